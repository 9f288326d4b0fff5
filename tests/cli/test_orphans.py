"""Commands do not outlive Strata unnoticed (issue 19, item 3): a real `strata run` is killed with SIGKILL while
its `bash` call runs a command in its own session (so it keeps running: an orphan). The command ends only when
the test touches `release`, then appends `done` to `f`. The batch's next call appends to `g` what `f` held when
it ran, so `g` shows whether it ran beside the orphan or after it.

- `strata resume` waits for the orphan up to the lock timeout, then says it is still running (exit 6): its
  receipt stays `dispatched` and the next command does not run;
- when the orphan ends within the wait, the resume goes on: the call is `unknown` (never re-run), the next runs;
- `strata resume --kill-orphans` kills the orphan's process group first: `done` never lands;
- another session in the same workspace gets `resource busy` for its command while the orphan runs."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, group_members, kill_group, wait_for, wait_group_gone
from tests.cli._helpers import (
    assert_clean_stderr,
    call_results,
    check_pairing,
    error_lines,
    events_of,
    result_line,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

ORPHAN = ("echo $$ > orphan.pid; echo yes > started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; do sleep 0.05; "
          "done; echo done >> f")
NEXT = "{ cat f 2>/dev/null; echo next; } >> g"
SHORT_WAIT = {"STRATA_LOCK_TIMEOUT_S": "1"}


class Orphaned:
    """A session whose run was SIGKILLed while its first bash call's command still runs."""

    def __init__(self, cli: StrataCLI, workspace: Path, session_id: str, pgid: int) -> None:
        self.cli = cli
        self.workspace = workspace
        self.session_id = session_id
        self.pgid = pgid

    def receipts(self) -> dict[str, dict[str, Any]]:
        return {r["call_id"]: r for r in json_lines_in_process(self.cli, "receipts", self.session_id, "--json")}

    def read(self, name: str) -> list[str]:
        path = self.workspace / name
        return path.read_text().splitlines() if path.exists() else []

    def release(self) -> None:
        (self.workspace / "release").touch()


@pytest.fixture
def orphaned(cli: StrataCLI, workspace: Path, tmp_path: Path) -> Any:
    script = write_script(tmp_path / "s.json", [
        [tool_use("orphan", "bash", command=ORPHAN), tool_use("next", "bash", command=NEXT)],
        [text("finished")],
    ])
    proc = cli.popen("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                     "go")
    pgid = None
    try:
        wait_for(workspace / "started", proc)
        pgid = int((workspace / "orphan.pid").read_text())
        proc.send_signal(signal.SIGKILL)
        killed = finish(proc)
        assert killed.returncode == -signal.SIGKILL
        assert group_members(pgid), "the command did not outlive the killed runtime: nothing to test"
        (row,) = json_lines_in_process(cli, "sessions", "--json")
        yield Orphaned(cli, workspace, row["id"], pgid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        (workspace / "release").touch()
        if pgid is not None:
            kill_group(pgid)


def test_resume_says_an_orphaned_command_is_still_running_and_runs_nothing_beside_it(orphaned: Orphaned) -> None:
    """Resume waits the lock timeout, then exits 6 in one line; the receipt stays dispatched, `next` never ran."""
    started = time.monotonic()
    resumed = orphaned.cli.run("resume", orphaned.session_id, "--json", env=SHORT_WAIT)
    assert_clean_stderr(resumed)
    assert resumed.returncode == 6, (resumed.returncode, resumed.stdout, resumed.stderr)
    (line,) = error_lines(resumed.stderr)
    assert "still running" in line and "orphan" in line and str(orphaned.pgid) in line, line
    assert "--kill-orphans" in resumed.stderr, resumed.stderr
    assert time.monotonic() - started >= 1.0, "resume did not wait for the orphan first"
    assert orphaned.receipts()["orphan"]["status"] == "dispatched"
    assert "next" not in orphaned.receipts()
    assert orphaned.read("g") == [], "the next command ran beside the orphan"
    assert group_members(orphaned.pgid), "resume killed the orphan without being asked to"

    # Once the orphan has ended, a resume settles its call as unknown (not re-run) and runs the next one after it.
    orphaned.release()
    assert wait_group_gone(orphaned.pgid)
    again = orphaned.cli.run("resume", orphaned.session_id, "--json")
    assert_clean_stderr(again)
    assert again.returncode == 5, (again.returncode, again.stderr)
    receipts = orphaned.receipts()
    assert receipts["orphan"]["status"] == "unknown" and receipts["next"]["status"] == "done", receipts
    assert orphaned.read("f") == ["done"]
    assert orphaned.read("g") == ["done", "next"]
    assert call_results(events_of(again.stdout))["orphan"]["status"] == "unknown"  # settled, not run again


def test_resume_waits_for_an_orphan_that_ends_within_the_lock_timeout(orphaned: Orphaned) -> None:
    """The orphan ends half a second into the resume's wait: the resume goes on and `next` runs after `done` landed."""
    proc = orphaned.cli.popen("resume", orphaned.session_id, "--json")
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the resume is recorded: it is about to finish the open batch
        assert "session_resumed" in first, first
        time.sleep(0.5)
        orphaned.release()
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    resumed = subprocess.CompletedProcess(proc.args, proc.returncode, first + out, err)
    assert_clean_stderr(resumed)
    assert resumed.returncode == 5, (resumed.returncode, resumed.stderr)
    results = call_results(events_of(resumed.stdout))
    assert results["orphan"]["status"] == "unknown", results["orphan"]
    assert orphaned.read("g") == ["done", "next"], "the next command did not wait for the orphan"
    summary = result_line(resumed.stdout)
    assert summary is not None and summary["unknown_receipts"] == 1


def test_resume_with_kill_orphans_kills_the_group_before_anything_runs(orphaned: Orphaned) -> None:
    """`--kill-orphans`: the orphan's process group is killed, its call is unknown, `done` never lands."""
    resumed = orphaned.cli.run("resume", orphaned.session_id, "--kill-orphans", "--json")
    assert_clean_stderr(resumed)
    assert resumed.returncode == 5, (resumed.returncode, resumed.stderr)
    assert wait_group_gone(orphaned.pgid, timeout=1), group_members(orphaned.pgid)
    receipts = orphaned.receipts()
    assert receipts["orphan"]["status"] == "unknown", receipts
    assert "killed" in receipts["orphan"]["note"], receipts["orphan"]
    assert receipts["orphan"]["process"]["pgid"] == orphaned.pgid, receipts["orphan"]  # recorded on the receipt
    assert receipts["next"]["status"] == "done"
    assert orphaned.read("g") == ["next"]
    orphaned.release()
    time.sleep(0.5)
    assert orphaned.read("f") == [], "the orphan's command finished although it was killed"
    (view,) = json_lines_in_process(orphaned.cli, "show", orphaned.session_id, "--json")
    results = check_pairing(view["messages"])
    assert results["orphan"]["is_error"] and "unknown" in results["orphan"]["content"].lower()


def test_another_session_in_the_workspace_does_not_run_a_command_beside_an_orphan(
        orphaned: Orphaned, tmp_path: Path) -> None:
    """A new `strata run` in the same workspace: its bash call is `resource busy` (naming the orphan), not run."""
    script = write_script(tmp_path / "other.json", [[tool_use("other", "bash", command="echo other >> h")],
                                                    [text("gave up")]])
    other = orphaned.cli.run("run", "--model", f"script:{script}", "--workspace", str(orphaned.workspace), "--allow",
                             "bash", "--json", "other", env=SHORT_WAIT)
    assert_clean_stderr(other)
    assert other.returncode == 0, other.stderr
    result = call_results(events_of(other.stdout))["other"]
    assert result["is_error"] and "resource busy" in result["content"], result
    assert orphaned.session_id in result["content"] and "--kill-orphans" in result["content"], result
    assert orphaned.read("h") == [], "the other session's command ran beside the orphan"
    assert group_members(orphaned.pgid)
    summary = result_line(other.stdout)
    assert summary is not None
    (receipt,) = json_lines_in_process(orphaned.cli, "receipts", summary["session_id"], "--json")
    assert receipt["status"] == "failed", receipt  # never started

