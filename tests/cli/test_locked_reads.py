"""A reading command on a database another process holds locked: it waits out SQLite's busy timeout once (5 s),
then says the database is locked, in one line; it never recreates, migrates or changes the database. Real
processes: the holder is another Python process in exclusive locking mode with a write transaction open (what
blocks readers of a WAL database), the readers the real `strata` script on a home made by `strata run`."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.cli._helpers import ScriptCLI, error_lines, scripted_session

pytestmark = pytest.mark.timeout(180)

HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("CREATE TABLE held_by_another_process (x)")
print("held", flush=True)
sys.stdin.readline()
conn.rollback()
conn.close()
"""

BUSY_S = 5.0
"""The store's busy timeout (memory/sqlite_store.py `busy_timeout_ms`)."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_locked_database_makes_a_reading_command_wait_once_then_say_so(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    cli = ScriptCLI(tmp_path / "home", tmp_path)
    sid = scripted_session(cli, tmp_path)
    db = cli.home / "strata.db"
    before = _digest(db)

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        def timed(args: tuple[str, ...]) -> tuple[subprocess.CompletedProcess[str], float]:
            t0 = time.monotonic()
            proc = cli.run(*args)
            return proc, time.monotonic() - t0

        commands = [("sessions",), ("timeline", sid), ("show", sid)]
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            results = list(pool.map(timed, commands))
    finally:
        holder.communicate(input="\n", timeout=30)  # lets it roll back, and closes the pipes

    for args, (proc, elapsed) in zip(commands, results, strict=True):
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
        assert proc.returncode == 1, (args, proc.stderr)
        (line,) = error_lines(proc.stderr)
        assert f"{db} is locked by another process" in line, (args, proc.stderr)
        assert "hint: retry when the other process is done" in proc.stderr
        assert proc.stdout == "", args
        # One busy wait, not the quick way's and then the full way's (10 s and more before the fix).
        assert BUSY_S - 0.5 <= elapsed < 2 * BUSY_S - 1, (args, elapsed)
    assert _digest(db) == before  # the holder rolled back; nothing of strata's changed the file
    again = cli.run("timeline", sid)
    assert again.returncode == 0 and f"timeline of session {sid}" in again.stdout, again.stderr
