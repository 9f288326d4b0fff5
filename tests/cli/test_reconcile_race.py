"""Two people reconcile one uncertain receipt at once with contradicting verdicts: exactly one decision is
recorded, and the other person is told in one line what was decided and by whom (never a bare internal status),
so that they can see their verdict was not taken (real processes, real SQLite file, SIGKILLed writer)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script


def _uncertain_receipt(cli: StrataCLI, workspace: Path, tmp_path: Path) -> tuple[str, str]:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file",
                     "go", env={"STRATA_FAULT": "after_receipt"})
    assert killed.returncode == -9
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    (receipt,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    assert receipt["status"] == "dispatched"
    return str(session["id"]), str(receipt["id"])


def test_contradicting_reconciles_at_once_record_one_and_tell_the_other_what_was_decided(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    session_id, receipt_id = _uncertain_receipt(cli, workspace, tmp_path)
    procs = {verdict: cli.popen("reconcile", receipt_id, f"--{verdict}", "--note", f"I say {verdict}")
             for verdict in ("applied", "not-applied")}
    done: dict[str, tuple[int, str, str]] = {}
    for verdict, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        done[verdict] = (proc.returncode, out, err)
    winners = [v for v, (rc, _, _) in done.items() if rc == 0]
    assert len(winners) == 1, done
    (winner,) = winners
    (loser,) = [v for v in done if v != winner]
    rc, _, err = done[loser]
    assert rc == 1 and len(err.strip().splitlines()) <= 2, err  # the error line and its hint
    said = "applied" if winner == "applied" else "not applied"
    first = err.splitlines()[0]
    assert f"already reconciled as {said}" in first and "via strata reconcile" in first, first
    assert " is done," not in first and " is failed," not in first, first

    (after,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert after["status"] == ("done" if winner == "applied" else "failed")
    assert after["note"] == f"I say {winner}"
    again = cli.run("reconcile", receipt_id, f"--{loser}")  # the same line when it comes later, not at once
    assert again.returncode == 1 and f"already reconciled as {said}" in again.stderr, again.stderr
    verified = cli.run("timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
