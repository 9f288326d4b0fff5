"""What a check decides: pass, or deny with the deciding check and every reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CheckName = Literal["resolve", "scope", "policy", "schema", "receipt", "dispatch"]


@dataclass(frozen=True)
class Pass:
    rule: str | None = None
    """The rule that allowed the call, where one did."""


@dataclass(frozen=True)
class Deny:
    check: CheckName
    reasons: tuple[str, ...]


Verdict = Pass | Deny
