"""One driver per session across PID namespaces (issue 19, item 6): a live session's owner runs a long `bash`
call; a real `strata resume` started in another PID namespace (`unshare --pid --fork --mount-proc`, same host
name, same boot), where the owner's pid means nothing, must be refused as active, and the owner must finish
normally. The test needs a tool that can make a PID namespace (root, or unprivileged user namespaces); where there
is none it skips with the reason, unless STRATA_REQUIRE_NAMESPACES=1 (CI) makes that a failure."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._groups import finish, wait_for
from tests.cli._helpers import (
    assert_clean_stderr,
    error_lines,
    json_lines,
    result_line,
    text,
    tool_use,
)
from tests.conftest import StrataCLI, write_script

UNTIL_RELEASED = ("echo yes > started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; do sleep 0.05; done; "
                  "echo finished >> out")


@functools.cache
def _unshare_prefix() -> tuple[list[str] | None, str]:
    """The command prefix that runs a program in a new PID namespace, or None and why there is none."""
    tool = shutil.which("unshare")
    if tool is None:
        return None, "the unshare program (util-linux) is not installed"
    tried = []
    for prefix in ([tool, "--pid", "--fork", "--mount-proc"],
                   [tool, "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]):
        probe = subprocess.run([*prefix, "sh", "-c", "readlink /proc/self/ns/pid"], capture_output=True, text=True,
                               timeout=30)
        if probe.returncode == 0 and probe.stdout.strip() != os.readlink("/proc/self/ns/pid"):
            return prefix, ""
        tried.append(f"{' '.join(prefix[1:])}: {probe.stderr.strip() or probe.returncode}")
    return None, "unshare cannot make a PID namespace here (" + "; ".join(tried) + ")"


@pytest.fixture
def in_new_pid_namespace() -> list[str]:
    prefix, why = _unshare_prefix()
    if prefix is None:
        if os.environ.get("STRATA_REQUIRE_NAMESPACES") == "1":
            pytest.fail(f"STRATA_REQUIRE_NAMESPACES=1 but {why}")
        pytest.skip(why)
    return prefix


def _live_owner(cli: StrataCLI, workspace: Path, tmp_path: Path) -> tuple[str, subprocess.Popen[str]]:
    """A completed session, then its owner: `strata resume ID go` running a bash call until `release`."""
    script = write_script(tmp_path / "s.json", [[text("ready")], [tool_use("long", "bash", command=UNTIL_RELEASED)],
                                                 [text("finished")]])
    first = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--json",
                    "start")
    assert first.returncode == 0, first.stderr
    summary = result_line(first.stdout)
    assert summary is not None
    session_id = str(summary["session_id"])
    owner = cli.popen("resume", session_id, "go", "--allow", "bash", "--json")
    wait_for(workspace / "started", owner)
    return session_id, owner


def test_resume_in_another_pid_namespace_is_refused_while_the_owner_lives(
        cli: StrataCLI, workspace: Path, tmp_path: Path, in_new_pid_namespace: list[str]) -> None:
    """The other namespace's resume exits 1 with "is active"; the owner then finishes its call and completes."""
    session_id, owner = _live_owner(cli, workspace, tmp_path)
    try:
        other = subprocess.run([*in_new_pid_namespace, *cli.argv(["resume", session_id, "me too"])], cwd=cli.cwd,
                               env=cli.env(), capture_output=True, text=True, timeout=60)
        assert owner.poll() is None, "the owner died while the other namespace tried to take its session"
        (workspace / "release").touch()
        done = finish(owner, timeout=60)
    finally:
        (workspace / "release").touch()
        if owner.poll() is None:
            owner.kill()
            owner.communicate()
    assert_clean_stderr(other)
    assert other.returncode == 1, (other.returncode, other.stdout, other.stderr)
    (line,) = error_lines(other.stderr)
    assert "is active" in line and session_id in line and f"pid {owner.pid}" in line, line
    assert_clean_stderr(done)
    assert done.returncode == 0, (done.returncode, done.stderr)
    summary = result_line(done.stdout)
    assert summary is not None and summary["status"] == "completed" and summary["unknown_receipts"] == 0
    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert receipt["status"] == "done", receipt
    assert (workspace / "out").read_text().splitlines() == ["finished"]
    (view,) = json_lines_in_process(cli, "show", session_id, "--json")
    assert view["session"]["ended"] == "completed" and view["session"]["lease_owner"] is None


def test_the_owner_is_shown_active_from_another_pid_namespace(
        cli: StrataCLI, workspace: Path, tmp_path: Path, in_new_pid_namespace: list[str]) -> None:
    """`strata sessions` in the other namespace lists the live session as active, not as interrupted."""
    session_id, owner = _live_owner(cli, workspace, tmp_path)
    try:
        listed = subprocess.run([*in_new_pid_namespace, *cli.argv(["sessions", "--json"])], cwd=cli.cwd,
                                env=cli.env(), capture_output=True, text=True, timeout=60)
    finally:
        (workspace / "release").touch()
        done = finish(owner, timeout=60)
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json_lines(listed.stdout) if r["id"] == session_id]
    assert row["status"] == "active", row
    assert done.returncode == 0, done.stderr

