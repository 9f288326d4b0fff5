"""A flood of refused or misbehaving connections is a few log lines with counts, not one line per connection: a
real daemon process (the IPC server with the fake session side) whose slots are all attached refuses 3,000
connections, and one closes 600 that send an oversized line or too many bad ones."""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from pathlib import Path

from tests.ipc._wire import HELLO, RawClient, start_fake_daemon

FLOOD = 3000


def _bound(took: float) -> int:
    """Lines allowed for a flood that took `took` seconds: the first, one per 10 s interval, the last at the stop."""
    return 2 + int(took // 10) + 1


def _refusal_records(home: Path) -> list[dict[str, object]]:
    lines = (home / "logs" / "strata.log").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if str(r.get("event", "")).startswith(("ipc connection", "ipc client"))]


def test_a_flood_of_refused_connections_is_a_few_log_lines_that_count_every_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = start_fake_daemon(home, "--max-connections", "2")
    held = [RawClient(daemon.socket), RawClient(daemon.socket)]
    started = time.monotonic()
    try:
        for client in held:
            client.hello()
        session = held[0].ask({"type": "new_session", "id": "n", "workspace": "/w", "model": "m"})["session_id"]
        for client in held:
            assert client.ask({"type": "attach", "id": "a", "session_id": session, "role": "watch"})["type"] == "ok"
        for _ in range(FLOOD):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(str(daemon.socket))
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
            sock.close()
            assert json.loads(reply)["code"] == "too_many_connections"
        assert held[0].ask({"type": "status", "id": "s"})["type"] == "ok"  # still serving
    finally:
        for client in held:
            client.close()
        code, err = daemon.stop()
        took = time.monotonic() - started
    assert code == 0, err
    records = [r for r in _refusal_records(home) if r["event"] == "ipc connection refused"]
    assert len(records) <= _bound(took), f"{len(records)} log lines for {FLOOD} refused connections in {took:.0f} s"
    counted = sum(int(r.get("count", 1)) for r in records)  # type: ignore[call-overload]
    assert counted == FLOOD, records
    assert {r["code"] for r in records if "code" in r} == {"too_many_connections"}
    assert all(r["codes"] == {"too_many_connections": r["count"]} for r in records if "codes" in r), records


def test_a_flood_of_misbehaving_connections_is_a_few_log_lines_that_count_every_one(tmp_path: Path) -> None:
    """Connections closed for an oversized line or too many protocol errors: each is counted, a few lines say so."""
    home = tmp_path / "home"
    daemon = start_fake_daemon(home)
    flood = 600
    started = time.monotonic()
    try:
        for k in range(flood):
            client = RawClient(daemon.socket)
            if k % 10 == 0:
                client.send(HELLO + b"x" * (1024 * 1024 + 10) + b"\n")
            else:
                client.send(HELLO + b"{\n" * 8)
            assert client.closed_after()
            client.close()
    finally:
        code, err = daemon.stop()
        took = time.monotonic() - started
    assert code == 0, err
    records = [r for r in _refusal_records(home) if r["event"] == "ipc client disconnected"]
    assert len(records) <= _bound(took), f"{len(records)} log lines for {flood} misbehaving connections"
    codes: Counter[str] = Counter()
    for r in records:
        if "codes" in r:
            codes.update(r["codes"])  # type: ignore[arg-type]
        else:
            codes[str(r["code"])] += 1
    assert codes == {"it sent an oversized line": flood // 10, "too many protocol errors": flood - flood // 10}
