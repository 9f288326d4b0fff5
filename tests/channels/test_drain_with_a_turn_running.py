"""SIGTERM while a channel message's turn runs a long command: the daemon stops taking messages, gives the turn
`drain_grace_s`, then closes it as Ctrl-C does (the started effect `unknown`) and exits 0; the next daemon
finishes the message exactly once: one turn-starting user message, one reply, the command never run again."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.channels._support import drop, pending, replies, session_events, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_drained_turn_is_closed_and_its_message_finished_once_by_the_next_daemon(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json",
                   [tool_use("b1", "bash", command="echo started >> runs.log; sleep 30; echo late >> runs.log")],
                   [text("the command was stopped")])
    write_config(cli, 'drain_grace_s = 1\n[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n'
                 '[daemon]\nenable = ["bash"]\n\n' + spool_table("ops", spool, ws, model))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "m", thread="t", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: (ws / "runs.log").exists(), what="the command started")
        asked = time.monotonic()
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(60) == 0, daemon.stderr
        assert time.monotonic() - asked < 15
    finally:
        daemon.stop()
    assert not replies(spool / "out") and pending(spool / "in") == ["m.json"]

    restarted = Daemon(cli)
    try:
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="the reply")
    finally:
        restarted.stop()
    [reply] = replies(spool / "out")
    assert (reply["status"], reply["text"]) == ("completed", "the command was stopped")
    events = session_events(cli.home, reply["session_id"])
    heads = [p["text"] for _, kind, p in events if kind == "user_message" and p["text"].startswith("[channel")]
    assert len(heads) == 1
    assert [(p["call_id"], p["status"]) for _, kind, p in events if kind == "call_result"] == [("b1", "unknown")]
    assert (ws / "runs.log").read_text() == "started\n"
