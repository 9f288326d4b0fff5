"""A home's secret keys (`masking.key`, `chain.key`): 32 random bytes, hex-encoded in one file of the home, created
once with mode 0600 and never written again.

Creation is atomic and exclusive: the complete file is linked into place, so a concurrent reader never sees a
half-written key, and the loser of a creation race reads the winner's key."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from config.private_files import FILE_MODE, private_dir
from core.errors import ConfigError

KEY_BYTES = 32


def read_key(path: Path, what: str, *, hint: str) -> bytes:
    """The key in `path`; a ConfigError naming `what` when it cannot be read or is malformed."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what}: {exc.strerror or exc}", file=str(path)) from None
    try:
        key = bytes.fromhex(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ConfigError(f"malformed {what}: expected {KEY_BYTES * 2} hex characters", file=str(path), hint=hint)
    return key


def create_key(path: Path) -> None:
    """Create the key file with a new random key, unless another process creates it first."""
    private_dir(path.parent)
    content = (secrets.token_bytes(KEY_BYTES).hex() + "\n").encode("ascii")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
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
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    os.fchmod(fd, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
