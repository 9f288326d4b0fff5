"""A session's runtime with the tools of the MCP servers its config declares: the servers start before the session
does (so the plan, and its digest, holds their tools with their schemas and policies) and are closed, their
children killed with their process groups, when the session ends. An untrusted project's servers are not in the
config at all (config/loader.py), so they are never started."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from agent.session import Runtime
from config import LoadedConfig

MCP_LOG_DIR = "mcp"
"""Under the Strata home: each stdio server's stderr, `NAME.log`."""


@asynccontextmanager
async def with_mcp_tools(rt: Runtime, config: LoadedConfig, notify: Callable[[str], None]) -> AsyncIterator[Runtime]:
    """`rt` with the callable tools of `config`'s MCP servers added (itself when none is declared: then the SDK
    is not even imported). `notify` gets one line per server that could not start or stopped."""
    if not config.mcp.servers:
        yield rt
        return
    from tool_executor.mcp import open_mcp

    async with open_mcp(config.mcp.servers, log_dir=config.settings.home / MCP_LOG_DIR, notify=notify,
                        mask=rt.masker.mask) as mcp:
        yield dataclasses.replace(rt, tools=[*rt.tools, *mcp.tools])
