"""Acceptance 5 against the real daemon: the IPC layer's own fuzz test (tests/ipc/test_fuzz.py) sends 10,000
hostile messages to a daemon with a fake session side; here a short burst of the same kinds, plus requests aimed
at a real hosted session that the session side must refuse, leaves `strata serve` serving: it answers `status`,
and a session whose approval the burst tried to forge completes when its own driver answers."""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path

import pytest

from tests.cli._helpers import bash_mark, effect_counts, marker, text
from tests.conftest import StrataCLI
from tests.ipc._wire import HELLO, RawClient
from tests.ipc.test_fuzz import _bad_line
from tests.serve._procs import Client, Daemon, script, status

pytestmark = pytest.mark.slow

BURST_CONNECTIONS = 60


def _session_side_attacks(sid: str, call_id: str, ws: Path) -> list[dict[str, object]]:
    """Well-formed requests the daemon's session side must refuse without harm."""
    return [
        {"type": "attach", "id": "a1", "session_id": sid},  # a second driver
        {"type": "attach", "id": "a2", "session_id": "no-such-session"},
        {"type": "prompt", "id": "p1", "session_id": sid, "text": "not attached"},
        {"type": "approve", "id": "ap", "session_id": sid, "call_id": call_id, "args_sha256": "0" * 64,
         "plan_digest": "forged"},
        {"type": "deny", "id": "dn", "session_id": sid, "call_id": call_id},
        {"type": "interrupt", "id": "in", "session_id": sid},
        {"type": "detach", "id": "de", "session_id": sid},
        {"type": "new_session", "id": "n1", "workspace": "relative/dir", "model": "script:x.json"},
        {"type": "new_session", "id": "n2", "workspace": str(ws / "missing"), "model": "script:/nope.json"},
        {"type": "new_session", "id": "n3", "workspace": str(ws), "model": "nonsense:model"},
    ]


def test_a_burst_of_hostile_messages_leaves_the_real_daemon_serving_and_its_sessions_undisturbed(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1")], [text("done")])
    daemon = Daemon(cli)
    sock = cli.home / "run" / "daemon.sock"
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="mark it")
        driver.wait_for("approval_request", call_id="b1")

        rng = random.Random(10)
        sent = 0
        for k in range(BURST_CONNECTIONS):
            client = RawClient(sock, timeout=15)
            if k % 6 == 0:  # a request before the hello: refused and closed
                client.send(b'{"type": "status", "id": "s"}\n')
            elif k % 6 == 1:  # a line over the cap
                client.send(HELLO + b"x" * (1024 * 1024 + 10) + b"\n")
            elif k % 6 == 2:  # half-closed mid-line
                client.send(HELLO + b'{"type": "status", "id"')
                client.sock.shutdown(socket.SHUT_WR)
            elif k % 6 == 3:  # an unknown version
                client.send(b'{"v": 7, "type": "hello", "id": "h"}\n')
            else:
                client.hello()
                for _ in range(7):
                    client.send(_bad_line(rng) + b"\n")
                sent += 7
            sent += 1
            if k % 6 in (0, 1, 2, 3):
                assert client.closed_after()
            client.sock.close()

        attacker = RawClient(sock, timeout=15)
        attacker.hello()
        replies = {m["id"]: attacker.ask(m) for m in _session_side_attacks(sid, "b1", ws)}
        attacker.sock.close()
        assert {k: r["type"] for k, r in replies.items()} == dict.fromkeys(replies, "error"), replies
        assert replies["a1"]["code"] == "not_driver" and replies["a2"]["code"] == "unknown_session"
        assert {replies[k]["code"] for k in ("p1", "ap", "dn", "in", "de")} == {"not_attached"}
        assert all(r["code"] == "refused" for k, r in replies.items() if k.startswith("n")), replies

        # Still serving: status answers, and nothing was approved by the forged requests.
        (row,) = status(cli)
        assert [(w["call_id"], w["how"]) for w in row["waiting"]] == [("b1", "asking")]
        assert effect_counts(ws) == {}
        driver.send(type="approve", call_id="b1")
        result = driver.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0)
        assert driver.finish().returncode == 0
        assert sent >= 200
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert effect_counts(ws) == {marker("b1"): 1}
    assert "Traceback" not in daemon.stderr
    log = (cli.home / "logs" / "strata.log").read_text()
    assert '"level": "error"' not in log, [json.loads(x)["event"] for x in log.splitlines() if '"error"' in x]
