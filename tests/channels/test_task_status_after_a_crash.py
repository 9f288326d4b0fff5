"""A daemon killed right after a task's reply went out (before the book recorded how the task ended): the next
daemon acknowledges the redelivered message without running it again, and the task does not stay `open` for ever:
`strata tasks` says `done` (a real `strata serve` process SIGKILLed at the fault point, a scripted model)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_task_whose_reply_went_out_before_a_crash_is_done_not_open(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("the report is fine")], [text("never asked")])
    write_config(cli, spool_table("team", spool, ws, model))
    crashing = Daemon(cli, env={"STRATA_FAULT": "after_reply_sent"})
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    [reply] = replies(spool / "out")
    assert reply["task_id"] == 1 and pending(spool / "in") == ["a.json"]

    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in"), what="the redelivered message acknowledged")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert len(replies(spool / "out")) == 1
    listed = cli.run("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    [task] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (task["id"], task["message"], task["status"]) == (1, "m1", "done"), task
    verified = cli.run("timeline", reply["session_id"], "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
