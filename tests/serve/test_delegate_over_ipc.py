"""Delegation in the serve daemon (issue 14): a child's approvals reach the parent's attached client, naming the
child, with a real `strata serve` and a real `strata attach --json` on a real socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon

pytestmark = pytest.mark.slow


def test_a_childs_approval_reaches_the_attached_client_naming_the_child(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="write c.txt")], [text("parent done")]],
        "children": [[[tool_use("c1", "write_file", path="c.txt", content="c\n")], [text("child wrote c.txt")]]],
    }), encoding="utf-8")
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", f"script:{path}")
        sid = driver.session_id
        driver.send(type="prompt", text="delegate it")
        ask = driver.wait_for("approval_request", call_id="p1")
        assert ask["tool"] == "delegate" and ask["session_id"] == sid
        driver.send(type="approve", call_id="p1")
        child_ask = driver.wait_for("approval_request", call_id="c1")
        child = child_ask["session_id"]
        assert child != sid and child_ask["tool"] == "write_file"
        assert f"in child session {child} delegated by {sid}" in json.dumps(child_ask)
        assert not (ws / "c.txt").exists()  # nothing runs before the person's answer
        driver.send(type="approve", call_id="c1")
        result = driver.wait_for("result")
        assert result["status"] == "completed", result
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert (ws / "c.txt").read_text() == "c\n"
    rows = cli.json_lines("sessions", "--json")
    assert {r["id"]: r["parent_id"] for r in rows} == {sid: None, child: sid}
    delegated = next(e for e in driver.events() if e["kind"] == "call_result" and e["call_id"] == "p1")
    assert delegated["status"] == "ok" and "child wrote c.txt" in delegated["content"]
