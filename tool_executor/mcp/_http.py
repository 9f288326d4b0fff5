"""The streamable HTTP transport to an MCP server (the SDK's), with its close bounded: leaving it sends the DELETE
that ends the server's MCP session, and the SDK waits for the answer as long as its read timeout (300 s), so a
server that answered `initialize` and then stopped answering held Strata for five minutes when its start-up timed
out. Here the close takes at most CLOSE_S; the session's end is not waited for beyond it.

A JSON response body is read up to MAX_JSON_BODY (the SDK reads it whole, and caps only SSE events): a longer one
ends that request as an error naming the bound, with the connection dropped, so a hostile server cannot grow
Strata's memory with an endless answer. The server stays connected for the calls after it. The bound is on the
body as decoded: a compressed body (gzip or deflate, the encodings asked for) is inflated here, a piece at a time,
instead of by httpx, which inflated each piece whole (a 300 KB gzip answer became 300 MB in memory before any
bound was looked at). A body compressed more than once is refused. At most 64 requests from the server (over its
event streams) wait for their answers at once (tool_executor/mcp/_asked.py); one waits until the POST carrying its
answer is done.

The errors the SDK's client makes up for an answer it could not read (not JSON-RPC, over the bound, an unexpected
content type, an HTTP error status without a JSON-RPC error) are told from the errors a server sends by
tool_executor/mcp/_answers.py: the request reached the server, so whatever it asked for may have been done."""

from __future__ import annotations

import contextlib
import json
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from tool_executor.mcp._asked import ServerRequests

log = structlog.get_logger("strata.mcp")

MAX_JSON_BODY = 8 * 1024 * 1024
"""The longest JSON response read from an HTTP server, the bound of a stdio server's message line
(tool_executor/mcp/_stdio.py): far above the largest result Strata keeps (256 Ki characters, at most ~3 MiB as
escaped JSON)."""

PIECE_BYTES = 64 * 1024
"""The most a compressed body is inflated by at a time."""

CLOSE_S = 5.0
"""How long closing an HTTP server's connection may take (the DELETE ending its MCP session): a server that answers
at all answers that in well under a second."""


def _capped_client(asked: ServerRequests | None = None) -> Any:
    """The SDK's default client (its timeouts, no redirects followed by httpx) whose JSON responses are read up to
    MAX_JSON_BODY; the POST carrying an answer to a request of the server settles it in `asked` once it is done."""
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

    class Undecodable(httpx2.StreamError):
        pass

    class Refused(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx2.AsyncByteStream, why: str) -> None:
            self._inner, self._why = inner, why

        async def __aiter__(self) -> AsyncIterator[bytes]:
            raise Undecodable(self._why)
            yield b""  # an async generator

        async def aclose(self) -> None:
            await self._inner.aclose()

    class Inflated(httpx2.AsyncByteStream):
        """A gzip or deflate body inflated at most PIECE_BYTES at a time (zlib's own bound on its output)."""

        def __init__(self, inner: httpx2.AsyncByteStream, encoding: str) -> None:
            self._inner = inner
            self._deflate = encoding == "deflate"

        async def __aiter__(self) -> AsyncIterator[bytes]:
            # gzip, or deflate as zlib data; deflate without zlib's header is tried when that fails at once
            inflater = zlib.decompressobj(zlib.MAX_WBITS if self._deflate else zlib.MAX_WBITS | 32)
            started = False
            async for chunk in self._inner:
                data = chunk
                while data:
                    try:
                        piece = inflater.decompress(data, PIECE_BYTES)
                    except zlib.error as exc:
                        if started or not self._deflate:
                            raise Undecodable(f"the server's compressed answer cannot be inflated ({exc})") from None
                        inflater, started = zlib.decompressobj(-zlib.MAX_WBITS), True
                        continue
                    started = True
                    data = inflater.unconsumed_tail
                    if piece:
                        yield piece
            if rest := inflater.flush():
                yield rest

        async def aclose(self) -> None:
            await self._inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            answering = _answer_id(request) if asked is not None else None
            try:
                response = await self._inner.handle_async_request(request)
            finally:
                if asked is not None and answering is not None:  # delivered or failed: it waits no more
                    asked.settle(answering)
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
            codings = [c for c in codings if c not in ("", "identity")]
            if codings:  # inflated here, within bounds; httpx then sees a plain body
                del response.headers["content-encoding"]
                if len(codings) > 1 or codings[0] not in ("gzip", "x-gzip", "deflate"):
                    response.stream = Refused(response.stream, f"the server's answer is encoded as "
                                                               f"{', '.join(codings)} (Strata reads gzip or deflate)")
                else:
                    response.stream = Inflated(response.stream, codings[0])
            if response.headers.get("content-type", "").lower().startswith("application/json"):
                response.stream = CappedBody(response.stream)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return httpx2.AsyncClient(timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
                              transport=CappedTransport(), headers={"accept-encoding": "gzip, deflate"})


def _answer_id(request: Any) -> object:
    """The id of the server's request this POST answers (a JSON-RPC response or error), or None."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content)
    except (ValueError, RuntimeError):  # not JSON, or a streamed body (the SDK sends neither for an answer)
        return None
    if isinstance(body, dict) and "method" not in body and ("result" in body or "error" in body):
        return body.get("id")
    return None


async def _admitting(read: Any, to_session: MemoryObjectSendStream[Any], asked: ServerRequests) -> None:
    """Pass the transport's messages to the session, a request of the server once `asked` admits it."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async with to_session:
            async for item in read:
                if not isinstance(item, Exception):
                    await asked.admit(item.message)
                await to_session.send(item)


@asynccontextmanager
async def http_transport(url: str) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client for `url`; its close is cut short after CLOSE_S (what made the connection
    close, an error or a timeout, is raised as it would have been)."""
    from mcp.client.streamable_http import streamable_http_client

    failure: BaseException | None = None
    # The scope is entered before the transport (anyio's scopes nest): its deadline, set only when the body ends,
    # bounds the transport's close and nothing before it.
    asked = ServerRequests()
    with anyio.CancelScope() as closing:
        async with _capped_client(asked) as client, streamable_http_client(url, http_client=client) as (read, write), \
                anyio.create_task_group() as relay:
            to_session, from_relay = anyio.create_memory_object_stream[Any](0)
            relay.start_soon(_admitting, read, to_session, asked)
            try:
                yield from_relay, write
            except BaseException as exc:
                failure = exc
                raise
            finally:
                closing.deadline = anyio.current_time() + CLOSE_S
                relay.cancel_scope.cancel()
                from_relay.close()
    if closing.cancelled_caught:
        log.info("mcp http close cut short", url=url, after_s=CLOSE_S)
        if failure is not None:
            raise failure
