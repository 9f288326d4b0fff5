"""A flood of refused connections is a few log lines with counts, not one line per connection: a real daemon
process (the IPC server with the fake session side) whose slots are all attached refuses 3,000 connections."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.ipc._wire import RawClient, start_fake_daemon

FLOOD = 3000


def _refusal_records(home: Path) -> list[dict[str, object]]:
    lines = (home / "logs" / "strata.log").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if str(r.get("event", "")).startswith("ipc connection")]


def test_a_flood_of_refused_connections_is_a_few_log_lines_that_count_every_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    daemon = start_fake_daemon(home, "--max-connections", "2")
    held = [RawClient(daemon.socket), RawClient(daemon.socket)]
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
    assert code == 0, err
    records = _refusal_records(home)
    assert len(records) <= 5, f"{len(records)} log lines for {FLOOD} refused connections"
    counted = sum(int(r.get("count", 1)) for r in records)  # type: ignore[call-overload]
    assert counted == FLOOD, records
    assert {r["code"] for r in records if "code" in r} == {"too_many_connections"}
    assert all(r["codes"] == {"too_many_connections": r["count"]} for r in records if "codes" in r), records
