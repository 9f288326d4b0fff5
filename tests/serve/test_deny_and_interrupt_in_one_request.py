"""A `deny` with `interrupt: true` (what `strata attach` sends for Ctrl-C at an approval question) denies the call
and stops the turn in one step on a real `strata serve`: with a model that answers at once, nothing runs between the
two, so the model is not asked again and the turn ends `interrupted`. A `deny` without the field (an older client's)
is the plain denial it always was: the turn goes on, the model told of it, and ends before an `interrupt` sent after
the denial's reply can stop it (why the two had to become one request)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import script, serving

pytestmark = pytest.mark.slow

WRITE_A = [tool_use("w1", "write_file", path="a.txt", content="A\n")]


@contextmanager
def _asked(cli: StrataCLI, tmp_path: Path) -> Iterator[tuple[RawClient, str, Path]]:
    """A driving connection to a new session of a served home whose turn waits for call w1's approval (a write the
    model, answering at once, follows with "after the denial"); its session id and workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", WRITE_A, [text("after the denial")])
    with serving(cli):
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        client.send(json.dumps({"type": "prompt", "id": "p", "session_id": sid, "text": "write a"}).encode() + b"\n")
        while (message := client.line()) is not None and message["type"] != "approval_request":
            pass
        assert message is not None and message["call_id"] == "w1", message
        try:
            yield client, sid, ws
        finally:
            client.close()


def _reply_and_result(client: RawClient, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`request`'s reply and the turn's `result` push, in whichever order they come (no result after a refusal:
    {} then)."""
    client.send(json.dumps(request).encode() + b"\n")
    reply: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    while reply is None or (result is None and reply["type"] == "ok"):
        message = client.line()
        assert message is not None, "the daemon closed the connection"
        if message.get("id") == request["id"]:
            reply = message
        elif message["type"] == "result":
            result = message
    return reply, result or {}


def _timeline(cli: StrataCLI, sid: str) -> list[dict[str, Any]]:
    return json_lines_in_process(cli, "timeline", sid, "--json")


def test_a_deny_with_interrupt_stops_the_turn_before_the_model_is_asked_again(cli: StrataCLI,
                                                                             tmp_path: Path) -> None:
    with _asked(cli, tmp_path) as (client, sid, ws):
        reply, result = _reply_and_result(client, {"type": "deny", "id": "d", "session_id": sid, "call_id": "w1",
                                                   "reason": "no", "interrupt": True})
        assert reply["type"] == "ok", reply
        assert (result["status"], result["exit_code"]) == ("interrupted", 130), result
    assert not (ws / "a.txt").exists()
    rows = _timeline(cli, sid)
    assert [(r["call_id"], r["decision"]) for r in rows if r["kind"] == "approval"] == [("w1", "rejected")], rows
    assert len([r for r in rows if r["kind"] == "model_attempt"]) == 1, rows  # none after the denial
    lifecycle = [r["summary"] for r in rows if r["kind"] == "lifecycle"]
    assert "the person interrupted the turn" in lifecycle, lifecycle
    assert not any("completed" in line for line in lifecycle), lifecycle


def test_a_plain_deny_lets_the_turn_go_on_and_an_interrupt_after_it_finds_nothing_to_stop(cli: StrataCLI,
                                                                                         tmp_path: Path) -> None:
    """What an older client sends: the request as it was (no `interrupt` field) is still taken, and still only
    denies."""
    with _asked(cli, tmp_path) as (client, sid, _):
        reply, result = _reply_and_result(client, {"type": "deny", "id": "d", "session_id": sid, "call_id": "w1",
                                                   "reason": "no"})
        assert reply["type"] == "ok", reply
        assert result["status"] == "completed", result
        late = client.ask({"type": "interrupt", "id": "i", "session_id": sid})
        assert (late["type"], late["code"]) == ("error", "refused"), late
    rows = _timeline(cli, sid)
    assert [(r["call_id"], r["decision"]) for r in rows if r["kind"] == "approval"] == [("w1", "rejected")], rows
    assert len([r for r in rows if r["kind"] == "model_attempt"]) == 2, rows  # the model heard of the denial


NOT_BOOLEANS: list[Any] = ["true", 1, 0, None, "", [True], {"interrupt": True}]


def test_a_refused_deny_with_interrupt_neither_denies_nor_stops_the_turn(cli: StrataCLI, tmp_path: Path) -> None:
    """Every deny that is refused leaves the turn as it was: an `interrupt` that is not a JSON boolean (strict: no
    "true", 1 or null) is `invalid`, one naming a call not asked is `no_such_call`, one from a watcher is
    `not_driver`; each one clear line, none of them stops the turn, and the call they named still waits: approved
    after them, it runs once and the turn completes. The daemon serves on (it stops cleanly after the block)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", WRITE_A, [text("wrote a")])
    with serving(cli):
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        watcher = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        try:
            client.hello()
            sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
            assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
            client.send(json.dumps({"type": "prompt", "id": "p", "session_id": sid, "text": "write a"}).encode()
                        + b"\n")
            while (asked := client.line()) is not None and asked["type"] != "approval_request":
                pass
            assert asked is not None and asked["call_id"] == "w1", asked
            deny = {"type": "deny", "session_id": sid, "call_id": "w1", "reason": "no"}
            refusals = [client.ask({**deny, "id": f"v{i}", "interrupt": value}) for i, value in enumerate(NOT_BOOLEANS)]
            refusals.append(client.ask({**deny, "id": "x", "call_id": "not-asked", "interrupt": True}))
            watcher.hello()
            assert watcher.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch"})["type"] == "ok"
            refusals.append(watcher.ask({**deny, "id": "o", "interrupt": True}))
            codes = [(r["type"], r["code"]) for r in refusals]
            assert codes == [("error", "invalid")] * len(NOT_BOOLEANS) + [("error", "no_such_call"),
                                                                           ("error", "not_driver")], refusals
            assert all(r["message"] and "\n" not in r["message"] for r in refusals), refusals
            reply, result = _reply_and_result(client, {"type": "approve", "id": "y", "session_id": sid, "call_id": "w1",
                                                       "args_sha256": asked["args_sha256"],
                                                       "plan_digest": asked["plan_digest"]})
            assert reply["type"] == "ok", reply
            assert result["status"] == "completed", result
        finally:
            watcher.close()
            client.close()
    assert (ws / "a.txt").read_text() == "A\n"
    rows = _timeline(cli, sid)
    assert [(r["call_id"], r["decision"]) for r in rows if r["kind"] == "approval"] == [("w1", "approved")], rows
    assert cli.run("timeline", sid, "--verify").returncode == 0
