"""Reading one request line: what it is, or which error reply it earns. Never raises on what a client sent.

The line is parsed twice on purpose: first into plain JSON (pydantic_core's parser, which refuses invalid
UTF-8, lone surrogates, NaN and nesting past its recursion limit without raising anything but ValueError), to
classify the failure and find the id to answer with; then validated strictly as a `Request`. A line is at most
`Limits.max_line_bytes`, so both passes are bounded."""

from __future__ import annotations

from typing import Any

import pydantic_core
from pydantic import ValidationError

from agent.ipc._messages import (
    PROTOCOL_VERSION,
    REQUEST_TYPES,
    SUPPORTED_VERSIONS,
    ErrorCode,
    ErrorReply,
    Request,
    RequestAdapter,
)

_MAX_ECHO = 40


def read_request(line: bytes, *, greeted: bool) -> Request | ErrorReply:
    """The request on `line`, or the error reply for it. Before the hello (`greeted` False) only a hello is
    accepted, and every error is fatal."""
    try:
        value = pydantic_core.from_json(line, allow_inf_nan=False)
    except ValueError as exc:
        return _error(None, "bad_json", f"not valid JSON: {_first_line(str(exc))}", greeted)
    if not isinstance(value, dict):
        return _error(None, "not_object", f"a message is a JSON object, not {_json_kind(value)}", greeted)
    request_id = _readable_id(value.get("id"))
    kind = value.get("type")
    if not greeted and kind != "hello":
        return ErrorReply(id=request_id, code="hello_required", fatal=True,
                          message='the first message must be {"v": 1, "type": "hello", "id": ...}')
    if not isinstance(kind, str) or kind not in REQUEST_TYPES:
        shown = "no type" if kind is None else f"type {_echo(kind)}"
        return _error(request_id, "unknown_type", f"{shown}: the request types are {', '.join(sorted(REQUEST_TYPES))}",
                      greeted)
    version_error = _version_error(request_id, value, kind, greeted)
    if version_error is not None:
        return version_error
    if greeted and kind == "hello":
        return _error(request_id, "invalid", "this connection already said hello", greeted)
    try:
        return RequestAdapter.validate_json(line)
    except ValidationError as exc:
        return _error(request_id, "invalid", _summary(exc), greeted)


def _version_error(request_id: str | None, value: dict[str, Any], kind: str, greeted: bool) -> ErrorReply | None:
    if kind == "hello":
        v = value.get("v")
        if type(v) is int and v in SUPPORTED_VERSIONS:
            return None
        said = "no version (v)" if v is None else f"version {_echo(v)}"
        return ErrorReply(id=request_id, code="bad_version", fatal=True, versions=SUPPORTED_VERSIONS,
                          message=f"the hello gave {said}; this daemon speaks {_versions()}")
    if "v" in value and not (type(value["v"]) is int and value["v"] == PROTOCOL_VERSION):
        return _error(request_id, "bad_version", f"this connection speaks version {PROTOCOL_VERSION}, "
                      f"the request says {_echo(value['v'])}", greeted, versions=SUPPORTED_VERSIONS)
    return None


def _error(request_id: str | None, code: ErrorCode, message: str, greeted: bool,
           versions: tuple[int, ...] | None = None) -> ErrorReply:
    return ErrorReply(id=request_id, code=code, message=message, fatal=not greeted, versions=versions)


def _readable_id(value: object) -> str | None:
    """The id to answer with: only one that is itself valid (a string of 1 to 128 characters)."""
    if isinstance(value, str) and 1 <= len(value) <= 128:
        return value
    return None


def _summary(exc: ValidationError) -> str:
    """The first few problems as `field: message`, never the values the client sent."""
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False)[:3]:
        where = ".".join(str(p) for p in error.get("loc", ())[1:]) or "message"  # loc[0] is the union's tag
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _echo(value: object) -> str:
    """A short, JSON-shaped echo of a client value for an error message (the client's own data)."""
    text = pydantic_core.to_json(value).decode(errors="replace")
    return text if len(text) <= _MAX_ECHO else text[: _MAX_ECHO - 3] + "..."


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else "unreadable"


def _versions() -> str:
    return ", ".join(str(v) for v in SUPPORTED_VERSIONS)

