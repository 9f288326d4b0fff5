"""A hostile MCP server over stdio, speaking newline-delimited JSON-RPC by hand (no SDK: it starts in a few
milliseconds): `python flood_server.py STATE [--flood-listing BYTES | --refuse-initialize]`.

It answers `initialize` and `tools/list` properly (tools `flood` and `echo`), unless `--flood-listing` makes its
`tools/list` answer an endless line. A `flood` call (`{"bytes": N}`) is answered by one message line that never
ends: N bytes of text in 1 MiB writes without a newline, then it waits. `echo` answers at once. `ask` (`{"pings":
N}`) sends N ping requests to the client without reading its stdin (so the answers are not read), then answers;
`shout` (`{"mib": N}`) writes N MiB to stderr, then answers.
STATE gets `started` (a line per start with the pid), `calls.log` (a line per call), `written` (how many bytes of
the flood it managed to write, rewritten after each write) and `asked` (how many pings `ask` sent, every 500th).
With `--refuse-initialize` it answers `initialize` with a JSON-RPC error (code -32000) quoting its environment's
FLOOD_TOKEN, and stays up. At its start it writes FLOOD_TOKEN to stderr when that is set. STATE gets `ended` when it
stops: `stdin closed` when it exits on its own at the end of its stdin, `SIGTERM` when it is terminated."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
FLOOD_LISTING = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--flood-listing" else 0
REFUSE_INITIALIZE = sys.argv[2:3] == ["--refuse-initialize"]
TOKEN = os.environ.get("FLOOD_TOKEN")
CHUNK = b"x" * (1024 * 1024)
OBJECT = {"type": "object", "properties": {"bytes": {"type": "integer"}, "q": {"type": "string"}}}
TOOLS = [{"name": "flood", "description": "answers with an endless line", "inputSchema": OBJECT},
         {"name": "echo", "description": "answers at once", "inputSchema": OBJECT},
         {"name": "junk", "description": "writes a line that is not UTF-8, then answers", "inputSchema": OBJECT},
         {"name": "shout", "description": "writes N MiB to stderr, then answers",
          "inputSchema": {"type": "object", "properties": {"mib": {"type": "integer"}}}},
         {"name": "ask", "description": "sends N pings to the client without reading, then answers",
          "inputSchema": {"type": "object", "properties": {"pings": {"type": "integer"}}}}]

STATE.mkdir(parents=True, exist_ok=True)


def terminated(signum: int, _frame: Any) -> None:
    (STATE / "ended").write_text("SIGTERM", encoding="ascii")
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, terminated)
with (STATE / "started").open("a", encoding="utf-8") as f:
    f.write(f"{os.getpid()}\n")
out = sys.stdout.buffer
if TOKEN:
    sys.stderr.write(f"logging in with token {TOKEN}\n")
    sys.stderr.flush()


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def flood(request_id: Any, total: int) -> None:
    """The start of a result whose text never ends, `total` bytes of it, then silence."""
    out.write(json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode() + b', "result": {"content": [{"type": '
              b'"text", "text": "')
    written = 0
    while written < total:
        out.write(CHUNK)
        out.flush()
        written += len(CHUNK)
        (STATE / "written.new").write_text(str(written), encoding="ascii")
        os.replace(STATE / "written.new", STATE / "written")  # whole, even when it is killed meanwhile
    time.sleep(3600)


for raw in sys.stdin.buffer:
    try:
        message = json.loads(raw)
    except ValueError:
        continue  # a line cut short when the client closed
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue  # a notification
    if method == "initialize" and REFUSE_INITIALIZE:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": f"cannot log in with {TOKEN}"}})
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "flood", "version": "1"}}})
    elif method == "tools/list":
        if FLOOD_LISTING:
            flood(request_id, FLOOD_LISTING)
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = message["params"]
        with (STATE / "calls.log").open("a", encoding="utf-8") as f:
            f.write(f"{params['name']} {json.dumps(params.get('arguments'), sort_keys=True)}\n")
        if params["name"] == "flood":
            flood(request_id, int(params["arguments"]["bytes"]))
        if params["name"] == "shout":  # a server logging without end, as far as the test goes
            line = b"e" * 1023 + b"\n"
            for _ in range(int(params["arguments"]["mib"]) * 1024):
                sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
        if params["name"] == "ask":  # requests to the client, their answers not read until the last is sent
            for i in range(int(params["arguments"]["pings"])):
                send({"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping"})
                if i % 500 == 0:
                    (STATE / "asked.new").write_text(str(i + 1), encoding="ascii")
                    os.replace(STATE / "asked.new", STATE / "asked")
            (STATE / "asked").write_text(str(params["arguments"]["pings"]), encoding="ascii")
        if params["name"] == "junk":  # a line that is not UTF-8 first, then the answer
            out.write(b"\xff\xfe not utf-8\n")
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "content": [{"type": "text", "text": f"echo {params['arguments'].get('q')}"}]}})
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})
(STATE / "ended").write_text("stdin closed", encoding="ascii")
