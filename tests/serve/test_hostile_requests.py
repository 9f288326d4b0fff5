"""Well-formed requests with hostile values, against a real `strata serve`: each earns one clear error reply (or is
served as documented), the connection goes on, and nothing reaches the daemon's log as an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow


def _errors_in_log(cli: StrataCLI) -> list[str]:
    log = cli.home / "logs" / "strata.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(x)["event"] for x in lines if '"level": "error"' in x]


def test_an_attach_with_a_since_seq_no_store_can_hold_is_invalid_and_the_connection_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=15)
        client.hello()
        made = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})
        sid = made["session_id"]
        for k, seq in enumerate((2**63, 10**30, 2**53 + 1)):
            reply = client.ask({"type": "attach", "id": f"a{k}", "session_id": sid, "since_seq": seq})
            assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "invalid", False), reply
            assert "since_seq" in reply["message"]
        # The same connection attaches as asked, and gets the session's events from its first.
        ok = client.ask({"type": "attach", "id": "ok", "session_id": sid, "since_seq": 1})
        assert (ok["type"], ok["role"]) == ("ok", "drive"), ok
        first = client.line()
        assert first is not None and (first["type"], first["seq"], first["kind"]) == ("event", 1, "session_started")
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr
    assert _errors_in_log(cli) == []
