"""Two people decide two different parked calls of one session at the same moment: each decision takes the
session's lease for a few milliseconds, so one of them found it held and was refused with "session ... is active in
another process", as if the session were running. A decision now waits for a lease held that briefly (as a
reconcile does) and is recorded; a session that stays running is still refused (real processes, real SQLite file;
the other person's decision is a process holding the session's lease for a second)."""

from __future__ import annotations

import time
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import hold_lease, text, tool_use
from tests.conftest import StrataCLI, write_script


def _park_two(cli: StrataCLI, workspace: Path, tmp_path: Path) -> str:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_one", "write_file", path="one.txt", content="1\n"),
         tool_use("toolu_two", "write_file", path="two.txt", content="2\n")],
        [text("done")],
    ])
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park", "go")
    assert parked.returncode == 4, parked.stderr
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    return str(session["id"])


def test_a_decision_waits_for_a_lease_another_decision_holds_for_a_moment(cli: StrataCLI, workspace: Path,
                                                                            tmp_path: Path) -> None:
    session_id = _park_two(cli, workspace, tmp_path)
    holder = hold_lease(cli, session_id, 1.0)
    try:
        approved = cli.run("approve", session_id, "toolu_one")
    finally:
        holder.communicate(timeout=30)
    assert approved.returncode == 0, approved.stderr
    assert "approved call toolu_one" in approved.stdout and "is active" not in approved.stderr
    denied = cli.run("deny", session_id, "toolu_two", "--reason", "not now")
    assert denied.returncode == 0, denied.stderr
    resumed = cli.run("resume", session_id)
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "one.txt").read_text() == "1\n" and not (workspace / "two.txt").exists()
    verified = cli.run("timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_decision_on_a_session_that_stays_running_is_refused(cli: StrataCLI, workspace: Path,
                                                               tmp_path: Path) -> None:
    session_id = _park_two(cli, workspace, tmp_path)
    holder = hold_lease(cli, session_id, 8.0)
    try:
        started = time.monotonic()
        approved = cli.run("approve", session_id, "--all")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.communicate()
    assert approved.returncode == 1, approved.stdout
    (line, *_) = approved.stderr.splitlines()
    assert "is active in another process" in line and "Traceback" not in approved.stderr, approved.stderr
    assert waited < 7.5, waited
    assert json_lines_in_process(cli, "receipts", session_id, "--json") == []
