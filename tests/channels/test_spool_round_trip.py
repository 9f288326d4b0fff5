"""Acceptance 1: a spool round trip through a real `strata serve` process with a scripted model. A message file in
the inbox becomes one turn in its thread's session and one reply file in the outbox; the thread's next message
continues the same session (one id, one chain); the same message dropped again is acknowledged, not processed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._in_process_cli import run_in_process
from tests.channels._support import (
    drop,
    pending,
    replies,
    session_events,
    session_ids,
    spool_table,
    write_config,
)
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_spool_message_gets_one_turn_and_one_reply_and_its_thread_keeps_one_session(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("first answer")], [text("second answer")])
    write_config(cli, spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="t1", id="m1", sender="anna@example.com", text="Please review the report")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="the first reply")
        [first] = replies(spool / "out")
        assert (first["in_reply_to"], first["thread"], first["status"], first["text"]) == (
            "m1", "t1", "completed", "first answer")
        assert first["task_id"] == 1  # an imperative aimed at a work artifact: the gate made it a task

        drop(spool / "in", "b", thread="t1", id="m2", sender="anna@example.com", text="thanks, and how long is it?")
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"), what="the second reply")
        second = next(r for r in replies(spool / "out") if r["in_reply_to"] == "m2")
        assert (second["session_id"], second["text"], second["task_id"]) == (first["session_id"], "second answer",
                                                                             None)

        drop(spool / "in", "a-again", thread="t1", id="m1", sender="anna@example.com",
             text="Please review the report")
        wait_until(lambda: not pending(spool / "in"), what="the redelivered message acknowledged")
        assert len(replies(spool / "out")) == 2
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr

    sid = first["session_id"]
    assert session_ids(cli.home) == [sid]
    events = session_events(cli.home, sid)
    prompts = [p["text"] for _, kind, p in events if kind == "user_message"]
    assert len(prompts) == 2
    assert prompts[0].startswith("[channel team · thread t1 · message m1 · from anna@example.com]")
    assert "[task 1:" in prompts[0]
    assert prompts[1].startswith("[channel team · thread t1 · message m2")
    assert [kind for _, kind, _ in events].count("session_started") == 1
    assert [s for s, _, _ in events] == list(range(1, len(events) + 1))  # one chain, no gap
    verified = run_in_process(cli, "timeline", sid, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads((spool / "out" / f"{first['key']}.json").read_text())["key"] == first["key"]

    listed = cli.run("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    [task] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert {k: task[k] for k in ("id", "channel", "thread", "message", "status", "session", "rule")} == {
        "id": 1, "channel": "team", "thread": "t1", "message": "m1", "status": "done", "session": sid,
        "rule": "imperative"}
    shown = cli.run("channels", "--json")
    assert shown.returncode == 0, shown.stderr
    [channel] = [json.loads(line) for line in shown.stdout.splitlines()]
    assert {k: channel[k] for k in ("name", "kind", "threads", "messages", "unacknowledged", "backlog")} == {
        "name": "team", "kind": "spool", "threads": 1, "messages": 2, "unacknowledged": 0, "backlog": 0}
    assert (channel["last_message"]["id"], channel["last_message"]["status"]) == ("m2", "acked")
    table = cli.run("tasks")
    assert table.returncode == 0 and "imperative" in table.stdout and sid in table.stdout


def test_a_reply_the_model_sends_with_the_reply_tool_is_an_effect_with_a_receipt_and_the_only_reply(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The reply goes through the tool-call path (policy, receipt, idempotency key); a second `reply` call in
    the same turn and the daemon's own fallback send nothing more."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("r1", "reply", text="the report is fine")],
                   [tool_use("r2", "reply", text="a second answer")], [text("all done")])
    write_config(cli, spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        wait_until(lambda: not pending(spool / "in") and len(replies(spool / "out")) == 1, what="the reply")
    finally:
        daemon.stop()
    [reply] = replies(spool / "out")
    assert (reply["in_reply_to"], reply["text"], reply["task_id"]) == ("m1", "the report is fine", 1)
    sid = reply["session_id"]
    results = {p["call_id"]: p for _, kind, p in session_events(cli.home, sid) if kind == "call_result"}
    assert results["r1"]["status"] == "ok" and not results["r1"]["is_error"]
    assert "nothing more was sent" in results["r2"]["content"]
    listed = run_in_process(cli, "receipts", sid, "--json")
    receipts = {r["call_id"]: r for r in map(json.loads, listed.stdout.splitlines())}
    assert receipts["r1"]["status"] == "done" and receipts["r1"]["tool"] == "reply"


def test_a_message_whose_id_extends_an_earlier_ones_is_a_message_of_its_own(cli: StrataCLI, tmp_path: Path) -> None:
    """`m1` after `m10` in one thread is not mistaken for a message whose turn already started."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [text("answer to m10")], [text("answer to m1")])
    write_config(cli, spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="t1", id="m10", text="hello")
        wait_until(lambda: len(replies(spool / "out")) == 1, what="the first reply")
        drop(spool / "in", "b", thread="t1", id="m1", text="hello again")
        wait_until(lambda: len(replies(spool / "out")) == 2, what="the second reply")
    finally:
        daemon.stop()
    assert sorted((r["in_reply_to"], r["text"]) for r in replies(spool / "out")) == [
        ("m1", "answer to m1"), ("m10", "answer to m10")]
