"""A message id is the message's identity on its channel (its reply's key is made from it): a second message that
reuses an id already taken by another thread is neither dropped as a "redelivery" nor run in the first thread's
session. A spool file is moved to `inbox/rejected/` with a `.error` saying why; the webhook answers 409."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.channels._runner import DEFERRED_RETRY_S
from tests.channels._support import drop, pending, replies, spool_table, write_config
from tests.channels.test_webhook import TOKEN, _free_port, _http
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


def _rejected(inbox: Path) -> dict[str, str]:
    """Rejected files whose reason is written (the file is moved first, its `.error` written next)."""
    folder = inbox / "rejected"
    return {p.name.removesuffix(".error"): p.read_text() for p in folder.glob("*.json.error")}


def test_a_message_reusing_another_threads_id_is_rejected_with_a_reason_not_acknowledged_as_a_redelivery(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    write_config(cli, spool_table("ops", spool, ws, script(tmp_path / "s.json", [text("first answer")])))
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a", thread="alpha", id="m1", text="Hello from alpha")
        wait_until(lambda: len(replies(spool / "out")) == 1, what="alpha's reply")
        wait_until(lambda: not pending(spool / "in"), what="alpha's message acknowledged")
        drop(spool / "in", "b", thread="beta", id="m1", text="Hello from beta")
        wait_until(lambda: "b.json" in _rejected(spool / "in"), what="beta's message rejected")
    finally:
        daemon.stop()
    why = _rejected(spool / "in")["b.json"]
    assert "m1" in why and "alpha" in why and "already" in why, why
    [reply] = replies(spool / "out")
    assert (reply["thread"], reply["text"]) == ("alpha", "first answer")
    listed = cli.run("channels", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "beta" not in listed.stdout


def test_two_messages_with_one_id_in_one_poll_answer_one_thread_and_reject_the_other(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    write_config(cli, spool_table("ops", spool, ws, script(tmp_path / "s.json", [text("an answer")])))
    drop(spool / "in", "a", thread="alpha", id="dup", text="Hello from alpha")
    drop(spool / "in", "b", thread="beta", id="dup", text="Hello from beta")
    daemon = Daemon(cli)
    try:
        wait_until(lambda: len(_rejected(spool / "in")) == 1 and not pending(spool / "in"),
                   what="one message answered and the other rejected")
    finally:
        daemon.stop()
    [reply] = replies(spool / "out")
    [(name, why)] = _rejected(spool / "in").items()
    loser = json.loads((spool / "in" / "rejected" / name).read_text())["thread"]
    assert {reply["thread"], loser} == {"alpha", "beta"}
    assert "dup" in why and reply["thread"] in why, why


def test_the_webhook_refuses_a_message_id_another_thread_took_with_409_and_takes_a_retry_of_the_same(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    port = _free_port()
    model = script(tmp_path / "s.json", [text("hello")])
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\n')
    auth = {"Authorization": f"Bearer {TOKEN}"}
    url = f"http://127.0.0.1:{port}/messages"
    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        first = _http("POST", url, headers=auth, json_body={"thread": "alpha", "id": "w1", "text": "Hi"})
        assert first.status_code == 202, first.text
        other = _http("POST", url, headers=auth, json_body={"thread": "beta", "id": "w1", "text": "Hi too"})
        again = _http("POST", url, headers=auth, json_body={"thread": "alpha", "id": "w1", "text": "Hi"})
        wait_until(lambda: not pending(cli.home / "channels" / "hook" / "in"), what="the inbox emptied")
    finally:
        daemon.stop()
    assert other.status_code == 409, other.text
    assert "w1" in other.json()["error"] and "reply" not in other.json()
    assert again.status_code == 202, again.text
    [reply] = replies(cli.home / "channels" / "hook" / "out")
    assert reply["thread"] == "alpha"


def test_a_put_off_messages_id_stays_its_own_and_another_threads_later_message_reusing_it_is_rejected(
        cli: StrataCLI, tmp_path: Path) -> None:
    """alpha's session waits for approval, so alpha's message `dup` is put off; beta's message reusing `dup`,
    written after it, is rejected at once naming alpha (it used to be handled first, take the id in the book, and
    have alpha's earlier message rejected once the call was decided)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="true")], [text("parked, then denied")],
                   [text("alpha's second answered")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n' + spool_table("ops", spool, ws, model, on_ask='"park"'))
    log = cli.home / "logs" / "strata.log"
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a1", thread="alpha", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="alpha's m1 parked")
        [parked] = replies(spool / "out")
        assert parked["status"] == "parked"
        drop(spool / "in", "a2", thread="alpha", id="dup", text="And the changelog?")
        wait_until(lambda: log.is_file() and '"dup"' in log.read_text() and "stays queued" in log.read_text(),
                   what="alpha's dup put off")
        drop(spool / "in", "b", thread="beta", id="dup", text="Hello from beta")
        wait_until(lambda: "b.json" in _rejected(spool / "in") or len(replies(spool / "out")) > 1,
                   what="beta's message rejected (or answered)")
        assert [r["thread"] for r in replies(spool / "out")] == ["alpha"], "beta's message was handled"
        decided = cli.run("deny", parked["session_id"], "b1", "--reason", "not unattended")
        assert decided.returncode == 0, decided.stderr
        wait_until(lambda: len(replies(spool / "out")) == 2 and not pending(spool / "in"),
                   what="alpha's dup answered once the call was decided")
    finally:
        daemon.stop()
    why = _rejected(spool / "in")["b.json"]
    assert "'dup'" in why and "'alpha'" in why and "already" in why, why
    assert set(_rejected(spool / "in")) == {"b.json"}
    answered = {r["in_reply_to"]: (r["thread"], r["text"]) for r in replies(spool / "out")}
    assert answered["dup"] == ("alpha", "alpha's second answered")


def test_a_put_off_message_taken_away_by_its_writer_lets_its_id_go(cli: StrataCLI, tmp_path: Path) -> None:
    """The id is held for a waiting message only while its file is there: once its writer took it away (seen at
    the thread's retry), another thread's message may use the id."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="true")], [text("parked")])
    write_config(cli, '[daemon]\nenable = ["bash"]\n\n' + spool_table("ops", spool, ws, model, on_ask='"park"'))
    log = cli.home / "logs" / "strata.log"
    daemon = Daemon(cli)
    try:
        drop(spool / "in", "a1", thread="alpha", id="m1", text="Run the tests on the release branch")
        wait_until(lambda: len(replies(spool / "out")) == 1 and not pending(spool / "in"), what="alpha's m1 parked")
        drop(spool / "in", "a2", thread="alpha", id="dup", text="And the changelog?")
        wait_until(lambda: log.is_file() and '"dup"' in log.read_text() and "stays queued" in log.read_text(),
                   what="alpha's dup put off")
        (spool / "in" / "a2.json").unlink()
        time.sleep(DEFERRED_RETRY_S + 1.0)  # the thread's retry: its file is not found
        drop(spool / "in", "b", thread="gamma", id="dup", text="Hello from gamma")
        wait_until(lambda: len(replies(spool / "out")) == 2 or "b.json" in _rejected(spool / "in"),
                   what="gamma's message answered (or rejected)")
    finally:
        daemon.stop()
    assert _rejected(spool / "in") == {}
    assert {r["in_reply_to"]: r["thread"] for r in replies(spool / "out")} == {"m1": "alpha", "dup": "gamma"}
