"""An MCP server over stdio listing its tools in many large pages, speaking newline-delimited JSON-RPC by hand (no
SDK: it writes a page of 20,000 tools in a fraction of a second): `python paged_server.py STATE PAGES PER_PAGE`.

Page k holds PER_PAGE tools `tK_N` (each with a schema of its own); the first page starts with `echo`, which
answers at once. STATE gets `listed` (how many pages were asked for, rewritten at each) and `calls.log` (a line per
call)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
PAGES, PER_PAGE = int(sys.argv[2]), int(sys.argv[3])
STATE.mkdir(parents=True, exist_ok=True)
out = sys.stdout.buffer
asked = 0


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def page(k: int) -> dict[str, Any]:
    tools = [{"name": f"t{k}_{n}", "inputSchema": {"type": "object", "properties": {f"p{n}": {"type": "string"}}}}
             for n in range(PER_PAGE)]
    if k == 0:
        tools.insert(0, {"name": "echo", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}})
    return {"tools": tools, **({"nextCursor": str(k + 1)} if k + 1 < PAGES else {})}


for raw in sys.stdin.buffer:
    try:
        message = json.loads(raw)
    except ValueError:
        continue
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "paged", "version": "1"}}})
    elif method == "tools/list":
        asked += 1
        (STATE / "listed").write_text(str(asked), encoding="ascii")
        cursor = (message.get("params") or {}).get("cursor")
        send({"jsonrpc": "2.0", "id": request_id, "result": page(int(cursor or 0))})
    elif method == "tools/call":
        params = message["params"]
        with (STATE / "calls.log").open("a", encoding="utf-8") as f:
            f.write(f"{params['name']} {json.dumps(params.get('arguments'), sort_keys=True)}\n")
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "echo"}]}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
