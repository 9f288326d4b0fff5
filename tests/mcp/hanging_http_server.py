"""A streamable HTTP MCP server on loopback that stops answering, speaking the protocol by hand (JSON responses, no
SDK): `python hanging_http_server.py PORT STATE MODE`.

MODE says where it hangs (accepts the request, reads it, never answers, keeps the connection open):
- `never`: every request, `initialize` included;
- `listing`: `initialize` is answered (with a session id), `tools/list` and everything after it hang;
- `call`: initialise and listing are answered, a `tools/call` hangs, and so does the DELETE that ends the session;
- `flood`: it does not hang: its first `tools/call` is answered with a JSON body announced as 200 MB that it writes
  until the client stops reading (the bytes it managed to write go to STATE/flood_bytes); later calls get a short
  result.
- `gzip`: as `flood`, but its first `tools/call` is answered with a valid result of 64 MiB of text, gzip-compressed
  (about 64 KB on the wire, STATE/flood_bytes); later calls get a short result.
- `pings`: its event stream (GET) sends 2000 ping requests of 48 KiB each, as fast as the client reads them (how many
  it wrote goes to STATE/pings); the POSTs carrying their answers, and a `tools/call`, are never answered.
- `refuse`: it does not hang: its first `tools/call` is answered with a JSON-RPC error, code -32000 ("backend quota
  exceeded"); later calls get a short result.
- `sse-end`: it does not hang: its first `tools/call` is answered with an event stream that ends at once, without the
  answer (STATE/sse_ended); later calls get a short result.
STATE gets `requests.log`: a line per request it received (the method, or the HTTP verb for GET and DELETE)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PORT, STATE, MODE = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
STATE.mkdir(parents=True, exist_ok=True)
LOCK = threading.Lock()
GZIP_MB = 64
PINGS, PING_PAD = 2000, 48 * 1024
TOOLS = [{"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}]


def record(what: str) -> None:
    with LOCK, (STATE / "requests.log").open("a", encoding="utf-8") as f:
        f.write(what + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def hang(self) -> None:
        time.sleep(3600)

    def answer(self, status: int, body: dict[str, Any] | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "hanging-1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def flood(self, request_id: object) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Mcp-Session-Id", "hanging-1")
        self.send_header("Content-Length", str(200 * 1024 * 1024))
        self.end_headers()
        written = 0
        try:
            self.wfile.write(json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1].encode() + b', "result": "')
            chunk = b"x" * 65536
            while written < 200 * 1024 * 1024:
                self.wfile.write(chunk)
                written += len(chunk)
        except OSError:
            pass
        (STATE / "flood_bytes").write_text(str(written), encoding="utf-8")
        self.close_connection = True

    def gzip_flood(self, request_id: object) -> None:
        """A valid answer whose text is GZIP_MB MiB, sent gzip-compressed (a few hundred KB on the wire)."""
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": ""}]}})
        cut = head.index('""') + 1
        data = packer.compress(head[:cut].encode())
        chunk = b"x" * (1024 * 1024)
        for _ in range(GZIP_MB):
            data += packer.compress(chunk)
        data += packer.compress(head[cut:].encode()) + packer.flush()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Mcp-Session-Id", "hanging-1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        (STATE / "flood_bytes").write_text(str(len(data)), encoding="utf-8")

    def do_GET(self) -> None:
        record("GET")
        if MODE != "pings":
            self.answer(405)
            return
        self.send_response(200)  # the server's event stream: pings, as many as the client reads
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Mcp-Session-Id", "hanging-1")
        self.end_headers()
        pad = "p" * PING_PAD
        for i in range(PINGS):
            ping = {"jsonrpc": "2.0", "id": f"ping-{i}", "method": "ping", "params": {"_meta": {"pad": pad}}}
            try:
                self.wfile.write(f"data: {json.dumps(ping)}\n\n".encode())
                self.wfile.flush()
            except OSError:
                break
            (STATE / "pings.new").write_text(str(i + 1), encoding="ascii")
            os.replace(STATE / "pings.new", STATE / "pings")
        self.hang()

    def do_DELETE(self) -> None:
        record("DELETE")
        if MODE in ("call", "listing"):
            self.hang()
        self.answer(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        method, request_id = message.get("method"), message.get("id")
        record(str(method))
        if MODE == "pings" and (method is None or method == "tools/call"):  # answers and calls are never answered
            self.hang()
        if MODE == "never" or (MODE == "listing" and method != "initialize") or (
                MODE == "call" and method == "tools/call"):
            self.hang()
        if request_id is None:
            self.answer(202)
        elif method == "initialize":
            self.answer(200, {"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "hanging", "version": "1"}}})
        elif method == "tools/call" and MODE == "flood" and not (STATE / "flood_bytes").exists():
            self.flood(request_id)
        elif method == "tools/call" and MODE == "gzip" and not (STATE / "flood_bytes").exists():
            self.gzip_flood(request_id)
        elif method == "tools/call" and MODE == "refuse" and not (STATE / "refused").exists():
            (STATE / "refused").touch()
            self.answer(200, {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000,
                                                                            "message": "backend quota exceeded"}})
        elif method == "tools/call" and MODE == "sse-end" and not (STATE / "sse_ended").exists():
            (STATE / "sse_ended").touch()
            self.send_response(200)  # an event stream for the answer, ended before any event
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Mcp-Session-Id", "hanging-1")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif method == "tools/call":
            self.answer(200, {"jsonrpc": "2.0", "id": request_id, "result": {
                "content": [{"type": "text", "text": "short answer"}]}})
        elif method == "tools/list":
            self.answer(200, {"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        else:
            self.answer(200, {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no"}})


class Server(ThreadingHTTPServer):
    daemon_threads = True


Server(("127.0.0.1", PORT), Handler).serve_forever()
