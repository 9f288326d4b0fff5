"""Acceptance 1 and 2 of the serve daemon (issue 10), with a real `strata serve` and real `strata attach --json`
processes on a real socket: approvals reach the driving client with every argument, watchers see the same
events, a second driver is refused, and a driver that dies while a call waits leaves the call parked."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import bash_mark, effect_counts, marker, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, parked_session, script

pytestmark = pytest.mark.slow


def _sha256(args: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode()).hexdigest()


def test_an_ask_reaches_the_driver_with_full_arguments_watchers_see_the_same_events_and_a_second_driver_is_refused(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("read me\n")
    content = "line one\nline two: a long argument shown in full, " + "x" * 300 + "\n"
    model = script(tmp_path / "s.json",
                   [tool_use("r1", "read_file", path="notes.txt"), tool_use("w1", "write_file", path="out.txt",
                                                                            content=content)],
                   [text("written")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        watcher = Client(cli, sid, "--watch")
        third = cli.run("attach", sid, "--json", input="")
        assert third.returncode == 1
        assert "already has a driving client" in third.stderr and "Traceback" not in third.stderr
        assert [line for line in third.stderr.splitlines() if line.startswith("strata: error")] == [
            third.stderr.splitlines()[0]]

        driver.send(type="prompt", text="read the notes, then write out.txt")
        ask = driver.wait_for("approval_request", call_id="w1")
        assert ask["tool"] == "write_file" and ask["session_id"] == sid
        assert ask["input"] == {"path": "out.txt", "content": content}  # every argument, in full
        proposed = next(e for e in driver.events() if e["kind"] == "batch_proposed")
        call = next(c for c in proposed["calls"] if c["call_id"] == "w1")
        assert ask["args_sha256"] == call["input_sha256"] and ask["asked_by"] and ask["plan_digest"]
        assert not (ws / "out.txt").exists()  # nothing runs before the answer
        driver.send(type="approve", call_id="w1")
        result = driver.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0)
        watched = watcher.wait_for("result")
        assert watched == result

        assert (ws / "out.txt").read_text() == content
        (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
        assert (receipt["call_id"], receipt["status"]) == ("w1", "done")  # written exactly once
        results = {e["call_id"]: e for e in driver.events() if e["kind"] == "call_result"}
        assert results["r1"]["status"] == "ok" and "read me" in results["r1"]["content"]
        approvals = [r for r in json_lines_in_process(cli, "timeline", sid, "--json") if r["kind"] == "approval"]
        assert len(approvals) == 1 and "strata attach" in json.dumps(approvals[0])

        # The watcher saw exactly the driver's events, in commit order; only the driver was asked.
        assert watcher.events() == driver.events()
        assert [e["seq"] for e in driver.events()] == sorted(e["seq"] for e in driver.events())
        assert not [o for o in watcher.out.seen if o["type"] == "approval_request"]

        watcher.send(type="prompt", text="a watcher cannot drive")
        refused = watcher.wait_for("error", request="prompt")
        assert refused["code"] == "not_driver"
        assert driver.finish().returncode == 0 and watcher.finish().returncode == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_a_driver_killed_while_a_call_waits_leaves_it_parked_and_approve_plus_a_new_attach_runs_it_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [bash_mark("b1")], [text("done")])
    daemon = Daemon(cli)
    try:
        # The driver is SIGKILLed while the call waits for its answer.
        sid = parked_session(cli, ws, model, asked="b1", prompt="mark it")
        assert show_in_process(cli, sid)["session"]["status"] == "awaiting_approval"
        assert effect_counts(ws) == {}

        approved = cli.run("approve", sid, "b1")
        assert approved.returncode == 0, approved.stderr

        again = Client(cli, sid)
        result = again.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0), result
        assert not [o for o in again.out.seen if o["type"] == "approval_request"]  # decided already
        assert again.finish().returncode == 0
    finally:
        daemon.stop()
    assert effect_counts(ws) == {marker("b1"): 1}
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"
    assert daemon.proc.returncode == 0, daemon.stderr
