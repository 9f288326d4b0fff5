"""PostgreSQL stopped under a running `strata serve` while a call's effect runs, and started again a few seconds
later: the commit of the call's result waits for a connection (the pool's 30 s) and is made once the server is
back. The daemon neither crashes nor wedges, the call that ran is never run again, its receipt is settled (not
left `dispatched`), the next turn works and the session's chains verify. (With the server away past the pool's
wait, the turn fails with "couldn't get a connection after 30.00 sec" after about 90 s and the next turn, once the
server is back, completes with the receipt `done` or `unknown`: tried in review 29d, not kept, it takes 2 min.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._postgres import Cluster, rows, start_cluster
from tests.channels._support import write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: it is stopped and started."""
    yield from start_cluster()


def test_a_call_whose_result_commit_meets_postgres_down_for_seconds_is_committed_when_it_is_back_and_run_once(
        own_cluster: Cluster, tmp_path: Path) -> None:
    url = own_cluster.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    cli = StrataCLI(tmp_path / "home", tmp_path, store_url=url)
    cli.home.mkdir()
    write_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n')
    model = script(tmp_path / "s.json",
                   [tool_use("c0", "bash", command="touch running; sleep 3; echo c0 >> effects.log")],
                   [text("one")], [text("two")], [text("three")])
    daemon = Daemon(cli)
    client = None
    try:
        client = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = client.session_id
        client.send(type="prompt", text="first")
        wait_until((ws / "running").exists, 30, "the call running")
        own_cluster.stop()
        try:
            wait_until((ws / "effects.log").exists, 30, "the call's effect")
            time.sleep(2.0)  # the result's commit waits for a connection
        finally:
            own_cluster.start()
        first = client.wait_for("result", 60)
        client.send(type="prompt", text="second")
        second = client.wait_for("result", 60)
        client.finish()
        client = None
    finally:
        if client is not None:
            client.kill()
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr, daemon.stderr
    assert first["status"] == "completed", first  # the commit waited for the server's return
    assert second["status"] == "completed", (second, daemon.stderr)
    assert (ws / "effects.log").read_text().split() == ["c0"]
    receipts = rows(url, "SELECT call_id, status FROM receipts WHERE session_id = %s", sid)
    assert receipts == [("c0", "done")], receipts
    verified = cli.run("timeline", sid, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr

