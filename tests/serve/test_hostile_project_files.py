"""A workspace whose project config is not a regular file (a FIFO, or a symlink to /dev/zero, as a cloned repo can
hold), named in a `new_session` request to a real `strata serve`: the request gets one clear error reply, the same
connection goes on, and the daemon still stops cleanly. Reading such a file used to block the request for ever
(a FIFO: the daemon could then not even drain) or read without end (/dev/zero)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, script

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_project_config_that_is_no_regular_file_is_refused_in_one_reply(cli: StrataCLI, tmp_path: Path,
                                                                          kind: str) -> None:
    ws = tmp_path / "ws"
    (ws / ".strata").mkdir(parents=True)
    config = ws / ".strata" / "config.toml"
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero")
    model = script(tmp_path / "s.json", [text("hello")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        reply = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})
        assert reply["type"] == "error" and reply["fatal"] is False, reply
        assert "not a regular file" in reply["message"] and "\n" not in reply["message"], reply
        assert client.ask({"type": "status", "id": "s"})["type"] == "ok"
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_strata_run_in_such_a_workspace_says_so_in_one_line(cli: StrataCLI, tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    (ws / ".strata").mkdir(parents=True)
    config = ws / ".strata" / "config.toml"
    if kind == "fifo":
        os.mkfifo(config)
    else:
        config.symlink_to("/dev/zero")
    proc = cli.run("run", "--model", script(tmp_path / "s.json", [text("hello")]), "--workspace", str(ws), "hi",
                   timeout=30)
    assert proc.returncode == 2, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("strata: error:") and "not a regular file" in first, proc.stderr
