"""Reading a file's bytes only when it is a regular file (and, when a limit is given, a small one). A FIFO or a
device where a file is expected (a project's config, a script, the saved start-up code: a cloned repository or a
stray `mkfifo` can put one there) would block the reader for ever or feed it without end. The file is opened
non-blocking and checked once open, so a FIFO swapped in after a check cannot hang the reader either. Cheap to
import: the start of every command reads through it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegular(OSError):
    """The path is no regular file (a FIFO, a device, a directory); nothing was read."""


class TooLarge(OSError):
    """The file is larger than the limit; what was read is dropped."""


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of `path` if it is a regular file (of at most `limit` bytes, when given). NotRegular or TooLarge
    otherwise, and any OSError of opening or reading it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file (a FIFO or a device is never read)")
        with open(fd, "rb", closefd=False) as f:
            data = f.read() if limit is None else f.read(limit + 1)
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit:
        raise TooLarge(errno.EFBIG, f"larger than {limit // (1024 * 1024)} MiB")
    return data
