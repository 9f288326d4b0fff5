"""A loopback HTTP server that speaks the Anthropic Messages API (`POST /v1/messages`, JSON and SSE) for tests.

It validates each request the way the API does (400 `invalid_request_error` naming the defect) and answers the
valid ones from a script the test sets up: a queue of steps, each a `Reply` (content blocks; tool_use ids are
picked when absent), a `Fault` (an HTTP error with optional headers such as `retry-after`), a `StreamFault` (a 200
stream that breaks off with an `error` event or a cut connection) or `DROP` (close without answering). Every
request is recorded (headers and body) for assertions.

It runs in a thread of the test process, so a test can start it, script it, and then point a `strata`
subprocess at it with `ANTHROPIC_BASE_URL=server.url`:

    with MessagesServer(api_key="sk-ant-test-not-a-real-key") as server:
        server.script(Reply([{"type": "text", "text": "hi"}]))
        ...  # ANTHROPIC_BASE_URL=server.url ANTHROPIC_API_KEY=... strata run --model anthropic:x PROMPT
        assert server.pending == 0

`steps_from_json` reads a script from JSON data, and `python -m tests.wire.messages_server SCRIPT.json` serves one
by hand."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.wire.messages_validation import Invalid, validate_request

# -- the script ------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """A successful answer. `content` holds text blocks and tool_use blocks (`id` optional; `partial_json`, if
    given, is streamed instead of the input). Streamed text and tool input go out in pieces of `chunk`
    characters. With `gate`, the stream pauses after its first delta until the test sets the event (proof that
    the client handles deltas as they arrive)."""

    content: list[dict[str, Any]]
    stop_reason: str | None = None  # default: "tool_use" with tool_use blocks, else "end_turn"
    usage: dict[str, int] = field(default_factory=dict)
    chunk: int = 4
    gate: threading.Event | None = None


@dataclass
class Fault:
    """An HTTP error answer: `status`, the API's error type (derived from the status when None), and headers."""

    status: int
    error_type: str | None = None
    message: str = "scripted fault"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamFault:
    """A 200 stream that sends `text` and then fails: an `error` event of `error_type`, or a cut connection when
    `error_type` is None."""

    text: str = "partial "
    error_type: str | None = "overloaded_error"


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering."""


DROP = Drop()

Step = Reply | Fault | StreamFault | Drop

_DEFAULT_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                        404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                        500: "api_error", 504: "timeout_error", 529: "overloaded_error"}


def error_type_for(status: int) -> str:
    return _DEFAULT_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def steps_from_json(data: list[dict[str, Any]]) -> list[Step]:
    """Script steps from JSON: {"content": [...], "stop_reason"?, "usage"?}, {"fault": 529, "headers"?: {...},
    "error_type"?, "message"?}, {"stream_fault": "overloaded_error" | null, "text"?}, {"drop": true}."""
    steps: list[Step] = []
    for item in data:
        if "content" in item:
            steps.append(Reply(item["content"], stop_reason=item.get("stop_reason"), usage=item.get("usage", {})))
        elif "fault" in item:
            steps.append(Fault(int(item["fault"]), item.get("error_type"), item.get("message", "scripted fault"),
                               dict(item.get("headers", {}))))
        elif "stream_fault" in item:
            steps.append(StreamFault(item.get("text", "partial "), item["stream_fault"]))
        elif item.get("drop"):
            steps.append(DROP)
        else:
            raise ValueError(f"unknown script step {item!r}")
    return steps


# -- the server ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """One request as received, and how it was answered (`outcome`: "reply", "fault", "stream_fault", "drop",
    "invalid", "unauthorized", "unexpected", "not_found")."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # decoded JSON, or None
    request_id: str
    status: int | None  # None when the connection was dropped
    outcome: str
    error: str | None = None  # the error message sent, if any


class MessagesServer:
    """See the module docstring. Thread-safe; use as a context manager or call `start()` / `stop()`."""

    def __init__(self, *, api_key: str | None = None, gate_timeout_s: float = 10.0) -> None:
        self.api_key = api_key
        self.gate_timeout_s = gate_timeout_s
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self._requests: list[Recorded] = []
        self._errors: list[str] = []
        self._serial = 0
        self._tool_serial = 0
        self.gate_timeouts = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> MessagesServer:
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="messages-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "the server is not running"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- scripting and inspection

    def script(self, *steps: Step) -> None:
        """Append steps; valid requests consume them in order."""
        with self._lock:
            self._steps.extend(steps)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._steps)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    @property
    def unexpected(self) -> list[Recorded]:
        """Valid requests that found the script empty (each was answered 400 so that it fails loudly)."""
        return [r for r in self.requests if r.outcome == "unexpected"]

    @property
    def errors(self) -> list[str]:
        """Exceptions raised while answering (e.g. the client went away mid-stream)."""
        with self._lock:
            return list(self._errors)

    @property
    def open_connections(self) -> int:
        """Client connections the server still has open: one a client keeps alive in its pool counts until the client
        closes it (the handler then reads the end of the stream and lets it go)."""
        httpd = self._httpd
        return httpd.open_connections() if httpd is not None else 0

    # -- answering (runs in the server's handler threads)

    def _next_request_id(self) -> str:
        with self._lock:
            self._serial += 1
            return f"req_test{self._serial:06d}"

    def _tool_id(self) -> str:
        with self._lock:
            self._tool_serial += 1
            return f"toolu_srv{self._tool_serial:06d}"

    def _record(self, item: Recorded) -> None:
        with self._lock:
            self._requests.append(item)

    def _error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    def _handle(self, h: _Handler, method: str, raw: bytes) -> None:
        rid = self._next_request_id()
        headers = {k.lower(): v for k, v in h.headers.items()}
        body: Any = None
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None

        def record(status: int | None, outcome: str, error: str | None = None) -> None:
            self._record(Recorded(method, h.path, headers, body, rid, status, outcome, error))

        if method != "POST" or h.path.split("?")[0] != "/v1/messages":
            message = f"Not found: {method} {h.path}"
            record(404, "not_found", message)
            return _send_error(h, 404, "not_found_error", message, rid)
        if self.api_key is not None and credential(headers) != self.api_key:
            record(401, "unauthorized", "invalid x-api-key")
            return _send_error(h, 401, "authentication_error", "invalid x-api-key", rid)
        try:
            if not headers.get("anthropic-version"):
                raise Invalid("anthropic-version: header is required")
            if raw and body is None:
                raise Invalid("There was an error parsing the body as JSON")
            validate_request(body)
        except Invalid as exc:
            record(400, "invalid", str(exc))
            return _send_error(h, 400, "invalid_request_error", str(exc), rid)
        with self._lock:
            step = self._steps.pop(0) if self._steps else None
        if step is None:
            message = "messages_server: no scripted response left for this request"
            record(400, "unexpected", message)
            return _send_error(h, 400, "invalid_request_error", message, rid)
        stream = bool(body.get("stream"))
        match step:
            case Reply():
                record(200, "reply")
                message_obj = self._message(step, body["model"], rid)
                if stream:
                    self._stream(h, message_obj, step, rid)
                else:
                    _send_json(h, 200, message_obj, rid)
            case Fault():
                error_type = step.error_type or error_type_for(step.status)
                record(step.status, "fault", step.message)
                _send_error(h, step.status, error_type, step.message, rid, step.headers)
            case StreamFault():
                record(200, "stream_fault", step.error_type)
                self._stream_fault(h, step, body["model"], rid)
            case Drop():
                record(None, "drop")
                _drop(h)

    def _message(self, reply: Reply, model: str, rid: str) -> dict[str, Any]:
        content = []
        for block in reply.content:
            if block.get("type") == "tool_use":
                block = {"type": "tool_use", "id": block.get("id") or self._tool_id(), "name": block["name"],
                         "input": block.get("input", {})}
            content.append(block)
        has_tools = any(b.get("type") == "tool_use" for b in content)
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0, **reply.usage}
        return {"id": f"msg_{rid[4:]}", "type": "message", "role": "assistant", "model": model, "content": content,
                "stop_reason": reply.stop_reason or ("tool_use" if has_tools else "end_turn"),
                "stop_sequence": None, "usage": usage}

    def _stream(self, h: _Handler, message: dict[str, Any], reply: Reply, rid: str) -> None:
        writer = _SSEWriter(h, rid)
        usage = message["usage"]
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {**usage, "output_tokens": 1}}
        writer.event("message_start", {"type": "message_start", "message": start})
        writer.event("ping", {"type": "ping"})
        gate = reply.gate
        for index, block in enumerate(message["content"]):
            if block["type"] == "tool_use":
                opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                raw = reply.content[index].get("partial_json")  # a literal input stream, e.g. one cut short
                pieces = ["", *_pieces(raw if raw is not None else json.dumps(block["input"]), reply.chunk)]
                deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            else:
                opening = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], reply.chunk)]
            writer.event("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": opening})
            for delta in deltas:
                writer.event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                if gate is not None:
                    if not gate.wait(self.gate_timeout_s):
                        with self._lock:
                            self.gate_timeouts += 1
                    gate = None
            writer.event("content_block_stop", {"type": "content_block_stop", "index": index})
        writer.event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                       "usage": {"output_tokens": usage["output_tokens"]}})
        writer.event("message_stop", {"type": "message_stop"})
        writer.close()

    def _stream_fault(self, h: _Handler, fault: StreamFault, model: str, rid: str) -> None:
        writer = _SSEWriter(h, rid)
        start = {"id": f"msg_{rid[4:]}", "type": "message", "role": "assistant", "model": model, "content": [],
                 "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
        writer.event("message_start", {"type": "message_start", "message": start})
        writer.event("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}})
        writer.event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": fault.text}})
        if fault.error_type is None:
            _drop(h)
            return
        writer.event("error", {"type": "error", "error": {"type": fault.error_type, "message": "scripted"},
                               "request_id": rid})
        writer.close()


def credential(headers: dict[str, str]) -> str | None:
    """The API key a request carries: `x-api-key`, or `authorization: Bearer KEY` (how current SDKs send it)."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class _SSEWriter:
    """Server-sent events over chunked transfer encoding, flushed per event."""

    def __init__(self, h: _Handler, rid: str) -> None:
        self._h = h
        h.send_response(200)
        h.send_header("content-type", "text/event-stream; charset=utf-8")
        h.send_header("cache-control", "no-cache")
        h.send_header("request-id", rid)
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()

    def event(self, name: str, data: dict[str, Any]) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self._h.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self._h.wfile.flush()

    def close(self) -> None:
        self._h.wfile.write(b"0\r\n\r\n")
        self._h.wfile.flush()


def _send_json(h: _Handler, status: int, obj: Any, rid: str, headers: dict[str, str] | None = None) -> None:
    data = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("content-type", "application/json")
    h.send_header("content-length", str(len(data)))
    h.send_header("request-id", rid)
    for name, value in (headers or {}).items():
        h.send_header(name, value)
    h.end_headers()
    h.wfile.write(data)
    h.wfile.flush()


def _send_error(h: _Handler, status: int, error_type: str, message: str, rid: str,
                headers: dict[str, str] | None = None) -> None:
    body = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": rid}
    _send_json(h, status, body, rid, headers)


def _drop(h: _Handler) -> None:
    h.close_connection = True
    with contextlib.suppress(OSError):
        h.wfile.flush()
        h.connection.shutdown(socket.SHUT_RDWR)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: MessagesServer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def open_connections(self) -> int:
        with self._conns_lock:
            return len(self._conns)

    def close_connections(self) -> None:
        """End idle keep-alive connections, so their handler threads finish."""
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        self.owner._error(f"{type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.owner._handle(self, method, raw)

    def do_POST(self) -> None:
        self._serve("POST")

    def do_GET(self) -> None:
        self._serve("GET")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the server records requests instead


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a scripted Messages API on loopback.")
    parser.add_argument("script", help="JSON file: a list of steps (see steps_from_json)")
    parser.add_argument("--api-key", default=None, help="require this x-api-key")
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        steps = steps_from_json(json.load(f))
    with MessagesServer(api_key=args.api_key) as server:
        server.script(*steps)
        print(f"ANTHROPIC_BASE_URL={server.url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
