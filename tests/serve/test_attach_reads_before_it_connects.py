"""`strata attach ID` in a terminal reads what it needs (the session's config, the store, the conversation so far)
before it connects to the daemon. It used to say hello first and read afterwards: a connection that said hello and
is attached to nothing is the first to be closed when the daemon's connections are all taken, so while the client
read the store, 64 newer connections could close its own, and the attach failed.

Against a real daemon and a real client in a pseudo-terminal: the store is kept locked for a while (another
process holds every WAL read mark's lock, as a long checkpoint or recovery can, so every read waits: SQLite's busy
handler retries it), and meanwhile new connections keep coming."""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path

import pexpect
import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import HELLO, RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow

READ_MARKS = (123, 5)
"""Where SQLite's WAL read-mark locks are in the -shm file (the first byte, how many): a reader must hold one of
them shared to begin a read transaction."""
LOCKED_S = 3.0
"""How long the store stays locked: less than the client's busy timeout (5 s), long enough for the client to start
and reach its read."""


def _greeted(path: Path) -> socket.socket:
    """A connection that says hello and then nothing (it reads nothing either)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.fsencode(path))
    sock.sendall(HELLO)
    return sock


def test_attach_in_a_terminal_is_not_closed_by_newer_connections_while_it_reads_the_store(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    crowd: list[socket.socket] = []
    try:
        sock_path = cli.home / "run" / "daemon.sock"
        maker = RawClient(sock_path, timeout=15)
        maker.hello()
        sid = maker.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        maker.close()
        shm = os.open(cli.home / "strata.db-shm", os.O_RDWR)
        fcntl.lockf(shm, fcntl.LOCK_EX | fcntl.LOCK_NB, READ_MARKS[1], READ_MARKS[0])
        try:
            child: pexpect.spawn = cli.spawn_pty("attach", sid)
            until = time.monotonic() + LOCKED_S
            while time.monotonic() < until:  # newer connections keep coming while the store is locked
                crowd.extend(_greeted(sock_path) for _ in range(10))
                while len(crowd) > 200:
                    crowd.pop(0).close()
                time.sleep(0.05)
        finally:
            os.close(shm)  # the locks go with it
        child.expect(rf"attached to session {sid} \(driving\)")
        child.expect("strata>")
        child.sendline("/exit")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
    finally:
        for sock in crowd:
            sock.close()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
