"""Streams the Messages API grammar does not allow, sent byte for byte by a loopback server to the real `strata run`
through the real `anthropic` SDK: a tool_use block whose input is completed after its `content_block_stop`, one
that never stops, two blocks on one index, and events with a field missing, of the wrong type, or data that is not
JSON.

The promise: no tool call runs that the model did not fully propose, and a stream Strata cannot read fails the
session in one line (no "internal error"), with the reason recorded, and the session resumes.

Each `strata` process that calls the API imports the SDK (~3 s of CPU on a loaded machine), so one scenario per
kind of failure (a tool input that is not whole, an event the accumulator refuses, data that is not JSON, a 200
that is not an event stream) runs as whole `strata run`/`resume` processes, which also checks the exit codes and
the clean stderr; the other shapes run the same parts in the test's process: the real SDK client against the same
loopback server, the real AnthropicModel, the real loop and a real SQLite file, with the same checks on the
outcome, the one request, the log and the timeline."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.session import Runtime, resume_session, start_session
from core.messages import TextBlock, ToolUseBlock
from core.model.anthropic import AnthropicModel
from core.state import fold
from observability.session_timeline import load_timeline
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import assert_clean_stderr, json_lines
from tests.conftest import StrataCLI
from tests.wire.conftest import TEST_KEY
from tests.wire.raw_sse_server import (
    SSE_HEAD,
    RawSSEServer,
    block_stop,
    json_delta,
    message_end,
    message_start,
    sse,
    text_answer,
    text_delta,
    text_start,
    tool_start,
)

MODEL = "anthropic:claude-test"



@pytest.fixture
def raw_server() -> Iterator[RawSSEServer]:
    with RawSSEServer() as server:
        yield server


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "a.txt").write_text("alpha\n")
    return workspace


def env(server: RawSSEServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": TEST_KEY, "ANTHROPIC_BASE_URL": server.url, "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost"}


def run(cli: StrataCLI, server: RawSSEServer, *args: str) -> subprocess.CompletedProcess[str]:
    proc = cli.run(*args, env=env(server))
    assert_clean_stderr(proc)
    return proc


def result_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    (line,) = [o for o in json_lines(proc.stdout) if o.get("type") == "result"]
    return line


def fails_and_resumes(cli: StrataCLI, server: RawSSEServer, ws: Path, stream: list[bytes], *reason: str) -> None:
    """`strata run` on `stream` fails in one line naming `reason`, runs no tool (a tool that ran would be answered
    in a second request), records the reason, and the session resumes with a new prompt."""
    server.script(stream, text_answer("Should not be asked."))
    proc = run(cli, server, "run", "--model", MODEL, "--workspace", str(ws), "--json", "look")
    result = result_of(proc)
    assert (result["status"], proc.returncode) == ("failed", 1), (proc.stdout, proc.stderr)
    for part in reason:
        assert part in result["reason"], result["reason"]
    assert len(server.requests) == 1, "a tool ran that the model did not fully propose"
    sid = result["session_id"]
    (view,) = json_lines_in_process(cli, "show", sid, "--json")
    assert not [b for m in view["messages"] for b in m["content"] if b.get("type") == "tool_use"], view["messages"]
    ended = [row for row in json_lines_in_process(cli, "timeline", sid, "--json")
             if "session failed" in row.get("summary", "")]
    assert ended and reason[0] in ended[-1]["summary"], ended
    again = run(cli, server, "resume", sid, "--model", MODEL, "--json", "and now?")
    assert (again.returncode, result_of(again)["status"]) == (0, "completed"), (again.stdout, again.stderr)


async def fails_and_resumes_in_process(rt: Runtime, server: RawSSEServer, ws: Path, stream: list[bytes],
                                       *reason: str) -> None:
    """`fails_and_resumes` in this process: the same stream through the real SDK and AnthropicModel (its default
    retry policy, as `strata run` has), the same checks on the outcome, the request count, the logged
    conversation and the timeline, then a resume with a new prompt that completes."""
    server.script(stream, text_answer("Should not be asked."))
    model = AnthropicModel(MODEL.partition(":")[2], api_key=TEST_KEY, base_url=server.url)
    try:
        live = await start_session(rt, model=model, workspace=ws, mode="headless", rules=[], prompt="look",
                                   max_turns=10)
        outcome = await live.run()
        await live.release(None)  # as `strata run` does when it ends
    finally:
        await model.aclose()
    assert (outcome.status, outcome.exit_code) == ("failed", 1), outcome
    for part in reason:
        assert part in outcome.reason, outcome.reason
    assert len(server.requests) == 1, "a tool ran that the model did not fully propose"
    logged = fold(await rt.store.read_events(outcome.session_id)).messages
    assert not [b for m in logged for b in m.content if isinstance(b, ToolUseBlock)], logged
    ended = [row for row in await load_timeline(rt.store, outcome.session_id) if "session failed" in row.summary]
    assert ended and reason[0] in ended[-1].summary, ended
    again_model = AnthropicModel(MODEL.partition(":")[2], api_key=TEST_KEY, base_url=server.url)
    try:
        again = await resume_session(rt, outcome.session_id, rules=[], model=again_model, prompt="and now?")
        resumed = await again.run("and now?")
        await again.release(None)
    finally:
        await again_model.aclose()
    assert (resumed.exit_code, resumed.status) == (0, "completed"), resumed


# -- a tool call the model did not fully propose ----------------------------------------------------------------


@pytest.mark.slow  # runs two `strata` processes that call the API, and two that read the store
def test_tool_input_completed_after_its_block_stopped_never_runs(cli: StrataCLI, raw_server: RawSSEServer,
                                                                 ws: Path) -> None:
    """At its `content_block_stop` the input was `{"path": "a.txt"` (cut); a stray delta after the stop must not
    complete it into a call that runs."""
    stream = [SSE_HEAD, message_start(), tool_start(0, "toolu_late", "read_file"), json_delta(0, '{"path": "a.txt"'),
              block_stop(0), json_delta(0, "}"), *message_end("tool_use")]
    fails_and_resumes(cli, raw_server, ws, stream, "toolu_late", "after its content_block_stop")


async def test_a_tool_use_block_that_never_stops_never_runs(runtime: Runtime, raw_server: RawSSEServer,
                                                            ws: Path) -> None:
    """The message stops (max_tokens) while the tool_use block is still open: the proposal is unfinished."""
    stream = [SSE_HEAD, message_start(), tool_start(0, "toolu_open", "read_file"), json_delta(0, '{"path": "a.txt"}'),
              *message_end("max_tokens")]
    await fails_and_resumes_in_process(runtime, raw_server, ws, stream, "toolu_open", "no content_block_stop")


async def test_two_blocks_on_one_index_are_refused_not_merged(runtime: Runtime, raw_server: RawSSEServer,
                                                              ws: Path) -> None:
    """A second `content_block_start` for index 0 used to replace the first block silently (here a tool call
    half-proposed, then text); the stream is refused instead."""
    stream = [SSE_HEAD, message_start(), tool_start(0, "toolu_a", "read_file"), json_delta(0, '{"path": '),
              tool_start(0, "toolu_b", "read_file"), json_delta(0, '{"path": "a.txt"}'), block_stop(0),
              *message_end("tool_use")]
    await fails_and_resumes_in_process(runtime, raw_server, ws, stream, "malformed stream", "block 0 started twice")


async def test_a_tool_call_streamed_after_message_stop_never_runs(runtime: Runtime, raw_server: RawSSEServer,
                                                                  ws: Path) -> None:
    """The message ended; a whole tool_use block after its `message_stop` is not part of it."""
    stream = [SSE_HEAD, message_start(), text_start(0), text_delta(0, "Done."), block_stop(0),
              *message_end("end_turn"), tool_start(1, "toolu_after", "read_file"), json_delta(1, '{"path": "a.txt"}'),
              block_stop(1)]
    await fails_and_resumes_in_process(runtime, raw_server, ws, stream, "malformed stream", "after message_stop")


# -- events Strata cannot read: one line, recorded, resumable (they used to end in "internal error") -----------

_DELTA = "content_block_delta"
MALFORMED: dict[str, list[bytes]] = {
    "delta without its delta": [text_start(0), sse(_DELTA, {"type": _DELTA, "index": 0})],
    "message_delta with a null delta": [sse("message_delta", {"type": "message_delta", "delta": None})],
    "block start without its block": [sse("content_block_start", {"type": "content_block_start", "index": 0})],
    "index that is a string": [sse("content_block_start", {"type": "content_block_start", "index": "zero",
                                                           "content_block": {"type": "text", "text": "x"}})],
    "tool_use without an id": [sse("content_block_start", {
        "type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "read_file",
                                                                     "input": {}}})],
    "tool_use input that is a list": [sse("content_block_start", {
        "type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_l",
                                                                     "name": "read_file", "input": [1, 2]}})],
    "text delta that is a number": [text_start(0), sse(_DELTA, {"type": _DELTA, "index": 0,
                                                                "delta": {"type": "text_delta", "text": 5}})],
    "partial_json that is a number": [tool_start(0, "toolu_n", "read_file"), sse(_DELTA, {
        "type": _DELTA, "index": 0, "delta": {"type": "input_json_delta", "partial_json": 5}})],
    "data that is not JSON": [text_start(0), sse(_DELTA, "{not json")],
}


WHOLE_PROCESS_CASE = "data that is not JSON"  # its own path in the adapter: the SDK's decode fails, not a check


@pytest.mark.slow  # runs two `strata` processes that call the API, and two that read the store
def test_an_event_strata_cannot_read_fails_the_session_in_one_line(cli: StrataCLI, raw_server: RawSSEServer,
                                                                   ws: Path) -> None:
    stream = [SSE_HEAD, message_start(), *MALFORMED[WHOLE_PROCESS_CASE], block_stop(0), *message_end("end_turn")]
    fails_and_resumes(cli, raw_server, ws, stream, "malformed stream")


@pytest.mark.parametrize("case", sorted(set(MALFORMED) - {WHOLE_PROCESS_CASE}))
async def test_an_event_strata_cannot_read_fails_the_session_with_the_reason_recorded(
        runtime: Runtime, raw_server: RawSSEServer, ws: Path, case: str) -> None:
    stream = [SSE_HEAD, message_start(), *MALFORMED[case], block_stop(0), *message_end("end_turn")]
    await fails_and_resumes_in_process(runtime, raw_server, ws, stream, "malformed stream")


# -- what holds: odd chunking and events Strata may ignore --------------------------------------------------------


async def test_events_split_inside_utf8_and_inside_data_and_unknown_events_are_read(runtime: Runtime,
                                                                                     raw_server: RawSSEServer,
                                                                                     ws: Path) -> None:
    """Every byte in its own TCP write (so chunks break inside `data:` and inside multibyte characters), with
    `ping` and an event type Strata does not know: the text arrives whole."""
    body = b"".join([message_start(), sse("ping", {"type": "ping"}), sse("future_event", {"type": "future_event"}),
                     text_start(0), text_delta(0, "h\u00e9llo \u20ac\U0001f600"), block_stop(0),
                     *message_end("end_turn")])
    raw_server.script([SSE_HEAD, *(body[i:i + 1] for i in range(len(body)))])
    model = AnthropicModel(MODEL.partition(":")[2], api_key=TEST_KEY, base_url=raw_server.url)
    try:
        live = await start_session(runtime, model=model, workspace=ws, mode="headless", rules=[], prompt="look",
                                   max_turns=10)
        outcome = await live.run()
        await live.release(None)
    finally:
        await model.aclose()
    assert (outcome.exit_code, outcome.status) == (0, "completed"), outcome
    logged = fold(await runtime.store.read_events(outcome.session_id)).messages
    texts = [b.text if isinstance(b, TextBlock) else b for m in logged if m.role == "assistant" for b in m.content]
    assert texts == ["h\u00e9llo \u20ac\U0001f600"], logged


async def test_a_stream_without_message_start_is_not_an_empty_answer(runtime: Runtime, raw_server: RawSSEServer,
                                                                     ws: Path) -> None:
    """`message_stop` alone (a proxy's empty stream, say) used to be read as an empty answer and the session
    completed; it is a stream Strata cannot read."""
    await fails_and_resumes_in_process(runtime, raw_server, ws, [SSE_HEAD, *message_end("end_turn")],
                                       "malformed stream", "before message_start")


def not_an_event_stream(content_type: str) -> list[bytes]:
    body = b"<html>welcome</html>" if content_type.startswith("text/html") else b"not json!"
    return [(f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
             "connection: close\r\n\r\n").encode() + body]


@pytest.mark.slow  # runs two `strata` processes that call the API, and two that read the store
def test_a_200_that_is_not_an_event_stream_names_the_base_url_and_is_not_retried(cli: StrataCLI,
                                                                                 raw_server: RawSSEServer,
                                                                                 ws: Path) -> None:
    """ANTHROPIC_BASE_URL pointing at some other web service that answers 200: it used to read as a stream that
    "broke off" ("check the network"), retried as a network fault; it is one clear line naming what answered."""
    fails_and_resumes(cli, raw_server, ws, not_an_event_stream("text/html; charset=utf-8"), "not an event stream",
                      "text/html", "ANTHROPIC_BASE_URL")


async def test_a_200_json_body_is_not_an_event_stream_and_is_not_retried(runtime: Runtime, raw_server: RawSSEServer,
                                                                         ws: Path) -> None:
    await fails_and_resumes_in_process(runtime, raw_server, ws, not_an_event_stream("application/json"),
                                       "not an event stream", "application/json", "ANTHROPIC_BASE_URL")
