"""PostgreSQL restarted under a running `strata serve` (an operator's `pg_ctl restart`, a failover): every
connection the daemon had is ended by the server. Once the server is back, the daemon's next turn must work: a
connection the server ended is not handed to a commit (the commit would fail, and the effect that ran before it
would be left `unknown`), and the resource locks' connection is opened again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests._postgres import Cluster, start_cluster
from tests.channels._support import write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script

pytestmark = pytest.mark.slow


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: it is restarted."""
    yield from start_cluster()


def test_a_daemon_goes_on_after_postgres_restarts_with_nothing_failed_or_unknown(
        own_cluster: Cluster, tmp_path: Path) -> None:
    url = own_cluster.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    cli = StrataCLI(tmp_path / "home", tmp_path, store_url=url)
    cli.home.mkdir()
    write_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n')
    model = script(tmp_path / "s.json", [tool_use("c0", "bash", command="echo c0 >> effects.log")], [text("one")],
                   [tool_use("c1", "bash", command="echo c1 >> effects.log")], [text("two")])
    daemon = Daemon(cli)
    try:
        client = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        client.send(type="prompt", text="first")
        first = client.wait_for("result", 30)
        assert first["status"] == "completed", first

        own_cluster.restart()

        client.send(type="prompt", text="second")
        second = client.wait_for("result", 30)
        client.finish()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert second["status"] == "completed", second
    assert (ws / "effects.log").read_text().split() == ["c0", "c1"]
    with psycopg.connect(url, autocommit=True) as conn:
        receipts = conn.execute("SELECT call_id, status FROM receipts ORDER BY call_id").fetchall()
    assert receipts == [("c0", "done"), ("c1", "done")]
    assert "Traceback" not in daemon.stderr
