"""The streamable HTTP transport to an MCP server (the SDK's), with its close bounded: leaving it sends the DELETE
that ends the server's MCP session, and the SDK waits for the answer as long as its read timeout (300 s), so a
server that answered `initialize` and then stopped answering held Strata for five minutes when its start-up timed
out. Here the close takes at most CLOSE_S; the session's end is not waited for beyond it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import structlog

log = structlog.get_logger("strata.mcp")

CLOSE_S = 5.0
"""How long closing an HTTP server's connection may take (the DELETE ending its MCP session): a server that answers
at all answers that in well under a second."""


@asynccontextmanager
async def http_transport(url: str) -> AsyncIterator[Any]:
    """The SDK's streamable HTTP client for `url`; its close is cut short after CLOSE_S (what made the connection
    close, an error or a timeout, is raised as it would have been)."""
    from mcp.client.streamable_http import streamable_http_client

    failure: BaseException | None = None
    # The scope is entered before the transport (anyio's scopes nest): its deadline, set only when the body ends,
    # bounds the transport's close and nothing before it.
    with anyio.CancelScope() as closing:
        async with streamable_http_client(url) as streams:
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
