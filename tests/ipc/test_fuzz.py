"""The daemon never crashes because of what a client sent: 10,000 malformed or hostile messages from a thousand
connections (random bytes, huge lines, wrong types, unknown versions, deep nesting, half-closed and reset sockets,
clients that never read, connect-and-drop floods) against a real daemon process leave it serving, with its
memory and descriptors back near where they started, and none of what was sent in its log."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.ipc._wire import HELLO, FakeDaemon, RawClient, start_fake_daemon

CANARY = "CANARY-9f2c41"
TARGET_MESSAGES = 10_000
REQUEST_TYPES = ["hello", "new_session", "attach", "prompt", "approve", "deny", "interrupt", "detach", "status",
                 "shutdown"]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 2**63, 1.5, -1e308, 10**30])
    if kind == 3:
        return rng.choice(["", CANARY, "\u202e" + CANARY, "x" * rng.randrange(5000), "\x00\x1b[2J", "é" * 50])
    if kind == 4:
        return rng.choice(REQUEST_TYPES)
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["id", "type", "v", "session_id", "text", CANARY]): _random_value(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def _bad_line(rng: random.Random) -> bytes:
    """One line the daemon must answer with an error (or close on), never crash on."""
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))).replace(b"\n", b"") or b"\x00"
    if kind == 1:
        return json.dumps(_random_value(rng)).encode() if rng.random() < 0.5 else b'"' + CANARY.encode() + b'"'
    if kind == 2:
        return json.dumps({"type": f"{CANARY}-{rng.randrange(1000)}", "id": CANARY}).encode()
    if kind == 3:  # a known type with wrong or missing fields
        message = {"type": rng.choice(REQUEST_TYPES[1:]), "id": rng.choice(["a", CANARY, 5, None, "x" * 200])}
        for field in rng.sample(["session_id", "text", "role", "call_id", "workspace", "model", CANARY], 3):
            message[field] = _random_value(rng)
        return json.dumps(message).encode()
    if kind == 4:  # an unknown version on a request
        return json.dumps({"type": "status", "id": "v", "v": rng.choice([0, 2, 99, "1", None, 1.0, [1]])}).encode()
    if kind == 5:
        depth = rng.choice([300, 5000, 100_000])
        return b"[" * depth + b"]" * depth if rng.random() < 0.5 else b'{"a":' * depth + b"1" + b"}" * depth
    if kind == 6:
        return b'{"type": "prompt", "id": "s", "session_id": "s", "text": "\\ud800' + CANARY.encode() + b'"}'
    if kind == 7:
        return b'{"type": "status", "id": "n", "x": NaN}'
    return json.dumps({"type": "hello", "id": CANARY, "v": 1}).encode()  # a second hello


def _good_line(rng: random.Random, i: int) -> bytes:
    return json.dumps(rng.choice([
        {"type": "status", "id": f"g{i}"},
        {"type": "detach", "id": f"g{i}", "session_id": CANARY},
        {"type": "prompt", "id": f"g{i}", "session_id": "s404", "text": CANARY * 10},
    ])).encode()


class Storm:
    def __init__(self, daemon: FakeDaemon, seed: int) -> None:
        self.daemon = daemon
        self.seed = seed
        self.sent = 0
        self.lock = threading.Lock()
        self.problems: list[str] = []

    def count(self, n: int) -> None:
        with self.lock:
            self.sent += n

    def connect(self) -> RawClient:
        return RawClient(self.daemon.socket, timeout=15)

    def run_one(self, k: int) -> None:
        rng = random.Random(self.seed * 100_003 + k)
        plans: list[tuple[float, Callable[[random.Random], None]]] = [
            (0.30, self.garbage), (0.25, self.mixed), (0.10, self.before_hello), (0.08, self.bad_version),
            (0.08, self.half_closed), (0.12, self.drop), (0.005, self.huge), (0.003, self.never_reads),
            (0.062, self.garbage)]
        pick = rng.random()
        plan = plans[-1][1]
        for weight, candidate in plans:
            pick -= weight
            if pick <= 0:
                plan = candidate
                break
        try:
            plan(rng)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon closed a misbehaving connection while lines were still being sent
        except Exception as exc:
            self.problems.append(f"{plan.__name__}: {type(exc).__name__}: {exc}")

    def _replies_until_closed(self, client: RawClient) -> list[dict[str, Any]]:
        replies = []
        while (reply := client.line()) is not None:
            replies.append(reply)
        return replies

    def garbage(self, rng: random.Random) -> None:
        """Eight or more bad lines: each answered with an error, then `too_many_errors` and EOF."""
        client = self.connect()
        try:
            client.hello()
            lines = [_bad_line(rng) for _ in range(rng.randrange(8, 14))]
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for line in lines:
                    client.send(line + b"\n")
                    self.count(1)
            replies = self._replies_until_closed(client)
            if not any(r.get("fatal") for r in replies):
                self.problems.append(f"garbage: not closed after {len(lines)} bad lines: {replies[-2:]}")
            if any(r.get("type") != "error" for r in replies):
                self.problems.append("garbage: a bad line was answered with something else than an error")
        finally:
            client.close()

    def mixed(self, rng: random.Random) -> None:
        """Good requests with at most seven bad lines among them: exactly one reply per line, in order."""
        client = self.connect()
        try:
            client.hello()
            lines = [_good_line(rng, i) for i in range(rng.randrange(10, 40))]
            for _ in range(rng.randrange(0, 8)):
                line = _bad_line(rng)
                if line.startswith(b"[" * 300) or line.startswith(b'{"a":' * 300):
                    line = b"{}"  # keep this plan's replies countable: nesting is exercised by `garbage`
                lines.insert(rng.randrange(len(lines) + 1), line)
            client.send(b"\n".join(lines) + b"\n")
            self.count(len(lines))
            replies = [client.line() for _ in lines]
            if any(r is None for r in replies):
                self.problems.append(f"mixed: the connection closed before {len(lines)} replies")
            good_ids = [json.loads(line)["id"] for line in lines if line.startswith(b'{"type": ') and b'"g' in line
                        and json.loads(line).get("id", "").startswith("g")]
            replied_ids = [r["id"] for r in replies if r and isinstance(r.get("id"), str) and r["id"].startswith("g")]
            if replied_ids != good_ids:
                self.problems.append("mixed: replies do not match the good requests one for one")
        finally:
            client.close()

    def before_hello(self, rng: random.Random) -> None:
        client = self.connect()
        try:
            line = _bad_line(rng)
            if b'"hello"' in line:
                line = b'{"type": "status", "id": "early"}'  # a good hello is no misbehaviour before the hello
            client.send(line + b"\n")
            self.count(1)
            replies = self._replies_until_closed(client)
            if len(replies) != 1 or not replies[0].get("fatal"):
                self.problems.append(f"before_hello: {replies}")
        finally:
            client.close()

    def bad_version(self, rng: random.Random) -> None:
        client = self.connect()
        try:
            version = rng.choice([0, 2, 3, 255, -1, "1", None, 1.5, [1], {"v": 1}, 2**70])
            client.send(json.dumps({"v": version, "type": "hello", "id": "h"}).encode() + b"\n")
            self.count(1)
            replies = self._replies_until_closed(client)
            if [r.get("code") for r in replies] != ["bad_version"] or replies[0].get("versions") != [1]:
                self.problems.append(f"bad_version: {replies}")
        finally:
            client.close()

    def half_closed(self, rng: random.Random) -> None:
        client = self.connect()
        try:
            client.send(HELLO + b'{"type": "status", "id": "half", "v": ' + CANARY.encode()[: rng.randrange(1, 8)])
            self.count(2)
            client.sock.shutdown(socket.SHUT_WR)
            replies = self._replies_until_closed(client)
            if [r.get("type") for r in replies] != ["hello_ok"]:
                self.problems.append(f"half_closed: {replies}")
        finally:
            client.close()

    def drop(self, rng: random.Random) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(15)
        sock.connect(os.fsencode(self.daemon.socket))
        if rng.random() < 0.5:
            sock.send(HELLO if rng.random() < 0.5 else _bad_line(rng)[:50])
            self.count(1)
        if rng.random() < 0.5:  # close with a reset, not a FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def huge(self, rng: random.Random) -> None:
        client = self.connect()
        try:
            client.hello()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                client.send(b'{"type": "prompt", "text": "' + CANARY.encode() * (1024 * 1024 // len(CANARY) + 10))
                self.count(1)
            replies = self._replies_until_closed(client)
            if [r.get("code") for r in replies] != ["too_large"]:
                self.problems.append(f"huge: {[r.get('code') for r in replies]}")
        finally:
            client.close()

    def never_reads(self, rng: random.Random) -> None:
        """Drives a session whose turn pushes 8 MB, reads nothing, and is disconnected by the daemon."""
        client = self.connect()
        try:
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            client.hello()
            session = client.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
            client.ask({"type": "attach", "id": "a", "session_id": session})
            client.send(json.dumps({"type": "prompt", "id": "p", "session_id": session,
                                    "text": "flood:160:50000"}).encode() + b"\n")
            self.count(4)
            time.sleep(0.5)
        finally:
            client.close()


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _served(daemon: FakeDaemon) -> None:
    """A well-behaved client's whole exchange works: hello, a session, a prompt and its approval request."""
    client = RawClient(daemon.socket)
    try:
        assert client.hello()["pid"] == daemon.pid
        session = client.ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": session})["role"] == "drive"
        client.send(json.dumps({"type": "prompt", "id": "p", "session_id": session, "text": "ask"}).encode() + b"\n")
        types = [client.line()["type"] for _ in range(3)]  # type: ignore[index]
        assert sorted(types) == ["approval_request", "event", "ok"], types
    finally:
        client.close()


def test_ten_thousand_hostile_messages_leave_the_daemon_serving(tmp_path: Path) -> None:
    """After 10,000 hostile messages the daemon process is alive, answers a well-behaved client, has given back
    its connections' memory and descriptors, and has written none of what it was sent to its log."""
    home = tmp_path / "home"
    daemon = start_fake_daemon(home)
    try:
        _served(daemon)
        time.sleep(0.3)
        rss_before, fds_before = daemon.rss_kib(), _fds(daemon.pid)
        storm = Storm(daemon, seed=20261203)
        started = time.monotonic()
        k = 0
        with ThreadPoolExecutor(max_workers=8) as pool:
            while storm.sent < TARGET_MESSAGES:
                list(pool.map(storm.run_one, range(k, k + 64)))
                k += 64
                assert daemon.proc.poll() is None, "the daemon died"
        elapsed = time.monotonic() - started
        assert storm.problems == [], storm.problems[:10]
        assert storm.sent >= TARGET_MESSAGES and k >= 500, (storm.sent, k)
        _served(daemon)
        deadline = time.monotonic() + 10
        while _fds(daemon.pid) > fds_before + 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _fds(daemon.pid) <= fds_before + 2, "connections left open"
        growth_mib = (daemon.rss_kib() - rss_before) / 1024
        assert growth_mib < 64, f"RSS grew by {growth_mib:.0f} MiB"
        print(f"{storm.sent} messages on {k} connections in {elapsed:.1f} s; RSS +{growth_mib:.1f} MiB")
    finally:
        code, err = daemon.stop()
    assert code == 0, err
    assert "Traceback" not in err
    log = (home / "logs" / "strata.log").read_text(encoding="utf-8", errors="replace")
    assert "ipc listening" in log
    assert CANARY not in log and CANARY not in err, "a client's bytes reached the daemon's log"
