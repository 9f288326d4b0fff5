"""`strata chat --resume ID` finding the session's lease held, in a real pseudo-terminal (chat needs one on stdin):
as `strata resume` (tests/cli/test_resume_races_approve.py), a lease held for a moment (`strata approve|deny`
recording its decision, a reconcile, a probe) is waited for, up to SHORT_LEASE_S (memory/short_lease.py), and one
held longer is a running session, refused in one line naming the holder's pid, exit 1. Before, chat refused at
once although the holder let go a moment later. Real processes on one real SQLite file."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pexpect
import pytest

from tests._terminal import leave_chat
from tests.cli._helpers import EFFECTS_LOG, bash_mark, hold_lease, marker, text
from tests.conftest import StrataCLI, write_script

pytestmark = pytest.mark.slow


def _approved(cli: StrataCLI, tmp_path: Path) -> tuple[str, Path]:
    """A session parked on call c1 (a bash command that marks the effects log), the call approved, not yet run."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = write_script(tmp_path / "turns.json", [[bash_mark("c1")], [text("done")]])
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--on-ask", "park", "go")
    assert parked.returncode == 4, parked.stdout + parked.stderr
    sid = parked.stdout.split("strata approve ", 1)[1].split()[0]
    approved = cli.run("approve", sid, "c1")
    assert approved.returncode == 0, approved.stderr
    return sid, workspace


def test_a_chat_resume_waits_for_a_lease_a_decision_holds_for_a_moment(cli: StrataCLI, tmp_path: Path) -> None:
    """The lease is held (as `strata approve` holds it while it records) when the chat asks for it: the chat waits,
    goes on, and runs the approved call, once."""
    sid, workspace = _approved(cli, tmp_path)
    holder = hold_lease(cli, sid, 1.0)
    try:
        child: pexpect.spawn = cli.spawn_pty("chat", "--resume", sid)
        child.expect(f"history of session {sid}")
    finally:
        holder.communicate(timeout=30)
    assert holder.returncode == 0
    child.expect("assistant: done")
    seen = child.before
    leave_chat(child, sid)
    assert "is active in another process" not in seen and "Traceback" not in seen, seen
    assert (workspace / EFFECTS_LOG).read_text() == f"{marker('c1')}\n"
    (row,) = [r for r in cli.json_lines("sessions", "--json") if r["id"] == sid]
    assert row["lease_owner"] is None, row
    (receipt,) = cli.json_lines("receipts", sid, "--json")
    assert (receipt["call_id"], receipt["status"]) == ("c1", "done"), receipt


def test_a_chat_resume_of_a_session_another_process_keeps_running_is_refused_in_one_line_naming_it(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A lease held past the short wait is a running session: the chat gives up within a bound with the same
    refusal and exit code as `strata resume` (one line naming the holder's pid, and a hint), runs nothing, and the
    session resumes once that process is gone."""
    sid, workspace = _approved(cli, tmp_path)
    holder = hold_lease(cli, sid, 8.0)
    try:
        started = time.monotonic()
        child: pexpect.spawn = cli.spawn_pty("chat", "--resume", sid)
        child.expect(pexpect.EOF)
        waited = time.monotonic() - started
        child.close()
    finally:
        holder.kill()
        holder.communicate()
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)  # whatever the terminal was sent, as seen
    assert child.exitstatus == 1, shown
    assert "Traceback" not in shown, shown
    (line, hint) = [s for s in shown.splitlines() if s.strip()]
    assert f"session {sid} is active in another process (pid {holder.pid} on " in line, line
    assert "wait for it to finish, or stop that process" in hint, hint
    assert 2.5 < waited < 7.5, waited
    assert not (workspace / EFFECTS_LOG).exists()

    child = cli.spawn_pty("chat", "--resume", sid)  # the holder is gone (killed): its lease is recovered
    child.expect("assistant: done")
    leave_chat(child, sid)
    assert (workspace / EFFECTS_LOG).read_text() == f"{marker('c1')}\n"
