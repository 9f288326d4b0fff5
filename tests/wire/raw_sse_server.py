"""A loopback HTTP server that answers `POST /v1/messages` with bytes the test wrote itself, for stream shapes
the well-behaved `MessagesServer` never sends: events the API's grammar does not allow (a delta after its block
stopped, two blocks on one index, a field missing or of the wrong type, data that is not JSON), a tool_use block
that never stops, bytes split at odd places.

Each request takes the next script: a list of byte strings, each sent with its own `sendall` (so a test chooses
where the TCP chunks break), after which the connection is closed. `sse_*` build the usual events."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any


class RawSSEServer:
    """Use as a context manager; `script(chunks, ...)` queues answers, `requests` holds the decoded bodies."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._lock = threading.Lock()
        self._scripts: list[list[bytes]] = []
        self.requests: list[Any] = []
        self._thread = threading.Thread(target=self._accept, name="raw-sse-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def script(self, *answers: list[bytes]) -> None:
        with self._lock:
            self._scripts.extend(answers)

    def __enter__(self) -> RawSSEServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                body = _read_request(conn)
                with self._lock:
                    self.requests.append(body)
                    chunks = self._scripts.pop(0) if self._scripts else [_NO_SCRIPT]
                for chunk in chunks:
                    conn.sendall(chunk)
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read_request(conn: socket.socket) -> Any:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            raise OSError("the client went away before its request ended")
        data += more
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        more = conn.recv(65536)
        if not more:
            break
        body += more
    return json.loads(body) if body else None


_NO_SCRIPT = (b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n"
              b'{"type":"error","error":{"type":"invalid_request_error","message":"raw_sse_server: no script left"}}')

SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\nrequest-id: req_raw000001\r\n"
            b"cache-control: no-cache\r\nconnection: close\r\n\r\n")


def sse(name: str, data: dict[str, Any] | str) -> bytes:
    """One event; `data` as given when it is a string (so it can be anything, JSON or not)."""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"event: {name}\ndata: {payload}\n\n".encode()


def message_start() -> bytes:
    return sse("message_start", {"type": "message_start", "message": {
        "id": "msg_raw1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})


def tool_start(index: int, call_id: str, name: str) -> bytes:
    return sse("content_block_start", {"type": "content_block_start", "index": index,
                                       "content_block": {"type": "tool_use", "id": call_id, "name": name,
                                                         "input": {}}})


def text_start(index: int) -> bytes:
    return sse("content_block_start", {"type": "content_block_start", "index": index,
                                       "content_block": {"type": "text", "text": ""}})


def json_delta(index: int, partial: str) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                       "delta": {"type": "input_json_delta", "partial_json": partial}})


def text_delta(index: int, text: str) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                       "delta": {"type": "text_delta", "text": text}})


def block_stop(index: int) -> bytes:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


def message_end(stop_reason: str) -> list[bytes]:
    return [sse("message_delta", {"type": "message_delta",
                                  "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                  "usage": {"output_tokens": 5}}),
            sse("message_stop", {"type": "message_stop"})]


def text_answer(text: str) -> list[bytes]:
    return [SSE_HEAD, message_start(), text_start(0), text_delta(0, text), block_stop(0), *message_end("end_turn")]
