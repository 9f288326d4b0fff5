"""A store whose commit fails runs no tool and exits 1 with a clear message (issue 2, acceptance item 3), with a
real process and a really read-only database file. (The in-process variant with a failing store lives with the
loop tests.)

How the file is made unwritable: its mode becomes 0444. A non-root process honours that. Root ignores permission
bits because it holds CAP_DAC_OVERRIDE, and running strata as an unprivileged user (nobody) is not possible here
because the interpreter lives under /root (mode 0700). So, when the tests run as root, the strata subprocess
drops CAP_DAC_OVERRIDE from its capability bounding set before exec (prctl PR_CAPBSET_DROP): the kernel then
enforces the owner's permission bits for it, and its open of the 0444 file for writing fails like anyone's.
A probe checks that this works on the machine, and the tests skip with the reason if it does not."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import (
    ALLOW_EFFECTS,
    EFFECTS_LOG,
    assert_clean_stderr,
    bash_mark,
    effect_counts,
    error_lines,
    events_of,
    marker,
    strata,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
BEFORE = "a line that was there before\n"

Runner = Callable[..., subprocess.CompletedProcess[str]]


def _drop_dac_override() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE) failed")


def _preexec() -> Callable[[], None] | None:
    return _drop_dac_override if os.geteuid() == 0 else None


@pytest.fixture
def unprivileged(cli: StrataCLI, tmp_path: Path) -> Runner:
    """Runs strata so that file permission bits bind it (see the module docstring); skips if that is impossible."""
    probe = tmp_path / "probe"
    probe.write_text("x")
    probe.chmod(0o444)
    try:
        check = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'a')"], capture_output=True,
                               preexec_fn=_preexec(), timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE for a child process here: {exc}")
    if check.returncode == 0:
        pytest.skip("a child process can still write a 0444 file here, so a read-only database cannot be staged")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(cli.argv(args), cwd=cli.cwd, env=cli.env(), capture_output=True, text=True,
                              timeout=60, preexec_fn=_preexec())
        assert_clean_stderr(proc)
        return proc

    return run


@contextlib.contextmanager
def read_only(db: Path) -> Iterator[None]:
    db.chmod(0o444)
    try:
        yield
    finally:
        db.chmod(0o644)


def _assert_commit_refused(proc: subprocess.CompletedProcess[str], db: Path) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert str(db) in line and ("readonly" in line or "read-only" in line), line


def test_resume_with_read_only_database_runs_no_tool_and_exits_1(
        cli: StrataCLI, workspace: Path, tmp_path: Path, unprivileged: Runner) -> None:
    """Resuming a pending batch on a read-only database exits 1 clearly; its append never runs, the log is intact."""
    (workspace / "a.txt").write_text("a\n")
    log = workspace / EFFECTS_LOG
    log.write_text(BEFORE)
    # The read-only call goes first, so the batch commit carries no receipt: the bash call has never started and
    # a resume would run it.
    script = write_script(tmp_path / "script.json",
                          [[tool_use("look", "read_file", path="a.txt"), bash_mark("append")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS, "--json",
                 "append a line", env={"STRATA_FAULT": "after_commit:1"})
    assert run.returncode == -signal.SIGKILL, run.stderr
    sid = events_of(run.stdout)[0]["session_id"]
    (before,) = json_lines_in_process(cli, "show", sid, "--json")
    assert [c["result"] for c in before["open_batch"]["calls"]] == [None, None]

    db = cli.home / "strata.db"
    with read_only(db):
        refused = unprivileged("resume", sid)
    _assert_commit_refused(refused, db)
    assert log.read_text() == BEFORE  # the tool did not run
    (after,) = json_lines_in_process(cli, "show", sid, "--json")
    assert after["messages"] == before["messages"] and after["open_batch"] == before["open_batch"]
    assert after["session"]["last_seq"] == before["session"]["last_seq"]  # nothing half-done in the log

    # Control: with the database writable again, the same resume runs the pending call, exactly once.
    resumed = unprivileged("resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert log.read_text().startswith(BEFORE)
    assert effect_counts(workspace) == {BEFORE.strip(): 1, marker("append"): 1}


def test_run_with_read_only_database_runs_no_tool_and_exits_1(
        cli: StrataCLI, workspace: Path, tmp_path: Path, unprivileged: Runner) -> None:
    """A new run on a read-only database exits 1 clearly and runs none of its tools."""
    log = workspace / EFFECTS_LOG
    log.write_text(BEFORE)
    script = write_script(tmp_path / "script.json", [[bash_mark("append")], [text("done")]])
    assert json_lines_in_process(cli, "sessions", "--json") == []  # the database exists, empty
    db = cli.home / "strata.db"
    with read_only(db):
        refused = unprivileged("run", "--model", f"script:{script}", "--workspace", str(workspace), *ALLOW_EFFECTS,
                               "append a line")
    _assert_commit_refused(refused, db)
    assert log.read_text() == BEFORE
    assert json_lines_in_process(cli, "sessions", "--json") == []
