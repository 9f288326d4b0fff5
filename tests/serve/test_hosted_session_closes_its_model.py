"""A session `strata serve` hosts on the Anthropic API model closes the model's HTTP client when it lets the session
go, while the daemon runs on: here its turn parks (the driver detached while a call was asked) and the host releases
it. Before, each hosted session (and each resume of one) left its client's pooled connection open for the life of
the daemon, or until the garbage collector found it. A real `strata serve`, a real socket client, the loopback
Messages API server, which sees the client's end of each connection."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import serving, status, wait_until
from tests.wire.conftest import TEST_KEY
from tests.wire.messages_server import MessagesServer, Reply
from tests.wire.wire_helpers import model_env, text, use

pytestmark = pytest.mark.slow

CLOSED_WITHIN_S = 5.0


def test_a_hosted_session_closes_its_api_client_when_the_host_releases_it(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with MessagesServer(api_key=TEST_KEY) as server, serving(cli, env=model_env(server)):
        server.script(Reply([text("Writing."), use("write_file", "toolu_w", path="a.txt", content="A\n")]))
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws),
                          "model": "anthropic:claude-test"})["session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        client.send(json.dumps({"type": "prompt", "id": "p", "session_id": sid, "text": "write a"}).encode() + b"\n")
        while (message := client.line()) is not None and message["type"] != "approval_request":
            pass
        assert message is not None and message["call_id"] == "toolu_w", message
        assert server.open_connections == 1  # the model's client keeps its connection for the next call

        client.close()  # the driver goes while asked: the call parks, the run ends, the host lets the session go
        wait_until(lambda: [(r["session_id"], r["phase"]) for r in status(cli)] == [(sid, "parked")],
                   what="the session to park")
        deadline = time.monotonic() + CLOSED_WITHIN_S
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.open_connections == 0, "the released session's API connection is still open"
    assert len(server.requests) == 1 and not (ws / "a.txt").exists()
