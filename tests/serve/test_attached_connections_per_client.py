"""One client process cannot hold every connection slot by attaching on connection after connection, against a real
`strata serve` over real Unix sockets. Attached connections are never closed to make room, so a client that
attached 64 watchers (one per connection) used to hold all 64 places, and every other client was refused
(`too_many_connections`). Now one process may hold `Limits.max_held_per_peer` attached connections; its next attach
on another connection is refused with `too_many_attachments` (one line, the connection stays), and other clients
get in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.ipc import Limits
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, script

pytestmark = pytest.mark.slow

CAP = 16
"""Limits.max_held_per_peer's default (checked at the end)."""


def test_one_process_attaching_on_many_connections_is_capped_and_another_client_still_drives(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    sock = cli.home / "run" / "daemon.sock"
    watchers: list[RawClient] = []
    try:
        first = RawClient(sock, timeout=15)
        first.hello()
        sid = first.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        watchers.append(first)
        for k in range(CAP + 3):
            client = watchers[-1] if k == 0 else RawClient(sock, timeout=15)
            if k:
                client.hello()
                watchers.append(client)
            reply = client.ask({"type": "attach", "id": f"a{k}", "session_id": sid, "role": "watch"})
            if k < CAP:
                assert reply["type"] == "ok", (k, reply)
                continue
            assert (reply["type"], reply["code"], reply["fatal"]) == ("error", "too_many_attachments", False), reply
            assert f"pid {os.getpid()}" in reply["message"], reply
            assert client.ask({"type": "status", "id": "s"})["type"] == "ok"  # the connection goes on
        # A second attach over a connection that holds one costs no slot: allowed.
        other_sid = first.ask({"type": "new_session", "id": "n2", "workspace": str(ws), "model": model})
        assert first.ask({"type": "attach", "id": "b", "session_id": other_sid["session_id"]})["type"] == "ok"

        driver = Client(cli, sid)  # another process: it gets in and drives
        driver.send(type="prompt", text="hi")
        assert driver.wait_for("result")["status"] == "completed"
        assert driver.finish().returncode == 0
    finally:
        for client in watchers:
            client.close()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr
    assert Limits().max_held_per_peer == CAP
