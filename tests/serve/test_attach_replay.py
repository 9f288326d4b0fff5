"""Replay and streamed text over the real socket: `strata serve` and `strata attach --json` processes. A client
gets every committed event of its session exactly once and in order (from seq 1 by default), however late it
attaches and while the session commits; a replay larger than a client's 4 MiB outbox arrives whole; the model's
text arrives as `text_delta` lines before the message that commits it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import bash_mark, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, allow_in_user_config, script

pytestmark = pytest.mark.slow


def _ended(line: dict[str, object]) -> bool:
    return line["type"] == "event" and line["kind"] == "session_ended"


def _seqs(client: Client) -> list[int]:
    return [e["seq"] for e in client.events()]


def test_attach_json_of_a_new_session_prints_every_event_from_session_started_and_streams_text_before_its_message(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello "), text("from the daemon")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        driver.send(type="prompt", text="greet")
        driver.wait_for("result")
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    events = driver.events()
    assert events[0]["kind"] == "session_started" and events[0]["seq"] == 1
    assert _seqs(driver) == list(range(1, len(events) + 1))
    seen = driver.out.seen
    deltas = [o for o in seen if o["type"] == "text_delta"]
    assert [(d["text"], d["attempt"], d["offset"], d["session_id"]) for d in deltas] == [
        ("hello ", 1, 0, driver.session_id), ("from the daemon", 1, 6, driver.session_id)]
    message = next(i for i, o in enumerate(seen) if o["type"] == "event" and o["kind"] == "assistant_message")
    assert all(seen.index(d) < message for d in deltas)
    assert daemon.proc.returncode == 0, daemon.stderr


def test_clients_attaching_while_a_session_commits_get_every_event_once_in_order(
        cli: StrataCLI, tmp_path: Path) -> None:
    """Watchers start while the driver's turn commits a call every few tens of milliseconds: each prints the
    session's events from seq 1, the same as the driver's, without a gap or a repeat at the point it attached."""
    ws = tmp_path / "ws"
    ws.mkdir()
    allow_in_user_config(cli, "bash")
    model = script(tmp_path / "s.json", *[[bash_mark(f"b{k}", sleep_before=0.05)] for k in range(30)],
                   [text("all marked")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="mark them")
        watchers = []
        for k in (2, 12, 22):
            driver.out.wait_for(lambda o, k=k: o["type"] == "event" and o["kind"] == "call_result"  # type: ignore[misc]
                                and o["call_id"] == f"b{k}", 60, f"the result of b{k}")
            watchers.append(Client(cli, sid, "--watch"))
        result = driver.wait_for("result")
        assert result["status"] == "completed", result
        last = driver.events()[-1]["seq"]
        for watcher in watchers:  # the last may have attached after the turn ended: it waits for no result
            watcher.wait_for("event", seq=last)
            assert watcher.finish().returncode == 0
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert _seqs(driver) == list(range(1, len(driver.events()) + 1))
    for watcher in watchers:
        assert watcher.events() == driver.events()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_a_replay_larger_than_the_client_outbox_arrives_whole_and_the_client_stays_attached(
        cli: StrataCLI, tmp_path: Path) -> None:
    """About 6 MB of committed events (a model that writes 600 KB of text a turn) replayed to a client whose
    outbox holds 4 MiB: the replay waits for the client instead of overflowing it. The session is recorded by
    `strata run` before the daemon starts: a client attached while it ran would take the same 6 MB live, where a
    client that falls 4 MiB behind is disconnected by design (a loaded machine made that client the slow one)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    big = "the model says a lot. " * 28_000  # ~600 KB
    model = script(tmp_path / "s.json",
                   *[[text(f"{k}: {big}"), tool_use(f"r{k}", "read_file", path="a.txt")] for k in range(10)],
                   [text("done")])
    done = cli.run("run", "--model", model, "--workspace", str(ws), "talk", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = cli.run("sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    sid = json.loads(listed.stdout.splitlines()[0])["id"]
    daemon = Daemon(cli)
    try:
        late = Client(cli, sid, "--watch")
        late.out.wait_for(_ended, 120, "session_ended")
        assert late.finish().returncode == 0
        again = Client(cli, sid, "--watch")
        again.out.wait_for(_ended, 120, "session_ended")
        assert again.finish().returncode == 0
    finally:
        daemon.stop()
    last = late.events()[-1]["seq"]
    assert _seqs(late) == list(range(1, last + 1))
    assert again.events() == late.events()
    assert sum(len(e.get("content", [{}])[0].get("text", "")) for e in late.events()
               if e["kind"] == "batch_proposed") > 5_000_000
    assert not [o for o in late.out.seen if o["type"] == "notice" and o.get("kind") == "dropped"]
    assert daemon.proc.returncode == 0, daemon.stderr
