"""The masking key: 32 random bytes, hex-encoded in `<home>/masking.key`, created once with mode 0600. One key per
home keeps fingerprints stable across runs (equal secrets correlate) and unrelated between homes."""

from __future__ import annotations

from pathlib import Path

from config._key_file import KEY_BYTES, create_key, read_key

KEY_FILE = "masking.key"

__all__ = ["KEY_BYTES", "KEY_FILE", "load_masking_key"]


def load_masking_key(home: Path) -> bytes:
    """Reads the key, creating it on first use (atomically: see config/_key_file.py)."""
    path = home / KEY_FILE
    if not path.exists():
        create_key(path)
    return read_key(path, "masking key", hint="restore the file, or delete it to start a new key (old fingerprints "
                                               "then no longer match new ones)")
