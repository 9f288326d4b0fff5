"""A misbehaving MCP server written with the SDK's low-level `Server` (which sends whatever tool list it is given,
unlike the high-level server), run by the tests as a real process over stdio: `python hostile_server.py SPEC`.

SPEC is a JSON file: `tools` (the tool list it sends, as the protocol's Tool objects: duplicate names, schemas
that cannot be evaluated, odd names), `results` (per tool: {"text": ...} or {"env": NAME} to answer with an
environment variable's value) and `state` (a directory: `started` gets a line per start with the pid,
`calls.log` a line per call it received); `page_size` makes it list its tools in pages; `tools_restarted` is the
tool list it sends once it has been started before (a server changed between two starts); a result of
{"die_once": true} ends the first start of the server during the call (and answers "ok" after)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SPEC: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
STATE = Path(SPEC["state"])
STATE.mkdir(parents=True, exist_ok=True)
RESTARTED = (STATE / "started").exists()
with (STATE / "started").open("a", encoding="utf-8") as f:
    f.write(f"{os.getpid()}\n")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    listed = SPEC["tools_restarted"] if RESTARTED and "tools_restarted" in SPEC else SPEC["tools"]
    tools = [types.Tool(**t) for t in listed]
    size = SPEC.get("page_size")  # pages of this many tools, the cursor being the next page's start
    if size is None:
        return types.ListToolsResult(tools=tools)
    start = int(params.cursor) if params is not None and params.cursor else 0
    more = start + size < len(tools)
    return types.ListToolsResult(tools=tools[start:start + size], next_cursor=str(start + size) if more else None)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    with (STATE / "calls.log").open("a", encoding="utf-8") as f:
        f.write(f"{params.name} {json.dumps(params.arguments, sort_keys=True)}\n")
    answer = SPEC.get("results", {}).get(params.name, {"text": "ok"})
    if answer.get("die_once") and not RESTARTED:
        os._exit(9)
    text = os.environ.get(answer["env"], "?") if "env" in answer else answer.get("text", "ok")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
