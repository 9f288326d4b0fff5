"""`strata resume ID` (no daemon, nobody to ask) of a session the daemon hosted, whose call waits for approval:
after its driver left (the call parked), or after the daemon was SIGKILLed while the driver was being asked. The
call must stay parked for `strata approve|deny` (the parked row says so, and the README: "the call parks exactly
as with --on-ask park; nothing is approved by default"), then run once. A plain resume used to deny it by policy
("no person to approve it in ipc mode"), a decision nobody made, and the model went on without it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import assert_clean_stderr, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, killed_while_asking, parked_session, script

pytestmark = pytest.mark.slow

EXIT_AWAITING_APPROVAL = 4


def _resume(cli: StrataCLI, sid: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    proc = cli.run("resume", sid, "--json")
    assert_clean_stderr(proc)
    (result,) = [o for o in map(json.loads, proc.stdout.splitlines()) if o.get("type") == "result"]
    return proc, result


def _parks_then_runs_once(cli: StrataCLI, sid: str, ws: Path) -> None:
    proc, result = _resume(cli, sid)
    assert (proc.returncode, result["status"]) == (EXIT_AWAITING_APPROVAL, "awaiting_approval"), proc.stdout
    assert [p["call_id"] for p in result["parked"]] == ["w1"], result  # type: ignore[attr-defined]
    assert not (ws / "a.txt").exists()
    approved = cli.run("approve", sid, "w1")
    assert approved.returncode == 0, approved.stderr
    proc, result = _resume(cli, sid)
    assert (proc.returncode, result["status"]) == (0, "completed"), proc.stdout
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"
    assert not [row for row in json_lines_in_process(cli, "timeline", sid, "--json") if row.get("decision") == "denied"]


def test_a_call_parked_when_its_driver_left_stays_parked_on_a_plain_resume(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="w1")
    finally:
        daemon.stop()
    _parks_then_runs_once(cli, sid, ws)


def test_a_call_asked_when_the_daemon_was_killed_parks_on_a_plain_resume(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")])
    sid = killed_while_asking(cli, ws, model, asked="w1", prompt="write a")
    _parks_then_runs_once(cli, sid, ws)
