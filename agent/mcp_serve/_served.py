"""The SDK's `MCPServer` as `strata mcp serve` runs it, with what it says to a host made plain:

- a message the stdio transport cannot read (not JSON, a lone surrogate, no JSON-RPC message) is answered with a
  JSON-RPC error (agent/mcp_serve/_wire.py) where the SDK dropped it and the host waited for its own timeout; the
  server reads on;
- a call whose arguments do not fit the tool's input schema is refused with one line per problem, every problem
  listed (the SDK gave pydantic's report: a count, then each problem over two or three lines with a link);
- a call naming no tool (an empty name) or a tool not served says so and names the tools served;
- a refusal of one of the tools (`Refusal`) reaches the host as its own text, without the SDK's "Error executing
  tool NAME: " before it.

Imported only when the server is built (it imports the SDK)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from agent.mcp_serve._wire import json_kind, unreadable_reply

log = structlog.get_logger("strata.mcp_serve")

MAX_NAME_CHARS = 80
"""How much of an unknown tool's name a refusal quotes."""


class Refusal(ToolError):
    """A tool of this server refusing a call, in its own (masked) words: the host gets them as they are."""


class StrataMCPServer(MCPServer):
    """`MCPServer` with plain refusals of a bad call and answers to unreadable messages over stdio, masked by `mask`
    (what the host sent may quote a configured secret, as a refusal of a tool of the server may)."""

    def __init__(self, name: str, *, mask: Callable[[str], str], **settings: Any) -> None:
        super().__init__(name, **settings)
        self.mask = mask

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        served = sorted(tool.name for tool in await self.list_tools())
        if name not in served:
            which = "the call names no tool (its name is empty)" if not name else f"no tool named {_quoted(name)}"
            raise ToolError(self.mask(f"{which}; this server's tools are {', '.join(served)}"))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as err:
            if isinstance(err.__cause__, Refusal):  # the SDK wrapped it as "Error executing tool NAME: ..."
                raise Refusal(str(err.__cause__)) from None
            if not isinstance(err.__cause__, ValidationError):
                raise
            raise ToolError(self.mask(argument_problems(name, err.__cause__))) from err.__cause__

    async def run_stdio_async(self) -> None:
        """As the SDK's, the read stream answering what it cannot read (`AnsweringReads`)."""
        server = self._lowlevel_server  # what the SDK's own run_stdio_async runs
        async with stdio_server() as (read_stream, write_stream):
            await server.run(AnsweringReads(read_stream, write_stream, self.mask), write_stream,
                             server.create_initialization_options())


def argument_problems(tool: str, error: ValidationError) -> str:
    """The tool's refusal of its arguments: one line per problem, each naming the argument and what is wrong (the
    type of what was sent, never its value: the host's data)."""
    lines = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            lines.append(f"{tool}: argument {where} is required and missing")
        else:
            what = " ".join(str(problem["msg"]).split())
            lines.append(f"{tool}: argument {where}: {what} (got {json_kind(problem.get('input'))})")
    return "\n".join(lines) or f"{tool}: its arguments do not fit its input schema"


class AnsweringReads:
    """The stdio transport's read stream, answering each item that is the error of an unreadable message (on
    `write`, the transport's write stream; its words masked by `mask`) instead of passing it on for the session to
    drop. Messages pass as they are, with the sender's context the transport gave them."""

    def __init__(self, inner: Any, write: Any, mask: Callable[[str], str]) -> None:
        self._inner = inner
        self._write = write
        self._mask = mask

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = await anyio.to_thread.run_sync(unreadable_reply, item, self._mask)  # a long line takes a while
            log.info("mcp host sent a message that is not JSON-RPC",
                     answer=None if reply is None else reply.error.message[:300])
            if reply is not None:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnsweringReads:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReads:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _quoted(name: str) -> str:
    shown = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "..."
    return repr(shown)  # a line break or a control character shows as an escape
