"""Reading a config file's bytes only when it is a regular file of a sane size (small, and cheap to import: the
quick way of the reading commands uses it too, config/quick.py)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused unread: no real one comes near it."""


def read_regular(path: Path, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of `path` if it is a regular file of at most `limit` bytes. Anything else raises OSError without
    being read: a FIFO or a device (a project's `.strata/config.toml` can be one, or a symlink to `/dev/zero`, in a
    cloned repository) would block the reader for ever or feed it without end. Opened non-blocking and checked once
    open, so a FIFO swapped in after a check cannot hang it either."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO or a device is never read)")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // (1024 * 1024)} MiB")
    return data
