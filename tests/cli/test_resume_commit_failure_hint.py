"""A commit that fails during `strata resume` (the database refuses the write: a trigger put into the real SQLite
file raises "database or disk is full" for any new event) ends with a hint that is a command to paste: `strata
resume ID` with the session's id, not "`strata resume` the session". Once the database is fixed, the pasted command
resumes the session (real `strata` processes, the scripted model)."""

from __future__ import annotations

import re
import shlex
import sqlite3
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, write_script
from tests.conftest import StrataCLI

FULL = "CREATE TRIGGER full_disk BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"


def test_a_failed_commit_during_resume_hints_the_command_with_the_session_id(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [[text("first answer")], [text("second answer")]])
    first = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "go")
    assert first.returncode == 0, first.stderr
    [session] = json_lines_in_process(cli, "sessions", "--json")
    session_id = session["id"]
    db = cli.home / "strata.db"
    with sqlite3.connect(db) as conn:
        conn.execute(FULL)
    conn.close()

    failed = cli.run("resume", session_id, "and again")
    assert failed.returncode == 1, failed.stderr
    assert "failed: database or disk is full" in failed.stderr, failed.stderr
    [hint] = [line for line in failed.stderr.splitlines() if line.startswith("hint: ")]
    assert hint == ("hint: no tool ran after the failed commit; fix the database and "
                    f"`strata resume {session_id}`"), hint

    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER full_disk")
    conn.close()
    command = shlex.split(re.findall(r"`([^`]*)`", hint)[-1])
    assert command[0] == "strata"
    resumed = cli.run(*command[1:], "and again")
    assert resumed.returncode == 0, resumed.stderr
    assert "second answer" in resumed.stdout
