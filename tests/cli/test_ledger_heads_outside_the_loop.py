"""Commits made outside a session's loop (a reconcile, an approval or denial, a fork) are covered by the evidence
ledger's head as the loop's are: someone who removes the rows such a commit added, and moves the session row's head
back to match, is caught by `strata timeline ID --verify` (the ledger's heads file is outside the database)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import error_lines, result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

SEQ_MASK = (1 << 40) - 1


def cut_timeline(cli: StrataCLI, session_id: str, keep: int) -> None:
    """Remove the session's timeline rows after `keep` and point the session row's head at row `keep`, as someone
    who can write the database file (and drops the append-only triggers) can."""
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        for trigger in ("timeline_no_update", "timeline_no_delete"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        (num,) = conn.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()
        base = num << 40
        conn.execute("DELETE FROM timeline WHERE key > ? AND key <= ?", (base | keep, base | SEQ_MASK))
        (digest,) = conn.execute("SELECT lower(hex(hash)) FROM timeline WHERE key = ?", (base | keep,)).fetchone()
        conn.execute("UPDATE sessions SET head_timeline_seq = ?, head_timeline_hash = ? WHERE id = ?",
                     (keep, digest, session_id))


def last_row(cli: StrataCLI, session_id: str) -> int:
    rows = json_lines_in_process(cli, "timeline", session_id, "--json")
    return int(rows[-1]["seq"])


def assert_truncation_caught(cli: StrataCLI, session_id: str, keep: int) -> None:
    cut_timeline(cli, session_id, keep)
    proc = strata(cli, "timeline", session_id, "--verify")
    assert proc.returncode == 1, proc.stdout
    (line,) = error_lines(proc.stderr)
    assert line.startswith(f"strata: error: timeline of session {session_id}: truncated: the evidence ledger's")


def test_removing_a_reconcile_and_moving_the_head_back_fails_verify(cli: StrataCLI, workspace: Path,
                                                                    tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file",
                     "go", env={"STRATA_FAULT": "after_receipt"})
    assert killed.returncode == -9
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    (receipt,) = json_lines_in_process(cli, "receipts", session["id"], "--json")
    before = last_row(cli, session["id"])
    decided = strata(cli, "reconcile", receipt["id"], "--not-applied")
    assert decided.returncode == 0, decided.stderr
    assert last_row(cli, session["id"]) > before
    assert_truncation_caught(cli, session["id"], before)


def test_removing_a_denial_and_moving_the_head_back_fails_verify(cli: StrataCLI, workspace: Path,
                                                                 tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_w", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park",
                     "--json", "go")
    assert parked.returncode == 4, parked.stderr
    session_id = str((result_line(parked.stdout) or {})["session_id"])
    before = last_row(cli, session_id)
    denied = strata(cli, "deny", session_id, "toolu_w")
    assert denied.returncode == 0, denied.stderr
    assert last_row(cli, session_id) > before
    assert_truncation_caught(cli, session_id, before)


def test_a_fork_starts_with_its_head_in_the_ledger(cli: StrataCLI, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "hello")
    assert run.returncode == 0, run.stderr
    session_id = str((result_line(run.stdout) or {})["session_id"])
    forked = strata(cli, "fork", session_id, "--at-turn", "1", "--json")
    assert forked.returncode == 0, forked.stderr
    child = json.loads(forked.stdout.splitlines()[-1])["session_id"]
    checked = json.loads(strata(cli, "timeline", child, "--verify", "--json").stdout)
    assert checked["ok"] is True
    assert checked["ledger_head"] is not None and checked["ledger_head"] == checked["session_head"]
