"""SIGTERM's drain ends every attachment with its last messages delivered: each driver whose call was waiting for
approval gets the turn's `result` (awaiting_approval, the call parked) and the attachment's `closed` notice before
the daemon says goodbye and closes the connection. A real `strata serve` and real `strata attach --json` clients."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.cli._helpers import bash_mark, text
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, script

pytestmark = pytest.mark.slow

SESSIONS = 6


def test_sigterm_delivers_each_drivers_result_and_closing_notice_before_the_goodbye(
        cli: StrataCLI, tmp_path: Path) -> None:
    daemon = Daemon(cli)
    drivers = []
    try:
        for i in range(SESSIONS):
            ws = tmp_path / f"ws{i}"
            ws.mkdir()
            model = script(tmp_path / f"s{i}.json", [bash_mark(f"b{i}")], [text("done")])
            drivers.append(Client(cli, "--new", "--workspace", str(ws), "--model", model))
        for i, driver in enumerate(drivers):
            driver.send(type="prompt", text="go")
            driver.wait_for("approval_request", call_id=f"b{i}")
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(60) == 0, daemon.stderr
    finally:
        daemon.stop()
    for i, driver in enumerate(drivers):
        driver.proc.wait(30)
        seen = driver.out.rest()
        tail = [(o["type"], o.get("status") or o.get("kind")) for o in seen]
        assert ("result", "awaiting_approval") in tail, (i, tail[-6:])
        assert tail[-1] == ("notice", "closed"), (i, tail[-6:])
        driver.collect()
