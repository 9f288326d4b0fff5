"""The daemon's 64 connection slots cannot be held by clients that say hello and then nothing: a real `strata
serve`, 70 raw connections that greet it and go silent, then a real `strata attach` that must still get in (an
idle connection attached to nothing makes room for it) and approve a parked call within a few seconds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli._helpers import bash_mark, effect_counts, marker, text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, parked_session, script, status

pytestmark = pytest.mark.slow

SILENT = 70


def test_silent_connections_after_their_hello_do_not_shut_out_a_new_attach_and_its_approval(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1")], [text("done")])
    daemon = Daemon(cli)
    sock = cli.home / "run" / "daemon.sock"
    silent: list[RawClient] = []
    try:
        sid = parked_session(cli, ws, model, asked="b1")
        for _ in range(SILENT):
            client = RawClient(sock, timeout=15)
            client.send(b'{"v": 1, "type": "hello", "id": "h"}\n')
            silent.append(client)
        greeted = sum(1 for c in silent if (line := c.line()) is not None and line["type"] == "hello_ok")
        assert greeted >= 60, greeted  # the daemon took (nearly) all of them: its slots are full of silent clients

        started = time.monotonic()
        driver = Client(cli, sid)  # a fresh client: it gets in, and is asked about the parked call again
        driver.wait_for("approval_request", timeout=30, call_id="b1")
        driver.send(type="approve", call_id="b1")
        result = driver.wait_for("result", timeout=30)
        took = time.monotonic() - started
        assert (result["status"], result["exit_code"]) == ("completed", 0)
        assert driver.finish().returncode == 0
        assert took < 15, f"the attach and approval took {took:.1f} s"
        assert [row["session_id"] for row in status(cli)] == [sid]  # a status client gets in too
    finally:
        for client in silent:
            client.close()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {marker("b1"): 1}
    records = [json.loads(line) for line in (cli.home / "logs" / "strata.log").read_text().splitlines()]
    made_room = [r for r in records if r["event"] == "ipc client disconnected" and "make room" in
                 (r.get("code") or " ".join(r.get("codes", {})))]
    assert made_room, "the log does not say that idle connections were closed to make room"
    assert not [r for r in records if r["level"] == "error"]
