"""Reading a config file's bytes only when it is a regular file of a sane size (core/regular_file.py; the quick
way of the reading commands uses it too, config/quick.py)."""

from __future__ import annotations

from pathlib import Path

from core.regular_file import read_regular as _read_regular

MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused unread: no real one comes near it."""


def read_regular(path: Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes; OSError (saying why) otherwise."""
    return _read_regular(path, limit)
