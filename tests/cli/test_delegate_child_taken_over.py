"""A parent that drives its child in its own process is stopped (SIGSTOP: a frozen VM, a long pause) for longer
than the child's lease; meanwhile another process (`strata resume CHILD`) takes the child over. When the parent
continues, its child's run stops (LeaseLost: its next commit is refused), and its delegate call must neither fail
(the child goes on running elsewhere) nor run the child beside that process: the parent parks (exit 4) with the
call's receipt `dispatched`, and `strata resume PARENT` once the child is done takes its result, the child's
effect having run once.

Real processes on one Strata home: the parent runs through a launcher (this test's own) that makes its leases
short (TTL_S instead of 60 s) and its host another machine's (so this machine cannot check its pid, only its
lease's expiry, as for a process on another host sharing a database), and that stops itself as its child's model
is first asked, so the test does not depend on when a signal lands. The test continues it with SIGCONT."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import EFFECTS_LOG
from tests.cli.test_delegation import (
    CHILD_ANSWER,
    _delegate_result,
    _one_parent_one_child,
    _script,
    _until_started,
)
from tests.conftest import StrataCLI

TTL_S = 1.5

_LAUNCH = r'''
import datetime, os, signal, socket, sys
socket.gethostname = lambda: "parent-elsewhere"  # its pid cannot be checked from here, only its lease's expiry
ttl = datetime.timedelta(seconds=float(sys.argv[1]))
import agent.session, memory.leases
memory.leases.LEASE_TTL = agent.session.LEASE_TTL = ttl  # the lease it records, and its heartbeat's period
from core.model.scripted import CHILD_MARK, ScriptedModel
original = ScriptedModel.complete

async def complete(self, request, listener=None):
    if CHILD_MARK in self.name and request.turn == 0:
        os.kill(os.getpid(), signal.SIGSTOP)  # the child runs here, under its lease: stop before its first turn
    return await original(self, request, listener)

ScriptedModel.complete = complete
sys.argv = ["strata", *sys.argv[2:]]
from agent.cli.main import main
main()
'''


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def _until_stopped(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not _stopped(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the parent never stopped itself"
        time.sleep(0.02)


def _stopped_parent(cli: StrataCLI, tmp_path: Path, workspace: Path) -> subprocess.Popen[str]:
    """The parent's `strata run`, through the launcher, once it stopped itself as its child's model is first asked
    (its child started, under the parent's process's lease)."""
    script = _script(tmp_path / "s.json", f"touch started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; "
                                          f"do sleep 0.05; done; "
                                          f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")
    launcher = tmp_path / "launch.py"
    launcher.write_text(_LAUNCH, encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(launcher), str(TTL_S), "run", "--model", f"script:{script}", "--workspace",
         str(workspace), "--allow", "bash", "--allow", "delegate", "--json", "go"],
        cwd=cli.cwd, env=cli.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _until_stopped(proc)
    except BaseException:
        _end(proc)
        raise
    return proc


def _until_expired(cli: StrataCLI, session_id: str) -> None:
    """Until the session's lease, as recorded, has expired by this machine's clock (which the taking process reads
    too): its holder is stopped, so it is not renewed. A fixed TTL_S + 0.5 s from here waited longer: the lease was
    last renewed before the stop."""
    with closing(sqlite3.connect(cli.home / "strata.db", timeout=10)) as conn:
        (expires,) = conn.execute("SELECT lease_expires FROM sessions WHERE id = ?", (session_id,)).fetchone()
    left = (datetime.fromisoformat(expires) - datetime.now(UTC)).total_seconds()
    assert left <= TTL_S, (expires, left)  # the short lease of the launcher, not the default minute
    time.sleep(max(0.0, left) + 0.1)


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
    proc.communicate()


def test_a_delegate_call_whose_child_was_taken_over_while_the_parent_was_stopped_parks_and_resumes_once(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Continued while the other process still drives the child: the parent parks (exit 4) naming that
    process, its delegate receipt `dispatched`; `strata resume PARENT` later takes the child's result. Before,
    the delegate call failed (LeaseLost as the call's error) and the parent went on as if the child had failed."""
    parent_proc = _stopped_parent(cli, tmp_path, workspace)
    other: subprocess.Popen[str] | None = None
    try:
        parent, child = _one_parent_one_child(cli)
        _until_expired(cli, child["id"])  # the child's lease, last renewed before the stop, expires unrenewed
        other = cli.popen("resume", child["id"], "--json")  # takes the child over
        _until_started(other, workspace / "started")
        os.kill(parent_proc.pid, signal.SIGCONT)
        out, err = parent_proc.communicate(timeout=60)
        assert parent_proc.returncode == 4, (out, err)
        assert "Traceback" not in err, err
        assert f"child session {child['id']} is being run by another process (pid {other.pid}" in out, out
        (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
        assert receipt["status"] == "dispatched"
        assert other.poll() is None  # the other process still drives the child, untouched
    finally:
        _end(parent_proc)
        (workspace / "release").touch()
        if other is not None:
            _, other_err = other.communicate(timeout=60)
            assert other.returncode == 0, other_err
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    _all_done_once(cli, workspace, parent["id"])


def test_a_delegate_call_whose_child_another_process_took_over_and_finished_takes_its_result(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Continued after the other process finished the child: the parent's delegate call takes the child's
    recorded result at once (the child is not run again) and the parent completes."""
    parent_proc = _stopped_parent(cli, tmp_path, workspace)
    try:
        parent, child = _one_parent_one_child(cli)
        _until_expired(cli, child["id"])
        (workspace / "release").touch()
        other = cli.run("resume", child["id"], "--json")  # takes the child over and finishes it
        assert other.returncode == 0, other.stderr
        os.kill(parent_proc.pid, signal.SIGCONT)
        out, err = parent_proc.communicate(timeout=60)
        assert parent_proc.returncode == 0, (out, err)
    finally:
        _end(parent_proc)
    result = _delegate_result(out)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    _all_done_once(cli, workspace, parent["id"])


def _all_done_once(cli: StrataCLI, workspace: Path, parent_id: str) -> None:
    parent, child = _one_parent_one_child(cli)
    assert (parent["status"], child["status"]) == ("completed", "completed")
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"
    (receipt,) = json_lines_in_process(cli, "receipts", parent_id, "--json")
    assert receipt["status"] == "done"
