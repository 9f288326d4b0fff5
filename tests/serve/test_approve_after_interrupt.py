"""An `approve` the driver sends right after its `interrupt`, on one connection of a real `strata serve` (the two
lines in one write, as a script may send them): the interrupt comes first, so the call is no longer waiting and
the approval is refused (`no_such_call`). It used to be answered `ok` although the interrupted turn never ran the
call and recorded no approval: a decision acknowledged that nothing carried out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_an_approval_sent_after_the_interrupt_is_refused_and_the_call_is_not_run(cli: StrataCLI,
                                                                                 tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")], [text("after")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        client.send(_line({"type": "prompt", "id": "p", "session_id": sid, "text": "write a"}))
        ask = None
        while ask is None:
            message = client.line()
            assert message is not None
            ask = message if message["type"] == "approval_request" else None
        client.send(_line({"type": "interrupt", "id": "i", "session_id": sid}) + _line(
            {"type": "approve", "id": "ap", "session_id": sid, "call_id": "w1", "args_sha256": ask["args_sha256"],
             "plan_digest": ask["plan_digest"], "scope": "once"}))
        replies: dict[str, dict[str, Any]] = {}
        result = None
        while result is None:
            message = client.line()
            assert message is not None
            if message.get("id") in ("i", "ap"):
                replies[message["id"]] = message
            elif message["type"] == "result":
                result = message
        while len(replies) < 2:
            message = client.line()
            assert message is not None
            if message.get("id") in ("i", "ap"):
                replies[message["id"]] = message
        assert replies["i"]["type"] == "ok", replies
        assert (replies["ap"]["type"], replies["ap"].get("code")) == ("error", "no_such_call"), replies
        assert result["status"] == "interrupted", result
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert not (ws / "a.txt").exists()
    events = json_lines_in_process(cli, "timeline", sid, "--json")
    assert not [e for e in events if e.get("decision") == "approved"], events
