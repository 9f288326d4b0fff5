"""Watchers of a session are told when its driving client leaves, against a real `strata serve` and real clients
over the real socket. The protocol declared a `driver_left` notice that the daemon never sent: a watcher could not
tell that the session had nobody driving it any more (and that it could attach as the driver itself) unless a call
happened to be waiting (`parked`). Now every watcher gets `driver_left` when the driver detaches, is dropped or its
connection ends; never when the session itself leaves the daemon (every attachment gets `closed` then)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, notices_until, script, watched_session

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("leave", ["detach", "kill"])
def test_every_watcher_is_told_when_the_driver_leaves(cli: StrataCLI, tmp_path: Path,
                                                      leave: Literal["detach", "kill"]) -> None:
    with watched_session(cli, tmp_path, [text("hello")]) as watched:
        driver, sid = watched.driver, watched.session_id
        if leave == "detach":
            assert driver.finish().returncode == 0
            assert not [o for o in driver.out.seen if o.get("kind") == "driver_left"]  # it knows it left
        else:
            driver.kill()
        for watcher in watched.watchers:
            (notice,) = notices_until(watcher, "driver_left")
            assert (notice["session_id"], notice["level"]) == (sid, "info"), notice
            assert "driving client left" in notice["text"], notice
        # Nobody drives it now: a watcher may take over (on another connection: a connection attaches once).
        successor = Client(cli, sid)
        assert successor.finish().returncode == 0


def test_watchers_get_no_driver_left_when_the_session_leaves_the_daemon(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        watcher = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        watcher.hello()
        assert watcher.ask({"type": "attach", "id": "w", "session_id": driver.session_id, "role": "watch"})["type"] \
            == "ok"
        watcher.send(b'{"type": "shutdown", "id": "s"}\n')
        notices = notices_until(watcher, "closed")
        assert [n["kind"] for n in notices] == ["shutting_down", "closed"], notices
        driver.collect()
        watcher.close()
        assert daemon.wait() == 0, daemon.stderr  # the drain the shutdown began ends the daemon
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
