"""A daemon whose listening socket fails for good (not for want of descriptors) accepts nobody: it used to log an
error and go on running, unreachable. Now it drains as on SIGTERM (its clients hear it, its sessions stay
resumable) and exits non-zero with one line, for a supervisor to start it again.

The socket is made to fail for real, from outside: the test takes a duplicate of the daemon's listening descriptor
(pidfd_getfd, Linux 5.6+) and shuts it down. Made blocking too (a flag of the open file, which the daemon shares),
its next accept fails at once with EINVAL. Left non-blocking, accept only says "try again" (EAGAIN) while epoll says
the socket is ready, for ever: anyio's accept loop spun on that at full CPU, the daemon unreachable and not
stopping; the daemon now sees the listener hung up and drains as in the blocking case."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import time
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow

_SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture


def _shut_down_listener(pid: int, *, blocking: bool = True) -> None:
    """Shut down the listening socket of process `pid` through a duplicate of its descriptor (and make it
    blocking, or leave it non-blocking as the daemon made it)."""
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
                    if blocking:  # the flag is the open file's, the daemon's too: its accept now fails
                        dup.setblocking(True)
                    else:  # closing the duplicate must not change the daemon's flag either
                        dup.setblocking(False)
                    return
        raise AssertionError("the daemon has no listening Unix socket")
    finally:
        os.close(pidfd)


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) process `pid` used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("blocking", [True, False], ids=["made-blocking", "left-non-blocking"])
def test_a_daemon_whose_listening_socket_fails_drains_and_exits_non_zero(cli: StrataCLI, tmp_path: Path,
                                                                         blocking: bool) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        cpu_before = _cpu_seconds(daemon.pid)
        _shut_down_listener(daemon.pid, blocking=blocking)
        used = 0.0
        deadline = time.monotonic() + 3
        while daemon.proc.poll() is None and time.monotonic() < deadline:  # sampled until it ends (or 3 s)
            with contextlib.suppress(OSError):  # it ended between the poll and the read
                used = _cpu_seconds(daemon.pid) - cpu_before
            time.sleep(0.1)
        assert used < 0.6, f"the daemon used {used:.2f} s of CPU after its listener was shut down (a busy loop)"
        assert daemon.proc.poll() is not None, "the daemon still runs 3 s after its listener was shut down"
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
    (row,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["id"] == sid]
    assert row["lease_owner"] is None, row  # released: resumable by id
