"""Acceptance 2, the webhook channel of a real `strata serve` process over real HTTP on loopback: a POST with the
right token is queued and gets a reply (polled with GET); a wrong or missing token gets 401 and creates nothing;
a 1 GB body is refused by its Content-Length without being read; invalid JSON gets 400."""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.channels._support import write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

TOKEN = "test-token-0123456789abcdef"


class _Answer:
    def __init__(self, status_code: int, body: bytes) -> None:
        self.status_code = status_code
        self.text = body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.text)


def _http(method: str, url: str, *, headers: dict[str, str] | None = None, json_body: Any = None,
          content: bytes | None = None) -> _Answer:
    """One request over a real loopback connection (the standard library's client)."""
    host, rest = url.removeprefix("http://").split(":", 1)
    port, _, path = rest.partition("/")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        data = json.dumps(json_body).encode() if json_body is not None else content
        sent = dict(headers or {})
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        conn.request(method, "/" + path, body=data, headers=sent)
        response = conn.getresponse()
        return _Answer(response.status, response.read())
    finally:
        conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _daemon(cli: StrataCLI, tmp_path: Path) -> tuple[Daemon, str]:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello from strata")])
    port = _free_port()
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\nmax_body_bytes = 65536\n')
    return Daemon(cli, env={"HOOK_TOKEN": TOKEN}), f"http://127.0.0.1:{port}"


def _nothing_created(cli: StrataCLI) -> bool:
    inbox = cli.home / "channels" / "hook" / "in"
    return not list(inbox.glob("*.json")) and not list((cli.home / "channels" / "hook" / "out").glob("*.json"))


def test_a_post_with_the_right_token_gets_a_reply(cli: StrataCLI, tmp_path: Path) -> None:
    daemon, url = _daemon(cli, tmp_path)
    try:
        posted = _http("POST", f"{url}/messages", headers={"Authorization": f"Bearer {TOKEN}"},
                           json_body={"thread": "t1", "id": "w1", "sender": "bot", "text": "What is the status?"})
        assert posted.status_code == 202, posted.text
        where = posted.json()["reply"]
        got: dict[str, object] = {}

        def replied() -> bool:
            r = _http("GET", f"{url}{where}", headers={"Authorization": f"Bearer {TOKEN}"})
            if r.status_code == 200:
                got.update(r.json())
            return r.status_code == 200

        wait_until(replied, what="the webhook reply")
        assert (got["in_reply_to"], got["text"], got["status"]) == ("w1", "hello from strata", "completed")
        unauthorised = _http("GET", f"{url}{where}")
        assert unauthorised.status_code == 401
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_wrong_or_missing_tokens_get_401_oversized_bodies_413_unread_and_bad_json_400(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, url = _daemon(cli, tmp_path)
    body = {"thread": "t1", "id": "w1", "text": "Please send the invoice"}
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                        {"Authorization": f"Bearer {TOKEN}x"}):
            r = _http("POST", f"{url}/messages", headers=headers, json_body=body)
            assert r.status_code == 401, (headers, r.text)
        bad = _http("POST", f"{url}/messages", headers={"Authorization": f"Bearer {TOKEN}"}, content=b"{not json")
        assert bad.status_code == 400 and "not a message" in bad.json()["error"]
        shapeless = _http("POST", f"{url}/messages", headers={"Authorization": f"Bearer {TOKEN}"},
                          json_body={"text": "x"})
        assert shapeless.status_code == 400 and "thread" in shapeless.json()["error"]

        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(f"POST /messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {1 << 30}\r\n\r\n".encode())
            s.sendall(b"x" * 65536)  # a token part of the gigabyte; the answer must not wait for the rest
            started = time.monotonic()
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = s.recv(4096)
                if not chunk:
                    break
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert time.monotonic() - started < 5
        time.sleep(0.5)  # a poll interval: a message wrongly queued would have been taken by now
        assert _nothing_created(cli)
        assert _http("GET", f"{url}/nowhere", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    sessions = cli.run("sessions", "--json")
    assert sessions.returncode == 0 and not sessions.stdout.strip()


class _Callback:
    """A loopback HTTP server standing in for the remote service: it records each POST (key and body), and
    answers 503 to the first one, so delivery must retry."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.posts: list[tuple[int, str, dict[str, Any]]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status = 503 if not outer.posts else 200
                outer.posts.append((status, self.headers["Idempotency-Key"], body))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_replies_are_posted_to_the_callback_with_their_idempotency_key_until_it_takes_them(
        cli: StrataCLI, tmp_path: Path) -> None:
    callback = _Callback()
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("pushed")])
    port = _free_port()
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\ncallback_url = "{callback.url}"\n')
    daemon = Daemon(cli, env={"HOOK_TOKEN": TOKEN})
    try:
        posted = _http("POST", f"http://127.0.0.1:{port}/messages", headers={"Authorization": f"Bearer {TOKEN}"},
                       json_body={"thread": "t1", "id": "w1", "text": "Any news?"})
        assert posted.status_code == 202
        wait_until(lambda: any(status == 200 for status, _, _ in callback.posts), what="the callback took it")
        time.sleep(1.0)  # a few delivery rounds: a delivered reply is not posted again
    finally:
        daemon.stop()
        callback.close()
    key = posted.json()["reply"].removeprefix("/replies/")
    assert [(s, k) for s, k, _ in callback.posts] == [(503, key), (200, key)]
    assert callback.posts[-1][2]["text"] == "pushed" and callback.posts[-1][2]["key"] == key
    assert (cli.home / "channels" / "hook" / "delivered" / key).exists()
