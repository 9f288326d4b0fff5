"""SIGTERM's drain is bounded with a client that does not read: the goodbye to each client waits briefly, not a
whole send timeout, so one stuck client does not hold the daemon's exit. A real `strata serve`, raw clients."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow

GRACE_S = 1.0


def _ask(client: RawClient, message: dict[str, object]) -> dict[str, object]:
    client.send(json.dumps(message).encode() + b"\n")
    while True:
        line = client.line()
        assert line is not None, f"no reply to {message['type']}"
        if line.get("id") == message["id"]:
            return line


def test_sigterm_exits_within_the_grace_period_although_a_watcher_never_reads(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")])
    daemon = Daemon(cli, env={"STRATA_DRAIN_GRACE_S": str(GRACE_S)})
    sock = cli.home / "run" / "daemon.sock"
    try:
        driver = RawClient(sock, timeout=30)
        driver.hello()
        sid = _ask(driver, {"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert _ask(driver, {"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        stuck = RawClient(sock, timeout=30)
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.hello()
        stuck.send(json.dumps({"type": "attach", "id": "w", "session_id": sid, "role": "watch"}).encode() + b"\n")
        # A prompt of 900 kB: its event fills the stuck watcher's socket (well under its 4 MiB outbox).
        assert _ask(driver, {"type": "prompt", "id": "p", "session_id": sid, "text": "x" * 900_000})["type"] == "ok"
        while (line := driver.line()) is not None and line["type"] != "result":
            pass
        sent = time.monotonic()
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(30)
        assert daemon.exited_at is not None
        took = daemon.exited_at - sent
        stuck.sock.close()
        driver.sock.close()
    finally:
        daemon.stop()
    assert code == 0, daemon.stderr
    assert took < GRACE_S + 2.0, f"the drain took {took:.2f} s"
