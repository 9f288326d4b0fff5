"""`strata timeline ID --verify` on a session another process writes to meanwhile (a real writer process,
committing every 20 ms to a long timeline): the receipts table is still compared with the chained timeline, by
reading again the rows committed since and the receipts until one read of both sees the same head. A receipt
changed in the database is named. Before, a head that moved during the check skipped the receipts comparison
silently: the changed receipt went unnamed and the verdict was "verified"."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow

FILLER = 20_000
"""Timeline rows before the check: reading and verifying them takes far longer than the writer's period."""
PERIOD_S = 0.02


def test_verify_compares_the_receipts_of_a_session_written_to_during_the_check(cli: StrataCLI,
                                                                               workspace: Path) -> None:
    script = write_script(workspace.parent / "turns.json", [
        [tool_use("w1", "write_file", path="out.txt", content="hello\n")], [text("done")]])
    ran = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "write_file", "go")
    assert ran.returncode == 0, ran.stderr
    (session,) = cli.json_lines("sessions", "--json")
    sid = session["id"]
    (receipt,) = cli.json_lines("receipts", sid, "--json")
    with closing(sqlite3.connect(cli.home / "strata.db", isolation_level=None)) as conn:
        conn.execute("UPDATE receipts SET status = 'unknown' WHERE id = ?", (receipt["id"],))

    writer = subprocess.Popen([sys.executable, "-m", "tests.cli._timeline_writer", sid, str(FILLER), str(PERIOD_S)],
                              cwd=cli.cwd, env=cli.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n", writer.communicate()
        checked = cli.run("timeline", sid, "--verify", "--json")
    finally:
        _, err = writer.communicate(input="", timeout=60)
    assert writer.returncode == 0, err
    report = json.loads(checked.stdout)
    assert any("written to while it was checked" in n for n in report["notes"]), report  # the head did move
    assert checked.returncode == 1 and report["verdict"] == "broken", report
    assert any(p.startswith(f"receipts of session {sid}: receipt {receipt['id']} is unknown in the receipts table")
               for p in report["problems"]), report
