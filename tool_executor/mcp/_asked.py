"""The requests an MCP server sent that Strata has not answered yet, bounded.

The SDK starts a task for each request it reads from a server (a ping, a sampling request) and each waits until its
answer is on its way; a server that sent requests and did not take the answers (a stdio server not reading its
stdin, an HTTP server not answering the POSTs that carry them) made Strata hold a task per request, reading on:
100,000 pings took 1 GB. A transport passes a server's request on only while fewer than MAX_SERVER_REQUESTS wait, and
reads the server no further until one is answered (the server waits, as on a client that reads slowly; a call that
gets no answer meanwhile ends at its deadline). When the connection closes, a transport waiting for a place stops
waiting (`close`): the stdio transport then reads the server's output to its end and drops it, so that a server
still writing can finish and exit on its own."""

from __future__ import annotations

from typing import Any

import anyio

MAX_SERVER_REQUESTS = 64
"""How many requests from a server may wait for Strata's answer at once."""


class ServerRequests:
    """The server's requests not answered yet (their ids), at most `bound` at once."""

    def __init__(self, bound: int = MAX_SERVER_REQUESTS) -> None:
        self._bound = bound
        self._waiting: set[object] = set()
        self._freed = anyio.Event()
        self._closed = False

    async def admit(self, message: Any) -> None:
        """Return once `message` (a JSON-RPC message from the server), if it is a request, may be passed on; it
        then waits for its answer. anyio.ClosedResourceError for a request once `close` was called (also while it
        waits)."""
        import mcp_types

        if isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.settle((message.params or {}).get("requestId"))  # the server waits for that answer no more
        if not isinstance(message, mcp_types.JSONRPCRequest):
            return
        while not self._closed and len(self._waiting) >= self._bound:
            if self._freed.is_set():
                self._freed = anyio.Event()
            await self._freed.wait()
        if self._closed:
            raise anyio.ClosedResourceError
        self._waiting.add(_key(message.id))

    def close(self) -> None:
        """The connection closes: no request is passed on any more, and `admit` waits no longer."""
        self._closed = True
        self._freed.set()

    def answered(self, message: Any) -> None:
        """The session's `message` reached the server: an answer frees its request's place."""
        import mcp_types

        if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            self.settle(message.id)

    def settle(self, request_id: object) -> None:
        """The request `request_id` waits no more (answered, or cancelled by the server)."""
        if isinstance(request_id, str | int) and not isinstance(request_id, bool) and _key(request_id) in self._waiting:
            self._waiting.discard(_key(request_id))
            self._freed.set()


def _key(request_id: object) -> object:
    return (type(request_id).__name__, request_id)
