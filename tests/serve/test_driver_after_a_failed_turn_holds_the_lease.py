"""A driver attached to a hosted session whose turn failed is not left driving it without its lease, against a real
`strata serve`, real `strata attach` / `strata approve` processes and a real process holding the session's lease.
A turn that fails (here: its lease held elsewhere for longer than the daemon waits) lets the session's lease go
(phase `released`), and the daemon used to leave it so even with a driver attached, saying nothing: `strata resume
ID PROMPT` in another terminal could run the session while that driver stayed attached, its next prompt racing it.
A driver attaching to a released session took no lease either (nor finished the batch decided meanwhile). Now the
daemon takes the lease again at once for an attached driver, or, when it cannot, tells the driver (a `released`
notice: attach again to drive it); a driver attaching to a released session takes the lease as it does an idle
one, and finishes what was decided meanwhile."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import (
    Client,
    Daemon,
    allow_in_user_config,
    kill_if_running,
    lease_owner,
    parked_session,
    script,
    serving,
    status_in_process,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_a_driver_whose_turn_failed_is_told_the_session_was_released_and_the_next_driver_takes_it_back(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")])
    daemon = Daemon(cli)
    holder: subprocess.Popen[str] | None = None
    try:
        sid = parked_session(cli, ws, model, asked="w1", leave="detach")
        holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", sid], cwd=cli.cwd, env=cli.env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()
        first = Client(cli, sid)  # its turn waits for the lease, then fails: another process holds it
        assert first.wait_for("result")["status"] == "failed"
        notice = first.out.wait_for(lambda o: o["type"] == "notice" and o.get("kind") == "released", 10,
                                    "a released notice")
        assert "attach again" in notice["text"], notice
        assert first.finish().returncode == 0
        _, err = holder.communicate(input="")
        assert holder.returncode == 0, err
        approved = cli.run("approve", sid, "w1")
        assert approved.returncode == 0, approved.stderr

        driver = Client(cli, sid)  # the session's lease is its own again, and the approved call runs
        assert lease_owner(cli, sid) is not None
        assert driver.wait_for("result", timeout=30)["status"] == "completed"
        assert driver.finish().returncode == 0
    finally:
        kill_if_running(holder)
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"


LOCK_S = 8
"""How long another process holds the database's write lock: longer than the busy timeout (5 s), so the turn's
first commit fails, and shorter than twice it, so the daemon's release of the lease and its taking the lease back
for the driver, which wait on the lock next, succeed."""

_LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def test_a_turn_the_driver_interrupted_is_not_continued_after_a_failed_turn_and_the_drivers_leaving(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The driver interrupts a turn, then prompts while another process holds the database's write lock: that turn
    fails (its prompt could not be recorded), the daemon takes the session's lease back for the driver, and the
    driver leaves. A driver attaching next is not given the interrupted turn continued: no model call, no call
    runs, until a prompt says so. Before, the lease taken back for the driver was let go with the session `active`
    (as that resume left it), which is what a daemon that died holding the lease leaves: the next driver's attach
    took it for a crash and continued the turn, and the model's next call (an allowed command) ran unasked."""
    allow_in_user_config(cli, "bash")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo started > started.txt; sleep 30")],
                   [tool_use("b2", "bash", command="echo ran > b2.txt")], [text("after the interrupt")])
    locker: subprocess.Popen[str] | None = None
    with serving(cli):
        try:
            driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
            sid = driver.session_id
            driver.send(type="prompt", text="run it")
            wait_until(lambda: (ws / "started.txt").exists(), what="the command started")
            driver.send(type="interrupt")
            assert driver.wait_for("result")["status"] == "interrupted"

            locker = subprocess.Popen([sys.executable, "-c", _LOCKER, str(cli.home / "strata.db"), str(LOCK_S)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert locker.stdout is not None and locker.stdout.readline() == "held\n", locker.communicate()
            driver.send(type="prompt", text="go on")
            failed = driver.wait_for("result", timeout=LOCK_S + 30)
            assert failed["status"] == "failed", failed
            _, err = locker.communicate(timeout=30)
            assert locker.returncode == 0, err
            assert not any(o["type"] == "notice" and o.get("kind") == "released" for o in driver.out.seen)
            assert lease_owner(cli, sid) is not None  # taken back for the driver
            assert driver.finish().returncode == 0
            wait_until(lambda: lease_owner(cli, sid) is None, what="the daemon to let the lease go")

            last = Client(cli, sid)
            (row,) = status_in_process(cli)
            assert (row["turn_running"], row["phase"]) == (False, "idle"), row
            assert last.finish().returncode == 0
        finally:
            kill_if_running(locker)
    assert not (ws / "b2.txt").exists()
    assert not any(e["kind"] == "assistant_message" for e in last.events())


def test_a_turn_the_driver_interrupted_is_not_continued_after_a_resumed_session_s_turn_failed(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The driver interrupts a turn and leaves (the daemon lets the lease go); a second driver attaches, which
    resumes the session (its status `active` while held), and prompts while another process holds the database's
    write lock: that turn fails, the daemon takes the lease back for the driver, and the driver leaves. A driver
    attaching next is not given the interrupted turn continued. Before, the failed turn's release kept the status
    the resume had set (`active`, the turn committed none), and the take-back gave it back so: what a daemon that
    died holding the lease leaves, so the next driver's attach continued the turn and the model's next call (an
    allowed command) ran unasked."""
    allow_in_user_config(cli, "bash")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo started > started.txt; sleep 30")],
                   [tool_use("b2", "bash", command="echo ran > b2.txt")], [text("after the interrupt")])
    locker: subprocess.Popen[str] | None = None
    with serving(cli):
        try:
            driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
            sid = driver.session_id
            driver.send(type="prompt", text="run it")
            wait_until(lambda: (ws / "started.txt").exists(), what="the command started")
            driver.send(type="interrupt")
            assert driver.wait_for("result")["status"] == "interrupted"
            assert driver.finish().returncode == 0
            wait_until(lambda: lease_owner(cli, sid) is None, what="the daemon to let the lease go")

            second = Client(cli, sid)  # its attach resumes the session: the daemon holds its lease for it
            assert lease_owner(cli, sid) is not None
            locker = subprocess.Popen([sys.executable, "-c", _LOCKER, str(cli.home / "strata.db"), str(LOCK_S)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert locker.stdout is not None and locker.stdout.readline() == "held\n", locker.communicate()
            second.send(type="prompt", text="go on")
            failed = second.wait_for("result", timeout=LOCK_S + 30)
            assert failed["status"] == "failed", failed
            _, err = locker.communicate(timeout=30)
            assert locker.returncode == 0, err
            assert lease_owner(cli, sid) is not None  # taken back for the driver
            assert second.finish().returncode == 0
            wait_until(lambda: lease_owner(cli, sid) is None, what="the daemon to let the lease go again")

            last = Client(cli, sid)
            (row,) = status_in_process(cli)
            assert (row["turn_running"], row["phase"]) == (False, "idle"), row
            assert last.finish().returncode == 0
        finally:
            kill_if_running(locker)
    assert not (ws / "b2.txt").exists()
    assert not any(e["kind"] == "assistant_message" for e in last.events())
