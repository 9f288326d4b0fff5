"""A daemon killed right after the model's `reply` call went out, in the middle of the message's turn (the reply
is in the outbox, its receipt still `dispatched`, the turn not ended): the next daemon, given the redelivered
message, finishes that turn instead of only acknowledging the message. Its task does not stay `open` for ever,
the reply's receipt is settled by the probe (never sent again), the rest of the turn runs once, and the session
ends `completed` (a real `strata serve` process SIGKILLed at the fault point, a scripted model).

Before the fix the redelivery saw the reply in the outbox and only acknowledged the message: `strata tasks` said
`open` for good, the session stayed `interrupted` with a `dispatched` receipt no process would settle, and the
calls the model made after its reply never ran."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_turn_cut_after_its_reply_call_is_finished_by_the_next_daemon(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json",
                   [tool_use("r1", "reply", text="the report is fine")],
                   [tool_use("w1", "write_file", path="after-reply.txt", content="written after the reply")],
                   [text("all done")])
    write_config(cli, spool_table("team", spool, ws, model) + "[policy]\nrules = [{tool = \"write_file\", "
                 "action = \"allow\"}]\n")
    crashing = Daemon(cli, env={"STRATA_FAULT": "after_dispatch:1"})  # the reply call's handler has returned
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    [reply] = replies(spool / "out")
    assert (reply["text"], reply["task_id"]) == ("the report is fine", 1)
    assert pending(spool / "in") == ["a.json"]

    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in"), what="the redelivered message handled")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert replies(spool / "out") == [reply]  # the one reply, never sent again
    [task] = json_lines_in_process(cli, "tasks", "--json")
    assert (task["id"], task["message"], task["status"]) == (1, "m1", "done"), task
    session_id = reply["session_id"]
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", session_id, "--json")}
    assert receipts == {"r1": "done", "w1": "done"}, receipts
    assert (ws / "after-reply.txt").read_text() == "written after the reply"
    [session] = [s for s in json_lines_in_process(cli, "sessions", "--json") if s["id"] == session_id]
    assert session["status"] == "completed", session
    verified = cli.run("timeline", session_id, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = cli.run("show", session_id, "--json")
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    firsts = [m for m in messages if m["role"] == "user" and any(
        b.get("type") == "text" and b["text"].startswith("[channel team · thread t1 · message m1")
        for b in m["content"])]
    assert len(firsts) == 1  # the message's prompt was given once
