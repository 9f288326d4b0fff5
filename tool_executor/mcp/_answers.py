"""What the error a `tools/call` ended with says about the call (the SDK raises every one as `MCPError`):

- `closed`: the connection ended (the SDK's own "Connection closed", -32000): the server may have done the call, and
  it is gone;
- `lost`: the HTTP server had the call and its answer's event stream ended or failed before the answer (the SDK's
  "SSE stream ..." errors, -32000 too): the call's outcome is not known, the server is still there;
- `unread`: the server answered with what could not be read (not JSON-RPC, over a bound, an HTTP error status
  without a JSON-RPC error, a result that is not a tool result): the server had the call;
- `refused`: any other error is the server's own JSON-RPC error answer to this call (whatever its code, -32000
  included): the call was refused, the server stays up and its other calls go on.

A `closed` error is checked by the caller (a ping on the same connection, tool_executor/mcp/_tools.py): the server
may have sent it itself (a gateway whose own upstream closed), and one that still answers has refused the call. A
server that sends another error worded exactly as one the SDK makes up is taken at its word: it is read as the more
cautious outcome (an unknown effect), never as a refusal that hides one."""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal["closed", "lost", "unread", "refused"]

UNREAD_STDIO_ANSWER = "Strata could not read the server's answer"
"""How the stdio transport begins the error it gives a call whose answer is not JSON-RPC (tool_executor/mcp/_stdio.py):
the SDK drops such a line, and the call would have waited for its deadline."""

_UNREAD_HTTP_ANSWERS = ("Failed to parse JSON response", "Failed to parse SSE message", "Unexpected content type",
                        "server answered a request with 202 Accepted", "Server returned an error response")
"""How the SDK's streamable HTTP client begins the errors it makes up when a request's answer could not be read
(mcp/client/streamable_http.py); the server sent none of them."""

_LOST_HTTP_ANSWERS = ("SSE stream ended", "SSE stream failed")
"""How the SDK's streamable HTTP client begins the errors it makes up when a request's event stream ended (or broke)
before its answer: that request only; the client and the server's session go on."""

_CLOSED = "Connection closed"
"""The SDK's error for every request waiting when the connection ended, and for one sent after."""


def error_kind(code: int, message: str) -> ErrorKind:
    from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR

    if code == CONNECTION_CLOSED and message == _CLOSED:
        return "closed"
    if code == CONNECTION_CLOSED and message.startswith(_LOST_HTTP_ANSWERS):
        return "lost"
    if code in (PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR) and message.startswith(_UNREAD_HTTP_ANSWERS):
        return "unread"
    if code == PARSE_ERROR and message.startswith(UNREAD_STDIO_ANSWER):
        return "unread"
    return "refused"
