"""Where a daemon listens, and the one-daemon-per-home rule.

Liveness is an exclusive flock on `<home>/run/daemon.lock`, held for the daemon's whole life: the kernel drops
it when the process dies, however it dies, so a lock that can be taken means no daemon is alive, and one that
cannot means one is (a pid in a file, or a socket that accepts, can both lie: pids are reused, and anything may
listen on a path). The lock file also says which pid holds it and where it listens, for the refusal message.
The descriptor is not inherited by children (Python opens files close-on-exec), so a command a session started,
still running after the daemon died, does not keep the lock held.

With the lock held, the socket path is ours to set up: a socket file left by a dead daemon (nothing accepts on
it) is replaced; anything else at the path (a live listener of another program or home, a regular file) is left
alone and refused. The socket is bound under a temporary name in the same directory, set to 0600, and renamed
into place, so the path never names a socket with looser permissions, nor a socket that does not accept yet."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
from pathlib import Path

from agent.ipc._errors import DaemonRunning, LockUnusable, SocketUnusable
from config.private_files import open_private, private_dir
from core.record import record

RUN_DIR = "run"
SOCKET_NAME = "daemon.sock"
LOCK_NAME = "daemon.lock"
SOCKET_MODE = 0o600
MAX_SOCKET_PATH = 107
"""sun_path holds 108 bytes, the last a NUL."""


@record
class DaemonPaths:
    home: Path
    run_dir: Path
    socket: Path
    lock: Path


def daemon_paths(home: Path, socket_path: Path | None = None) -> DaemonPaths:
    """The default socket is `<home>/run/daemon.sock`; the lock is always `<home>/run/daemon.lock`, so a daemon
    listening elsewhere (`--socket`) still keeps a second one off the same home."""
    run_dir = home / RUN_DIR
    return DaemonPaths(home=home, run_dir=run_dir, socket=socket_path or run_dir / SOCKET_NAME,
                       lock=run_dir / LOCK_NAME)


@record
class DaemonInfo:
    pid: int | None
    socket: str | None


class DaemonLock:
    """The held lock; `release` (or process death) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    def record(self, pid: int, socket_path: Path) -> None:
        data = json.dumps({"pid": pid, "socket": str(socket_path)}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)  # drops the flock
        self._fd = -1


def acquire_lock(paths: DaemonPaths) -> DaemonLock:
    """Take the home's daemon lock, or raise DaemonRunning naming the holder (LockUnusable: it cannot be opened)."""
    _private_run_dir(paths.run_dir)
    try:
        fd = open_private(paths.lock, os.O_RDWR)
    except OSError as exc:
        raise LockUnusable(str(paths.lock), exc.strerror or str(exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        info = _read_info(fd)
        os.close(fd)
        raise DaemonRunning(info.pid, info.socket, str(paths.lock)) from None
    except BaseException:
        os.close(fd)
        raise
    return DaemonLock(paths.lock, fd)


def running_daemon(paths: DaemonPaths) -> DaemonInfo | None:
    """The live daemon of this home (pid and socket as it recorded them), or None. Reads only."""
    try:
        fd = os.open(paths.lock, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:  # the home is not a directory, or not this user's
        raise LockUnusable(str(paths.lock), exc.strerror or str(exc)) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def prepare_socket_path(path: Path) -> Path:
    """Check `path` can be ours and clear a stale socket from it; returns the temporary name to bind (same
    directory, so the final rename is atomic). Raises SocketUnusable."""
    temporary = path.parent / f".s{os.getpid()}"
    for candidate in (path, temporary):
        if len(os.fsencode(candidate)) > MAX_SOCKET_PATH:
            raise SocketUnusable(str(path), f"the path is {len(os.fsencode(candidate))} bytes long, a Unix socket "
                                 f"path at most {MAX_SOCKET_PATH}", hint="give a shorter one with --socket")
    if not path.parent.is_dir():
        raise SocketUnusable(str(path), f"{path.parent} is not a directory")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode):
            raise SocketUnusable(str(path), "something that is not a socket is there",
                                 hint="remove it, or choose another path with --socket")
        if _accepts(path):
            raise SocketUnusable(str(path), "another process is listening there (not a daemon of this home)",
                                 hint="stop it, or choose another path with --socket")
        _unlink(path, "a dead socket is there and cannot be removed")  # a dead daemon's socket
    _unlink(temporary, f"the temporary name {temporary.name} beside it is taken and cannot be freed")
    return temporary


def _unlink(path: Path, what: str) -> None:
    """Remove what a dead daemon (or an earlier process with this pid) left; SocketUnusable when this user may
    not (another user's file in a shared, sticky directory)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SocketUnusable(str(path), f"{what} ({exc.strerror or exc})",
                             hint="choose another path with --socket, in a directory of your own") from None


def publish_socket(temporary: Path, path: Path) -> int:
    """Move the bound, 0600 socket into place; returns its inode (so only this socket is removed at exit)."""
    os.chmod(temporary, SOCKET_MODE)
    os.rename(temporary, path)
    return os.lstat(path).st_ino


def remove_socket(path: Path, inode: int) -> None:
    """Unlink `path` if it is still the socket this daemon published (never a successor's)."""
    with contextlib.suppress(OSError):
        if os.lstat(path).st_ino == inode:
            os.unlink(path)


def _accepts(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(os.fsencode(path))
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
            return False
        raise SocketUnusable(str(path), f"cannot check it: {exc.strerror or exc}") from None
    finally:
        probe.close()
    return True


def _private_run_dir(run_dir: Path) -> None:
    """Created 0700; an existing one must be this user's and closed to others (it is not repaired: someone
    opened it, and should know)."""
    try:
        private_dir(run_dir)
        st = os.stat(run_dir)
    except OSError as exc:
        raise SocketUnusable(str(run_dir), exc.strerror or str(exc)) from None
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise SocketUnusable(str(run_dir), f"the directory is open to other users (mode "
                             f"{stat.S_IMODE(st.st_mode):o}, owner uid {st.st_uid})",
                             hint=f"chmod 700 {run_dir}")


def _read_info(fd: int) -> DaemonInfo:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return DaemonInfo(pid=None, socket=None)
    pid = data.get("pid") if isinstance(data, dict) else None
    sock = data.get("socket") if isinstance(data, dict) else None
    return DaemonInfo(pid=pid if isinstance(pid, int) else None, socket=sock if isinstance(sock, str) else None)
