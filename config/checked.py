"""Config files known to be valid: the sha256 of each user or project file's exact bytes that a full load
(config/loader.py) validated, remembered in the home by a command that writes there (`run`, `resume`, `chat`, the
daemon). A command that only reads (agent/cli/quick_timeline.py) may then trust a file whose bytes it finds here
without importing the config's models; any other file (new, edited, never loaded by a writing command) sends it
the full way, which names the file, key and reason of what is wrong.

The record holds digests only, never a file's contents. It is advisory: losing it, or finding it unreadable, costs
only the quick way."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

CHECKED_FILE = "config-checked.json"
Role = Literal["user", "project"]
_KEEP = 64
"""Digests kept, newest last: enough for a user file and the projects one works in."""


def digest(data: bytes) -> str:
    import hashlib  # only when there is a file to digest

    return hashlib.sha256(data).hexdigest()


def _read(home: Path) -> list[str]:
    try:
        value = json.loads((home / CHECKED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def was_checked(home: Path, role: Role, data: bytes) -> bool:
    """Whether these exact bytes validated as a `role` file in a full load."""
    return f"{role}:{digest(data)}" in _read(home)


def remember_checked(home: Path, files: Iterable[tuple[Role, str | None]]) -> None:
    """Record the digests (`None`: no such file) of files a full load just validated. Written whole to a temporary
    file and renamed, so a reader never sees half of it; a home that cannot take it is left as it is."""
    known = _read(home)
    new = [f"{role}:{sha}" for role, sha in files if sha is not None and f"{role}:{sha}" not in known]
    if not new:
        return
    kept = [*known, *new][-_KEEP:]
    tmp = home / f".{CHECKED_FILE}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(kept), encoding="utf-8")
        os.replace(tmp, home / CHECKED_FILE)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
