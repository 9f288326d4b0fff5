"""What `strata mcp serve` answers a message from the host that the SDK cannot read as JSON-RPC.

The SDK's stdio transport hands the session the error its reader got for such a line, and the session logs it at
debug level and drops it: a host that sent a line that is not JSON, or JSON the SDK's reader refuses (a string
holding a lone surrogate, nesting deeper than the reader goes), or JSON that is no JSON-RPC message, got no answer
and waited for its own timeout. Such a message is answered here, as JSON-RPC says: -32700 (parse error, id null)
for one that is not JSON; -32600 (invalid request, with the message's id when it can be read, else null) for JSON
that is no message the server can take, naming every problem on one line. An answer from the host (an object with
`result` or `error` and no `method`) is never answered (JSON-RPC does not answer answers): None.

The problems are named by where they are and what is wrong, never by the values sent (the host's own data)."""

from __future__ import annotations

import json
from typing import Any

import mcp_types
from pydantic import ValidationError

MAX_PROBLEMS = 20
"""At most this many problems are named in one answer (then how many more there were)."""
MAX_PROBLEM_CHARS = 200


def unreadable_reply(error: Exception) -> mcp_types.JSONRPCError | None:
    """The error answer to the message whose reading raised `error` (the item the SDK's transport passes the session
    in place of a message), or None when it gets none (an answer from the host)."""
    if not isinstance(error, ValidationError):
        return _error(None, mcp_types.PARSE_ERROR, "Parse error: the message could not be read")
    problems = error.errors(include_url=False)
    first = problems[0] if problems else None
    if first is not None and first["type"] == "json_invalid":
        return _from_text(first["input"], str((first.get("ctx") or {}).get("error") or first["msg"]))
    whole = _whole_input(problems)
    if whole is _UNKNOWN:  # every part of the message was there, some of them wrong: named as the SDK found them
        named = [_problem(p["loc"][1:], p["msg"]) for p in problems if p["loc"][:1] == ("JSONRPCRequest",)]
        return _invalid(None, named or ["it is no JSON-RPC message"])
    return _from_value(whole, reader_problem=None)


def _from_text(text: Any, reader_problem: str) -> mcp_types.JSONRPCError | None:
    """The answer to message text that the SDK's JSON reader refused (saying `reader_problem`)."""
    try:
        value = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return _error(None, mcp_types.PARSE_ERROR, f"Parse error: the message is not JSON ({reader_problem})")
    return _from_value(value, reader_problem=reader_problem)


def _from_value(value: Any, *, reader_problem: str | None) -> mcp_types.JSONRPCError | None:
    """The answer to the JSON value `value` (which the SDK refused, its JSON reader saying `reader_problem`)."""
    if isinstance(value, list):
        return _invalid(None, ["a batch (a JSON array) is not served: send one JSON-RPC message at a time"])
    if not isinstance(value, dict):
        return _invalid(None, [f"a JSON-RPC message is a JSON object, not {_kind(value)}"])
    if "method" not in value and ("result" in value or "error" in value):
        return None  # an answer: never answered
    request_id = value.get("id")
    if not _is_id(request_id):
        request_id = None
    problems = [_problem(where, f"a string holds a lone surrogate ({escape}), which is not Unicode text")
                for where, escape in _lone_surrogates(value)]
    kind = mcp_types.JSONRPCRequest if "id" in value else mcp_types.JSONRPCNotification
    try:
        kind.model_validate(value, by_name=False)
    except ValidationError as exc:
        problems += [_problem(p["loc"], p["msg"]) for p in exc.errors(include_url=False)]
    except RecursionError:
        problems.append("it is nested too deep")
    if not problems:
        problems = [reader_problem or "it could not be read"]
    return _invalid(request_id, problems)


def _invalid(request_id: str | int | None, problems: list[str]) -> mcp_types.JSONRPCError:
    named = problems[:MAX_PROBLEMS]
    if len(problems) > MAX_PROBLEMS:
        named.append(f"and {len(problems) - MAX_PROBLEMS} more")
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


def _lone_surrogates(value: Any, where: tuple[int | str, ...] = ()) -> list[tuple[tuple[int | str, ...], str]]:
    """Where a string of `value` (its keys included) holds a lone surrogate, and the first one's escape. Python's JSON
    reader takes `"\\ud800"` as such a string; the SDK's refuses it (calling it the end of a hex escape)."""
    found: list[tuple[tuple[int | str, ...], str]] = []
    stack: list[tuple[tuple[int | str, ...], Any]] = [(where, value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, str):
            if (escape := _first_surrogate(item)) is not None:
                found.append((at, escape))
        elif isinstance(item, dict):
            for key, inner in item.items():
                if (escape := _first_surrogate(key)) is not None:
                    found.append((at, f"{escape} in a key"))
                    key = key.encode("ascii", "backslashreplace").decode("ascii")
                stack.append(((*at, key), inner))
        elif isinstance(item, list):
            stack.extend(((*at, i), inner) for i, inner in enumerate(item))
    return sorted(found, key=lambda f: [str(p) for p in f[0]])


def _first_surrogate(text: str) -> str | None:
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            return f"\\u{ord(ch):04x}"
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string"


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
