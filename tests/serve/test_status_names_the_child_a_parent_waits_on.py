"""`strata serve --status` / `strata ps` for a parent whose delegate call waits on a child's call: the row names the
child's call (id and tool) and the session that holds it, asked of the driver or parked, down through a child that
waits on its own child. Before, a parked parent showed `waiting: -`, and an asked one the child's call as if it
were the parent's own: a person could not tell what to approve, nor where. A real `strata serve`, real `strata
attach --json` clients and the real status commands on one home."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import (
    Client,
    allow_in_user_config,
    child_writes_c,
    prompted,
    serving,
    status,
    status_in_process,
    wait_until,
)

pytestmark = pytest.mark.slow


def _row(cli: StrataCLI, session_id: str) -> dict[str, Any]:
    (row,) = [r for r in status(cli) if r["session_id"] == session_id]
    return row


def _polled_row(cli: StrataCLI, session_id: str) -> dict[str, Any]:
    """`_row` read in this process, for the polls of a wait (the rows the test checks are read by `_row`)."""
    (row,) = [r for r in status_in_process(cli) if r["session_id"] == session_id]
    return row


def _ps_line(cli: StrataCLI, session_id: str) -> str:
    proc = cli.run("ps")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.strip().startswith(session_id)]
    return line


def test_a_parent_waiting_on_its_childs_call_names_the_child_and_the_call(cli: StrataCLI, tmp_path: Path) -> None:
    ws, path = child_writes_c(tmp_path)
    allow_in_user_config(cli, "delegate")
    with serving(cli):
        first = prompted(cli, ws, path, "delegate it")
        parent = first.session_id
        child = first.wait_for("approval_request", call_id="c1")["session_id"]
        assert child != parent

        # Asked of the parent's driver: the child's call, named as the child's.
        asked = _row(cli, parent)
        assert asked["phase"] == "approval"
        assert asked["waiting"] == [{"call_id": "c1", "tool": "write_file", "how": "asking", "session_id": child}]
        assert _ps_line(cli, parent).endswith(f"waiting: c1 write_file (asking) in child session {child}")

        # The driver leaves: the child's call parks, and the parent with it (no lease, nobody driving).
        assert first.finish().returncode == 0
        wait_until(lambda: _polled_row(cli, parent)["phase"] == "parked", what="the parent to park")
        parked = _row(cli, parent)
        assert parked["status"] == "awaiting_approval"
        assert parked["waiting"] == [{"call_id": "c1", "tool": "write_file", "how": "parked", "session_id": child}]
        assert _ps_line(cli, parent).endswith(f"waiting: c1 write_file (parked) in child session {child}")

        # What the line names is what decides it: approved in the child, the parent has nothing left waiting.
        assert cli.run("approve", child, "c1").returncode == 0
        wait_until(lambda: _polled_row(cli, parent)["waiting"] == [], what="the parent's waiting calls to clear")
        assert not (ws / "c.txt").exists()  # decided, not run: that is the parent's resume
        again = Client(cli, parent)
        again.send(type="prompt", text="go on")
        assert again.wait_for("result")["status"] == "completed"
        assert again.finish().returncode == 0
    assert (ws / "c.txt").read_text() == "c\n"


def test_a_parent_whose_child_waits_on_a_grandchild_names_the_grandchild(cli: StrataCLI, tmp_path: Path) -> None:
    """Two levels down: the session that holds the parked call is the grandchild; the row names it, and its own
    parked calls (a session's own) carry no session_id at all."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="have it written")], [text("parent done")]],
        "children": [{"turns": [[tool_use("k1", "delegate", task="write g.txt")], [text("child done")]],
                      "children": [[[tool_use("g1", "write_file", path="g.txt", content="g\n"),
                                     tool_use("g2", "write_file", path="h.txt", content="h\n")],
                                    [text("grandchild wrote")]]]}],
    }), encoding="utf-8")
    allow_in_user_config(cli, "delegate")
    with serving(cli):
        first = prompted(cli, ws, path, "delegate it")
        parent = first.session_id
        grandchild = first.wait_for("approval_request", call_id="g1")["session_id"]
        assert first.finish().returncode == 0
        wait_until(lambda: _polled_row(cli, parent)["phase"] == "parked", what="the parent to park")
        rows = [r["id"] for r in cli.json_lines("sessions", "--json")]
        assert grandchild in rows and len(rows) == 3
        assert _row(cli, parent)["waiting"] == [
            {"call_id": "g1", "tool": "write_file", "how": "parked", "session_id": grandchild},
            {"call_id": "g2", "tool": "write_file", "how": "parked", "session_id": grandchild}]
        assert _ps_line(cli, parent).endswith(f"waiting: g1 write_file (parked) in child session {grandchild}, "
                                              f"g2 write_file (parked) in child session {grandchild}")
    assert not (ws / "g.txt").exists() and not (ws / "h.txt").exists()


def test_a_sessions_own_parked_call_carries_no_session_id(cli: StrataCLI, tmp_path: Path) -> None:
    """The row's own parked call is shown as before: no `session_id` in the JSON, nothing added to the line."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps([[tool_use("w1", "write_file", path="w.txt", content="w\n")], [text("done")]]),
                    encoding="utf-8")
    with serving(cli):
        driver = prompted(cli, ws, path, "write")
        driver.wait_for("approval_request", call_id="w1")
        assert driver.finish().returncode == 0
        sid = driver.session_id
        parked = [{"call_id": "w1", "tool": "write_file", "how": "parked"}]
        wait_until(lambda: _polled_row(cli, sid)["waiting"] == parked, what="the call to park")
        assert _ps_line(cli, sid).endswith("waiting: w1 write_file (parked)")
