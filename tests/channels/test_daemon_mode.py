"""Acceptance 4, DAEMON mode in a real `strata serve` process: no human is there, so an `ask` is a denial (or a
parked call with the channel's `on_ask = "park"`); execute and admin tools are not in a channel session's plan
unless `daemon.enable` names them; and a turn past `daemon.turn_budget_s` is closed as Ctrl-C closes it (the
started effect `unknown`) with a reply that says so."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import run_in_process
from tests.channels._support import drop, pending, replies, session_events, spool_table, write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

ALLOW_BASH = '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n'


def _results(cli: StrataCLI, session_id: str) -> list[dict[str, Any]]:
    return [p for _, kind, p in session_events(cli.home, session_id) if kind == "call_result"]


def _one_reply(outbox: Path) -> dict[str, Any]:
    wait_until(lambda: len(replies(outbox)) == 1, what=f"a reply in {outbox}")
    [reply] = replies(outbox)
    return reply


def test_bash_is_not_in_a_channel_sessions_plan_unless_enabled_by_name_even_when_policy_allows_it(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="touch ran.txt")], [text("could not run it")])
    write_config(cli, ALLOW_BASH + spool_table("ops", tmp_path / "spool", ws, model))
    daemon = Daemon(cli)
    try:
        drop(tmp_path / "spool" / "in", "m", thread="t", id="m1", text="Run the tests on the release branch")
        reply = _one_reply(tmp_path / "spool" / "out")
    finally:
        daemon.stop()
    assert (reply["status"], reply["text"]) == ("completed", "could not run it")
    [result] = _results(cli, reply["session_id"])
    assert result["call_id"] == "b1" and result["is_error"] and result["receipt_id"] is None
    assert not (ws / "ran.txt").exists()


def test_an_ask_is_denied_and_with_on_ask_park_the_call_parks_for_strata_approve(
        cli: StrataCLI, tmp_path: Path) -> None:
    deny_ws, park_ws = tmp_path / "deny-ws", tmp_path / "park-ws"
    deny_ws.mkdir()
    park_ws.mkdir()
    turns = ([tool_use("b1", "bash", command="touch ran.txt")], [text("denied, as expected")])
    deny_model, park_model = script(tmp_path / "d.json", *turns), script(tmp_path / "p.json", *turns)
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n'
                 + spool_table("deny", tmp_path / "deny", deny_ws, deny_model)
                 + spool_table("park", tmp_path / "park", park_ws, park_model, on_ask='"park"'))
    daemon = Daemon(cli)
    try:
        for name in ("deny", "park"):
            drop(tmp_path / name / "in", "m", thread="t", id="m1", text="Run the tests on the release branch")
        denied = _one_reply(tmp_path / "deny" / "out")
        parked = _one_reply(tmp_path / "park" / "out")
        wait_until(lambda: not pending(tmp_path / "park" / "in"), what="the parked message acknowledged")
        kinds = [kind for _, kind, _ in session_events(cli.home, parked["session_id"])]
        assert "calls_parked" in kinds and "call_result" not in kinds

        # the thread's next message waits while the call is undecided, and goes on once a person decides it
        drop(tmp_path / "park" / "in", "m2", thread="t", id="m2", text="And the changelog?")
        time.sleep(1.0)
        assert pending(tmp_path / "park" / "in") == ["m2.json"]
        assert len(replies(tmp_path / "park" / "out")) == 1
        decided = cli.run("deny", parked["session_id"], "b1", "--reason", "not unattended")
        assert decided.returncode == 0, decided.stderr
        wait_until(lambda: len(replies(tmp_path / "park" / "out")) == 2, what="the second message answered")
    finally:
        daemon.stop()
    later = next(r for r in replies(tmp_path / "park" / "out") if r["in_reply_to"] == "m2")
    assert later["session_id"] == parked["session_id"] and later["status"] == "completed"
    results = _results(cli, parked["session_id"])
    assert [(r["call_id"], r["status"]) for r in results] == [("b1", "denied")]
    assert (denied["status"], denied["text"]) == ("completed", "denied, as expected")
    [result] = _results(cli, denied["session_id"])
    assert result["status"] == "denied" and result["receipt_id"] is None, result
    assert parked["status"] == "parked" and "b1" in parked["text"]
    assert not (deny_ws / "ran.txt").exists() and not (park_ws / "ran.txt").exists()


def test_a_turn_past_its_budget_is_closed_with_the_started_effect_unknown_and_a_reply_saying_so(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="sleep 30; touch late.txt")],
                   [text("never reached")])
    write_config(cli, ALLOW_BASH + '[daemon]\nenable = ["bash"]\nturn_budget_s = 1.5\n\n'
                 + spool_table("ops", tmp_path / "spool", ws, model))
    daemon = Daemon(cli)
    try:
        drop(tmp_path / "spool" / "in", "m", thread="t", id="m1", text="Run the tests on the release branch")
        reply = _one_reply(tmp_path / "spool" / "out")
        wait_until(lambda: not pending(tmp_path / "spool" / "in"), what="the message acknowledged")
    finally:
        daemon.stop()
    assert reply["status"] == "over_budget"
    assert "time budget (1.5 s)" in reply["text"] and "unknown" in reply["text"]
    [result] = _results(cli, reply["session_id"])
    assert result["call_id"] == "b1" and result["receipt_id"] is not None
    receipts = run_in_process(cli, "receipts", reply["session_id"], "--json")
    assert '"unknown"' in receipts.stdout, receipts.stdout + receipts.stderr
    assert not (ws / "late.txt").exists()
