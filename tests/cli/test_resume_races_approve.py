"""`strata resume ID` and `strata approve ID CALL` started at the same moment on one parked session: each takes the
session's lease, and whichever comes second finds it held by the other. The decision holds it for milliseconds, the
resume for as long as it runs the session; each waits for a lease held that briefly (memory/short_lease.py), so
neither is refused for the other. Whatever the order, the approved call's effect runs exactly once (by this resume
or the next), no process prints a traceback, each ends with one of the statuses its order allows, and the hash
chain verifies. Several rounds, each a fresh session, real processes on one real SQLite file."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from memory.short_lease import WAITING_FOR_LEASE
from tests._in_process_cli import json_lines_in_process, run_in_process, set_up_in_process
from tests.cli._helpers import EFFECTS_LOG, bash_mark, hold_lease, marker, text
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow

STAGGERS = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1)
"""Seconds between the two starts, one round each: where each reaches the lease moves across the other's hold."""


def _parked(cli: StrataCLI, workspace: Path, script: Path) -> str:
    parked = set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask",
                               "park", "go")
    assert parked.returncode == 4, parked.stdout + parked.stderr
    return parked.stdout.split("strata approve ", 1)[1].split()[0]


def _ended(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "Traceback" not in out, err
    return proc.returncode, out, err


@pytest.mark.parametrize("first", ["resume", "approve"])
def test_resume_racing_approve_runs_the_call_once_and_neither_is_refused(cli: StrataCLI, tmp_path: Path,
                                                                        first: str) -> None:
    seen: set[tuple[int, int]] = set()
    for k, stagger in enumerate(STAGGERS):
        workspace = tmp_path / f"ws{k}"
        workspace.mkdir()
        script = write_script(tmp_path / f"turns{k}.json", [[bash_mark(f"c{k}")], [text("done")]])
        sid = _parked(cli, workspace, script)
        argvs = {"resume": ("resume", sid), "approve": ("approve", sid, f"c{k}")}
        order = [first, "approve" if first == "resume" else "resume"]
        procs = {order[0]: cli.popen(*argvs[order[0]])}
        time.sleep(stagger)
        procs[order[1]] = cli.popen(*argvs[order[1]])
        resume_rc, resume_out, resume_err = _ended(procs["resume"])
        approve_rc, approve_out, approve_err = _ended(procs["approve"])
        seen.add((resume_rc, approve_rc))

        # The decision is always recorded: a resume before it holds the lease only while it parks the call again.
        assert approve_rc == 0 and f"approved call c{k}" in approve_out, approve_out + approve_err
        # The resume either came after it (and ran the call: completed) or before (the call undecided: parked again).
        assert resume_rc in (0, 4), resume_out + resume_err
        assert "is active in another process" not in resume_err + approve_err
        if resume_rc == 4:
            assert "waiting for approval" in resume_out and not (workspace / EFFECTS_LOG).exists()
            again = cli.run("resume", sid)
            assert again.returncode == 0, again.stdout + again.stderr
        assert (workspace / EFFECTS_LOG).read_text() == f"{marker(f'c{k}')}\n"  # once, whichever won
        (row,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["id"] == sid]
        assert row["status"] == "completed" and row["lease_owner"] is None, row
        (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
        assert (receipt["call_id"], receipt["status"]) == (f"c{k}", "done"), receipt
        verified = run_in_process(cli, "timeline", sid, "--verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
    assert seen <= {(0, 0), (4, 0)}, seen


def _approved(cli: StrataCLI, tmp_path: Path) -> tuple[str, Path]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    sid = _parked(cli, workspace, write_script(tmp_path / "turns.json", [[bash_mark("c1")], [text("done")]]))
    approved = set_up_in_process(cli, "approve", sid, "c1")
    assert approved.returncode == 0, approved.stderr
    return sid, workspace


def test_a_resume_waits_for_a_lease_a_decision_holds_for_a_moment(cli: StrataCLI, tmp_path: Path) -> None:
    """The loser's side made certain: the lease is held (as `strata approve` holds it while it records) when the
    resume asks for it. The resume waits and runs the approved call, once; before, it was refused at once ("active
    in another process", exit 1) though the holder let go a moment later."""
    sid, workspace = _approved(cli, tmp_path)
    holder = hold_lease(cli, sid, 1.0)
    try:
        resumed = cli.run("resume", sid)
    finally:
        holder.communicate(timeout=30)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "is active in another process" not in resumed.stderr and "Traceback" not in resumed.stderr
    assert (workspace / EFFECTS_LOG).read_text() == f"{marker('c1')}\n"


def test_a_resume_of_a_session_another_process_keeps_running_is_refused_in_one_line_naming_it(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A lease held past the short wait is a running session: the resume gives up within a bound, with one line
    naming the holder's pid and a hint, runs nothing, and the session resumes once that process is done."""
    sid, workspace = _approved(cli, tmp_path)
    holder = hold_lease(cli, sid, 8.0)
    try:
        started = time.monotonic()
        refused = cli.run("resume", sid)
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.communicate()
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == "", refused.stdout + refused.stderr
    (line, hint) = refused.stderr.splitlines()
    assert f"session {sid} is active in another process (pid {holder.pid} on " in line, line
    assert "wait for it to finish, or stop that process" in hint, hint
    assert 2.5 < waited < 7.5, waited
    assert not (workspace / EFFECTS_LOG).exists()
    resumed = cli.run("resume", sid)  # the holder is gone (killed): its lease is recovered
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (workspace / EFFECTS_LOG).read_text() == f"{marker('c1')}\n"


def _until_it_waits_for_the_lease(cli: StrataCLI, sid: str, resume: subprocess.Popen[str]) -> None:
    """Until `resume` logged that it waits for the session's lease: the Ctrl-C then lands in that wait, what this test
    is about (a fixed pause was too short for its start on a loaded machine, and a pause after its start may still
    end before its first try)."""
    log = cli.home / "logs" / "strata.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and any(
            (line := json.loads(raw)).get("event") == WAITING_FOR_LEASE and line.get("session_id") == sid
            for raw in log.read_text(encoding="utf-8").splitlines())):
        if resume.poll() is not None:
            out, err = resume.communicate()
            raise AssertionError(f"the resume ended ({resume.returncode}) before it waited: {out + err}")
        assert time.monotonic() < deadline, "the resume never logged that it waits for the lease"
        time.sleep(0.02)


def test_a_resume_interrupted_while_it_waits_for_a_lease_says_it_left_the_session_as_it_was(
        cli: StrataCLI, tmp_path: Path) -> None:
    """Ctrl-C while the resume waits for a lease another live process holds: exit 130, and the lines after
    `strata: interrupted` say the session was not resumed. Before, they said it 'was stopped safely: its open
    batch was closed and its lease released', of a session this process never took, which the holder still
    drives. Nothing is recorded, the holder keeps its lease, and the session resumes once that process is gone."""
    sid, workspace = _approved(cli, tmp_path)
    holder = hold_lease(cli, sid, 30.0)
    try:
        with sqlite3.connect(cli.home / "strata.db") as db:
            before = [db.execute(f"SELECT * FROM {t}").fetchall() for t in ("sessions", "events", "timeline")]
        resume = cli.popen("resume", sid)
        _until_it_waits_for_the_lease(cli, sid, resume)  # then well inside SHORT_LEASE_S of its first try
        resume.send_signal(signal.SIGINT)
        out, err = resume.communicate(timeout=30)
        assert resume.returncode == 130, out + err
        assert "Traceback" not in err and out == "", out + err
        assert err.splitlines()[:2] == ["strata: interrupted",
                                        f"session {sid} was not resumed: this process had not taken it, and it is "
                                        "as it was"], err
        assert "stopped safely" not in err and "lease released" not in err, err
        with sqlite3.connect(cli.home / "strata.db") as db:
            after = [db.execute(f"SELECT * FROM {t}").fetchall() for t in ("sessions", "events", "timeline")]
        assert after == before
        assert holder.poll() is None
        (row,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["id"] == sid]
        assert row["lease_owner"]["pid"] == holder.pid, row
    finally:
        holder.kill()
        holder.communicate()
    assert not (workspace / EFFECTS_LOG).exists()
    resumed = cli.run("resume", sid)  # the holder is gone (killed): its lease is recovered
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (workspace / EFFECTS_LOG).read_text() == f"{marker('c1')}\n"
