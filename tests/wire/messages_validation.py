"""Validation of a Messages API request body, as the API does it: the first defect raises `Invalid` with a
message phrased like the API's `invalid_request_error`. Used by the loopback server in `messages_server`, so that
a request Strata builds wrongly fails a test the way it would fail in production."""

from __future__ import annotations

import re
from typing import Any

_TOP_KEYS = {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream", "temperature", "top_p",
             "top_k", "stop_sequences", "metadata", "thinking", "service_tier", "cache_control"}
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_MAX_CACHE_BREAKPOINTS = 4


class Invalid(Exception):
    """A request defect, phrased like the API's `invalid_request_error` messages."""


def validate_request(body: Any) -> None:
    """Raise `Invalid` for the first defect the API would refuse."""
    if not isinstance(body, dict):
        raise Invalid("request body must be a JSON object")
    _keys("", body, _TOP_KEYS)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise Invalid("max_tokens: Field required")
    if max_tokens < 1:
        raise Invalid("max_tokens: must be greater than or equal to 1")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise Invalid("stream: Input should be a valid boolean")
    breakpoints = _validate_system(body.get("system"))
    breakpoints += _validate_tools(body.get("tools"))
    breakpoints += _validate_messages(body.get("messages"))
    if breakpoints > _MAX_CACHE_BREAKPOINTS:
        raise Invalid(f"A maximum of {_MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
                      f"Found {breakpoints}.")


def _cache_control(where: str, block: dict[str, Any]) -> int:
    if "cache_control" not in block:
        return 0
    cc = block["cache_control"]
    if not isinstance(cc, dict) or cc.get("type") != "ephemeral" or set(cc) - {"type", "ttl"} \
            or cc.get("ttl", "5m") not in ("5m", "1h"):
        raise Invalid(f"{where}.cache_control: expected {{\"type\": \"ephemeral\"}} with an optional ttl")
    return 1


def _keys(where: str, block: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(block) - allowed)
    if extra:
        raise Invalid(f"{where + '.' if where else ''}{extra[0]}: Extra inputs are not permitted")


def _text_block(where: str, block: dict[str, Any]) -> int:
    _keys(where, block, {"type", "text", "cache_control", "citations"})
    text = block.get("text")
    if not isinstance(text, str):
        raise Invalid(f"{where}.text: Field required")
    if not text:
        raise Invalid(f"{where}: text content blocks must be non-empty")
    if not text.strip():
        raise Invalid(f"{where}: text content blocks must contain non-whitespace text")
    return _cache_control(where, block)


def _validate_system(system: Any) -> int:
    if system is None or isinstance(system, str):
        return 0
    if not isinstance(system, list):
        raise Invalid("system: Input should be a valid string or a list of text blocks")
    count = 0
    for i, block in enumerate(system):
        where = f"system.{i}"
        if not isinstance(block, dict) or block.get("type") != "text":
            raise Invalid(f"{where}: system blocks must be text blocks")
        count += _text_block(where, block)
    return count


def _validate_tools(tools: Any) -> int:
    if tools is None:
        return 0
    if not isinstance(tools, list):
        raise Invalid("tools: Input should be a valid list")
    names: set[str] = set()
    count = 0
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise Invalid(f"{where}: Input should be a valid dictionary")
        _keys(where, tool, {"name", "description", "input_schema", "cache_control", "type"})
        name = tool.get("name")
        if not isinstance(name, str):
            raise Invalid(f"{where}.name: Field required")
        if not _TOOL_NAME.match(name):
            raise Invalid(f"{where}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
        if name in names:
            raise Invalid("tools: Tool names must be unique.")
        names.add(name)
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise Invalid(f"{where}.input_schema: Field required")
        if schema.get("type") != "object":
            raise Invalid(f"{where}.input_schema.type: Input should be 'object'")
        if "description" in tool and not isinstance(tool["description"], str):
            raise Invalid(f"{where}.description: Input should be a valid string")
        count += _cache_control(where, tool)
    return count


def _validate_messages(messages: Any) -> int:
    if messages is None:
        raise Invalid("messages: Field required")
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: at least one message is required")
    count = 0
    seen_ids: set[str] = set()
    awaiting: list[str] = []  # tool_use ids of the previous assistant message, to be answered now
    prev_role: str | None = None
    for i, message in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            raise Invalid(f"{where}: Input should be a valid dictionary")
        _keys(where, message, {"role", "content"})
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise Invalid(f"{where}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise Invalid("messages: first message must use the \"user\" role")
        if role == prev_role:
            raise Invalid(f"messages: roles must alternate between \"user\" and \"assistant\", but found multiple "
                          f"\"{role}\" roles in a row")
        blocks = _blocks(where, message.get("content"))
        kinds = [b.get("type") for b in blocks]
        results: list[str] = []
        uses: list[str] = []
        for j, block in enumerate(blocks):
            at = f"{where}.content.{j}"
            kind = block.get("type")
            if kind == "text":
                count += _text_block(at, block)
            elif kind == "tool_use":
                if role != "assistant":
                    raise Invalid(f"{at}: tool_use blocks are only allowed in assistant messages")
                count += _tool_use(at, block)
                if block["id"] in seen_ids:
                    raise Invalid(f"{at}: `tool_use` ids must be unique: {block['id']}")
                seen_ids.add(block["id"])
                uses.append(block["id"])
            elif kind == "tool_result":
                if role != "user":
                    raise Invalid(f"{at}: tool_result blocks are only allowed in user messages")
                count += _tool_result(at, block)
                if block["tool_use_id"] in results:
                    raise Invalid(f"{at}: each `tool_use` may have only one `tool_result`: {block['tool_use_id']}")
                results.append(block["tool_use_id"])
            else:
                raise Invalid(f"{at}.type: Input tag {kind!r} found using 'type' does not match any of the expected "
                              f"tags: 'text', 'tool_use', 'tool_result'")
        if awaiting:
            missing = [t for t in awaiting if t not in results]
            if missing:
                raise Invalid(f"messages.{i - 1}.content: `tool_use` ids were found without `tool_result` blocks "
                              f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                              f"corresponding `tool_result` block in the next message.")
            first_other = next((j for j, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                raise Invalid(f"{where}.content: `tool_result` blocks must come first in the user message, before "
                              f"any other content")
        extra = [t for t in results if t not in awaiting]
        if extra:
            raise Invalid(f"{where}.content: unexpected `tool_use_id` found in `tool_result` blocks: {extra[0]}. "
                          f"Each `tool_result` block must have a corresponding `tool_use` block in the previous "
                          f"message.")
        awaiting = uses
        prev_role = role
    if awaiting:
        raise Invalid(f"messages.{len(messages) - 1}.content: `tool_use` ids were found without `tool_result` blocks "
                      f"immediately after: {', '.join(awaiting)}. Each `tool_use` block must have a corresponding "
                      f"`tool_result` block in the next message.")
    return count


def _blocks(where: str, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content:
            raise Invalid(f"{where}.content: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise Invalid(f"{where}.content: messages must have non-empty content")
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            raise Invalid(f"{where}.content.{j}: Input should be a valid dictionary")
    return content


def _tool_use(where: str, block: dict[str, Any]) -> int:
    _keys(where, block, {"type", "id", "name", "input", "cache_control"})
    if not isinstance(block.get("id"), str) or not _TOOL_ID.match(block["id"]):
        raise Invalid(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if not isinstance(block.get("name"), str) or not block["name"]:
        raise Invalid(f"{where}.name: Field required")
    if not isinstance(block.get("input"), dict):
        raise Invalid(f"{where}.input: Input should be a valid dictionary")
    return _cache_control(where, block)


def _tool_result(where: str, block: dict[str, Any]) -> int:
    _keys(where, block, {"type", "tool_use_id", "content", "is_error", "cache_control"})
    if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
        raise Invalid(f"{where}.tool_use_id: Field required")
    content = block.get("content", "")
    if isinstance(content, list):
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Invalid(f"{where}.content.{k}: only text blocks are supported here")
            _text_block(f"{where}.content.{k}", part)
    elif not isinstance(content, str):
        raise Invalid(f"{where}.content: Input should be a valid string or a list of blocks")
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise Invalid(f"{where}.is_error: Input should be a valid boolean")
    return _cache_control(where, block)
