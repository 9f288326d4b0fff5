"""One process drives a session at a time (issue 2, acceptance item 4), with real processes: a second `strata
resume` of an active session exits 1 with a clear "is active" error; once the owner is killed with SIGKILL, a
third process recovers the dead owner's lease and resumes. (The killed owner's command, `sleep`, outlives it: the
third resume ends it with `--kill-orphans` rather than wait for it, see tests/cli/test_orphans.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    assert_clean_stderr,
    check_pairing,
    error_lines,
    strata,
    strata_set_up,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

SLEEP_S = 30  # far longer than the test needs; the sleeper is killed at the end


def _script(tmp_path: Path) -> Path:
    """Turn 0 finishes; turn 1 (the first resume with a prompt) runs a long command; turn 2 finishes."""
    return write_script(tmp_path / "script.json", [
        [text("ready")],
        [tool_use("call_sleep", "bash", command=f"echo $$ > sleeper.pid; exec sleep {SLEEP_S}")],
        [text("finished")],
    ])


@pytest.fixture
def session(cli: StrataCLI, workspace: Path, tmp_path: Path) -> Iterator[str]:
    """A completed headless session whose next turn is the long command; the command is killed afterwards. Made in
    this process (tests/_in_process_cli.py): the resumes are what the tests are about."""
    proc = strata_set_up(cli, "run", "--model", f"script:{_script(tmp_path)}", "--workspace", str(workspace),
                         *ALLOW_EFFECTS, "start")
    assert proc.returncode == 0, proc.stderr
    (row,) = json_lines_in_process(cli, "sessions", "--json")
    try:
        yield row["id"]
    finally:
        _kill_sleeper(workspace / "sleeper.pid")


def _kill_sleeper(pid_file: Path) -> None:
    """The bash call runs in its own process group, which outlives a SIGKILLed runtime: end it by its id."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    with contextlib.suppress(OSError):
        if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.killpg(pid, signal.SIGKILL)


def _row(cli: StrataCLI, session_id: str) -> dict[str, Any]:
    (row,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["id"] == session_id]
    return row


def _wait_active(cli: StrataCLI, session_id: str, owner: subprocess.Popen[str], timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert owner.poll() is None, f"the first resume ended early: {owner.communicate()}"
        row = _row(cli, session_id)
        if row["status"] == "active":
            return row
        time.sleep(0.1)
    raise AssertionError(f"session {session_id} never became active")


def _kill(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _assert_refused(proc: subprocess.CompletedProcess[str], session_id: str, owner_pid: int) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert_clean_stderr(proc)
    (line,) = error_lines(proc.stderr)
    assert "is active" in line and session_id in line and f"pid {owner_pid}" in line, line


def _assert_recovered(cli: StrataCLI, session_id: str, third: subprocess.CompletedProcess[str]) -> None:
    """The third process took the dead owner's lease and finished the session; the killed call is unknown."""
    assert_clean_stderr(third)
    assert "is active" not in third.stderr
    unknown = json_lines_in_process(cli, "receipts", session_id, "--status", "unknown", "--json")
    assert [r["call_id"] for r in unknown] == ["call_sleep"]  # dispatched when its owner died: never re-run
    assert third.returncode == 5, (third.returncode, third.stdout, third.stderr)
    (view,) = json_lines_in_process(cli, "show", session_id, "--json")
    assert view["session"]["ended"] == "completed" and view["session"]["lease_owner"] is None
    results = check_pairing(view["messages"])
    assert results["call_sleep"]["is_error"] and "unknown" in results["call_sleep"]["content"].lower()


@pytest.mark.slow
def test_second_resume_is_refused_while_the_first_is_active_then_a_third_recovers(
        cli: StrataCLI, session: str) -> None:
    """While one resume runs, a second exits 1 saying the session is active; after SIGKILL a third resumes."""
    first = cli.popen("resume", session, "run the long command")
    try:
        active = _wait_active(cli, session, first)
        assert active["lease_owner"]["pid"] == first.pid
        second = strata(cli, "resume", session, "me too")
        _assert_refused(second, session, first.pid)
        # The refused process changed nothing: the first still runs and still holds the lease.
        assert first.poll() is None
        row = _row(cli, session)
        assert row["status"] == "active" and row["lease_owner"]["pid"] == first.pid
    finally:
        killed = _kill(first)
    assert killed.returncode == -signal.SIGKILL
    assert _row(cli, session)["status"] != "active"  # a dead owner's lease does not count as active
    _assert_recovered(cli, session, strata(cli, "resume", session, "--kill-orphans"))


def test_two_resumes_started_together_one_proceeds(cli: StrataCLI, session: str) -> None:
    """Two resumes racing for the same session: exactly one takes the lease, the other exits 1 (is active)."""
    procs = [cli.popen("resume", session, f"racer {i}") for i in range(2)]
    try:
        deadline = time.monotonic() + 30
        while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        done = [p for p in procs if p.poll() is not None]
        assert len(done) == 1, "neither or both resumes ended"
        (loser,) = done
        (winner,) = [p for p in procs if p is not loser]
        out, err = loser.communicate(timeout=30)
        _assert_refused(subprocess.CompletedProcess(loser.args, loser.returncode, out, err), session, winner.pid)
        row = _wait_active(cli, session, winner)
        assert row["lease_owner"]["pid"] == winner.pid
    finally:
        for p in procs:
            _kill(p)
    _assert_recovered(cli, session, strata(cli, "resume", session, "--kill-orphans"))
