"""Reading a workspace file so that nothing can block or blow up: only regular files (a FIFO, socket or device is
refused before it is opened, and the open is non-blocking in case one is swapped in), and never more than a cap
(read in bounded chunks, so a 2 GiB file costs what the cap costs). Runs in a worker thread that checks the call's
`Stop` flag between chunks (core/tools/blocking.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from core.tools import Stop, ToolError

READ_CAP = 1024 * 1024
"""The most read_file returns in one call; `offset` reads on."""
EDIT_CAP = 16 * 1024 * 1024
"""The largest file edit_file (and its probe) will hold in memory to edit."""
CHUNK = 256 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def os_error(exc: OSError, what: str) -> ToolError:
    return ToolError(f"cannot {what}: {exc.strerror or exc}")


def _refuse_irregular(mode: int, shown: str, verb: str) -> None:
    if stat.S_ISDIR(mode):
        raise ToolError(f"{shown} is a directory; use list_dir")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a file")
        raise ToolError(f"{shown} is not a regular file ({kind}); {verb} regular files only")


def open_regular(path: Path | str, shown: str, verb: str = "read_file reads") -> int:
    """A read-only descriptor of `path`, which must be a regular file. `path` was resolved (symlinks followed) by
    the caller: a symlink put in its place since is refused (O_NOFOLLOW), and a FIFO swapped in between the
    check and the open cannot block the open (O_NONBLOCK) and is refused by the second check."""
    try:
        _refuse_irregular(os.stat(path).st_mode, shown, verb)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(exc, f"read {shown}") from None
    try:
        _refuse_irregular(os.fstat(fd).st_mode, shown, verb)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_capped(path: Path | str, shown: str, stop: Stop, *, offset: int = 0, limit: int = READ_CAP,
                verb: str = "read_file reads") -> tuple[bytes, int]:
    """At most `limit` bytes of `path` from `offset`, and the file's size."""
    fd = open_regular(path, shown, verb)
    try:
        size = os.fstat(fd).st_size
        chunks: list[bytes] = []
        pos, left = offset, limit
        while left > 0:
            stop.check()
            chunk = os.pread(fd, min(left, CHUNK), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
            left -= len(chunk)
        return b"".join(chunks), max(size, pos) if chunks else size  # a file that grew: what was read
    except OSError as exc:
        raise os_error(exc, f"read {shown}") from None
    finally:
        os.close(fd)


def read_whole(path: Path, shown: str, stop: Stop, *, verb: str) -> bytes:
    """The whole file, refused when it is over EDIT_CAP (an edit needs all of it)."""
    data, size = read_capped(path, shown, stop, limit=EDIT_CAP + 1, verb=verb)
    if len(data) > EDIT_CAP:
        raise ToolError(f"{shown} is too large to edit ({size} bytes; the limit is {EDIT_CAP}); nothing changed")
    return data


def shows_whole(offset: int, got: int, size: int) -> bool:
    """Whether a read of `got` bytes from `offset` shows the whole file of `size` bytes (it needs no note)."""
    return offset == 0 and got >= size


def read_note(shown: str, offset: int, got: int, size: int) -> str | None:
    """The first line of a read that does not show the whole file, or None when it does."""
    if shows_whole(offset, got, size):
        return None
    end = offset + got
    if got == 0:
        return f"[nothing at offset {offset}: {shown} has {size} bytes]"
    more = f"; read on with offset={end}" if end < size else ""
    if offset == 0:
        return f"[truncated: showing the first {got} of {size} bytes of {shown}{more}]"
    return f"[showing bytes {offset} to {end} of {size} of {shown}{more}]"
