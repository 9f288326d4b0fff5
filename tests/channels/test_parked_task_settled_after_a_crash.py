"""A daemon SIGKILLed while the thread's next message finishes a parked turn (after its decided call ran and its
batch closed, or after the whole turn ended, before the book heard how) does not leave the task `parked` for ever:
the next daemon, handling the redelivered message, finishes that turn if it had not ended, gives the task the end
the turn recorded (`done`), runs the call once only, then answers the message (real `strata serve` processes killed
at a fault point, a scripted model, real spool files, the decision made with the real `strata approve`)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def _tasks(cli: StrataCLI) -> dict[str, str]:
    listed = cli.run("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    return {t["message"]: t["status"] for t in (json.loads(line) for line in listed.stdout.splitlines())}


@pytest.mark.parametrize("fault", ["after_parked_turn_finished", "after_batch_completed"])
def test_a_parked_task_killed_before_it_was_settled_ends_as_its_turn_did(cli: StrataCLI, tmp_path: Path,
                                                                          fault: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="touch ran-$$")],
                   [text("the tests ran")], [text("second answered")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n' + spool_table("park", spool, ws, model, on_ask='"park"'))
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
    assert answered["m2"] == ("completed", "second answered")
    assert _tasks(cli) == {"m1": "done"}
    verified = cli.run("timeline", parked["session_id"], "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
