"""Helpers shared by the wire tests that drive the real loop (in-process, `strata run|resume`, `strata chat`) through
the real `anthropic` SDK against the loopback Messages API server: script blocks, and checks on what the server
received (every request valid; tool_results first, in proposal order)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.cli._helpers import json_lines as json_lines
from tests.cli._helpers import text as text
from tests.cli._helpers import tool_use
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import MessagesServer, Recorded
from tests.wire.messages_validation import validate_request

# How the server may answer a request the test meant to send; "invalid", "unexpected", "unauthorized" and
# "not_found" mean Strata sent something it should not have.
SCRIPTED_OUTCOMES = frozenset({"reply", "fault", "stream_fault", "drop"})


def use(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """A tool_use block, named first (the order the wire tests read best); the same shape as the CLI tests'."""
    return tool_use(call_id, name, **args)


def model_env(server: MessagesServer, key: str = TEST_KEY) -> dict[str, str]:
    """The environment a `strata` subprocess needs to use the loopback server as its Anthropic API (never
    through a proxy the machine may have configured)."""
    return {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.url, "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost"}


def assert_all_valid(server: MessagesServer, *, allowed: Iterable[str] = ()) -> None:
    """Every request was one the test scripted (no 400 from validation, no request beyond the script, no wrong
    key); `allowed` names outcomes a test expects on top of those (e.g. "unauthorized")."""
    ok = SCRIPTED_OUTCOMES | set(allowed)
    bad = [(r.request_id, r.outcome, r.error) for r in server.requests if r.outcome not in ok]
    assert not bad, f"the server refused or did not expect requests: {bad}"
    for r in server.requests:
        if r.outcome in SCRIPTED_OUTCOMES:
            validate_request(r.body)  # re-checked here, so a change to the server cannot hide a defect


def messages_of(request: Recorded) -> list[dict[str, Any]]:
    body = request.body
    assert isinstance(body, dict), request
    messages = body["messages"]
    assert isinstance(messages, list)
    return messages


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def results_after(messages: list[dict[str, Any]], assistant_index: int) -> list[dict[str, Any]]:
    """The tool_result blocks of the user message after the assistant message at `assistant_index`, checked to
    come first in it and to answer exactly that message's tool_use blocks, in their order."""
    assistant, answer = messages[assistant_index], messages[assistant_index + 1]
    assert assistant["role"] == "assistant" and answer["role"] == "user", (assistant, answer)
    uses = [b["id"] for b in blocks(assistant) if b["type"] == "tool_use"]
    kinds = [b["type"] for b in blocks(answer)]
    n = kinds.count("tool_result")
    assert kinds[:n] == ["tool_result"] * n, f"tool_result blocks are not first: {kinds}"
    results = blocks(answer)[:n]
    assert [b["tool_use_id"] for b in results] == uses, ([b["tool_use_id"] for b in results], uses)
    return results


def tool_use_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [b["id"] for m in messages if m["role"] == "assistant" for b in blocks(m) if b["type"] == "tool_use"]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content)
    return str(content)


def user_texts(message: dict[str, Any]) -> list[str]:
    return [b["text"] for b in blocks(message) if b["type"] == "text"]
