"""Two people deciding one parked call at once: a driver attaches to the session in a real `strata serve` while
another process holds the session's lease for a moment (as `strata approve` does while it records a decision).
The driver's turn used to fail at once ("session ... is active in another process"), reported as a failed
session although nothing had failed, and the call waited on; now the daemon waits for the short-lived holder,
then asks the driver, and the call runs once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.daemon._hosted import WAITING_FOR_LEASE as WAITING
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, parked_session, script, wait_until

pytestmark = pytest.mark.slow


def _met_the_held_lease(cli: StrataCLI, driver: Client) -> bool:
    """The daemon logged that the driver's turn waits for the lease, or the turn ended (with a result)."""
    log = cli.home / "logs" / "strata.log"
    if log.exists() and any(json.loads(line).get("event") == WAITING for line in log.read_text().splitlines()):
        return True
    try:
        driver.out.wait_for(lambda o: o["type"] == "result", 0.05, "a result")
    except AssertionError:
        return False
    return True


def test_a_driver_attaching_while_another_process_briefly_holds_the_lease_is_asked_and_the_call_runs_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="w1")
        holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", sid], cwd=cli.cwd, env=cli.env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()
        driver = Client(cli, sid)
        # The driver's turn meets the held lease: it waits for it (the daemon's log says so), or, as it used to,
        # fails at once with a result.
        wait_until(lambda: _met_the_held_lease(cli, driver), what="the turn to meet the held lease")
        _, err = holder.communicate(input="")  # the decision is recorded: the lease is free again
        assert holder.returncode == 0, err
        assert not [o for o in driver.out.seen if o["type"] == "result"], driver.out.seen[-1]
        ask = driver.wait_for("approval_request", timeout=30)
        assert ask["call_id"] == "w1"
        driver.send(type="approve", call_id="w1")
        result = driver.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0), result
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"


@pytest.mark.parametrize("driver_says", ["approve", "deny"])
def test_strata_approve_losing_to_the_daemons_driver_says_who_decided_first(cli: StrataCLI, tmp_path: Path,
                                                                           driver_says: str) -> None:
    """A parked call is decided twice: the driver that attached answers first and the call is acted on, then
    `strata approve` (or `deny`) from another terminal comes. The loser gets one line saying the call was already
    approved or denied, and by whom (the attached client), exit 2; nothing changes. Before, it said only that the
    call "is not waiting for approval", as for a call id that never waited."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")], [text("done")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="w1")
        driver = Client(cli, sid)
        driver.wait_for("approval_request", call_id="w1")
        driver.send(type=driver_says, call_id="w1")
        assert driver.wait_for("result")["status"] == "completed"
        assert driver.finish().returncode == 0
        said = "approved" if driver_says == "approve" else "denied"
        for late in ("approve", "deny"):
            proc = cli.run(late, sid, "w1")
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            first = proc.stderr.splitlines()[0]
            assert first.startswith(f"strata: error: call w1 of session {sid} was already {said} by person:"), first
            assert "via strata attach (client pid" in first and "a recorded decision is not changed" in first
    finally:
        daemon.stop()
    assert (ws / "a.txt").exists() == (driver_says == "approve")
    decisions = [r["decision"] for r in json_lines_in_process(cli, "timeline", sid, "--json")
                 if r["kind"] == "approval"]
    assert decisions == ["parked", "approved" if driver_says == "approve" else "rejected"]
