"""The masking key: 32 random bytes, hex-encoded in `<home>/masking.key`, created once with mode 0600. One key per
home keeps fingerprints stable across runs (equal secrets correlate) and unrelated between homes."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from core.errors import ConfigError

KEY_FILE = "masking.key"
KEY_BYTES = 32


def load_masking_key(home: Path) -> bytes:
    """Reads the key, creating it on first use. Creation is atomic and exclusive: the complete file is linked
    into place, so a concurrent reader never sees a half-written key, and the loser of a creation race reads
    the winner's key."""
    path = home / KEY_FILE
    if not path.exists():
        _create(path)
    return _read(path)


def _read(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the masking key: {exc.strerror or exc}", file=str(path)) from None
    try:
        key = bytes.fromhex(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ConfigError(f"malformed masking key: expected {KEY_BYTES * 2} hex characters", file=str(path),
                          hint="restore the file, or delete it to start a new key (old fingerprints then no "
                               "longer match new ones)")
    return key


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    content = (secrets.token_bytes(KEY_BYTES).hex() + "\n").encode("ascii")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: theirs is the key
        except OSError:  # no hard links on this filesystem: exclusive create in place
            _create_in_place(path, content)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _create_in_place(path: Path, content: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
