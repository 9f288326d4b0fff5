"""A daemon SIGKILLed after a task's turn ended and before the book recorded the task's status (fault point
`before_task_status`; the reply not sent yet): the next daemon, given the redelivered message, does not run the turn
again, gives the task the end the turn recorded (`done` for a completed turn, `incomplete` when the turn limit ended
it, `max_turns = 1`), and sends the reply once, with that status (a real `strata serve` process SIGKILLed at the
fault point, then a real restart; a scripted model whose unused answers would show a second run)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.channels._support import task_statuses as _tasks
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

ENDS = {"done": ("", "completed", "the report is fine"),
        "incomplete": ("max_turns = 1\n", "incomplete", None)}
"""A task's end -> the top-level settings that make its turn end so, the reply's status and its text (None: any)."""


@pytest.mark.parametrize("end", ENDS)
def test_a_task_killed_before_its_status_was_set_ends_as_its_turn_did(cli: StrataCLI, tmp_path: Path,
                                                                       end: str) -> None:
    settings, status, answer = ENDS[end]
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json",
                   [tool_use("w1", "write_file", path="note.txt", content="checked")],
                   [text("the report is fine")], [text("never asked")], [text("never asked either")])
    write_config(cli, settings + '[[policy.rules]]\ntool = "write_file"\naction = "allow"\n\n'
                 + spool_table("team", spool, ws, model))
    crashing = Daemon(cli, env={"STRATA_FAULT": "before_task_status"})
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    assert replies(spool / "out") == [] and pending(spool / "in") == ["a.json"]
    assert _tasks(cli) == {"m1": "open"}

    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in"), what="the redelivered message handled")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    [reply] = replies(spool / "out")  # sent once
    assert reply["status"] == status and answer in (None, reply["text"]), reply
    assert _tasks(cli) == {"m1": end}
    session_id = reply["session_id"]
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"w1": "done"}, receipts  # the turn ran once
    [session] = [s for s in json_lines_in_process(cli, "sessions", "--json") if s["id"] == session_id]
    assert session["status"] == status, session
    verified = cli.run("timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_an_empty_message_leaves_its_threads_ended_session_as_it_ended(cli: StrataCLI, tmp_path: Path) -> None:
    """The same release, without a crash: an empty message (answered "empty", no turn run) on a thread whose session
    had ended left that session resumed and `active`, which `strata sessions` reads as a crash (`interrupted`)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    write_config(cli, spool_table("team", spool, ws, script(tmp_path / "s.json", [text("the report is fine")],
                                                              [text("never asked")])))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        wait_until(lambda: len(replies(spool / "out")) == 1, what="m1 answered")
        drop(spool / "in", "b", thread="t1", id="m2", text="  ")
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="m2 answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    empty = {r["in_reply_to"]: r for r in replies(spool / "out")}["m2"]
    assert empty["status"] == "empty", empty
    [session] = json_lines_in_process(cli, "sessions", "--json")
    assert (session["id"], session["status"]) == (empty["session_id"], "completed"), session
