"""The MCP servers of one session (or one listing): all started together at the start, each within its startup
timeout, each failure said once and the rest going on; their callable tools; closed together at the end."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import structlog

from config.mcp import McpServerDecl
from core.record import record
from core.tools import ToolSpec
from tool_executor.mcp._server import SPEAKING, Notify, ServerLink
from tool_executor.mcp._tools import ToolStatus, tool_specs, tool_statuses

log = structlog.get_logger("strata.mcp")


@record
class ServerStatus:
    name: str
    transport: str
    target: str
    source: str
    up: bool
    problem: str | None
    tools: tuple[ToolStatus, ...]


class McpTools:
    """The running servers' tools."""

    def __init__(self, links: Sequence[ServerLink]) -> None:
        self._links = tuple(links)

    @property
    def tools(self) -> list[ToolSpec]:
        """The callable tools of the servers that started (the tools a plan may hold)."""
        return [spec for link in self._links for spec in tool_specs(link)]

    def statuses(self) -> list[ServerStatus]:
        return [ServerStatus(link.name, link.decl.transport, link.decl.target(), link.decl.source, link.up,
                             link.problem, tuple(tool_statuses(link))) for link in self._links]


class _SdkLog(logging.Handler):
    """The SDK's own log records (a server writing non-protocol lines to stdout, a transport hiccup) as one info
    line each in Strata's log, without the traceback the SDK attaches: a server's fault is said once, by the
    notice, and never as a traceback on the terminal."""

    def emit(self, record: logging.LogRecord) -> None:
        link = SPEAKING.get()
        if link is not None and record.getMessage().startswith("Failed to parse JSONRPC message"):
            link.unreadable += 1
        log.info("mcp sdk", sdk_logger=record.name, level=record.levelname, message=record.getMessage()[:500])


@contextlib.contextmanager
def _sdk_log_to_strata() -> Iterator[None]:
    sdk = logging.getLogger("mcp")
    handler, propagate = _SdkLog(), sdk.propagate
    sdk.addHandler(handler)
    sdk.propagate = False
    try:
        yield
    finally:
        sdk.removeHandler(handler)
        sdk.propagate = propagate


@asynccontextmanager
async def open_mcp(servers: Sequence[McpServerDecl], *, log_dir: Path, notify: Notify,
                   mask: Callable[[str], str]) -> AsyncIterator[McpTools]:
    """Start `servers` (stdio children log their stderr to `log_dir/NAME.log`, masked by `mask`); yields once each
    is up or has failed (`notify` said why, once). On exit every connection closes and every child is killed with
    its group."""
    links = [ServerLink(decl, log_dir, notify, mask) for decl in servers]
    if not links:
        yield McpTools(())
        return
    with _sdk_log_to_strata():
        async with _servers(links) as tools:
            yield tools


@asynccontextmanager
async def _servers(links: list[ServerLink]) -> AsyncIterator[McpTools]:
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as starting:  # every server starts at once; each reports when ready
            for link in links:
                starting.start_soon(tg.start, link.supervise)
        try:
            yield McpTools(links)
        finally:
            for link in links:  # each closes the orderly way, all at once, within the deadline
                link.stop()
            with anyio.move_on_after(STOP_S, shield=True):
                await _all_stopped(links)
            tg.cancel_scope.cancel()


STOP_S = 10.0
"""How long the servers have to close at the session's end before their connections are cancelled: an HTTP close
takes at most 5 s (tool_executor/mcp/_http.py), a stdio server has 2 s to exit once its stdin closes and 2 s more
after SIGTERM before its group is killed (tool_executor/mcp/_stdio.py)."""


async def _all_stopped(links: list[ServerLink]) -> None:
    for link in links:
        await link.stopped.wait()
