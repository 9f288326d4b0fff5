"""A watcher attached to a session the daemon hosts gets every committed event, in order, none skipped, also those
another process committed while the daemon held no lease. Since a session nobody drives lets its lease go,
`strata resume ID PROMPT` in another terminal may run it while the watcher stays attached; the daemon does not see
those commits as they happen, and once a driver attached there and prompted, the watcher got the daemon's next
events after a hole: the other run's prompt, its calls and its decisions were never shown to it. Now an
attachment that meets a seq past the one after its last reads the missing ones from the store first, as its replay
does. Real `strata serve`, `strata resume` and `strata attach` processes; the watcher is a raw socket client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, script, wait_until

pytestmark = pytest.mark.slow


def _events_until(watcher: RawClient, done: Any) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        line = watcher.line()
        assert line is not None, seen
        if line["type"] == "event":
            seen.append(line)
        if done(line):
            return seen


def test_a_watcher_gets_the_events_another_process_committed_while_the_daemon_held_no_lease(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")], [text("two")], [text("three")])
    daemon = Daemon(cli)
    try:
        watcher = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        watcher.hello()
        sid = watcher.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert watcher.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch", "since_seq": 1}
                           )["type"] == "ok"
        driver = Client(cli, sid)
        driver.send(type="prompt", text="first")
        assert driver.wait_for("result")["status"] == "completed"
        assert driver.finish().returncode == 0
        seen = _events_until(watcher, lambda line: line["type"] == "result")
        wait_until(lambda: next(r for r in json_lines_in_process(cli, "sessions", "--json")
                                if r["id"] == sid)["lease_owner"] is None,
                   timeout=10, what="the watched session's lease to go")
        resumed = cli.run("resume", sid, "second", "--json")  # another terminal, the watcher still attached
        assert resumed.returncode == 0, resumed.stderr
        again = Client(cli, sid)
        again.send(type="prompt", text="third")
        assert again.wait_for("result")["status"] == "completed"
        assert again.finish().returncode == 0
        seen += _events_until(watcher, lambda line: line["type"] == "result")
        watcher.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    prompts = [e["text"] for e in seen if e["kind"] == "user_message"]
    assert prompts == ["first", "second", "third"], prompts
    stored = json_lines_in_process(cli, "timeline", sid, "--json")
    assert len(seqs) == len(stored), (seqs, len(stored))
