"""A new session's model spec naming a file that is not a script file (an endless device, a FIFO nobody writes)
is refused in one line, and the daemon goes on serving: the scripted model's loader reads only regular files, and
only up to a bound. A real `strata serve`, a raw client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Daemon, status

pytestmark = pytest.mark.slow


def test_a_model_spec_naming_an_endless_device_or_a_fifo_is_refused_and_the_daemon_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    fifo = tmp_path / "script.fifo"
    os.mkfifo(fifo)
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=20)
        client.hello()
        for i, target in enumerate(["/dev/zero", str(fifo)]):
            reply = client.ask({"type": "new_session", "id": f"n{i}", "workspace": str(ws),
                                "model": f"script:{target}"})
            assert (reply["type"], reply["code"]) == ("error", "refused"), reply
            assert target in reply["message"] and "not a regular file" in reply["message"], reply
        client.sock.close()
        assert status(cli) == []  # still serving, nothing hosted
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert "Traceback" not in daemon.stderr
    log = (cli.home / "logs" / "strata.log").read_text()
    assert '"level": "error"' not in log, [json.loads(x)["event"] for x in log.splitlines() if '"error"' in x]


def test_a_nul_byte_in_a_new_sessions_workspace_or_model_is_an_invalid_request_not_an_internal_error(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "s.json").write_text('[[{"type": "text", "text": "hi"}]]')
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=20)
        client.hello()
        for i, (workspace, model) in enumerate([(str(ws), f"script:{tmp_path}/s.json\x00x"),
                                                (f"{ws}\x00x", f"script:{tmp_path}/s.json")]):
            reply = client.ask({"type": "new_session", "id": f"n{i}", "workspace": workspace, "model": model})
            assert (reply["type"], reply["code"]) == ("error", "invalid"), reply
        client.sock.close()
        assert status(cli) == []
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    log = (cli.home / "logs" / "strata.log").read_text()
    assert '"level": "error"' not in log, [json.loads(x)["event"] for x in log.splitlines() if '"error"' in x]
