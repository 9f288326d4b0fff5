"""The daemon hosts a bounded number of sessions (`[daemon] max_sessions`), against a real `strata serve` over its
real Unix socket: a client creating sessions in a loop once made it host (and renew the lease of) every one. Past
the bound the session nobody uses leaves the host (resumable, hosted again on attach); when every one is in use a
new one is refused with `too_many_sessions`, and the daemon goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.channels._support import write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script, status

pytestmark = pytest.mark.slow


def _answer(client: RawClient, message: dict[str, Any]) -> dict[str, Any]:
    """The reply to `message` (pushes before it skipped)."""
    reply = client.ask(message)
    while reply.get("id") != message["id"]:
        line = client.line()
        assert line is not None, f"connection closed instead of answering {message}"
        reply = line
    return reply


def test_new_sessions_past_max_sessions_are_refused_while_each_is_in_use_and_an_unused_one_makes_room(
        cli: StrataCLI, tmp_path: Path) -> None:
    write_config(cli, "[daemon]\nmax_sessions = 2\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    new = {"type": "new_session", "workspace": str(ws), "model": model}
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=15)
        client.hello()
        first = _answer(client, {**new, "id": "n1"})["session_id"]
        second = _answer(client, {**new, "id": "n2"})["session_id"]
        for k, sid in enumerate((first, second)):
            assert _answer(client, {"type": "attach", "id": f"a{k}", "session_id": sid})["type"] == "ok"
        for k in range(5):  # every hosted session has a client: refused, each time, and nothing more is hosted
            refused = _answer(client, {**new, "id": f"x{k}"})
            assert (refused["type"], refused["code"], refused["fatal"]) == ("error", "too_many_sessions", False)
            assert "max_sessions" in refused["message"]
        assert len(status(cli)) == 2
        # Detached, the first is unused: a new session takes its place, and the first is hosted again on attach.
        assert _answer(client, {"type": "detach", "id": "d", "session_id": first})["type"] == "ok"
        third = _answer(client, {**new, "id": "n3"})
        assert third["type"] == "ok", third
        assert {row["session_id"] for row in status(cli)} == {second, third["session_id"]}
        again = _answer(client, {"type": "attach", "id": "again", "session_id": first})
        assert again["type"] == "ok", again
        assert {row["session_id"] for row in status(cli)} == {first, second}
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr


SPAM = 30


def _log_records(cli: StrataCLI) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (cli.home / "logs" / "strata.log").read_text().splitlines()]


def test_new_sessions_replacing_unused_ones_at_max_sessions_are_one_counted_log_line_not_lines_each(
        cli: StrataCLI, tmp_path: Path) -> None:
    """Each new session at the cap replaces an unused one; that used to log three info lines (one leaving, it left,
    the new one hosted) per request. Now it is one line at once, then one line of counts per interval."""
    write_config(cli, "[daemon]\nmax_sessions = 2\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    new = {"type": "new_session", "workspace": str(ws), "model": model}
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=15)
        client.hello()
        for k in range(2):
            assert _answer(client, {**new, "id": f"n{k}"})["type"] == "ok"
        before = len(_log_records(cli))
        for k in range(SPAM):
            assert _answer(client, {**new, "id": f"x{k}"})["type"] == "ok"
        assert len(status(cli)) == 2
        during = _log_records(cli)[before:]
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    churn = [r for r in during if r["event"] != "session started" and r["level"] != "debug"]
    assert len(churn) <= 2, [r["event"] for r in churn]  # the first at once, perhaps an interval's count
    replaced = [r for r in _log_records(cli) if r["event"] == "session left the host to make room for another"]
    assert sum(r.get("count", 1) for r in replaced) == SPAM, replaced  # every one counted, none lost
    assert all(r["level"] == "info" for r in replaced)


@pytest.mark.parametrize("value", ["0", "100000", '"8"'])
def test_a_bad_max_sessions_stops_serve_with_one_line_naming_the_file_and_key(cli: StrataCLI, value: str) -> None:
    write_config(cli, f"[daemon]\nmax_sessions = {value}\n")
    proc = cli.run("serve", "--foreground")
    assert proc.returncode != 0
    assert "daemon.max_sessions" in proc.stderr and "config.toml" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
