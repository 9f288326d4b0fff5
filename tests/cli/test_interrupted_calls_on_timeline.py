"""Every call that reached dispatch ends with a call row in the commit that closes its batch, and every receipt
transition is a timeline row (issue 19, item 4): a real `strata run` is stopped during a `bash` call, by Ctrl-C
(SIGINT) or by SIGKILL and a resume, and `strata timeline ID --json` must show the call row and the receipt rows:
`dispatched` in the commit that made the receipt durable (before the command started), `unknown` and the call row
in the commit that closed the batch; a reconciliation is a receipt row too."""

from __future__ import annotations

import signal
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, kill_group, wait_for, wait_group_gone
from tests.cli._helpers import assert_clean_stderr, events_of, strata, strata_read, text, tool_use
from tests.conftest import StrataCLI, write_script

TICKER = "echo $$ > cmd.pid; while true; do echo tick >> ticks; sleep 0.1; done"
"""Runs until killed, one line every 0.1 s; its pid (the group's id) in cmd.pid."""


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _rows(cli: StrataCLI, session_id: str) -> list[dict[str, Any]]:
    return json_lines_in_process(cli, "timeline", session_id, "--json")


def _receipt_rows(rows: list[dict[str, Any]], call_id: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["kind"] == "receipt" and row["call_id"] == call_id:
            assert row["outcome"] not in found, f"two {row['outcome']} receipt rows for {call_id}: {rows}"
            found[row["outcome"]] = row
    return found


def _end(proc: subprocess.Popen[str], workspace: Path) -> None:
    """A test that failed early leaves neither the runtime nor the command's group behind."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
    if (workspace / "cmd.pid").exists():
        kill_group(int((workspace / "cmd.pid").read_text()))


def _start_ticker(cli: StrataCLI, workspace: Path, tmp_path: Path) -> subprocess.Popen[str]:
    script = write_script(tmp_path / "s.json", [[tool_use("tick", "bash", command=TICKER)], [text("done")]])
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                     "go")
    wait_for(workspace / "ticks", proc, lines=2)
    return proc


def test_ctrl_c_during_a_command_leaves_its_call_row_and_receipt_rows_in_the_closing_commit(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Ctrl-C mid-`bash`: the call row and the `unknown` receipt row share the commit that closed the batch."""
    proc = _start_ticker(cli, workspace, tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        done = finish(proc, timeout=15)
    finally:
        _end(proc, workspace)
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert_clean_stderr(done)
    session_id = events_of(done.stdout)[0]["session_id"]
    rows = _rows(cli, session_id)
    (closing,) = [r for r in rows if r["kind"] == "lifecycle" and r["outcome"] == "interrupted"]
    closed_at = _at(closing["at"])

    calls = [r for r in rows if r["kind"] == "call" and r["call_id"] == "tick"]
    assert len(calls) == 1, f"the interrupted call has {len(calls)} call rows: {rows}"
    (call,) = calls
    assert _at(call["at"]) == closed_at, (call, closing)
    assert call["outcome"] == "unknown", call
    assert call["decision"] == "allowed", call

    receipts = _receipt_rows(rows, "tick")
    assert set(receipts) == {"dispatched", "unknown"}, receipts
    assert _at(receipts["unknown"]["at"]) == closed_at, receipts
    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    # `dispatched` is observed in the commit that made the receipt durable, before the command started.
    assert _at(receipts["dispatched"]["at"]) == _at(receipt["created_at"]), (receipts, receipt)
    assert receipts["unknown"]["check"] == receipt["id"] == receipts["dispatched"]["check"], (receipts, receipt)
    assert receipts["dispatched"]["seq"] < receipts["unknown"]["seq"] < closing["seq"], rows
    verified = strata_read(cli, "timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_sigkill_during_a_command_leaves_its_call_row_and_unknown_receipt_row_after_resume(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """SIGKILL mid-`bash`, then resume: the `dispatched` row survived the kill; `unknown` and the call row close
    the batch together, and a reconciliation adds its own receipt row."""
    proc = _start_ticker(cli, workspace, tmp_path)
    try:
        pgid = int((workspace / "cmd.pid").read_text())
        proc.send_signal(signal.SIGKILL)
        killed = finish(proc, timeout=15)
        (session,) = json_lines_in_process(cli, "sessions", "--json")
        session_id = session["id"]
        before = _rows(cli, session_id)
        assert set(_receipt_rows(before, "tick")) == {"dispatched"}, before
        resumed = cli.run("resume", session_id, "--kill-orphans", "--json")
        assert wait_group_gone(pgid, timeout=5)
    finally:
        _end(proc, workspace)
    assert killed.returncode == -signal.SIGKILL
    assert_clean_stderr(resumed)
    assert resumed.returncode == 5, (resumed.returncode, resumed.stderr)
    (closed,) = [e for e in events_of(resumed.stdout) if e["kind"] == "batch_completed"]
    closed_at = _at(closed["at"])

    rows = _rows(cli, session_id)
    calls = [r for r in rows if r["kind"] == "call" and r["call_id"] == "tick"]
    assert len(calls) == 1, f"the killed call has {len(calls)} call rows: {rows}"
    assert _at(calls[0]["at"]) == closed_at, (calls, closed)
    assert calls[0]["outcome"] == "unknown", calls
    receipts = _receipt_rows(rows, "tick")
    assert set(receipts) == {"dispatched", "unknown"}, receipts
    assert _at(receipts["unknown"]["at"]) == closed_at, receipts

    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    reconciled = strata(cli, "reconcile", receipt["id"], "--not-applied", "--note", "checked by hand")
    assert reconciled.returncode == 0, reconciled.stderr
    rows = _rows(cli, session_id)
    receipts = _receipt_rows(rows, "tick")
    assert set(receipts) == {"dispatched", "unknown", "reconciled"}, receipts
    assert receipts["reconciled"]["seq"] == rows[-1]["seq"], rows
    assert "not applied" in receipts["reconciled"]["summary"], receipts
    verified = strata_read(cli, "timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
