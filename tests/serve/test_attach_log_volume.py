"""Attaching and detaching is routine, not news: against a real `strata serve`, many attaches and detaches over
real Unix sockets write (almost) nothing to the daemon's log at info level (8,000 attaches once wrote ~15,600
lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow


def _info_lines(cli: StrataCLI, event: str) -> int:
    log = cli.home / "logs" / "strata.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(1 for x in lines if json.loads(x).get("event") == event and json.loads(x).get("level") == "info")


def test_many_attaches_and_detaches_do_not_write_a_log_line_each(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        sock = cli.home / "run" / "daemon.sock"
        client = RawClient(sock, timeout=15)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        for k in range(40):  # detached by request
            ok = client.ask({"type": "attach", "id": f"a{k}", "session_id": sid, "role": "watch"})
            assert ok["type"] == "ok", ok
            reply = client.ask({"type": "detach", "id": f"d{k}", "session_id": sid})
            while reply["type"] == "notice":  # the attachment's last message comes before the reply
                reply = client.line() or {}
            assert reply["type"] == "ok", reply
        client.close()
        for _ in range(20):  # detached by the connection's end
            other = RawClient(sock, timeout=15)
            other.hello()
            assert other.ask({"type": "attach", "id": "a", "session_id": sid, "role": "watch"})["type"] == "ok"
            other.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    for event in ("client attached", "client detached", "client detached: its connection ended"):
        assert _info_lines(cli, event) <= 2, event
