"""Watchers of a session are told when a driving client attaches, as they are told when one leaves, against a real
`strata serve` and real clients over the real socket. They got `driver_left` when the driver went, but nothing when
a new one came: a watcher that had read "nobody drives the session now: attach with role drive" could not tell the
session was driven again until its own attach was refused. Now every watcher (never the new driver itself) gets a
`driver_attached` notice; `strata attach --watch` in a terminal shows each of the two as one line (by its text, as
it shows any notice, so a client older than the kind shows it too)."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect
import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, notices_until, script, watched_session

pytestmark = pytest.mark.slow

_ATTACHED = "a driving client attached; it drives the session now"
_LEFT = "the driving client left; nobody drives the session now"


def test_every_watcher_is_told_when_a_driver_attaches_and_the_driver_is_not(cli: StrataCLI, tmp_path: Path) -> None:
    with watched_session(cli, tmp_path, [text("hello")], [text("again")]) as watched:
        sid = watched.session_id
        assert watched.driver.finish().returncode == 0
        for watcher in watched.watchers:
            assert [n["kind"] for n in notices_until(watcher, "driver_left")] == ["driver_left"]

        second = Client(cli, sid)
        for watcher in watched.watchers:
            (notice,) = notices_until(watcher, "driver_attached")
            assert (notice["session_id"], notice["level"]) == (sid, "info"), notice
            assert notice["text"].startswith(_ATTACHED), notice
        second.send(type="prompt", text="and now")
        assert second.wait_for("result")["status"] == "completed"
        assert second.finish().returncode == 0
        assert not [o for o in second.out.seen if o["type"] == "notice" and o["kind"] == "driver_attached"]
        for watcher in watched.watchers:
            assert [n["kind"] for n in notices_until(watcher, "driver_left")] == ["driver_left"]


def test_attach_watch_in_a_terminal_shows_a_driver_leaving_and_attaching_as_one_line_each(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        first = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = first.session_id
        child: pexpect.spawn = cli.spawn_pty("attach", sid, "--watch")
        child.expect(rf"attached to session {sid} \(watching\)")
        assert first.finish().returncode == 0
        child.expect(re.escape(_LEFT) + r"[^\r\n]*\r\n")
        second = Client(cli, sid)
        child.expect(re.escape(_ATTACHED) + r"[^\r\n]*\r\n")
        assert second.finish().returncode == 0
        child.expect(re.escape(_LEFT))
        child.sendline("/exit")
        child.expect(f"detached from session {sid}")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
