"""An MCP server over stdio whose answers to `tools/call` are what a broken or strict server sends, speaking
newline-delimited JSON-RPC by hand (no SDK, so it can send what the SDK would not): `python answers_server.py STATE`.

Its tools (each call gets a line in STATE/calls.log; STATE/started a line per start with the pid):
- `echo`: a plain text result;
- `refuse`: a JSON-RPC error answer, code -32000 (what the SDK also uses for a closed connection), message
  "backend quota exceeded";
- `refuse_params`: a JSON-RPC error answer, code -32602 ("unknown repository");
- `refuse_closed`: a JSON-RPC error answer worded as the SDK's own for a closed connection (-32000, "Connection
  closed"), as a gateway whose own upstream connection closed answers;
- `garbled`: a result that is not a CallToolResult (`content` is a string, not a list);
- `garbled_frame`: an answer that is not JSON-RPC at all (its `result` is a string, not an object);
- `shaped`: declares an output schema (`{"n": integer}`, required) and answers with structured content that does
  not fit it (`{"n": "many"}`), with text content too;
- `unshaped`: declares an output schema and answers with text content only (no structured content).

A server that quotes its secrets: with ANSWERS_TOKEN in its environment it lists one more tool, named after the
token (`token_VALUE`), and with ANSWERS_REFUSE_START too it answers `initialize` with an error quoting the token."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}}
SHAPE = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS = [{"name": "echo", "inputSchema": OBJECT},
         {"name": "refuse", "inputSchema": OBJECT},
         {"name": "refuse_params", "inputSchema": OBJECT},
         {"name": "refuse_closed", "inputSchema": OBJECT},
         {"name": "garbled", "inputSchema": OBJECT},
         {"name": "garbled_frame", "inputSchema": OBJECT},
         {"name": "shaped", "inputSchema": OBJECT, "outputSchema": SHAPE},
         {"name": "unshaped", "inputSchema": OBJECT, "outputSchema": SHAPE}]

TOKEN = os.environ.get("ANSWERS_TOKEN")
if TOKEN:
    TOOLS.append({"name": f"token_{TOKEN}", "inputSchema": OBJECT})

STATE.mkdir(parents=True, exist_ok=True)
with (STATE / "started").open("a", encoding="utf-8") as f:
    f.write(f"{os.getpid()}\n")
out = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


ANSWERS: dict[str, dict[str, Any]] = {
    "refuse": {"error": {"code": -32000, "message": "backend quota exceeded"}},
    "refuse_params": {"error": {"code": -32602, "message": "unknown repository"}},
    "refuse_closed": {"error": {"code": -32000, "message": "Connection closed"}},
    "garbled": {"result": {"content": "not a list of blocks"}},
    "garbled_frame": {"result": "not an object"},
    "shaped": {"result": {"content": text('{"n": "many"}'), "structuredContent": {"n": "many"}}},
    "unshaped": {"result": {"content": text("no structure here")}},
}

for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize" and TOKEN and os.environ.get("ANSWERS_REFUSE_START"):
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32001, "message": f"bad credentials {TOKEN}"}})
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "answers", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = message["params"]
        with (STATE / "calls.log").open("a", encoding="utf-8") as f:
            f.write(f"{params['name']} {json.dumps(params.get('arguments'), sort_keys=True)}\n")
        answer = ANSWERS.get(params["name"], {"result": {"content": text(f"echo {params['arguments'].get('q')}")}})
        send({"jsonrpc": "2.0", "id": request_id, **answer})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
