"""A daemon whose listening socket fails for good (not for want of descriptors) accepts nobody: it used to log an
error and go on running, unreachable. Now it drains as on SIGTERM (its clients hear it, its sessions stay
resumable) and exits non-zero with one line, for a supervisor to start it again.

The socket is made to fail for real, from outside: the test takes a duplicate of the daemon's listening descriptor
(pidfd_getfd, Linux 5.6+) and shuts it down. A non-blocking accept on a shut-down listener only says "try again"
(EAGAIN) while epoll says it is ready, so the descriptor is also made blocking (a flag of the open file, which the
daemon shares): its next accept fails at once with EINVAL."""

from __future__ import annotations

import ctypes
import os
import socket
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow

_SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture


def _shut_down_listener(pid: int) -> None:
    """Shut down the listening socket of process `pid` through a duplicate of its descriptor."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = libc.syscall(_SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                pytest.skip(f"pidfd_getfd is not allowed here: {os.strerror(ctypes.get_errno())}")
            with socket.socket(fileno=fd) as dup:
                if dup.family == socket.AF_UNIX and dup.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    dup.shutdown(socket.SHUT_RDWR)
                    dup.setblocking(True)  # the flag is the open file's, the daemon's too: its accept now fails
                    return
        raise AssertionError("the daemon has no listening Unix socket")
    finally:
        os.close(pidfd)


def test_a_daemon_whose_listening_socket_fails_drains_and_exits_non_zero(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        _shut_down_listener(daemon.pid)
        code = daemon.wait(60)
        said = []
        while (line := client.line()) is not None:
            said.append(line)
        client.close()
    finally:
        daemon.stop()
    assert code == 1, daemon.stderr
    assert "Traceback" not in daemon.stderr
    assert "socket" in daemon.stderr and "failed" in daemon.stderr and "drained" in daemon.stderr, daemon.stderr
    assert any(m["type"] == "notice" and m.get("session_id") == sid for m in said), said  # the drain reached it
    assert "shutting down" in str(said), said
    (row,) = [r for r in cli.json_lines("sessions", "--json") if r["id"] == sid]
    assert row["lease_owner"] is None, row  # released: resumable by id
