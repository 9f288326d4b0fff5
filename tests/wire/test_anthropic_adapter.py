"""The Anthropic adapter through the real `anthropic` SDK against the loopback Messages API server: streaming text
and tool calls are mapped into Strata's types, requests carry the prompt-cache breakpoints, a conversation built
as the loop builds it is accepted, and a malformed one is refused once, with one clear line."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from agent.models import NO_API_KEY, model_from_spec
from core.errors import ModelError, UsageError
from core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from core.model import ModelRequest, Usage
from core.model.anthropic import DEFAULT_MODEL, AnthropicModel
from tests.wire.conftest import TEST_KEY, MakeModel, RecordingListener
from tests.wire.messages_server import MessagesServer, Reply

READ_FILE = {"name": "read_file", "description": "Read a file.",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
LIST_DIR = {"name": "list_dir", "description": "List a directory.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def user(*blocks: Any) -> Message:
    return Message(role="user", content=tuple(TextBlock(text=b) if isinstance(b, str) else b for b in blocks))


def request(*messages: Message, system: str = "You are Strata.", tools: tuple[Any, ...] = (READ_FILE, LIST_DIR),
            turn: int = 0) -> ModelRequest:
    return ModelRequest(system=system, messages=messages, tools=tools, turn=turn)


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


# -- one turn --------------------------------------------------------------------------------------------------


async def test_plain_text_answer(messages_server: MessagesServer, make_model: MakeModel,
                                 listener: RecordingListener) -> None:
    """A text answer becomes one TextBlock that ends the turn; the request is a streamed Messages API call."""
    messages_server.script(Reply([text("Hello from the model.")]))
    response = await make_model().complete(request(user("hi")), listener)
    assert response.content == (TextBlock(text="Hello from the model."),)
    assert response.stop_reason == "end_turn"
    assert response.tool_uses == []
    (sent,) = messages_server.requests
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == 8192
    assert sent.body["stream"] is True
    assert sent.headers.get("anthropic-version")
    assert response.request_id == sent.request_id
    assert listener.outcomes == ["ok"]
    assert listener.attempts[0].request_id == sent.request_id


async def test_text_deltas_reach_the_listener_in_order_as_they_arrive(messages_server: MessagesServer,
                                                                     make_model: MakeModel) -> None:
    """Deltas arrive one by one, in order: the server holds the rest of the stream until the first delta has
    reached the listener, so an adapter that buffered the answer would stall."""
    gate = threading.Event()
    words = "The quick brown fox jumps over the lazy dog, twice."
    messages_server.script(Reply([text(words)], chunk=5, gate=gate))
    live = RecordingListener(on_first_text=gate.set)
    response = await make_model().complete(request(user("go")), live)
    assert messages_server.gate_timeouts == 0
    assert live.texts == [words[i:i + 5] for i in range(0, len(words), 5)]
    assert response.content == (TextBlock(text=words),)


async def test_parallel_tool_calls_are_assembled_from_json_deltas(messages_server: MessagesServer,
                                                                  make_model: MakeModel,
                                                                  listener: RecordingListener) -> None:
    """Two tool_use blocks streamed as 3-character input_json_delta pieces come back whole, in order, with the
    ids the server chose; the turn stops for tool use and only the text reaches the listener."""
    nested = {"path": "src", "depth": 2, "filters": {"ext": [".py", ".toml"], "hidden": False}, "note": "é \"q\""}
    messages_server.script(Reply([text("Reading both."),
                                  {"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}},
                                  {"type": "tool_use", "name": "list_dir", "input": nested}], chunk=3))
    response = await make_model().complete(request(user("look")), listener)
    assert response.stop_reason == "tool_use"
    assert response.content[0] == TextBlock(text="Reading both.")
    assert response.tool_uses == [ToolUseBlock(id="toolu_srv000001", name="read_file", input={"path": "a.txt"}),
                                  ToolUseBlock(id="toolu_srv000002", name="list_dir", input=nested)]
    assert "".join(listener.texts) == "Reading both."


async def test_usage_is_mapped_including_cache_tokens(messages_server: MessagesServer, make_model: MakeModel,
                                                      listener: RecordingListener) -> None:
    """Input, output, cache-read and cache-creation tokens land in Usage and in the ok attempt."""
    messages_server.script(Reply([text("ok")], usage={"input_tokens": 1200, "output_tokens": 42,
                                                      "cache_read_input_tokens": 1000,
                                                      "cache_creation_input_tokens": 150}))
    response = await make_model().complete(request(user("hi")), listener)
    expected = Usage(input_tokens=1200, output_tokens=42, cache_read_tokens=1000, cache_write_tokens=150)
    assert response.usage == expected
    assert listener.attempts[-1].usage == expected


async def test_cache_breakpoints_on_system_last_tool_and_last_message(messages_server: MessagesServer,
                                                                      make_model: MakeModel) -> None:
    """The stable prefix (tools, system) and the conversation so far are marked ephemeral: the system block, only
    the last tool, and the last block of the last message."""
    messages_server.script(Reply([text("ok")]))
    await make_model().complete(request(user("first", "second")))
    body = messages_server.bodies[0]
    assert body["system"] == [{"type": "text", "text": "You are Strata.", "cache_control": {"type": "ephemeral"}}]
    assert [t.get("cache_control") for t in body["tools"]] == [None, {"type": "ephemeral"}]
    assert [t["name"] for t in body["tools"]] == ["read_file", "list_dir"]
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "first"},
                                               {"type": "text", "text": "second",
                                                "cache_control": {"type": "ephemeral"}}]


async def test_prompt_cache_can_be_turned_off(messages_server: MessagesServer, make_model: MakeModel) -> None:
    """With prompt_cache=False no block carries cache_control; an empty system prompt is left out."""
    messages_server.script(Reply([text("ok")]))
    await make_model(prompt_cache=False).complete(request(user("hi"), system=""))
    body = json.dumps(messages_server.bodies[0])
    assert "cache_control" not in body
    assert "system" not in messages_server.bodies[0]


async def test_max_tokens_is_configurable(messages_server: MessagesServer, make_model: MakeModel) -> None:
    """The max_tokens setting is what the request asks for."""
    messages_server.script(Reply([text("ok")]))
    model = make_model(max_tokens=1024)
    await model.complete(request(user("hi")))
    assert messages_server.bodies[0]["max_tokens"] == 1024
    assert model.name == "anthropic:claude-test"


async def test_tool_input_cut_off_by_max_tokens_is_a_clear_error(messages_server: MessagesServer,
                                                                  make_model: MakeModel,
                                                                  listener: RecordingListener) -> None:
    """Tool input JSON that stops mid-way (max_tokens reached) is not guessed at: a non-retryable error that says
    to raise max_tokens, after one request."""
    messages_server.script(Reply([{"type": "tool_use", "name": "read_file", "input": {},
                                   "partial_json": '{"path": "a.t'}], stop_reason="max_tokens"))
    with pytest.raises(ModelError) as info:
        await make_model().complete(request(user("go")), listener)
    err = info.value
    assert (err.error_kind, err.retryable, err.attempts) == ("bad_response", False, 1)
    assert "cut off by max_tokens" in str(err) and str(err).endswith(": raise max_tokens")
    assert err.request_id == messages_server.requests[0].request_id
    assert len(messages_server.requests) == 1


async def test_tool_input_nested_past_the_reader_bound_is_one_clear_error(messages_server: MessagesServer,
                                                                          make_model: MakeModel,
                                                                          listener: RecordingListener) -> None:
    """Streamed tool input nested thousands of levels deep is refused by the bounded reader: a non-retryable
    error naming the bound, never a RecursionError (an input deep enough to be read but past the plan phase's
    limit is the plan phase's to deny, see tests/wire/test_model_output_wedges_wire.py)."""
    deep = '{"a":' * 3000 + "1" + "}" * 3000
    messages_server.script(Reply([{"type": "tool_use", "name": "read_file", "input": {}, "partial_json": deep}],
                                 chunk=4096))
    with pytest.raises(ModelError) as info:
        await make_model().complete(request(user("go")), listener)
    err = info.value
    assert (err.error_kind, err.retryable, err.attempts) == ("bad_response", False, 1)
    assert "nested deeper than 512 levels" in str(err) and "\n" not in str(err)


async def test_streamed_surrogates_reach_the_loop_listener_as_valid_text(messages_server: MessagesServer,
                                                                          make_model: MakeModel) -> None:
    """Text deltas holding unpaired surrogates (a pair split across two deltas, and a lone half) reach the
    surface through the loop's listener as valid UTF-8: the split pair joined, the lone half as U+FFFD."""
    from agent.timeline_rows import AttemptTee

    inner = RecordingListener()
    messages_server.script(Reply([text("ab\ud83d\ude00cd \udfff end")], chunk=3))
    await make_model().complete(request(user("go")), AttemptTee(lambda _: None, inner))
    shown = "".join(inner.texts)
    assert ascii(shown) == ascii("ab\U0001f600cd \ufffd end")  # ascii(): a failure report must be printable


# -- conversations ---------------------------------------------------------------------------------------------


async def test_multi_turn_exchange_with_tool_results_is_accepted(messages_server: MessagesServer,
                                                                 make_model: MakeModel) -> None:
    """A conversation built as the loop builds it (the assistant's tool calls, then one user message whose
    tool_result blocks come first) passes the server's validation over three turns."""
    messages_server.script(
        Reply([text("Let me look."), {"type": "tool_use", "name": "read_file", "input": {"path": "a.txt"}},
               {"type": "tool_use", "name": "list_dir", "input": {"path": "."}}]),
        Reply([{"type": "tool_use", "name": "read_file", "input": {"path": "b.txt"}}]),
        Reply([text("Both files are short.")]),
    )
    model = make_model()
    conversation: list[Message] = [user("summarise a.txt")]
    first = await model.complete(request(*conversation))
    conversation += [Message(role="assistant", content=first.content),
                     user(*(ToolResultBlock(tool_use_id=u.id, content=f"contents of {u.input['path']}")
                            for u in first.tool_uses), "also check b.txt")]
    second = await model.complete(request(*conversation, turn=1))
    (use,) = second.tool_uses
    conversation += [Message(role="assistant", content=second.content),
                     user(ToolResultBlock(tool_use_id=use.id, content="no such file", is_error=True))]
    third = await model.complete(request(*conversation, turn=2))
    assert third.content == (TextBlock(text="Both files are short."),)
    assert [r.outcome for r in messages_server.requests] == ["reply", "reply", "reply"]
    last = messages_server.bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in last[2]["content"]] == ["tool_result", "tool_result", "text"]
    assert last[4]["content"] == [{"type": "tool_result", "tool_use_id": use.id, "content": "no such file",
                                   "is_error": True, "cache_control": {"type": "ephemeral"}}]


async def test_dangling_tool_use_is_refused_once_with_one_line(messages_server: MessagesServer,
                                                               make_model: MakeModel,
                                                               listener: RecordingListener) -> None:
    """A tool_use with no tool_result in the next message is a 400 from the server's validator; the adapter sends
    it once and raises a non-retryable ModelError whose one line names the request id."""
    dangling = Message(role="assistant", content=(ToolUseBlock(id="toolu_1", name="read_file", input={"path": "a"}),))
    with pytest.raises(ModelError) as info:
        await make_model().complete(request(user("go"), dangling, user("and then?")), listener)
    err = info.value
    (sent,) = messages_server.requests
    assert sent.outcome == "invalid"
    assert "toolu_1" in (sent.error or "")
    assert (err.status_code, err.retryable, err.attempts, err.error_kind) == (400, False, 1, "bad_request")
    assert err.request_id == sent.request_id
    assert sent.request_id in str(err)
    assert "tool_result" in str(err)
    assert "\n" not in str(err)
    assert listener.outcomes == ["error"]


async def test_blank_text_blocks_are_not_sent_next_to_other_content(messages_server: MessagesServer,
                                                                    make_model: MakeModel) -> None:
    """A blank text block, which the API refuses, is left out of a message that has other content."""
    messages_server.script(Reply([text("ok")]))
    use = ToolUseBlock(id="toolu_9", name="read_file", input={"path": "a"})
    conversation = (user("go"), Message(role="assistant", content=(TextBlock(text="  "), use)),
                    user(ToolResultBlock(tool_use_id="toolu_9", content="")))
    await make_model().complete(request(*conversation, turn=1))
    sent = messages_server.bodies[0]["messages"]
    assert sent[1]["content"] == [{"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {"path": "a"}}]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_9",
                                     "cache_control": {"type": "ephemeral"}}


# -- choosing the model ----------------------------------------------------------------------------------------


def test_without_an_api_key_the_usage_error_is_one_line_with_both_ways_out() -> None:
    """No ANTHROPIC_API_KEY: a usage error (exit 2) in one line, saying how to set a key or use the scripted
    model."""
    with pytest.raises(UsageError) as info:
        model_from_spec("anthropic:claude-test", env={"ANTHROPIC_API_KEY": "  "})
    err = info.value
    assert str(err) == NO_API_KEY
    assert "\n" not in str(err) and err.hint is None
    assert "ANTHROPIC_API_KEY" in str(err) and "--model script:" in str(err)
    assert err.exit_code == 2


async def test_spec_builds_the_adapter_from_the_env_mapping(messages_server: MessagesServer) -> None:
    """`anthropic:NAME` uses the key and base URL of the given environment mapping."""
    messages_server.script(Reply([text("hello")]))
    model = model_from_spec("anthropic:claude-test",
                            env={"ANTHROPIC_API_KEY": TEST_KEY, "ANTHROPIC_BASE_URL": messages_server.url})
    assert isinstance(model, AnthropicModel)
    async with model:
        response = await model.complete(request(user("hi")))
    assert model.name == "anthropic:claude-test"
    assert response.content == (TextBlock(text="hello"),)


async def test_bare_anthropic_spec_uses_the_default_model() -> None:
    """`anthropic` alone picks the default Claude model."""
    model = model_from_spec("anthropic", env={"ANTHROPIC_API_KEY": TEST_KEY})
    assert isinstance(model, AnthropicModel)
    async with model:
        assert model.name == f"anthropic:{DEFAULT_MODEL}"
