"""A daemon stopped (SIGSTOP: a debugger, a frozen VM, a long swap storm) for longer than its timeouts, then
continued, keeps the clients that did nothing wrong: its timers ran on while it could not run, so a deadline that
passed meanwhile is no proof the client failed. A real daemon process (the IPC server with the fake session side)
and raw clients on its socket."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from tests.ipc._wire import RawClient, start_fake_daemon

EVENTS = 30
STOPPED_S = 2.0
"""How long the daemon stays stopped: twice each timeout the tests set (1 s), so every deadline a client's timer
had running passes while the daemon cannot run."""


def test_a_reading_client_whose_write_was_pending_when_the_daemon_stopped_keeps_its_connection(
        tmp_path: Path) -> None:
    """A watcher reading 3 MB of events steadily, a little at a time, while the daemon stops for 2 s (its write
    timeout is 1 s) gets every event: the write that waited across the stop is not taken for a client that
    does not read."""
    daemon = start_fake_daemon(tmp_path / "home", "--send-timeout", "1")
    client = RawClient(daemon.socket, timeout=30)
    try:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        client.hello()
        session = client.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
        client.ask({"type": "attach", "id": "a", "session_id": session})
        client.send(json.dumps({"type": "prompt", "id": "p", "session_id": session,
                                "text": f"flood:{EVENTS}:100000"}).encode() + b"\n")
        seen: dict[str, Any] = {"events": 0, "end": None}

        def read() -> None:
            buffer = b""
            while seen["events"] < EVENTS:
                try:
                    chunk = client.sock.recv(16384)
                except OSError as exc:
                    seen["end"] = repr(exc)
                    return
                if not chunk:
                    seen["end"] = "the daemon closed the connection"
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if json.loads(line)["type"] == "event":
                        seen["events"] += 1
                time.sleep(0.01)  # a slow reader, never a stopped one

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 10
        while seen["events"] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(daemon.pid, signal.SIGSTOP)
        time.sleep(STOPPED_S)
        os.kill(daemon.pid, signal.SIGCONT)
        reader.join(30)
        assert (seen["events"], seen["end"]) == (EVENTS, None), seen
        assert client.ask({"type": "status", "id": "s"})["type"] == "ok"
    finally:
        client.close()
        code, err = daemon.stop()
    assert code == 0, err


def test_a_request_sent_while_the_daemon_was_stopped_is_answered_not_taken_for_idleness(tmp_path: Path) -> None:
    """An idle client (attached to nothing; the idle timeout is 1 s) sends a request while the daemon is stopped
    for 2 s: when it continues, the request is answered, not met with `idle_timeout`."""
    daemon = start_fake_daemon(tmp_path / "home", "--idle-timeout", "1")
    client = RawClient(daemon.socket, timeout=30)
    try:
        client.hello()
        os.kill(daemon.pid, signal.SIGSTOP)
        time.sleep(0.3)
        client.send(b'{"type": "status", "id": "during"}\n')
        time.sleep(STOPPED_S)
        os.kill(daemon.pid, signal.SIGCONT)
        reply = client.line()
        assert reply is not None and (reply["type"], reply["id"]) == ("ok", "during"), reply
    finally:
        client.close()
        code, err = daemon.stop()
    assert code == 0, err


def test_a_hello_sent_while_the_daemon_was_stopped_is_answered_not_taken_for_silence(tmp_path: Path) -> None:
    """A client the daemon accepted just before it stopped says hello during a 2 s stop (the hello timeout is
    1 s): when the daemon continues, the hello is answered, not met with `hello_timeout`."""
    daemon = start_fake_daemon(tmp_path / "home", "--hello-timeout", "1")
    client = RawClient(daemon.socket, timeout=30)
    try:
        time.sleep(0.3)  # accepted: its hello deadline runs
        os.kill(daemon.pid, signal.SIGSTOP)
        client.send(b'{"v": 1, "type": "hello", "id": "h"}\n')
        time.sleep(STOPPED_S)
        os.kill(daemon.pid, signal.SIGCONT)
        reply = client.line()
        assert reply is not None and reply["type"] == "hello_ok", reply
        assert client.ask({"type": "status", "id": "s"})["type"] == "ok"
    finally:
        client.close()
        code, err = daemon.stop()
    assert code == 0, err
