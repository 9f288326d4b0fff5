"""A session the daemon parked (its driver left while a call waited) holds no lease, so another terminal may
approve the call and `strata resume ID` it to the end. The daemon still hosts it, as parked. It must not go on
believing so: `serve --status` said phase `parked` (with nothing waiting) for a completed session, and the next
driver attaching was given a turn of its own making (finish a batch that was no longer open): a result it did not
ask for ("already completed; nothing to do without a new prompt") and its own first prompt refused as `session_busy`
("a turn ... is running"). Real `strata serve`, `strata attach`, `strata approve` and `strata resume` processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, parked_session, script, status

pytestmark = pytest.mark.slow


def test_a_parked_session_finished_elsewhere_is_idle_in_the_daemon_and_the_next_driver_prompts_at_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("w1", "write_file", path="a.txt", content="A\n")],
                   [text("written")], [text("after")])
    daemon = Daemon(cli)
    try:
        sid = parked_session(cli, ws, model, asked="w1", leave="detach")
        assert cli.run("approve", sid, "w1").returncode == 0
        finished = cli.run("resume", sid, "--json")  # another terminal runs the approved call and the turn's end
        assert finished.returncode == 0, finished.stderr
        (row,) = status(cli)
        assert (row["status"], row["phase"], row["waiting"]) == ("completed", "idle", []), row
        driver = Client(cli, sid)
        driver.send(type="prompt", text="next")
        result = driver.wait_for("result", timeout=30)
        assert (result["status"], result["reason"]) == ("completed", ""), result
        assert not [o for o in driver.out.seen if o["type"] == "error"], driver.out.seen
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"
    verified = cli.run("timeline", sid, "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    texts = [b["text"] for m in show_in_process(cli, sid)["messages"] for b in m["content"] if b["type"] == "text"]
    assert texts[-2:] == ["next", "after"], texts
