"""The webhook channel of a real `strata serve` process against hostile clients on loopback: a flood of idle
connections (that never send a byte) neither ends the daemon, even past its file-descriptor limit, nor keeps it
from the next good request once the flood is gone; silent connections never keep out a client that sends its
request; beyond 64 requests at once (their heads read), the next gets 503 at once."""

from __future__ import annotations

import contextlib
import http.client
import os
import resource
import shutil
import socket
from pathlib import Path

import pytest

from tests.channels._support import write_config
from tests.channels.test_webhook import TOKEN, _free_port, _http
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _daemon(cli: StrataCLI, tmp_path: Path, extra: str = "") -> tuple[Daemon, int]:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("still here")])
    port = _free_port()
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\n{extra}')
    return Daemon(cli, env={"HOOK_TOKEN": TOKEN}), port


def _idle(port: int, count: int) -> list[socket.socket]:
    """Up to `count` connections that never send (fewer if the listener is gone)."""
    out: list[socket.socket] = []
    for _ in range(count):
        try:
            out.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            break
    return out


def _status(method: str, url: str, **kwargs: object) -> int:
    """The answer's status, or 0 when the connection failed (reset, refused, cut short)."""
    try:
        return _http(method, url, headers=AUTH, **kwargs).status_code  # type: ignore[arg-type]
    except (OSError, http.client.HTTPException):
        return 0


def _post(port: int, message_id: str) -> int:
    return _status("POST", f"http://127.0.0.1:{port}/messages",
                   json_body={"thread": "t1", "id": message_id, "text": "Are you there?"})


def test_an_idle_connection_flood_past_the_fd_limit_leaves_the_daemon_serving(cli: StrataCLI, tmp_path: Path) -> None:
    daemon, port = _daemon(cli, tmp_path)
    flood: list[socket.socket] = []
    try:
        try:
            used = len(os.listdir(f"/proc/{daemon.pid}/fd"))
            resource.prlimit(daemon.pid, resource.RLIMIT_NOFILE, (used + 16, used + 16))
            flood = _idle(port, 120)  # the kernel's backlog takes them all; the daemon runs out of descriptors
            log = cli.home / "logs" / "strata.log"
            wait_until(lambda: daemon.proc.poll() is not None or "webhook cannot accept" in log.read_text(),
                       what="the daemon noting it is out of descriptors")
            assert daemon.proc.poll() is None, "the daemon ended under an idle-connection flood"
        finally:
            for s in flood:
                s.close()
        wait_until(lambda: _post(port, "after-flood") == 202, what="the next good request served")
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def _holding(port: int, count: int) -> list[socket.socket]:
    """`count` requests in progress: each a whole authorised head, its body (announced) never sent."""
    out = _idle(port, count)
    for s in out:
        s.sendall(f"POST /messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n".encode())
    return out


def test_beyond_64_requests_at_once_the_next_gets_503_and_a_good_one_is_served_after(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, port = _daemon(cli, tmp_path)
    url = f"http://127.0.0.1:{port}/replies/reply-{'0' * 32}"
    flood: list[socket.socket] = []
    try:
        try:
            flood = _holding(port, 64)
            wait_until(lambda: _status("GET", url) == 503, what="a 503 beyond 64 requests")
            answer = _http("GET", url, headers=AUTH)
            assert answer.status_code == 503 and "busy" in answer.json()["error"]
        finally:
            for s in flood:
                s.close()
        wait_until(lambda: _post(port, "after-busy") == 202, what="a good request served once the flood is gone")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_silent_connections_never_keep_out_a_client_that_sends_its_request(cli: StrataCLI, tmp_path: Path) -> None:
    """A slow-headers flood: hundreds of connections that send nothing (or half a request line), kept open. A
    client with a request is served at once all the same (the connections waiting longest make room for it), and
    the flood's connections are closed, not kept for the whole request timeout."""
    daemon, port = _daemon(cli, tmp_path)
    flood: list[socket.socket] = []
    try:
        try:
            flood = _idle(port, 200)
            for s in flood[::2]:
                s.sendall(b"POST /mess")  # half a request line, then nothing
            assert _post(port, "through-the-flood") == 202
            assert _status("GET", f"http://127.0.0.1:{port}/replies/reply-{'0' * 32}") == 404  # served, none yet
            closed = 0
            for s in flood[:100]:  # the oldest ones made room for the newer: the server closed them
                s.settimeout(5)
                with contextlib.suppress(TimeoutError, ConnectionError):
                    closed += s.recv(1) == b""
            assert closed >= 90, closed
        finally:
            for s in flood:
                s.close()
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def _head(s: socket.socket) -> bytes:
    """What the server sent up to the end of its first status block (or the connection's end)."""
    got = b""
    while b"\r\n\r\n" not in got:
        try:
            chunk = s.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        got += chunk
    return got


def test_expect_100_continue_is_answered_before_the_body_only_for_a_request_that_passes_the_checks(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, port = _daemon(cli, tmp_path, "max_body_bytes = 4096\n")
    body = b'{"thread": "t1", "id": "e1", "text": "Continue?"}'
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"POST /messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                      "Expect: 100-continue\r\n\r\n".encode())
            assert _head(s).startswith(b"HTTP/1.1 100 "), "no 100 Continue before the body was sent"
            s.sendall(body)
            assert _head(s).startswith(b"HTTP/1.1 202 ")
        refusals = {401: "Authorization: Bearer wrong\r\nContent-Length: 10\r\n",
                    411: f"Authorization: Bearer {TOKEN}\r\n",
                    413: f"Authorization: Bearer {TOKEN}\r\nContent-Length: 5000\r\n"}
        for status, headers in refusals.items():
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(f"POST /messages HTTP/1.1\r\nHost: x\r\n{headers}Expect: 100-continue\r\n\r\n".encode())
                assert _head(s).startswith(f"HTTP/1.1 {status} ".encode()), status
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_a_removed_webhook_inbox_is_made_again_and_the_next_post_is_queued_and_answered(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon, port = _daemon(cli, tmp_path)
    try:
        shutil.rmtree(cli.home / "channels" / "hook" / "in")
        posted = _http("POST", f"http://127.0.0.1:{port}/messages", headers=AUTH,
                       json_body={"thread": "t1", "id": "r1", "text": "Still there?"})
        assert posted.status_code == 202, posted.text
        reply = f"http://127.0.0.1:{port}{posted.json()['reply']}"
        wait_until(lambda: _status("GET", reply) == 200, timeout=10, what="the reply")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "made again" in (cli.home / "logs" / "strata.log").read_text()
