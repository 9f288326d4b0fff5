"""A command killed after it ran (its receipt `dispatched`, no result) is never run again on resume: the receipt
says it was dispatched. If that receipt was removed from the database, the timeline's chained receipt row still
says so: `strata resume` refuses in one line, before anything is recorded, instead of running the effect twice."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import bash_mark, effect_counts, error_lines, marker, strata, text
from tests.conftest import StrataCLI, write_script


def test_resume_refuses_when_a_dispatched_calls_receipt_was_removed(cli: StrataCLI, workspace: Path,
                                                                    tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[bash_mark("b1")], [text("done")]])
    killed = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "go",
                     env={"STRATA_FAULT": "after_dispatch"})
    assert killed.returncode == -9
    assert effect_counts(workspace)[marker("b1")] == 1
    (session,) = json_lines_in_process(cli, "sessions", "--json")
    sid = session["id"]
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        conn.execute("DELETE FROM receipts WHERE id = ?", (receipt["id"],))
    events_before = len(json_lines_in_process(cli, "export", sid, "--format", "jsonl"))

    resumed = strata(cli, "resume", sid)
    assert resumed.returncode == 1, resumed.stdout
    assert error_lines(resumed.stderr) == [
        f"strata: error: session {sid}: call b1's receipt {receipt['id']} is on the timeline (row 6) but gone from "
        "the receipts table; resuming would run its effect again, so nothing was resumed"]
    assert effect_counts(workspace)[marker("b1")] == 1
    assert len(json_lines_in_process(cli, "export", sid, "--format", "jsonl")) == events_before
    assert json_lines_in_process(cli, "sessions", "--json")[0]["status"] == session["status"]
