"""A daemon SIGKILLed while the thread's next message finishes a parked turn (after its decided call ran and its
batch closed, or after the whole turn ended, before the book heard how) does not leave the task `parked` for ever:
the next daemon, handling the redelivered message, finishes that turn if it had not ended, gives the task the end
the turn recorded (`done`; `incomplete` when the turn limit ends it, `max_turns = 1`; `failed` when the model fails
the turn that goes on after the decision), runs the call once only, then answers the message (real `strata serve`
processes killed at a fault point, real spool files, the decision made with the real `strata approve`). The model is
the scripted one, or for `failed` the real Anthropic client against a strict loopback Messages API whose answer to
the resumed turn's request (the one carrying b1's result) is an error (tests/wire/messages_server.py)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.channels._support import PARKS_THEN_ANSWERS, drop, parking_channel, pending, replies
from tests.channels._support import task_statuses as _tasks
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import Fault, MessagesServer, Reply

pytestmark = pytest.mark.slow


ENDS = {"done": ("", ("completed", "second answered")),
        "incomplete": ("max_turns = 1\n", ("incomplete", None)),
        "failed": ("", ("completed", "second answered"))}
"""A task's end -> the settings that make its turn end so, and the status and text of the next message's reply (None:
whatever the loop says). `failed` is made by the model (`_channel`)."""

FAULT_MESSAGE = "scripted fault at the resumed turn"


@contextmanager
def _channel(cli: StrataCLI, tmp_path: Path, end: str) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """The parking channel for `end`: its workspace, its spool root and the daemons' environment. For `failed`, a
    loopback Messages API serves PARKS_THEN_ANSWERS's turns but answers the turn after b1 with an error (a 400,
    which the client does not retry): each request is consumed once, in order, whichever daemon makes it."""
    settings = ENDS[end][0]
    if end != "failed":
        yield (*parking_channel(cli, tmp_path, *PARKS_THEN_ANSWERS, settings=settings), {})
        return
    with MessagesServer(api_key=TEST_KEY) as server:
        server.script(Reply([{"type": "tool_use", "id": "b1", "name": "bash", "input": {"command": "touch ran-$$"}}]),
                      Fault(400, message=FAULT_MESSAGE), Reply([{"type": "text", "text": "second answered"}]))
        ws, spool = parking_channel(cli, tmp_path, settings=settings, model="anthropic:claude-test")
        yield ws, spool, {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": TEST_KEY}
        assert server.pending == 0 and server.unexpected == [], server.requests
        failing = server.requests[1]
        assert failing.status == 400 and failing.error == FAULT_MESSAGE, failing
        last = failing.body["messages"][-1]["content"]  # the resumed turn: the one that carries b1's result
        assert [(b["type"], b["tool_use_id"]) for b in last if b["type"] == "tool_result"] == [("tool_result", "b1")]


@pytest.mark.parametrize("end", ENDS)
@pytest.mark.parametrize("fault", ["after_parked_turn_finished", "after_batch_completed"])
def test_a_parked_task_killed_before_it_was_settled_ends_as_its_turn_did(cli: StrataCLI, tmp_path: Path,
                                                                          fault: str, end: str) -> None:
    with _channel(cli, tmp_path, end) as (ws, spool, env):
        _killed_while_settling(cli, ws, spool, env, fault, end)


def _killed_while_settling(cli: StrataCLI, ws: Path, spool: Path, env: dict[str, str], fault: str,
                           end: str) -> None:
    _, (status, answer) = ENDS[end]
    daemon = Daemon(cli, env=env)
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
    crashing = Daemon(cli, env={**env, "STRATA_FAULT": fault})
    try:
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    assert len(list(ws.glob("ran-*"))) == 1 and pending(spool / "in") == ["m2.json"]
    assert _tasks(cli) == {"m1": "parked"}

    daemon = Daemon(cli, env=env)
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
