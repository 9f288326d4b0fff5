"""How a `delegate` receipt names its child session (`session:<child id>` among its resource keys), with the
standard library alone: core/tools/delegate.py writes it, and the command line's quick way (memory/quick_read.py)
reads it without importing the tool machinery."""

from __future__ import annotations

from collections.abc import Sequence

DELEGATE = "delegate"
CHILD_KEY_PREFIX = "session:"


def child_of(resource_keys: Sequence[str]) -> str | None:
    """The child session id a delegate receipt records, if it does."""
    for key in resource_keys:
        if key.startswith(CHILD_KEY_PREFIX):
            return key[len(CHILD_KEY_PREFIX):]
    return None
