"""A daemon SIGKILLed while the thread's next message finishes a parked turn (after its decided call ran and its
batch closed, or after the whole turn ended, before the book heard how) does not leave the task `parked` for ever:
the next daemon, handling the redelivered message, finishes that turn if it had not ended, gives the task the end
the turn recorded (`done`; `incomplete` when the turn limit ends it, `max_turns = 1`), runs the call once only, then
answers the message (real `strata serve` processes killed at a fault point, a scripted model, real spool files, the
decision made with the real `strata approve`). A `failed` end is not among them: the scripted model cannot fail a
turn, and a failure raised while finishing settles the task in the same step, before that fault point."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.channels._support import PARKS_THEN_ANSWERS, drop, parking_channel, pending, replies
from tests.channels._support import task_statuses as _tasks
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until

pytestmark = pytest.mark.slow


ENDS = {"done": ("", ("completed", "second answered")),
        "incomplete": ("max_turns = 1\n", ("incomplete", None))}
"""A task's end -> the settings that make its turn end so, and the status and text of the next message's reply (None:
whatever the loop says)."""


@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("fault", ["after_parked_turn_finished", "after_batch_completed"])
def test_a_parked_task_killed_before_it_was_settled_ends_as_its_turn_did(cli: StrataCLI, tmp_path: Path,
                                                                          fault: str, end: str) -> None:
    settings, (status, answer) = ENDS[end]
    ws, spool = parking_channel(cli, tmp_path, *PARKS_THEN_ANSWERS, settings=settings)
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m1", thread="t", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="m1 parked")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    [parked] = replies(spool / "out")
    assert parked["status"] == "parked" and _tasks(cli) == {"m1": "parked"}
    approved = cli.run("approve", parked["session_id"], "b1")
    assert approved.returncode == 0, approved.stderr

    # the next message finishes the parked turn first; the daemon dies before the task is settled
    drop(spool / "in", "m2", thread="t", id="m2", text="And the changelog?")
    crashing = Daemon(cli, env={"STRATA_FAULT": fault})
    try:
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    assert len(list(ws.glob("ran-*"))) == 1 and pending(spool / "in") == ["m2.json"]
    assert _tasks(cli) == {"m1": "parked"}

    daemon = Daemon(cli)
    try:
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="m2 answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert len(list(ws.glob("ran-*"))) == 1  # the approved call ran once
    answered = {r["in_reply_to"]: (r["status"], r["text"]) for r in replies(spool / "out")}
    assert answered["m2"][0] == status and answer in (None, answered["m2"][1]), answered["m2"]
    assert _tasks(cli) == {"m1": end}
    verified = cli.run("timeline", parked["session_id"], "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
