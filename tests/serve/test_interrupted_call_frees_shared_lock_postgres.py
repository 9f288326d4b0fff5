"""Two workers on one PostgreSQL database (two homes, as two machines have). Worker A's call holds the workspace's
resource key (`shell:<workspace>`, also an advisory lock on the database) and is interrupted by its driver: the
call stops, and its key must be free for worker B's call, not held by A's connection until A's daemon exits
(README: the locks are held while a call runs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests._postgres import Cluster, rows
from tests.channels._support import write_config
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script, wait_until

pytestmark = pytest.mark.slow


def test_a_call_interrupted_in_one_worker_leaves_its_key_free_for_another_workers_call(
        postgres_cluster: Cluster, tmp_path: Path) -> None:
    url = postgres_cluster.new_database()
    ws = tmp_path / "ws"
    ws.mkdir()
    config = '[[policy.rules]]\ntool = "bash"\naction = "allow"\n\n[daemon]\nenable = ["bash"]\n'
    a = StrataCLI(tmp_path / "home-a", tmp_path, store_url=url)
    b = StrataCLI(tmp_path / "home-b", tmp_path, store_url=url)
    for cli in (a, b):
        cli.home.mkdir()
        write_config(cli, config)
    made = a.run("sessions")
    assert made.returncode == 0, made.stderr
    shutil.copy2(a.home / "chain.key", b.home / "chain.key")
    slow = script(tmp_path / "a.json", [tool_use("c0", "bash", command="touch running; sleep 60")], [text("a")])
    quick = script(tmp_path / "b.json", [tool_use("c1", "bash", command="echo c1 >> effects.log")], [text("b")])

    daemon = Daemon(a)
    client = None
    try:
        client = Client(a, "--new", "--workspace", str(ws), "--model", slow)
        client.send(type="prompt", text="go")
        wait_until((ws / "running").exists, 30, "worker A's call running")
        client.send(type="interrupt")
        stopped = client.wait_for("result", 30)
        assert stopped["status"] == "interrupted", stopped

        ran = b.run("run", "--model", quick, "--workspace", str(ws), "--json", "go", timeout=90)
    finally:
        if client is not None:
            client.kill()
        daemon.stop()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "resource busy" not in ran.stdout, ran.stdout
    assert (ws / "effects.log").read_text().split() == ["c1"]
    assert rows(url, "SELECT status FROM receipts WHERE call_id = 'c1'") == [("done",)]
