"""What `strata mcp serve` answers a message from the host that the SDK cannot read as JSON-RPC.

The SDK's stdio transport hands the session the error its reader got for such a line, and the session logs it at
debug level and drops it: a host that sent a line that is not JSON, or JSON the SDK's reader refuses (a string
holding a lone surrogate, nesting deeper than the reader goes), or JSON that is no JSON-RPC message, got no answer
and waited for its own timeout. Such a message is answered here, as JSON-RPC says: -32700 (parse error, id null)
for one that is not JSON; -32600 (invalid request, with the message's id when it can be read, else null) for JSON
that is no message the server can take, naming every problem on one line. An answer from the host (an object with
`result` or `error` and no `method`) is never answered (JSON-RPC does not answer answers): None.

Over streamable HTTP the SDK answers such a request itself (400), but not in these words: a lone surrogate as a
parse error ("unexpected end of hex escape", id null), JSON that is no JSON-RPC message as -32602 with pydantic's
report of all four message kinds over some twenty lines. `MessageCheck`, in front of the SDK's app, answers them as
over stdio (400, the same errors).

The problems are named by where they are and what is wrong, never by the values sent (the host's own data)."""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from typing import Any

import anyio
import mcp_types
import pydantic_core
from pydantic import ValidationError

MAX_PROBLEMS = 20
"""At most this many problems are named in one answer (then how many more there were)."""
MAX_PROBLEM_CHARS = 200


def unreadable_reply(error: Exception, mask: Callable[[str], str]) -> mcp_types.JSONRPCError | None:
    """The error answer to the message whose reading raised `error` (the item the SDK's transport passes the session
    in place of a message), its words masked by `mask`; None when it gets none (an answer from the host)."""
    return _masked(_unreadable_reply(error), mask)


def _unreadable_reply(error: Exception) -> mcp_types.JSONRPCError | None:
    if not isinstance(error, ValidationError):
        return _error(None, mcp_types.PARSE_ERROR, "Parse error: the message could not be read")
    problems = error.errors(include_url=False)
    first = problems[0] if problems else None
    if first is not None and first["type"] == "json_invalid":
        return text_reply(first["input"], str((first.get("ctx") or {}).get("error") or first["msg"]))
    whole = _whole_input(problems)
    if whole is _UNKNOWN:  # every part of the message was there, some of them wrong: named as the SDK found them
        named = [_problem(p["loc"][1:], p["msg"]) for p in problems if p["loc"][:1] == ("JSONRPCRequest",)]
        return _invalid(None, named or ["it is no JSON-RPC message"])
    return value_reply(whole)


def text_reply(text: Any, reader_problem: str) -> mcp_types.JSONRPCError | None:
    """The answer to message text (str or bytes) that the SDK's JSON reader refused, saying `reader_problem`."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return _error(None, mcp_types.PARSE_ERROR, f"Parse error: the message is not JSON ({reader_problem})")
    return value_reply(value, reader_problem=reader_problem)


def value_reply(value: Any, *, reader_problem: str | None = None) -> mcp_types.JSONRPCError | None:
    """The answer to the JSON value `value`, which the SDK refused (its JSON reader saying `reader_problem`, when
    that was what refused it)."""
    if isinstance(value, list):
        return _invalid(None, ["a batch (a JSON array) is not served: send one JSON-RPC message at a time"])
    if not isinstance(value, dict):
        return _invalid(None, [f"a JSON-RPC message is a JSON object, not {json_kind(value)}"])
    if "method" not in value and ("result" in value or "error" in value):
        return None  # an answer: never answered
    request_id = value.get("id")
    if not _is_id(request_id):
        request_id = None
    surrogates, count = _lone_surrogates(value)
    problems = [_problem(where, f"a string holds a lone surrogate ({escape}), which is not Unicode text")
                for where, escape in surrogates]
    unnamed = count - len(surrogates)
    kind = mcp_types.JSONRPCRequest if "id" in value else mcp_types.JSONRPCNotification
    try:
        kind.model_validate(value, by_name=False)
    except ValidationError as exc:
        problems += [_problem(p["loc"], p["msg"]) for p in exc.errors(include_url=False)]
    except RecursionError:
        problems.append("it is nested too deep")
    if not problems:
        problems = [reader_problem or "it could not be read"]
    return _invalid(request_id, problems, unnamed)


def _invalid(request_id: str | int | None, problems: list[str], unnamed: int = 0) -> mcp_types.JSONRPCError:
    """-32600 naming `problems` (at most MAX_PROBLEMS of them), and how many more there are (`unnamed` besides)."""
    named = problems[:MAX_PROBLEMS]
    if (more := len(problems) - len(named) + unnamed) > 0:
        named.append(f"and {more} more")
    return _error(request_id, mcp_types.INVALID_REQUEST, "Invalid Request: " + "; ".join(named))


def _error(request_id: str | int | None, code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message))


def _problem(loc: tuple[int | str, ...] | list[int | str], msg: str) -> str:
    """One problem on one line: where it is (`params.x`, `id`), what is wrong."""
    where = ".".join(str(part) for part in loc)
    text = " ".join((f"{where}: {msg}" if where else msg).split())
    return text if len(text) <= MAX_PROBLEM_CHARS else text[:MAX_PROBLEM_CHARS - 3] + "..."


def _is_id(value: Any) -> bool:
    """Whether `value` is a JSON-RPC request id an answer can carry (a string of Unicode text, or an integer)."""
    if isinstance(value, str):
        return not any("\ud800" <= ch <= "\udfff" for ch in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _lone_surrogates(value: Any) -> tuple[list[tuple[tuple[int | str, ...], str]], int]:
    """Where a string of `value` (its keys included) holds a lone surrogate, and the first one's escape, in document
    order: the first MAX_PROBLEMS of them, and how many there are in all. Python's JSON reader takes `"\\ud800"` as
    such a string; the SDK's refuses it (calling it the end of a hex escape)."""
    found: list[tuple[tuple[int | str, ...], str]] = []
    count = 0
    stack: list[tuple[tuple[int | str, ...], Any]] = [((), value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if (escape := _first_surrogate(item)) is not None:
                count += 1
                if len(found) < MAX_PROBLEMS:
                    found.append((at, escape))
        elif isinstance(item, dict):
            children: list[tuple[tuple[int | str, ...], Any]] = []
            for key, inner in item.items():
                if (escape := _first_surrogate(key)) is not None:
                    count += 1
                    if len(found) < MAX_PROBLEMS:
                        found.append((at, f"{escape} in a key"))
                    key = key.encode("ascii", "backslashreplace").decode("ascii")
                children.append(((*at, key), inner))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(((*at, i), item[i]) for i in range(len(item) - 1, -1, -1))
    return found, count


def _first_surrogate(text: str) -> str | None:
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            return f"\\u{ord(ch):04x}"
    return None


def json_kind(value: Any) -> str:
    """What JSON type `value` (as sent) is, named as an input schema names types (an integer is not a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


_UNKNOWN = object()


def _whole_input(problems: list[Any]) -> Any:
    """The message the SDK refused, from its reader's problems: a part found missing, or a message that is no
    object at all, is reported with the whole message as its input. `_UNKNOWN` when no problem carries it."""
    for p in problems:
        if p["type"] == "missing" and len(p["loc"]) == 2:
            return p["input"]
        if len(p["loc"]) == 1:  # the message itself is not of the variant's type (an array, a number)
            return p["input"]
    return _UNKNOWN


Scope = MutableMapping[str, Any]


class MessageCheck:
    """The ASGI app `app` (the SDK's streamable HTTP app) behind a check of each POST's JSON body as the SDK reads
    it (pydantic's JSON reader, then the JSON-RPC message types): a body it would refuse is answered here, 400 with
    the JSON-RPC error `body_reply` gives (masked by `mask`), and `app` never sees it. A body over `limit` bytes (the
    SDK's own bound, which it answers 413), one that is not declared JSON (415 from the SDK), and an unreadable answer
    from the host pass on unchecked, as does everything else."""

    def __init__(self, app: Any, limit: int, mask: Callable[[str], str]) -> None:
        self.app = app
        self.limit = limit
        self.mask = mask

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not _declares_json(scope):
            await self.app(scope, receive, send)
            return
        taken: list[Any] = []  # the request's messages read here, given to `app` again
        size, whole = 0, False
        while size <= self.limit:
            message = await receive()
            taken.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                whole = size <= self.limit
                break
        body = b"".join(m.get("body", b"") for m in taken) if whole else b""
        # read off the event loop, as what is wrong with it is found: a large hostile body takes a second or so
        reply = await anyio.to_thread.run_sync(self._reply, body) if whole else None
        if reply is not None:
            body = reply.model_dump_json(by_alias=True, exclude_unset=True).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        async def replayed() -> Any:
            return taken.pop(0) if taken else await receive()

        await self.app(scope, replayed, send)

    def _reply(self, body: bytes) -> mcp_types.JSONRPCError | None:
        return body_reply(body, self.mask) if _refused(body) else None


def body_reply(body: bytes, mask: Callable[[str], str]) -> mcp_types.JSONRPCError | None:
    """The error answer to a POST body the SDK's streamable HTTP transport would refuse (read as it reads it), its
    words masked by `mask`; None when it takes it (or it is an answer from the host)."""
    return _masked(_body_reply(body), mask)


def _body_reply(body: bytes) -> mcp_types.JSONRPCError | None:
    try:
        value = pydantic_core.from_json(body)
    except ValueError as exc:
        return text_reply(body, str(exc))
    try:
        mcp_types.jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        return value_reply(value)
    return None


def _masked(reply: mcp_types.JSONRPCError | None, mask: Callable[[str], str]) -> mcp_types.JSONRPCError | None:
    """`reply` with its message masked (a key or a position the host sent may quote a configured secret)."""
    if reply is None:
        return None
    return _error(reply.id, reply.error.code, mask(reply.error.message))


def _refused(body: bytes) -> bool:
    """Whether the SDK's transport refuses `body` (it reads it so)."""
    try:
        mcp_types.jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except ValueError:  # pydantic's ValidationError is one
        return True
    return False


def _declares_json(scope: Scope) -> bool:
    types = [value for name, value in scope.get("headers", []) if name.lower() == b"content-type"]
    return len(types) == 1 and types[0].split(b";")[0].strip().lower() == b"application/json"
