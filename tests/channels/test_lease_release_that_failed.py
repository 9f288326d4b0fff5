"""A thread's session whose lease the daemon could not release (the database locked by another process past the
busy timeout, or a full disk, when the turn ended) is taken up again by the same daemon once the database can be
written, and the message is answered. The lease row still names the daemon's own pid, which is alive, so before
the fix every later attempt was refused with "session ... is active in another process (pid <the daemon>)" and
the thread's messages stayed queued for as long as the daemon ran (a real `strata serve`, a real SQLite file
locked by another real process, a scripted model)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import effect_counts, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

LOCK_S = 12
"""How long the other process holds the write lock: longer than a commit's and then the release's busy timeouts
(5 s each), so the turn's next commit and the lease's release both fail."""

_LOCKER = f"""
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep({LOCK_S})
conn.execute("ROLLBACK")
"""


def test_a_session_whose_lease_release_failed_is_taken_up_again_by_the_same_daemon(cli: StrataCLI,
                                                                                     tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    locker = tmp_path / "locker.py"
    locker.write_text(_LOCKER, encoding="utf-8")
    locked = tmp_path / "locked"
    db = cli.home / "strata.db"
    # The call's effect, then another process takes the database's write lock (detached, so the call ends while it
    # holds it): the commit of the call's result waits out the busy timeout and fails, and so does the release.
    command = (f"echo b1 >> effects.log; setsid {sys.executable} {locker} {db} {locked} >/dev/null 2>&1 & "
               f"until [ -e {locked} ]; do sleep 0.05; done")
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command=command)], [text("the report is fine")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n[policy]\nrules = [{tool = "bash", action = "allow"}]\n\n'
                 + spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        wait_until(lambda: not pending(spool / "in"), timeout=LOCK_S + 45, what="the message answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {"b1": 1}
    [reply] = replies(spool / "out")
    assert reply["in_reply_to"] == "m1" and reply["status"] == "completed", reply
    [session] = json_lines_in_process(cli, "sessions", "--json")
    assert session["status"] == "completed", session
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session["id"], "--json")}
    assert receipts == {"b1": "unknown"}, receipts  # its result was never recorded: not run again
    verified = cli.run("timeline", session["id"], "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
