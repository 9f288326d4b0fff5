"""Step 9: resource locks. A call's resource keys (`fs:<absolute path>`, `shell:<workspace>`) are acquired in
sorted order (so two calls never wait on each other in a cycle), within the process (anyio locks) and across
processes on the same Strata home (an exclusive `flock` on one file per key under `<home>/locks/`). Waiting is
bounded; a timeout is a clear `resource busy`.

A command a call starts can outlive the Strata process that holds its lock (a `bash` command runs in its own
session, so a SIGKILLed Strata leaves it running), and the `flock` dies with that process. So the lock file also
records the command's process group while it runs (`Held.adopt`, written before the command is let go; a plain
write, no fsync: it must survive Strata's death, not the machine's, and a reboot ends the command too). Whoever
takes the lock next reads that record first: while the group still runs, the key stays held by it (the taker
waits, up to the same timeout, and then reports `resource busy` naming the command and how to end it). The record
is cleared when the call lets the lock go and its group is gone.

Where the store is shared by several machines (PostgreSQL), each key is also taken in the store's shared locks
(advisory locks, memory/postgres/_advisory.py), after the local ones: two workers on different machines (or with
different homes) never run calls on one key at once. A command left running by a worker that died is not seen from
another machine (its process group cannot be checked there): the README's limits say so.

Read-only calls take no locks: reads are not effects, and within a batch they run side by side."""

import contextlib
import errno
import fcntl
import hashlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

from config.private_files import open_private, private_dir
from core.errors import StoreError
from core.processes import ProcessGroup
from memory.store import SharedLocks

POLL_S = 0.01
SHARED_POLL_S = 0.05
"""A key another worker holds is asked for again this often (a round trip to the database each time)."""
ORPHAN_POLL_S = 0.05
RECORD_MAX = 64 * 1024


class HeldCommand(BaseModel):
    """A command started under a lock: its process group and the call that started it."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when a lock file is read

    group: ProcessGroup
    session_id: str
    call_id: str
    receipt_id: str | None = None

    def describe(self) -> str:
        return f"a command of session {self.session_id} (call {self.call_id}, {self.group.describe()})"


class _Record(BaseModel):
    """What a lock file holds: the key, the Strata process that holds the lock, and the command it started."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)  # built when a lock file is read

    key: str
    holder: int
    command: HeldCommand | None = None


class LockTimeout(Exception):
    def __init__(self, key: str, timeout_s: float, message: str | None = None) -> None:
        super().__init__(message or f"resource busy: {key} is held by another call (waited {timeout_s:g} s)")
        self.key = key
        self.timeout_s = timeout_s


class OrphanHolds(LockTimeout):
    """The key is held by a command whose Strata process is gone, and the command still runs."""

    def __init__(self, key: str, timeout_s: float, command: HeldCommand) -> None:
        super().__init__(key, timeout_s, (
            f"resource busy: {key} is held by {command.describe()} whose Strata process stopped while it ran; "
            f"it still runs (waited {timeout_s:g} s), and nothing runs beside it. Wait for it to end, or end it "
            f"with `strata resume {command.session_id} --kill-orphans`"))
        self.command = command


def _read_record(fd: int) -> _Record | None:
    try:
        data = os.pread(fd, RECORD_MAX, 0)
        return _Record.model_validate_json(data) if data.strip() else None
    except (OSError, ValueError, ValidationError):  # an older format, or damaged: it names no command
        return None


def _write_record(fd: int, record: _Record) -> None:
    with contextlib.suppress(OSError):
        data = record.model_dump_json().encode() + b"\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


class Held:
    """The lock files of the keys one call holds."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}
        self.command: HeldCommand | None = None

    async def adopt(self, command: HeldCommand) -> None:
        """Record in every held key's lock file that `command` now holds it too, beyond this process."""
        self.command = command
        records = [(fd, _Record(key=key, holder=os.getpid(), command=command)) for key, fd in self._fds.items()]

        def write() -> None:
            for fd, record in records:
                _write_record(fd, record)

        await anyio.to_thread.run_sync(write)

    def _release(self, key: str) -> None:
        fd = self._fds.pop(key)
        try:
            if self.command is not None and self.command.group.state() != "running":
                _write_record(fd, _Record(key=key, holder=os.getpid()))  # the command is over: it holds nothing
            # (a group still running keeps its record: whoever takes the key next waits for it)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class ResourceLocks:
    def __init__(self, lock_dir: Path, timeout_s: float = 30.0, shared: SharedLocks | None = None) -> None:
        self.lock_dir = lock_dir
        self.timeout_s = timeout_s
        self.shared = shared
        self._local: dict[str, anyio.Lock] = {}

    def _path(self, key: str) -> Path:
        return self.lock_dir / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".lock")

    def _try_flock(self, key: str) -> tuple[int, HeldCommand | None] | None:
        """The key's lock file, flocked, and the command it records if that still runs (the key is not ours
        until it ends); or None when another process holds the flock. One thread hop for all of it."""
        private_dir(self.lock_dir)
        fd = open_private(self._path(key), os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise
        orphan = self._running_command(fd)
        if orphan is None:
            _write_record(fd, _Record(key=key, holder=os.getpid()))
        return fd, orphan

    @staticmethod
    def _running_command(fd: int) -> HeldCommand | None:
        """The command the lock file records, if its process group still runs. One that cannot be checked from
        here (another host or PID namespace) is not waited for (see the README's limits)."""
        record = _read_record(fd)
        if record is None or record.command is None:
            return None
        return record.command if record.command.group.state() == "running" else None

    @contextlib.asynccontextmanager
    async def hold(self, keys: Sequence[str], timeout_s: float | None = None) -> AsyncIterator[Held]:
        """Hold every key, acquired in sorted order; raises LockTimeout naming the key that stayed busy (or
        OrphanHolds when a command whose Strata process died still holds it)."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout
        held = Held()
        async with contextlib.AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                local = self._local.setdefault(key, anyio.Lock())
                with anyio.move_on_after(max(0.0, deadline - time.monotonic())) as scope:
                    await local.acquire()
                if scope.cancelled_caught:
                    raise LockTimeout(key, timeout)
                stack.callback(local.release)
                while (got := await anyio.to_thread.run_sync(self._try_flock, key)) is None:
                    if time.monotonic() >= deadline:
                        raise LockTimeout(key, timeout)
                    await anyio.sleep(POLL_S)
                fd, orphan = got
                held._fds[key] = fd
                stack.callback(held._release, key)
                # The flock is ours, but a command left running by a dead holder still holds the key.
                while orphan is not None:
                    if time.monotonic() >= deadline:
                        raise OrphanHolds(key, timeout, orphan)
                    await anyio.sleep(ORPHAN_POLL_S)
                    if await anyio.to_thread.run_sync(orphan.group.state) != "running":
                        orphan = None
                        await anyio.to_thread.run_sync(_write_record, fd, _Record(key=key, holder=os.getpid()))
                if self.shared is not None:
                    await self._take_shared(self.shared, key, deadline, timeout)
                    stack.push_async_callback(self.shared.give_back, key)
            yield held

    @staticmethod
    async def _take_shared(shared: SharedLocks, key: str, deadline: float, timeout: float) -> None:
        try:
            while not await shared.try_take(key):
                if time.monotonic() >= deadline:
                    raise LockTimeout(key, timeout, f"resource busy: {key} is held by a call of another worker on "
                                                    f"this database (waited {timeout:g} s)")
                await anyio.sleep(SHARED_POLL_S)
        except StoreError as err:
            raise LockTimeout(key, timeout, f"resource busy: {err.message}") from None

    def command_for(self, receipt_id: str, keys: Sequence[str]) -> HeldCommand | None:
        """The command the lock files of `keys` record for `receipt_id`, if one is still recorded (it is, while
        its group may run: only a taker that saw the group gone overwrites the record). Blocking: small reads."""
        for key in keys:
            try:
                fd = os.open(self._path(key), os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                record = _read_record(fd)
            finally:
                os.close(fd)
            if record is not None and record.command is not None and record.command.receipt_id == receipt_id:
                return record.command
        return None
