"""A decision taken by a `strata approve` that was stopped (SIGSTOP: a frozen VM, a long pause) after it took the
session's lease and before it committed, for longer than the lease: meanwhile another machine decided the same
parked call the other way. When the stopped one continues it must write nothing: its approval would otherwise sit
in the log after the denial, and a resume would run a call a person refused.

Real processes on one PostgreSQL database: the session made by `strata run --on-ask park` (this machine), the
approver as if on another machine (host name `decider-a`, leases of 3 s instead of 60, and a stop of itself just
before its commit, so the test does not depend on when a signal lands), and `strata deny` here.

The same for `strata reconcile`: there the receipt's expected state already refused the late write (old code said
"receipt ... is not in the expected state"); the lease's token now refuses it first and says why."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests._other_machine import OtherMachine
from tests._postgres import Cluster, rows
from tests.channels._support import write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import script, wait_until

pytestmark = pytest.mark.slow

TTL_S = 3.0

_LAUNCH = r'''
import datetime, os, signal, socket, sys
host, ttl = sys.argv[1], float(sys.argv[2])
socket.gethostname = lambda: host  # another machine: its pid cannot be checked from here, only its lease's expiry
import memory.leases, memory.postgres
memory.leases.LEASE_TTL = datetime.timedelta(seconds=ttl)
store = memory.postgres.PostgresEventStore
original = store.commit

async def commit(self, session_id, write, *args, **kwargs):
    decision = any(type(event).__name__ in ("ApprovalGranted", "ApprovalRejected") for event, _ in write.events)
    if decision or (write.receipt_updates and not write.events):  # an approval or denial; a reconciliation
        os.kill(os.getpid(), signal.SIGSTOP)  # the decision is made, its lease taken: stop before committing it
    return await original(self, session_id, write, *args, **kwargs)

store.commit = commit
sys.argv = ["strata", *sys.argv[3:]]
from agent.cli.main import main
main()
'''


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_stopped_approver_whose_lease_was_taken_over_commits_nothing_when_it_continues(
        postgres_cluster: Cluster, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with postgres_cluster.database() as url:
        a, b = _setup(url, tmp_path)
        model = script(tmp_path / "s.json", [tool_use("c0", "bash", command="echo c0 >> effects.log")])
        parked = b.run("run", "--model", model, "--workspace", str(ws), "--on-ask", "park", "--json", "go")
        assert parked.returncode == 4, parked.stdout + parked.stderr
        (sid,) = {r[0] for r in rows(url, "SELECT id FROM sessions")}
        assert rows(url, "SELECT status, lease_token FROM sessions") == [("awaiting_approval", None)]
        after_denial: list[object] = []

        def denied_here() -> None:
            denied = b.run("deny", str(sid), "--all", "--reason", "not this one")
            assert denied.returncode == 0, denied.stdout + denied.stderr
            after_denial.append(rows(url, "SELECT max(seq) FROM events WHERE session_id = %s", sid)[0][0])

        out, err = _stopped_then_overtaken(url, a.popen("approve", str(sid), "--all"), denied_here)
        assert a_failed_in_one_line(out, err)
        kinds = [r[0] for r in rows(url, "SELECT kind FROM events WHERE session_id = %s ORDER BY seq", sid)]
        assert "approval_rejected" in kinds and "approval_granted" not in kinds, kinds
        later = rows(url, "SELECT seq, kind FROM events WHERE session_id = %s AND seq > %s", sid, after_denial[0])
        assert later == [], f"the stopped approver wrote after the denial: {later}"
        verified = b.run("timeline", str(sid), "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr

        # The session goes on as decided: resumed, the refused call does not run.
        script(tmp_path / "s.json", [tool_use("c0", "bash", command="echo c0 >> effects.log")], [text("understood")])
        resumed = b.run("resume", str(sid))
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert not (ws / "effects.log").exists()


def _setup(postgres_cluster_url: str, tmp_path: Path) -> tuple[OtherMachine, StrataCLI]:
    launcher = tmp_path / "launch.py"
    launcher.write_text(_LAUNCH, encoding="utf-8")
    a = OtherMachine(tmp_path / "home-a", tmp_path, store_url=postgres_cluster_url, launcher=launcher,
                      host="decider-a", ttl_s=TTL_S)
    b = StrataCLI(tmp_path / "home-b", tmp_path, store_url=postgres_cluster_url)
    for cli in (a, b):
        cli.home.mkdir()
        write_config(cli, "")
    made = a.run("sessions")  # migrates the database and binds it to home-a's chain key
    assert made.returncode == 0, made.stderr
    shutil.copy2(a.home / "chain.key", b.home / "chain.key")
    return a, b


def _stopped_then_overtaken(url: str, proc: subprocess.Popen[str], overtake: Callable[[], None]) -> tuple[str, str]:
    """Wait for `proc` to stop itself before its commit, let its lease expire, run `overtake`, continue `proc`;
    its output once it ended."""
    try:
        wait_until(lambda: _stopped(proc.pid), 30, "the decider stopping itself before its commit")
        ((token, expires),) = rows(url, "SELECT lease_token, lease_expires FROM sessions")
        assert token is not None, "the decider holds the session's lease while it is stopped"
        left = (datetime.fromisoformat(str(expires)) - datetime.now(UTC)).total_seconds()
        time.sleep(max(0.0, left) + 0.5)  # its lease has expired unrenewed
        overtake()
        os.kill(proc.pid, signal.SIGCONT)
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.wait()


def test_a_stopped_reconcile_whose_lease_was_taken_over_commits_nothing_when_it_continues(
        postgres_cluster: Cluster, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with postgres_cluster.database() as url:
        a, b = _setup(url, tmp_path)
        model = script(tmp_path / "s.json", [tool_use("c0", "bash", command="echo c0 >> effects.log")],
                       [text("done")])
        killed = b.run("run", "--model", model, "--workspace", str(ws), "--allow", "bash", "go",
                       env={"STRATA_FAULT": "after_receipt"})
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        (sid,) = {r[0] for r in rows(url, "SELECT id FROM sessions")}
        unknown = b.run("resume", str(sid))
        assert unknown.returncode == 5, unknown.stdout + unknown.stderr
        ((receipt_id, status),) = rows(url, "SELECT id, status FROM receipts")
        assert status == "unknown"

        def reconciled_here() -> None:
            done = b.run("reconcile", str(receipt_id), "--not-applied", "--note", "checked: nothing was written")
            assert done.returncode == 0, done.stdout + done.stderr

        out, err = _stopped_then_overtaken(url, a.popen("reconcile", str(receipt_id), "--applied"), reconciled_here)
        assert a_failed_in_one_line(out, err)
        ((status, note),) = rows(url, "SELECT status, note FROM receipts")
        assert (status, note) == ("failed", "checked: nothing was written")  # the decision made here, alone
        verified = b.run("timeline", str(sid), "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr


def a_failed_in_one_line(out: str, err: str) -> bool:
    assert "took the session over" in err and "nothing of this commit was written" in err, out + err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    return True
