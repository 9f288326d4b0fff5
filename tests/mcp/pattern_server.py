"""A hostile MCP server over stdio, speaking newline-delimited JSON-RPC by hand (no SDK: it starts in a few
milliseconds): `python pattern_server.py STATE`.

Its tools' input schemas are valid JSON Schema whose `pattern`s make a backtracking engine (Python's `re`) take
exponential time on some strings (`^(a+)+$` on `aaaa...!`): `lookup` (a `pattern`), `keyed` (`patternProperties`
with `additionalProperties: false`) and `named` (`propertyNames`); `spell`'s (`^(a|aa)+$` on `aaaa...b`) takes long
in any backtracking engine; `strict`'s `patternProperties` beside `unevaluatedProperties` (jsonschema matches them
there with `re` itself). `echo` answers at once. Every call is answered with its arguments. STATE gets `started`
(a line per start) and `calls.log` (a line per call)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
EVIL = "^(a+)+$"
SLOW = "^(a|aa)+$"
TOOLS = [
    {"name": "lookup", "description": "looks a key up",
     "inputSchema": {"type": "object", "properties": {"key": {"type": "string", "pattern": EVIL}}}},
    {"name": "keyed", "description": "takes keyed values",
     "inputSchema": {"type": "object", "patternProperties": {EVIL: {"type": "string"}},
                     "additionalProperties": False}},
    {"name": "named", "description": "takes named values",
     "inputSchema": {"type": "object", "propertyNames": {"pattern": EVIL}}},
    {"name": "spell", "description": "spells a word",
     "inputSchema": {"type": "object", "properties": {"word": {"type": "string", "pattern": SLOW}}}},
    {"name": "strict", "description": "takes keyed values, nothing else",
     "inputSchema": {"type": "object", "patternProperties": {EVIL: {"type": "string"}},
                     "unevaluatedProperties": False}},
    {"name": "echo", "description": "answers at once",
     "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
]

STATE.mkdir(parents=True, exist_ok=True)
with (STATE / "started").open("a", encoding="utf-8") as f:
    f.write("started\n")
out = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


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
            "serverInfo": {"name": "pattern", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = message["params"]
        with (STATE / "calls.log").open("a", encoding="utf-8") as f:
            f.write(f"{params['name']} {json.dumps(params.get('arguments'), sort_keys=True)}\n")
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "content": [{"type": "text", "text": f"echo {json.dumps(params.get('arguments'), sort_keys=True)}"}]}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
