"""A task whose turn parked (a call waits for `strata approve|deny`) does not stay `parked` for ever once the
thread goes on: the thread's next message first finishes the parked turn (running the approved call, or telling the
model of the denial), and the task ends as that turn ends (`done` when it completes), before the next message's own
turn. A turn that parks again leaves its task `parked`; one the model fails ends it `failed` (a real `strata serve`
process, a scripted model or a strict loopback Messages API, real spool files, the decisions made with the real
`strata approve` and `strata deny`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._in_process_cli import run_in_process
from tests.channels._support import PARKS_THEN_ANSWERS, drop, parking_channel, pending, replies
from tests.channels._support import task_statuses as _tasks
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, wait_until
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import Fault, MessagesServer, Reply

pytestmark = pytest.mark.slow


def test_a_parked_task_ends_with_the_turn_that_runs_its_decided_call(cli: StrataCLI, tmp_path: Path) -> None:
    ws, spool = parking_channel(cli, tmp_path, *PARKS_THEN_ANSWERS)
    daemon = Daemon(cli)
    try:
        for thread, first in (("approved", "a1"), ("denied", "d1")):
            drop(spool / "in", first, thread=thread, id=first, text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="both turns parked")
        parked = {r["thread"]: r for r in replies(spool / "out")}
        assert {r["status"] for r in parked.values()} == {"parked"}
        assert _tasks(cli) == {"a1": "parked", "d1": "parked"}

        decided = [cli.run("approve", parked["approved"]["session_id"], "b1"),
                   cli.run("deny", parked["denied"]["session_id"], "b1", "--reason", "not on the release branch")]
        assert all(d.returncode == 0 for d in decided), [d.stderr for d in decided]
        assert _tasks(cli) == {"a1": "parked", "d1": "parked"}  # decided, not yet run: the thread has not gone on

        drop(spool / "in", "a2", thread="approved", id="a2", text="And the changelog?")
        drop(spool / "in", "d2", thread="denied", id="d2", text="And the changelog?")
        wait_until(lambda: len(replies(spool / "out")) == 4 and not pending(spool / "in"),
                   what="the second messages answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert len(list(ws.glob("ran-*"))) == 1  # the approved call ran once, the denied one never
    answered = {r["in_reply_to"]: (r["status"], r["text"]) for r in replies(spool / "out")}
    assert answered["a2"] == answered["d2"] == ("completed", "second answered")
    assert _tasks(cli) == {"a1": "done", "d1": "done"}


def test_a_task_whose_turn_parks_again_stays_parked_until_that_call_is_decided(cli: StrataCLI,
                                                                                tmp_path: Path) -> None:
    _, spool = parking_channel(cli, tmp_path, [tool_use("b1", "bash", command="true")],
                               [tool_use("b2", "bash", command="true")], [text("both ran")], [text("second answered")])
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m1", thread="t", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="m1 parked")
        [parked] = replies(spool / "out")
        sid = parked["session_id"]
        assert cli.run("approve", sid, "b1").returncode == 0
        drop(spool / "in", "m2", thread="t", id="m2", text="And the changelog?")
        # b1 runs, then the same turn parks on b2: m2 stays queued, m1's task still waits
        wait_until(lambda: "waiting for approval of b2" in run_in_process(cli, "timeline", sid).stdout,
                   what="the turn parked again on b2")
        assert pending(spool / "in") == ["m2.json"] and _tasks(cli) == {"m1": "parked"}
        assert cli.run("approve", sid, "b2").returncode == 0
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="m2 answered")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert _tasks(cli) == {"m1": "done"}


def test_a_parked_task_ends_failed_when_the_model_fails_the_turn_that_goes_on(cli: StrataCLI, tmp_path: Path) -> None:
    """The approved call runs; the model's answer to the turn that carries its result is an error (a 400, which the
    client does not retry): that turn ends `failed`, and so does the task. The thread's next message is then heard
    in its own turn and answered."""
    with MessagesServer(api_key=TEST_KEY) as server:
        server.script(Reply([{"type": "tool_use", "id": "b1", "name": "bash", "input": {"command": "touch ran-$$"}}]),
                      Fault(400, message="scripted fault at the resumed turn"),
                      Reply([{"type": "text", "text": "second answered"}]))
        ws, spool = parking_channel(cli, tmp_path, model="anthropic:claude-test")
        daemon = Daemon(cli, env={"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": TEST_KEY})
        try:
            drop(spool / "in", "m1", thread="t", id="m1", text="Run the tests on the release branch")
            wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="m1 parked")
            [parked] = replies(spool / "out")
            assert parked["status"] == "parked" and _tasks(cli) == {"m1": "parked"}
            assert cli.run("approve", parked["session_id"], "b1").returncode == 0
            drop(spool / "in", "m2", thread="t", id="m2", text="And the changelog?")
            wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="m2 answered")
        finally:
            daemon.stop()
        assert daemon.proc.returncode == 0, daemon.stderr
        assert server.pending == 0 and server.unexpected == [], server.requests
        resumed = server.requests[1]
        assert resumed.status == 400 and [b["tool_use_id"] for b in resumed.body["messages"][-1]["content"]
                                          if b["type"] == "tool_result"] == ["b1"]
    assert len(list(ws.glob("ran-*"))) == 1
    answered = {r["in_reply_to"]: (r["status"], r["text"]) for r in replies(spool / "out")}
    assert answered["m2"] == ("completed", "second answered")
    assert _tasks(cli) == {"m1": "failed"}
    ended = [r for r in cli.json_lines("timeline", parked["session_id"], "--json") if r["kind"] == "lifecycle"]
    assert any("scripted fault at the resumed turn" in json.dumps(r) for r in ended), ended
