"""The loopback server validates requests as the Messages API does, so a test that passes through it proves the
request would be accepted; each defect the API refuses is refused here with a 400 naming it."""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import MessagesServer, Reply, steps_from_json
from tests.wire.messages_validation import Invalid, validate_request

TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}


def use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": "a"}}


def result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


VALID: dict[str, Any] = {
    "model": "claude-test", "max_tokens": 100,
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "tools": [TOOL],
    "messages": [{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": [text("looking"), use("t1"), use("t2")]},
                 {"role": "user", "content": [result("t1"), result("t2"), text("thanks")]}],
}


def edited(**changes: Any) -> dict[str, Any]:
    body = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    return body


def with_messages(*messages: dict[str, Any]) -> dict[str, Any]:
    return edited(messages=list(messages))


U, A = "user", "assistant"


def msg(role: str, *blocks: Any) -> dict[str, Any]:
    return {"role": role, "content": list(blocks)}


INVALID: dict[str, tuple[dict[str, Any], str]] = {
    # name: (body, words of the error)
    "missing_model": (edited(model=None), "model: Field required"),
    "missing_max_tokens": (edited(max_tokens=None), "max_tokens: Field required"),
    "zero_max_tokens": (edited(max_tokens=0), "max_tokens"),
    "missing_messages": (edited(messages=None), "messages: Field required"),
    "no_messages": (with_messages(), "at least one message"),
    "unknown_top_level_key": (edited(temperture=0.5), "temperture: Extra inputs"),
    "first_message_assistant": (with_messages(msg(A, text("hi")), msg(U, text("hi"))), "first message"),
    "roles_not_alternating": (with_messages(msg(U, text("a")), msg(U, text("b"))), "roles must alternate"),
    "dangling_tool_use_at_the_end": (with_messages(msg(U, text("go")), msg(A, use("t1"))),
                                     "without `tool_result` blocks immediately after: t1"),
    "tool_use_answered_by_text": (with_messages(msg(U, text("go")), msg(A, use("t1")), msg(U, text("done"))),
                                  "without `tool_result` blocks immediately after: t1"),
    "one_of_two_answered": (with_messages(msg(U, text("go")), msg(A, use("t1"), use("t2")), msg(U, result("t1"))),
                            "immediately after: t2"),
    "tool_result_not_first": (with_messages(msg(U, text("go")), msg(A, use("t1")), msg(U, text("x"), result("t1"))),
                              "must come first"),
    "tool_result_without_tool_use": (with_messages(msg(U, result("t9"))), "unexpected `tool_use_id`"),
    "tool_result_for_an_older_turn": (with_messages(msg(U, text("go")), msg(A, use("t1")), msg(U, result("t1")),
                                                    msg(A, text("ok")), msg(U, result("t1"))),
                                      "unexpected `tool_use_id`"),
    "duplicate_tool_use_ids": (with_messages(msg(U, text("go")), msg(A, use("t1"), use("t1"))), "must be unique"),
    "duplicate_ids_across_turns": (with_messages(msg(U, text("go")), msg(A, use("t1")), msg(U, result("t1")),
                                                 msg(A, use("t1")), msg(U, result("t1"))), "must be unique"),
    "duplicate_tool_result": (with_messages(msg(U, text("go")), msg(A, use("t1")), msg(U, result("t1"), result("t1"))),
                              "only one `tool_result`"),
    "tool_use_in_user_message": (with_messages(msg(U, use("t1"))), "only allowed in assistant"),
    "empty_text_block": (with_messages(msg(U, text(""))), "must be non-empty"),
    "whitespace_text_block": (with_messages(msg(U, text("go")), msg(A, text("  \n"))), "non-whitespace"),
    "empty_string_content": (with_messages({"role": "user", "content": ""}), "must be non-empty"),
    "empty_content_list": (with_messages(msg(U)), "non-empty content"),
    "unknown_block_type": (with_messages(msg(U, {"type": "image"})), "does not match any of the expected tags"),
    "tool_without_name": (edited(tools=[{"input_schema": {"type": "object"}}]), "tools.0.name: Field required"),
    "tool_without_schema": (edited(tools=[{"name": "x"}]), "tools.0.input_schema: Field required"),
    "tool_schema_not_object": (edited(tools=[{"name": "x", "input_schema": {"type": "string"}}]), "'object'"),
    "tool_bad_name": (edited(tools=[{"name": "read file", "input_schema": {"type": "object"}}]), "pattern"),
    "duplicate_tool_names": (edited(tools=[TOOL, TOOL]), "Tool names must be unique"),
    "bad_cache_control": (edited(tools=[{**TOOL, "cache_control": {"type": "forever"}}]), "cache_control"),
    "five_cache_breakpoints": (with_messages(msg(U, *[{**text(f"t{i}"), "cache_control": {"type": "ephemeral"}}
                                                      for i in range(4)])),
                               "A maximum of 4 blocks with cache_control"),
}


def test_a_valid_request_passes() -> None:
    """The reference conversation (parallel tool calls answered first in the next message) is valid."""
    validate_request(copy.deepcopy(VALID))


@pytest.mark.parametrize("case", sorted(INVALID))
def test_each_defect_is_refused(case: str) -> None:
    """Each defect the API refuses raises Invalid with words that name it."""
    body, words = INVALID[case]
    with pytest.raises(Invalid) as info:
        validate_request(body)
    assert words in str(info.value)


def post(server: MessagesServer, body: Any, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"{server.url}/v1/messages", data=data, method="POST", headers={
        "content-type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": TEST_KEY,
        **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_invalid_request_gets_a_400_and_consumes_no_step(messages_server: MessagesServer) -> None:
    """An invalid request is answered 400 invalid_request_error with a request id, and leaves the script as is."""
    messages_server.script(Reply([text("kept")]))
    status, body = post(messages_server, INVALID["roles_not_alternating"][0])
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["request_id"] == messages_server.requests[0].request_id
    assert messages_server.pending == 1
    status, body = post(messages_server, VALID)
    assert (status, body["content"], body["stop_reason"]) == (200, [text("kept")], "end_turn")


def test_api_key_and_version_header_are_checked(messages_server: MessagesServer) -> None:
    """A wrong key is a 401 authentication_error; a missing anthropic-version header is a 400."""
    status, body = post(messages_server, VALID, {"x-api-key": "sk-ant-wrong"})
    assert (status, body["error"]["type"]) == (401, "authentication_error")
    status, body = post(messages_server, VALID, {"anthropic-version": ""})
    assert status == 400 and "anthropic-version" in body["error"]["message"]
    assert [r.outcome for r in messages_server.requests] == ["unauthorized", "invalid"]


def test_an_unscripted_request_is_refused_and_recorded() -> None:
    """A valid request that finds the script empty is answered 400 and listed as unexpected."""
    with MessagesServer() as server:
        status, body = post(server, VALID)
        assert status == 400 and "no scripted response" in body["error"]["message"]
        assert [r.outcome for r in server.unexpected] == ["unexpected"]


def test_script_steps_from_json() -> None:
    """A JSON script (as a CLI test would write it) becomes the same steps."""
    steps = steps_from_json([{"content": [text("hi")]}, {"fault": 529, "headers": {"retry-after": "1"}},
                             {"stream_fault": None}, {"drop": True}])
    assert [type(s).__name__ for s in steps] == ["Reply", "Fault", "StreamFault", "Drop"]
    with pytest.raises(ValueError, match="unknown script step"):
        steps_from_json([{"bogus": 1}])
