"""One daemon per Strata home, on a private socket: a second daemon is refused naming the first one's pid, a
dead daemon's socket is replaced, and nothing else at the path is ever removed. Daemons are real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from agent.ipc import DaemonRunning, SocketUnusable, daemon_paths, running_daemon
from tests.ipc._wire import InProcessDaemon, RawClient, env, fake_daemon_argv, start_fake_daemon


def _start_refused(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fake_daemon_argv(home, *extra), env=env(home), capture_output=True, text=True, timeout=30)


def test_socket_is_0600_in_a_0700_directory_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 0 the run directory is still 0700 and the socket 0600, and the lock file names the pid."""
    home = tmp_path / "home"
    old = os.umask(0)
    try:
        daemon = InProcessDaemon(home)
    finally:
        os.umask(old)
    try:
        paths = daemon_paths(home)
        assert stat.S_IMODE(os.stat(paths.run_dir).st_mode) == 0o700
        assert stat.S_ISSOCK(os.lstat(paths.socket).st_mode)
        assert stat.S_IMODE(os.lstat(paths.socket).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(paths.lock).st_mode) == 0o600
        assert running_daemon(paths) is not None and running_daemon(paths).pid == os.getpid()  # type: ignore[union-attr]
        assert [p.name for p in paths.run_dir.iterdir() if p.name.startswith(".s")] == []
    finally:
        daemon.close()
    assert not paths.socket.exists(), "the socket outlived its daemon"
    assert running_daemon(paths) is None


def test_a_second_daemon_on_the_same_home_exits_2_naming_the_first_ones_pid(tmp_path: Path) -> None:
    """While a daemon runs, another on its home (even on another socket path) is refused with one line naming
    the running daemon's pid, and the first keeps serving."""
    home = tmp_path / "home"
    first = start_fake_daemon(home)
    try:
        for extra in ((), ("--socket", str(tmp_path / "other.sock"))):
            second = _start_refused(home, *extra)
            assert second.returncode == 2, second.stderr
            first_line = second.stderr.splitlines()[0]
            assert "already running" in first_line and f"pid {first.pid}" in first_line
            assert "Traceback" not in second.stderr
        with pytest.raises(DaemonRunning) as refused:
            InProcessDaemon(home)
        assert refused.value.pid == first.pid
        client = RawClient(first.socket)
        client.hello()
        assert client.ask({"type": "status", "id": "1"})["type"] == "ok"
        client.close()
    finally:
        first.stop()


def test_the_socket_of_a_killed_daemon_is_replaced(tmp_path: Path) -> None:
    """After SIGKILL the socket file stays behind with no one listening; the next daemon replaces it and serves."""
    home = tmp_path / "home"
    first = start_fake_daemon(home)
    first.kill()
    assert stat.S_ISSOCK(os.lstat(first.socket).st_mode), "the dead daemon's socket should still be there"
    second = start_fake_daemon(home)
    try:
        client = RawClient(second.socket)
        assert client.hello()["pid"] == second.pid
        client.close()
    finally:
        assert second.stop()[0] == 0


def test_a_command_left_running_by_a_killed_daemon_does_not_keep_the_home_locked(tmp_path: Path) -> None:
    """A child the daemon started (inheriting every descriptor it could) outlives the daemon's SIGKILL; a new
    daemon still starts: the lock died with the daemon."""
    home = tmp_path / "home"
    first = start_fake_daemon(home, "--child-sleep", "60")
    assert first.child is not None
    first.kill()
    try:
        os.kill(first.child, 0)  # still running
        second = start_fake_daemon(home)
        assert second.stop()[0] == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(first.child, signal.SIGKILL)


def test_a_live_listener_at_the_path_is_left_alone(tmp_path: Path) -> None:
    """Another program listening at the chosen socket path is not replaced: the daemon refuses, one line, and
    the program's socket still accepts."""
    path = tmp_path / "taken.sock"
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(os.fsencode(path))
    other.listen()
    try:
        proc = _start_refused(tmp_path / "home", "--socket", str(path))
        assert proc.returncode == 2 and "another process is listening there" in proc.stderr.splitlines()[0]
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.connect(os.fsencode(path))
        probe.close()
    finally:
        other.close()


def test_a_file_that_is_not_a_socket_is_never_removed(tmp_path: Path) -> None:
    """A regular file at the socket path stays as it was; the daemon refuses with one line."""
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    with pytest.raises(SocketUnusable) as refused:
        InProcessDaemon(tmp_path / "home", socket_path=path)
    assert "not a socket" in str(refused.value)
    assert path.read_text() == "mine"
    assert running_daemon(daemon_paths(tmp_path / "home")) is None, "a refused start kept the lock"


def test_a_run_directory_open_to_others_is_refused(tmp_path: Path) -> None:
    """The daemon does not listen in a run directory others can enter; it says how to fix it."""
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    os.chmod(home / "run", 0o755)
    with pytest.raises(SocketUnusable) as refused:
        InProcessDaemon(home)
    assert "open to other users" in str(refused.value) and refused.value.hint == f"chmod 700 {home / 'run'}"


def test_a_socket_path_too_long_for_the_kernel_is_one_clear_line(tmp_path: Path) -> None:
    """A socket path past the 107 bytes the kernel takes is refused naming its length, with a hint."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    with pytest.raises(SocketUnusable) as refused:
        InProcessDaemon(tmp_path / "home", socket_path=deep / "daemon.sock")
    assert "at most 107" in str(refused.value) and refused.value.hint and "--socket" in refused.value.hint


def test_sigterm_stops_the_daemon_and_removes_its_socket(tmp_path: Path) -> None:
    """SIGTERM: connected clients get a goodbye notice, the socket is removed and the lock freed (exit 0)."""
    home = tmp_path / "home"
    daemon = start_fake_daemon(home)
    client = RawClient(daemon.socket)
    client.hello()
    started = time.monotonic()
    code, err = daemon.stop()
    assert code == 0, err
    assert time.monotonic() - started < 10
    notice = client.line()
    assert notice is not None and notice["type"] == "notice"
    assert client.closed_after()
    client.close()
    assert not daemon.socket.exists()
    assert running_daemon(daemon_paths(home)) is None
