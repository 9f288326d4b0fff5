"""SIGTERM and SIGHUP are handled like Ctrl-C by every command that drives a session (issue 19, item 3): a real
`strata run` (or `resume`, or `chat`) is signalled while its `bash` call runs a command that appends a line to a
file every 0.1 s. The process exits promptly with 128 + the signal's number, the command's process group is gone
(the file stops growing), the receipt is settled (`unknown`, not `dispatched`), the batch is closed with a result
for the call, the timeline says which signal stopped the run, and a resume does not run the command again."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, group_members, kill_group, wait_for, wait_group_gone
from tests.cli._helpers import (
    assert_clean_stderr,
    call_results,
    check_pairing,
    events_of,
    result_line,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

TICKER = "echo $$ > cmd.pid; while true; do echo tick >> ticks; sleep 0.1; done"
"""Runs until killed, one line every 0.1 s; its pid (the group's id) in cmd.pid."""


def _ticks(workspace: Path) -> int:
    path = workspace / "ticks"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _assert_stopped_cleanly(cli: StrataCLI, workspace: Path, done: subprocess.CompletedProcess[str],
                            sig: signal.Signals, call_id: str, session_id: str) -> None:
    """What must hold once the signalled process has exited. The command's group is killed at the end whatever
    happened (after it was checked), so a failing test leaves nothing running."""
    pgid = int((workspace / "cmd.pid").read_text())
    try:
        assert wait_group_gone(pgid, timeout=2), f"the command's group {pgid} outlived strata: {group_members(pgid)}"
        count = _ticks(workspace)
        time.sleep(0.5)
        assert _ticks(workspace) == count, "the command kept running after strata exited"
        assert done.returncode == 128 + sig.value, (done.returncode, done.stderr)
        assert_clean_stderr(done)
        assert f"stopped by {sig.name}" in done.stderr, done.stderr
    finally:
        kill_group(pgid)
    (receipt,) = [r for r in json_lines_in_process(cli, "receipts", session_id, "--json") if r["call_id"] == call_id]
    assert receipt["status"] == "unknown", receipt
    assert sig.name in receipt["note"], receipt
    assert receipt["process"]["pgid"] == pgid, receipt
    (view,) = json_lines_in_process(cli, "show", session_id, "--json")
    assert view["open_batch"] is None
    assert view["session"]["lease_owner"] is None
    results = check_pairing(view["messages"])
    assert results[call_id]["is_error"], results[call_id]
    rows = json_lines_in_process(cli, "timeline", session_id, "--json", "--kind", "lifecycle")
    assert any(r["outcome"] == "interrupted" and sig.name in r["summary"] for r in rows), rows


def _end(proc: subprocess.Popen[str], workspace: Path) -> None:
    """If the test failed early: the runtime and the command's group are ended, not left behind. (After a clean
    stop the group is gone already: the assertions check that before anything is killed.)"""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
        if (workspace / "cmd.pid").exists():
            kill_group(int((workspace / "cmd.pid").read_text()))


def _resume_does_not_rerun(cli: StrataCLI, workspace: Path, session_id: str, call_id: str) -> None:
    before = _ticks(workspace)
    resumed = cli.run("resume", session_id, "--json")
    assert_clean_stderr(resumed)
    assert call_id not in call_results(events_of(resumed.stdout)), "resume produced a second result for the call"
    summary = result_line(resumed.stdout)
    assert summary is not None and summary["unknown_receipts"] == 1, (resumed.stdout, resumed.stderr)
    assert resumed.returncode == 5, (resumed.returncode, resumed.stderr)
    assert _ticks(workspace) == before, "resume ran the command again"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_run_signalled_during_a_command_kills_its_group_and_closes_the_batch(
        cli: StrataCLI, workspace: Path, tmp_path: Path, sig: signal.Signals) -> None:
    """`strata run` signalled mid-command: prompt exit 128+N, group gone, receipt unknown, batch closed, no re-run."""
    script = write_script(tmp_path / "s.json", [[tool_use("tick", "bash", command=TICKER)], [text("done")]])
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                     "go")
    try:
        wait_for(workspace / "ticks", proc, lines=2)
        proc.send_signal(sig)
        started = time.monotonic()
        done = finish(proc, timeout=15)
        assert time.monotonic() - started < 10, "the signalled run did not exit promptly"
    finally:
        _end(proc, workspace)
    session_id = events_of(done.stdout)[0]["session_id"]
    _assert_stopped_cleanly(cli, workspace, done, sig, "tick", session_id)
    _resume_does_not_rerun(cli, workspace, session_id, "tick")


def test_resume_signalled_during_a_command_kills_its_group_and_closes_the_batch(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """`strata resume ID PROMPT` is a driving command too: SIGTERM mid-command is handled like in `run`."""
    script = write_script(tmp_path / "s.json", [[text("ready")], [tool_use("tick", "bash", command=TICKER)],
                                                 [text("done")]])
    first = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                    "start")
    assert first.returncode == 0, first.stderr
    summary = result_line(first.stdout)
    assert summary is not None
    session_id = summary["session_id"]
    proc = cli.popen("resume", session_id, "tick now", "--allow", "bash")
    try:
        wait_for(workspace / "ticks", proc, lines=2)
        proc.send_signal(signal.SIGTERM)
        done = finish(proc, timeout=15)
    finally:
        _end(proc, workspace)
    _assert_stopped_cleanly(cli, workspace, done, signal.SIGTERM, "tick", session_id)
    _resume_does_not_rerun(cli, workspace, session_id, "tick")


@pytest.mark.slow
def test_chat_hung_up_during_a_command_kills_its_group_and_closes_the_batch(
        cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """`strata chat` whose terminal hangs up (SIGHUP) mid-command: the same close path, the lease released."""
    script = write_script(tmp_path / "s.json", [[tool_use("tick", "bash", command=TICKER)], [text("done")]])
    child = cli.spawn_pty("chat", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash")
    gone: bool | None = None
    try:
        child.expect(r"session ([0-9a-f-]{36}) \(interactive\)")
        session_id = child.match.group(1)
        child.expect("strata>")
        child.sendline("tick")
        wait_for(workspace / "ticks", lines=2)
        child.kill(signal.SIGHUP)
        child.expect(pexpect.EOF, timeout=15)
        child.wait()
    finally:
        if child.isalive():
            child.terminate(force=True)
        if (workspace / "cmd.pid").exists():  # checked, then ended whatever happened
            pgid = int((workspace / "cmd.pid").read_text())
            gone = wait_group_gone(pgid, timeout=2)
            kill_group(pgid)
    assert gone, "the command's group outlived strata"
    assert "stopped by SIGHUP" in child.before, child.before
    assert child.exitstatus == 128 + signal.SIGHUP.value, (child.exitstatus, child.signalstatus)
    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert receipt["status"] == "unknown", receipt
    (view,) = json_lines_in_process(cli, "show", session_id, "--json")
    assert view["open_batch"] is None and view["session"]["lease_owner"] is None
    check_pairing(view["messages"])
