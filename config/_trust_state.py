"""The three states of a project file's trust (config/trust.py), on their own: the loader and what it returns name
them for every command, and a command in a workspace without a project file never reads the trust record, so never
imports config/trust.py (its models) at all. (Private: `config.trust_state` is the function.)"""

from typing import Literal

TrustState = Literal["trusted", "untrusted", "changed"]
