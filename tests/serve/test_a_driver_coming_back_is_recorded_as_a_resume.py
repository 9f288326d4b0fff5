"""What a driver attaching after the daemon let the session's lease go leaves in the session's log, against a real
`strata serve` and real clients over the real socket (agent/ipc/PROTOCOL.md, "Sessions and leases"): it takes the
lease back, which is a resume, so one `session_resumed` event is committed even when the driver only looks and
detaches without a prompt; a watcher takes no lease and commits nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, lease_owner, script, wait_until

pytestmark = pytest.mark.slow


def _kinds(cli: StrataCLI, sid: str) -> list[str]:
    """The kinds of the session's committed events, in order (`strata export ID --format jsonl`)."""
    return [e["kind"] for e in json_lines_in_process(cli, "export", sid, "--format", "jsonl") if e["type"] == "event"]


def test_a_driver_that_only_looks_after_the_release_is_recorded_as_one_resume_and_a_watcher_as_none(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")])
    daemon = Daemon(cli)
    try:
        first = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = first.session_id
        first.send(type="prompt", text="hi")
        assert first.wait_for("result")["status"] == "completed"
        assert first.finish().returncode == 0
        wait_until(lambda: lease_owner(cli, sid) is None, timeout=10, what="the lease to be let go")
        before = _kinds(cli, sid)

        watcher = Client(cli, sid, "--watch")
        assert watcher.finish().returncode == 0
        assert _kinds(cli, sid) == before  # a watcher takes no lease: nothing recorded

        looker = Client(cli, sid)  # a driver that only looks
        assert lease_owner(cli, sid) is not None
        assert looker.finish().returncode == 0
        assert _kinds(cli, sid) == [*before, "session_resumed"]
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
