"""Reply delivery to a webhook's callback against a broken or hostile remote, with a real `strata serve` and a
raw TCP server on loopback standing in for the remote service: an answer that is not HTTP at all is a failed
delivery, retried under the same key until the callback takes it; a reply file gone between the outbox's listing
and its reading is skipped. The daemon goes on in both cases."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.channels._support import write_config
from tests.channels.test_webhook import TOKEN, _free_port, _http
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until

pytestmark = pytest.mark.slow


class _RawCallback:
    """Answers the first `garbage` connections with bytes that are no HTTP, the later ones with 200; keeps the
    Idempotency-Key of each request."""

    def __init__(self, garbage: int, query: str = "") -> None:
        self.keys: list[tuple[str, str]] = []  # (answer kind, key)
        self.targets: list[str] = []  # each request's target (path and query)
        self._garbage = garbage
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}/hook{query}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    request += chunk
                head = request.split(b"\r\n\r\n", 1)[0].decode("latin-1")
                self.targets.append(head.split(" ")[1] if head.count(" ") >= 2 else "")
                key = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                            if line.lower().startswith("idempotency-key:")), "")
                if len(self.keys) < self._garbage:
                    self.keys.append(("garbage", key))
                    conn.sendall(b"\x00\xffSSH-2.0-not-http\r\n\r\n")
                else:
                    self.keys.append(("ok", key))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._server.close()


def _daemon(cli: StrataCLI, tmp_path: Path, callback: str) -> tuple[Daemon, int]:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("pushed")])
    port = _free_port()
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = {port}\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{ws}"\nmodel = "{model}"\ncallback_url = "{callback}"\n')
    return Daemon(cli, env={"HOOK_TOKEN": TOKEN}), port


@contextmanager
def _served(cli: StrataCLI, tmp_path: Path, *, garbage: int = 0,
            query: str = "") -> Iterator[tuple[Daemon, int, _RawCallback]]:
    """A daemon with a webhook whose callback is a `_RawCallback`; both stopped whatever fails."""
    callback = _RawCallback(garbage=garbage, query=query)
    try:
        daemon, port = _daemon(cli, tmp_path, callback.url)
    except BaseException:
        callback.close()
        raise
    try:
        yield daemon, port, callback
    finally:
        daemon.stop()
        callback.close()


def _post(port: int) -> str:
    """One message POSTed to the webhook; the key of its reply."""
    posted = _http("POST", f"http://127.0.0.1:{port}/messages", headers={"Authorization": f"Bearer {TOKEN}"},
                   json_body={"thread": "t1", "id": "w1", "text": "Any news?"})
    assert posted.status_code == 202
    return str(posted.json()["reply"]).removeprefix("/replies/")


def test_a_callback_answering_non_http_bytes_is_a_failed_delivery_retried_under_the_same_key(
        cli: StrataCLI, tmp_path: Path) -> None:
    with _served(cli, tmp_path, garbage=2) as (daemon, port, callback):
        key = _post(port)
        wait_until(lambda: daemon.proc.poll() is not None or ("ok" in {kind for kind, _ in callback.keys}),
                   what="the callback answered properly at last")
        assert daemon.proc.poll() is None, "a callback answering non-HTTP bytes ended the daemon"
    assert daemon.proc.returncode == 0, daemon.stderr
    assert callback.keys == [("garbage", key), ("garbage", key), ("ok", key)]
    assert (cli.home / "channels" / "hook" / "delivered" / key).exists()


def test_a_reply_file_gone_while_the_outbox_is_listed_is_skipped(cli: StrataCLI, tmp_path: Path) -> None:
    """A name the listing finds whose file is gone when it is read (a dangling link is such a name, for good)."""
    outbox = cli.home / "channels" / "hook" / "out"
    outbox.mkdir(parents=True)
    os.symlink(tmp_path / "gone.json", outbox / f"reply-{'0' * 32}.json")
    with _served(cli, tmp_path) as (daemon, port, callback):
        time.sleep(0.5)  # a few delivery rounds over the outbox
        assert daemon.proc.poll() is None, "a reply file gone while the outbox was listed ended the daemon"
        key = _post(port)
        wait_until(lambda: ("ok", key) in callback.keys, what="the good reply delivered")
    assert daemon.proc.returncode == 0, daemon.stderr
    assert [k for _, k in callback.keys] == [key]


def test_a_removed_delivered_folder_is_made_again_and_a_reply_is_not_posted_again_and_again(
        cli: StrataCLI, tmp_path: Path) -> None:
    delivered = cli.home / "channels" / "hook" / "delivered"
    with _served(cli, tmp_path) as (daemon, port, callback):
        shutil.rmtree(delivered)
        key = _post(port)
        wait_until(lambda: (delivered / key).exists() or len(callback.keys) > 3, timeout=10,
                   what="the delivery recorded in a delivered/ made again")
        time.sleep(1.0)  # a few delivery rounds: a delivered reply is not posted again
    assert daemon.proc.returncode == 0, daemon.stderr
    assert callback.keys == [("ok", key)]
    assert (delivered / key).exists()


def test_a_folder_named_like_a_reply_in_the_outbox_does_not_hold_up_delivery(cli: StrataCLI, tmp_path: Path) -> None:
    """Delivery goes oldest first and stops at a failure; a folder of a reply's name, the oldest in the outbox,
    used to fail every round (backing off to 30 s), so no reply behind it was ever posted."""
    outbox = cli.home / "channels" / "hook" / "out"
    (outbox / f"reply-{'0' * 32}.json").mkdir(parents=True)
    with _served(cli, tmp_path) as (daemon, port, callback):
        key = _post(port)
        wait_until(lambda: ("ok", key) in callback.keys, what="the reply behind the folder delivered")
    assert daemon.proc.returncode == 0, daemon.stderr
    assert [k for _, k in callback.keys] == [key]


def test_the_callback_urls_query_is_sent_with_each_delivery(cli: StrataCLI, tmp_path: Path) -> None:
    """A callback that takes its token in the query gets it (the query used to be dropped: only the path went); a
    failed delivery's log line does not carry the URL."""
    with _served(cli, tmp_path, garbage=1, query="?token=fake-callback-token&v=1") as (daemon, port, callback):
        key = _post(port)
        wait_until(lambda: ("ok", key) in callback.keys, what="the reply delivered")
    assert daemon.proc.returncode == 0, daemon.stderr
    assert callback.targets == ["/hook?token=fake-callback-token&v=1"] * 2
    logged = (cli.home / "logs" / "strata.log").read_text()
    assert "reply not delivered to the callback" in logged
    assert "fake-callback-token" not in logged and "fake-callback-token" not in daemon.stderr
