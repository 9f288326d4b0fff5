"""The Anthropic adapter's wire mapping, kept apart from the client: Strata messages and tools into the Messages
API's request shape (with prompt-cache breakpoints), and the streamed events back into a `ModelResponse`.

The request side is plain dicts. The response side reads the SDK's stream events by attribute (`type`, `index`,
`delta`, `usage`), so this module needs no SDK import; `core.model.anthropic` is the one module that has it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, assert_never, cast, get_args

from core import bounded_json
from core.messages import ContentBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from core.model.base import ModelListener, ModelRequest, ModelResponse, StopReason, Usage

_STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
# the events of one message, which all come after its message_start
_MESSAGE_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop", "message_delta",
                             "message_stop"})


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


def request_params(model: str, max_tokens: int, request: ModelRequest, *, cache: bool = True) -> dict[str, Any]:
    """The body of one Messages API call. With `cache`, three prompt-cache breakpoints: the last tool and the system
    block (the stable prefix, shared by every turn of a session), and the last message block (so each turn reads
    the conversation so far from the cache and writes only what is new)."""
    params: dict[str, Any] = {"model": model, "max_tokens": max_tokens,
                              "messages": [message_to_api(m) for m in request.messages]}
    if request.system:
        system: dict[str, Any] = {"type": "text", "text": request.system}
        if cache:
            system["cache_control"] = _ephemeral()
        params["system"] = [system]
    if request.tools:
        tools = [tool_to_api(t) for t in request.tools]
        if cache:
            tools[-1]["cache_control"] = _ephemeral()
        params["tools"] = tools
    if cache and params["messages"]:
        last = params["messages"][-1]["content"]
        last[-1] = {**last[-1], "cache_control": _ephemeral()}
    return params


def message_to_api(message: Message) -> dict[str, Any]:
    """A Strata message in the API's shape. Blank text blocks, which the API refuses, are left out when the
    message has other content (a message of nothing but blank text is sent as is and refused loudly)."""
    blocks = [b for b in message.content if not (isinstance(b, TextBlock) and not b.text.strip())]
    return {"role": message.role, "content": [block_to_api(b) for b in (blocks or message.content)]}


def block_to_api(block: ContentBlock) -> dict[str, Any]:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ToolUseBlock():
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": _plain(block.input)}
        case ToolResultBlock():
            out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
            if block.content:
                out["content"] = block.content
            if block.is_error:
                out["is_error"] = True
            return out
        case _:
            assert_never(block)


def tool_to_api(tool: Mapping[str, object]) -> dict[str, Any]:
    """A tool definition as plain JSON data (the plan hands out read-only mappings); an empty description is
    left out."""
    out = {str(k): _plain(v) for k, v in tool.items()}
    if not out.get("description"):
        out.pop("description", None)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class StreamIncomplete(Exception):
    """The event stream ended without `message_stop`: the connection was cut, so the answer is unusable."""


class StreamMalformed(Exception):
    """An event the Messages API's stream grammar does not allow (a field missing or of the wrong type, a block
    started twice, a delta for a block that never started or already stopped, data that is not JSON): the answer
    cannot be read with confidence, so none of it is used."""


class BadToolInput(Exception):
    """A tool_use block's streamed input is not a JSON object (typically cut off by max_tokens), or is nested too
    deep to be read at all (core/bounded_json.py)."""

    def __init__(self, tool: str, call_id: str, stop_reason: str | None, problem: str = "is not a JSON object") -> None:
        super().__init__(f"tool_use {call_id} ({tool}) has input that {problem}")
        self.tool = tool
        self.call_id = call_id
        self.stop_reason = stop_reason
        self.problem = problem


@dataclass
class _Text:
    parts: list[str] = field(default_factory=list)


@dataclass
class _Tool:
    id: str
    name: str
    initial: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    stopped: bool = False


class StreamAccumulator:
    """Folds one attempt's stream events into a response, passing text deltas to the listener as they arrive and
    assembling each tool_use input from its `input_json_delta` pieces. Unknown event, block and delta types are
    ignored, as the API's versioning policy asks; a known event that breaks the grammar is `StreamMalformed`, and
    a tool_use block is only a proposal once its `content_block_stop` arrived (anything after that is refused, so
    a cut input is never completed by a stray delta)."""

    def __init__(self, listener: ModelListener) -> None:
        self._listener = listener
        self._blocks: dict[int, _Text | _Tool] = {}
        self._open: set[int] = set()  # every started block not yet stopped, of any type
        self._started: set[int] = set()
        self._started_message = False
        self._usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self._started_message = True
            self._take_usage(getattr(getattr(event, "message", None), "usage", None))
        elif kind in _MESSAGE_EVENTS and not self._started_message:
            raise StreamMalformed(f"a {kind} event before message_start")
        elif kind in _MESSAGE_EVENTS and self.stopped:  # nothing after message_stop is part of the message
            raise StreamMalformed(f"a {kind} event after message_stop")
        elif kind == "content_block_start":
            self._start(_index(event), getattr(event, "content_block", None))
        elif kind == "content_block_delta":
            index = _index(event)
            if index not in self._open:
                state = "after its content_block_stop" if index in self._started else "before its content_block_start"
                tool = self._blocks.get(index)
                if isinstance(tool, _Tool) and index in self._started:
                    raise BadToolInput(tool.name, tool.id, self.stop_reason, f"had a delta {state}")
                raise StreamMalformed(f"a delta for block {index} {state}")
            self._delta(index, getattr(event, "delta", None))
        elif kind == "content_block_stop":
            index = _index(event)
            if index not in self._open:
                raise StreamMalformed(f"content_block_stop for block {index}, which is not open")
            self._open.discard(index)
            block = self._blocks.get(index)
            if isinstance(block, _Tool):
                block.stopped = True
        elif kind == "message_delta":
            delta = getattr(event, "delta", None)
            reason = getattr(delta, "stop_reason", None)
            if delta is None or not (reason is None or isinstance(reason, str)):
                raise StreamMalformed("a message_delta without a readable delta")
            self.stop_reason = reason
            self._take_usage(getattr(event, "usage", None))
        elif kind == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: Any) -> None:
        if index in self._started:
            raise StreamMalformed(f"block {index} started twice")
        block_type = getattr(block, "type", None)
        if not isinstance(block_type, str):
            raise StreamMalformed(f"a content_block_start for block {index} without its block")
        self._started.add(index)
        self._open.add(index)
        if block_type == "text":
            text = _text(getattr(block, "text", None), f"the text of block {index}")
            self._blocks[index] = _Text([text] if text else [])
            if text:
                self._listener.on_text(text)
        elif block_type == "tool_use":
            call_id, name = getattr(block, "id", None), getattr(block, "name", None)
            initial = getattr(block, "input", None)
            if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
                raise StreamMalformed(f"tool_use block {index} without an id or a name")
            if not (initial is None or isinstance(initial, dict)):
                raise StreamMalformed(f"tool_use block {index} ({name}) with an input that is not an object")
            self._blocks[index] = _Tool(call_id, name, dict(initial or {}))

    def _delta(self, index: int, delta: Any) -> None:
        delta_type = getattr(delta, "type", None)
        if not isinstance(delta_type, str):
            raise StreamMalformed(f"a content_block_delta for block {index} without its delta")
        block = self._blocks.get(index)
        if delta_type == "text_delta" and isinstance(block, _Text):
            text = _text(getattr(delta, "text", None), f"a text delta of block {index}")
            if text:
                block.parts.append(text)
                self._listener.on_text(text)
        elif delta_type == "input_json_delta" and isinstance(block, _Tool):
            partial = getattr(delta, "partial_json", None)
            if not isinstance(partial, str):
                raise StreamMalformed(f"an input delta of tool_use block {index} ({block.name}) that is not text")
            block.parts.append(partial)

    def _take_usage(self, usage: Any) -> None:
        # message_delta counts are cumulative totals; a field it leaves out keeps its message_start value
        for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            value = getattr(usage, name, None)
            if isinstance(value, int):
                self._usage[name] = value

    def finish(self, request_id: str | None) -> ModelResponse:
        if not self.stopped:
            raise StreamIncomplete("the response stream ended before message_stop")
        content: list[ContentBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if isinstance(block, _Text):
                text = "".join(block.parts)
                if text.strip():  # a blank text block would be refused when sent back next turn
                    content.append(TextBlock(text=text))
            elif not block.stopped:  # the message ended (max_tokens, a cut) while the call was being proposed
                raise BadToolInput(block.name, block.id, self.stop_reason, "never ended: no content_block_stop")
            else:
                content.append(ToolUseBlock(id=block.id, name=block.name, input=self._tool_input(block)))
        has_tools = any(isinstance(b, ToolUseBlock) for b in content)
        usage = Usage(input_tokens=self._usage.get("input_tokens", 0),
                      output_tokens=self._usage.get("output_tokens", 0),
                      cache_read_tokens=self._usage.get("cache_read_input_tokens", 0),
                      cache_write_tokens=self._usage.get("cache_creation_input_tokens", 0))
        return ModelResponse(content=tuple(content), stop_reason=stop_reason(self.stop_reason, has_tools),
                             usage=usage, request_id=request_id)

    def _tool_input(self, block: _Tool) -> dict[str, Any]:
        raw = "".join(block.parts)
        if not raw.strip():
            return block.initial
        try:
            value = bounded_json.loads(raw)
        except bounded_json.TooDeep as exc:
            raise BadToolInput(block.name, block.id, self.stop_reason, f"is {exc}") from None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise BadToolInput(block.name, block.id, self.stop_reason)
        return value


def _index(event: Any) -> int:
    index = getattr(event, "index", None)
    if type(index) is not int or index < 0:
        raise StreamMalformed(f"a {getattr(event, 'type', 'stream')} event with index {index!r}")
    return index


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise StreamMalformed(f"{what} is not text")
    return value


def stop_reason(raw: str | None, has_tools: bool) -> StopReason:
    """The API's stop reason in Strata's closed set; one Strata does not know is read from the content."""
    if raw in _STOP_REASONS:
        return cast(StopReason, raw)
    if raw == "model_context_window_exceeded":
        return "max_tokens"
    return "tool_use" if has_tools else "end_turn"

