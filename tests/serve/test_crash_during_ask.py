"""The daemon SIGKILLed while a call waits for its driver's approval (its batch staged, not yet committed): after
a restart, the first driving attach continues the interrupted turn as `strata resume ID` would, so the driver is
asked again; nothing ran before the answer, the call runs once after it, and the timeline verifies. Real
processes, a real socket."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import bash_mark, effect_counts, marker, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import (
    Client,
    Daemon,
    allow_in_user_config,
    killed_while_asking,
    lease_owner,
    script,
    serving,
    status,
    status_in_process,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_after_sigkill_during_an_ask_the_next_driver_is_asked_again_and_the_call_runs_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")])
    sid = killed_while_asking(cli, ws, model, asked="w1", prompt="write a")
    assert not (ws / "a.txt").exists()

    restarted = Daemon(cli)
    try:
        again = Client(cli, sid)
        ask = again.wait_for("approval_request", timeout=20)
        assert ask["call_id"] == "w1" and ask["input"] == {"path": "a.txt", "content": "A\n"}
        again.send(type="approve", call_id="w1")
        result = again.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0), result
        assert again.finish().returncode == 0
    finally:
        restarted.stop()
    assert restarted.proc.returncode == 0, restarted.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"
    proc = cli.run("timeline", sid, "--verify", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True, proc.stdout


@pytest.mark.parametrize("first", ["approve", "deny"])
def test_the_answer_about_a_batchs_first_call_and_its_outcome_survive_a_daemon_killed_during_the_next_ask(
        cli: StrataCLI, tmp_path: Path, first: str) -> None:
    """b1 is answered (approved: it runs; denied: it does not); the driver is then asked about b2 and the daemon is
    SIGKILLed while it waits. What b1 came to (its result, its receipt `done`, the person's answer) was committed
    before b2 was asked, and the driver saw b1's result first: after a restart b1 is neither asked nor run again
    nor left `unknown`, and only b2 is asked. Before, all of it stayed staged for as long as the person took to
    answer about b2: the crash turned a finished call into an unknown one (exit 5, to reconcile by hand) and lost
    who approved it, or lost the person's "no" (b1 was asked again, and a "yes" then would have run it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1"), bash_mark("b2")], [text("both marked")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="mark both")
        driver.wait_for("approval_request", call_id="b1")
        driver.send(type=first, call_id="b1")
        driver.wait_for("approval_request", call_id="b2")
        ran = [(e["call_id"], e["status"]) for e in driver.events() if e["kind"] == "call_result"]
        assert ran == [("b1", "ok" if first == "approve" else "denied")]  # pushed before b2's question
        daemon.signal(signal.SIGKILL)
        assert daemon.wait() == -signal.SIGKILL
        assert driver.collect().returncode == 1
    finally:
        daemon.stop()

    restarted = Daemon(cli)
    try:
        again = Client(cli, sid)
        ask = again.wait_for("approval_request", timeout=20)
        assert ask["call_id"] == "b2"
        again.send(type="approve", call_id="b2")
        result = again.wait_for("result")
        assert (result["status"], result["exit_code"], result["unknown_receipts"]) == ("completed", 0, 0), result
        assert not [o for o in again.out.seen if o["type"] == "approval_request" and o["call_id"] == "b1"]
        assert again.finish().returncode == 0
    finally:
        restarted.stop()
    ran_b1 = first == "approve"
    assert effect_counts(ws) == {marker("b1"): 1, marker("b2"): 1} if ran_b1 else {marker("b2"): 1}
    receipts = {r["call_id"]: r["status"] for r in json_lines_in_process(cli, "receipts", sid, "--json")}
    assert receipts == ({"b1": "done", "b2": "done"} if ran_b1 else {"b2": "done"})
    approvals = [(r["call_id"], r["decision"]) for r in json_lines_in_process(cli, "timeline", sid, "--json")
                 if r["kind"] == "approval"]
    assert approvals == [("b1", "approved" if ran_b1 else "rejected"), ("b2", "approved")]
    proc = cli.run("timeline", sid, "--verify", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True, proc.stdout


def test_a_turn_the_driver_interrupted_is_not_continued_by_the_next_attach_after_a_restart(
        cli: StrataCLI, tmp_path: Path) -> None:
    allow_in_user_config(cli, "bash")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo started > started.txt; sleep 30")],
                   [text("after the interrupt")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="run it")
        wait_until(lambda: (ws / "started.txt").exists(), what="the command started")
        driver.send(type="interrupt")
        assert driver.wait_for("result")["status"] == "interrupted"
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()

    restarted = Daemon(cli)
    try:
        again = Client(cli, sid)
        (row,) = status(cli)
        assert (row["session_id"], row["turn_running"], row["phase"]) == (sid, False, "idle"), row
        assert again.finish().returncode == 0
    finally:
        restarted.stop()
    assert not any(e["kind"] == "assistant_message" for e in again.events())


def test_a_turn_the_driver_interrupted_is_not_continued_by_a_driver_attaching_after_another_one_came_and_went(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The driver interrupts a turn and leaves; a second driver attaches (the daemon takes the session's lease for
    it) and leaves without a prompt; a third attaches. Nothing continues the interrupted turn: no model call, no
    call runs, until a prompt says so. Before, the lease taken for the second driver was let go with the session
    still `active` (as its resume left it), which is what a daemon that died holding the lease leaves: the third
    driver's attach took it for a crash and continued the turn, and the model's next call (an allowed command)
    ran unasked."""
    allow_in_user_config(cli, "bash")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command="echo started > started.txt; sleep 30")],
                   [tool_use("b2", "bash", command="echo ran > b2.txt")], [text("after the interrupt")])
    with serving(cli):
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="run it")
        wait_until(lambda: (ws / "started.txt").exists(), what="the command started")
        driver.send(type="interrupt")
        assert driver.wait_for("result")["status"] == "interrupted"
        assert driver.finish().returncode == 0
        wait_until(lambda: lease_owner(cli, sid) is None, what="the daemon to let the lease go")

        between = Client(cli, sid)  # attached: the daemon holds the session's lease for it
        assert lease_owner(cli, sid) is not None
        assert between.finish().returncode == 0
        wait_until(lambda: lease_owner(cli, sid) is None, what="the daemon to let the lease go again")

        last = Client(cli, sid)
        (row,) = status_in_process(cli)
        assert (row["turn_running"], row["phase"]) == (False, "idle"), row
        assert last.finish().returncode == 0
    assert not (ws / "b2.txt").exists()
    assert not any(e["kind"] == "assistant_message" for e in last.events())
