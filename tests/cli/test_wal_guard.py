"""A deleted write-ahead log is noticed before the next effect (issue 19, item 7), with a real `strata run`, a
real bash call that deletes the file mid-batch, and a second process holding the database open (as a
`strata timeline --follow` would), which is then killed.

SQLite keeps writing to a WAL it has open after the file is unlinked; every commit from then on lives only in
that unlinked file. Before the fix the run went on executing effects whose receipts were in the deleted WAL, and
once the processes were gone the session was gone too, although its effects ran. Now the commit that would carry
the next effect's receipt sees that the file under the name is not the one it writes, fails, and the run stops
(exit 1, one line); what was committed before is copied into the database file first, so every effect that ran
keeps its receipt, and a resume goes on from there without running anything twice."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    bash_mark,
    effect_counts,
    error_lines,
    events_of,
    marker,
    result_line,
    strata,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

_READER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM sessions").fetchall()
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_deleted_wal_stops_the_run_before_the_next_effect(cli: StrataCLI, workspace: Path, tmp_path: Path,
                                                            suffix: str) -> None:
    """A bash call deletes strata.db-wal (or -shm) in the middle of a batch of effects: no later effect runs,
    the run exits 1 with one line naming the file, every effect that ran has its receipt even though the other
    process that had the database open is killed, and a resume runs the rest exactly once."""
    assert json_lines_in_process(cli, "sessions", "--json") == []  # the database exists
    db = cli.home / "strata.db"
    reader = subprocess.Popen([sys.executable, "-c", _READER, str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "ready"
        turns = [[bash_mark("m1"), bash_mark("m2"), tool_use("zap", "bash", command=f"rm -f {db}{suffix}"),
                  bash_mark("m3"), bash_mark("m4")], [text("done")]]
        script = write_script(tmp_path / "script.json", turns)
        run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS,
                     "--json", "mark four times")
    finally:
        reader.send_signal(signal.SIGKILL)  # it must not be the one that saves the commits (at its close)
        reader.wait(30)
        if reader.stdout is not None:
            reader.stdout.close()
    assert run.returncode == 1, (run.returncode, run.stderr)
    (line,) = error_lines(run.stderr)
    assert f"{db}{suffix}" in line, line
    assert effect_counts(workspace) == {marker("m1"): 1, marker("m2"): 1}

    session_id = events_of(run.stdout)[0]["session_id"]
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"m1": "done", "m2": "done", "zap": "dispatched"}

    resumed = strata(cli, "resume", session_id, "--json")
    assert resumed.returncode == 5, resumed.stderr  # the deleting call's outcome is unknown: never re-run
    summary = result_line(resumed.stdout)
    assert summary is not None and summary["unknown_receipts"] == 1
    assert effect_counts(workspace) == {marker(c): 1 for c in ("m1", "m2", "m3", "m4")}
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"m1": "done", "m2": "done", "zap": "unknown", "m3": "done", "m4": "done"}
