"""The streamable HTTP transport to an MCP server (the SDK's), with its close bounded: leaving it sends the DELETE
that ends the server's MCP session, and the SDK waits for the answer as long as its read timeout (300 s), so a
server that answered `initialize` and then stopped answering held Strata for five minutes when its start-up timed
out. Here the close takes at most CLOSE_S; the session's end is not waited for beyond it.

A JSON response body is read up to MAX_JSON_BODY (the SDK reads it whole, and caps only SSE events): a longer one
ends that request as an error naming the bound, with the connection dropped, so a hostile server cannot grow
Strata's memory with an endless answer. The server stays connected for the calls after it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import structlog

log = structlog.get_logger("strata.mcp")

MAX_JSON_BODY = 8 * 1024 * 1024
"""The longest JSON response read from an HTTP server, the bound of a stdio server's message line
(tool_executor/mcp/_stdio.py): far above the largest result Strata keeps (256 Ki characters, at most ~3 MiB as
escaped JSON)."""

CLOSE_S = 5.0
"""How long closing an HTTP server's connection may take (the DELETE ending its MCP session): a server that answers
at all answers that in well under a second."""


def _capped_client() -> Any:
    """The SDK's default client (its timeouts, no redirects followed by httpx) whose JSON responses are read up to
    MAX_JSON_BODY."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class BodyTooLong(httpx2.StreamError):
        pass

    class CappedBody(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream) -> None:
            self._inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            read = 0
            async for chunk in self._inner:
                read += len(chunk)
                if read > MAX_JSON_BODY:
                    raise BodyTooLong(f"the server's answer is longer than {MAX_JSON_BODY // (1024 * 1024)} MiB "
                                      "(the most Strata reads)")
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self._inner.handle_async_request(request)
            if response.headers.get("content-type", "").lower().startswith("application/json"):
                assert isinstance(response.stream, httpx2.AsyncByteStream)
                response.stream = CappedBody(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx2.AsyncClient(timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                              transport=CappedTransport())


@asynccontextmanager
async def http_transport(url: str) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client for `url`; its close is cut short after CLOSE_S (what made the connection
    close, an error or a timeout, is raised as it would have been)."""
    from mcp.client.streamable_http import streamable_http_client

    failure: BaseException | None = None
    # The scope is entered before the transport (anyio's scopes nest): its deadline, set only when the body ends,
    # bounds the transport's close and nothing before it.
    with anyio.CancelScope() as closing:
        async with _capped_client() as client, streamable_http_client(url, http_client=client) as streams:
            try:
                yield streams
            except BaseException as exc:
                failure = exc
                raise
            finally:
                closing.deadline = anyio.current_time() + CLOSE_S
    if closing.cancelled_caught:
        log.info("mcp http close cut short", url=url, after_s=CLOSE_S)
        if failure is not None:
            raise failure
