"""A `reply` whose outcome a crash left uncertain is reconciled by its probe: the daemon is SIGKILLed right after
the reply tool wrote the reply (its receipt still `dispatched`); the restarted daemon acknowledges the redelivered
message without a second reply, and before the thread's next turn the `reply` probe finds the reply's key in the
outbox and settles the receipt as applied. The reply is never sent twice."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests._in_process_cli import run_in_process
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_reply_cut_by_a_crash_is_settled_by_its_probe_and_never_sent_twice(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("r1", "reply", text="first answer")], [text("after the reply")],
                   [text("second answer")])
    write_config(cli, spool_table("team", spool, ws, model))
    crashing = Daemon(cli, env={"STRATA_FAULT": "after_dispatch"})
    try:
        drop(spool / "in", "a", thread="t1", id="m1", text="Please review the report")
        assert crashing.wait(60) == -signal.SIGKILL
    finally:
        crashing.stop()
    [first] = replies(spool / "out")
    assert first["text"] == "first answer" and pending(spool / "in") == ["a.json"]
    sid = first["session_id"]
    before = {r["call_id"]: r
              for r in map(json.loads, run_in_process(cli, "receipts", sid, "--json").stdout.splitlines())}
    assert before["r1"]["status"] == "dispatched"

    daemon = Daemon(cli)
    try:
        wait_until(lambda: not pending(spool / "in"), what="the redelivered message acknowledged")
        assert len(replies(spool / "out")) == 1
        drop(spool / "in", "b", thread="t1", id="m2", text="And the summary?")
        wait_until(lambda: len(replies(spool / "out")) == 2, what="the second reply")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    second = next(r for r in replies(spool / "out") if r["in_reply_to"] == "m2")
    assert (second["session_id"], second["text"]) == (sid, "second answer")
    after = {r["call_id"]: r
             for r in map(json.loads, run_in_process(cli, "receipts", sid, "--json").stdout.splitlines())}
    assert after["r1"]["status"] == "done", after["r1"]
    assert "probe:reply" in json.dumps(after["r1"])
