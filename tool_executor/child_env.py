"""The environment of the processes that run code Strata did not write: a `bash` command the model proposed, and a
command hook from config. One owner, so the two cannot drift apart: a hook runs in the workspace the model writes
to, so whatever a `bash` command must not see, a hook must not see either, unless the config names it.

Removed: Strata's own model credentials (a command could print them back, a rewritten hook could send them away)
and every `STRATA_*` variable (Strata's settings and its crash-test fault injection, `STRATA_FAULT`, which would
kill a nested `strata`). Everything else passes, secrets of other programs included: masking, not the environment,
keeps those out of the records."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from core.faults import FAULT_ENV

HIDDEN_ENV = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
"""Strata's own model credentials."""
NEVER_PASSED = frozenset({FAULT_ENV})
"""Not even when a hook's config names it."""
PYTHON_HOOK_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONSAFEPATH": "1"}
"""Set for hooks (not for `bash`, where they would change the person's own tools): a Python hook writes no
`__pycache__` beside itself (which would change the files its trust covers) and, on Python 3.11+, does not put
its script's directory (or the current one) first on the import path, so a module planted beside it cannot
shadow an import."""


def scrubbed_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """`source` (default: this process's environment) without Strata's credentials and `STRATA_*` variables."""
    source = os.environ if source is None else source
    return {k: v for k, v in source.items() if k not in HIDDEN_ENV and not k.startswith("STRATA_")}


def hook_env(passthrough: Iterable[str] = (), source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The scrubbed environment plus the variables a hook's config names (`env = [...]`, passed as they are here;
    a name that is not set here stays unset), and the Python settings of `PYTHON_HOOK_ENV` unless the hook names
    them itself."""
    source = os.environ if source is None else source
    env = scrubbed_env(source)
    names = set(passthrough) - NEVER_PASSED
    env.update({k: v for k, v in PYTHON_HOOK_ENV.items() if k not in names})
    for name in names:
        if name in source:
            env[name] = source[name]
        else:
            env.pop(name, None)
    return env
