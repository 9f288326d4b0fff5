"""Step 9: resource locks. A call's resource keys (`fs:<absolute path>`, `shell:<workspace>`) are acquired in
sorted order (so two calls never wait on each other in a cycle), within the process (anyio locks) and across
processes on the same Strata home (an exclusive `flock` on one file per key under `<home>/locks/`). Waiting is
bounded; a timeout is a clear `resource busy`.

Read-only calls take no locks: reads are not effects, and within a batch they run side by side."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

from config.private_files import open_private, private_dir

POLL_S = 0.01


class LockTimeout(Exception):
    def __init__(self, key: str, timeout_s: float) -> None:
        super().__init__(f"resource busy: {key} is held by another call (waited {timeout_s:g} s)")
        self.key = key
        self.timeout_s = timeout_s


class ResourceLocks:
    def __init__(self, lock_dir: Path, timeout_s: float = 30.0) -> None:
        self.lock_dir = lock_dir
        self.timeout_s = timeout_s
        self._local: dict[str, anyio.Lock] = {}

    def _path(self, key: str) -> Path:
        return self.lock_dir / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".lock")

    def _try_flock(self, key: str) -> int | None:
        private_dir(self.lock_dir)
        fd = open_private(self._path(key), os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {key}\n".encode())
        return fd

    @contextlib.asynccontextmanager
    async def hold(self, keys: Sequence[str], timeout_s: float | None = None) -> AsyncIterator[None]:
        """Hold every key, acquired in sorted order; raises LockTimeout naming the key that stayed busy."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                local = self._local.setdefault(key, anyio.Lock())
                with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as scope:
                    await local.acquire()
                if scope.cancelled_caught:
                    raise LockTimeout(key, timeout)
                stack.callback(local.release)
                while (fd := await anyio.to_thread.run_sync(self._try_flock, key)) is None:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(key, timeout)
                    await anyio.sleep(POLL_S)
                stack.callback(self._unlock, fd)
            yield

    @staticmethod
    def _unlock(fd: int) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
