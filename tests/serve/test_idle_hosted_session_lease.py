"""A session the daemon hosts but nobody drives holds no lease between turns, against a real `strata serve` and
real `strata attach` / `strata resume` processes over the real socket. A watcher's attach used to keep the
session's lease for the daemon's whole life, so `strata resume ID` in another terminal was refused ("session ...
is active") until the daemon stopped. Now the daemon holds the lease while a run is in flight or a client drives
the session; with neither, it lets the lease go within RELEASE_AFTER_S. One process drives a session at a time
still: while a client drives it in the daemon a resume elsewhere is refused, and a driver attaching while another
process drives it is refused (`session_busy`) rather than run beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import Client, Daemon, kill_if_running, lease_owner, script, status, wait_until

pytestmark = pytest.mark.slow

EXIT_AWAITING_APPROVAL = 4


def _resume(cli: StrataCLI, sid: str, prompt: str) -> subprocess.CompletedProcess[str]:
    return cli.run("resume", sid, prompt, "--json")


def _result(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    (result,) = [o for o in map(json.loads, proc.stdout.splitlines()) if o.get("type") == "result"]
    return result


def test_a_session_only_watched_in_the_daemon_can_be_resumed_elsewhere_and_driven_again_after(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")], [text("two")], [text("three")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="first")
        assert driver.wait_for("result")["status"] == "completed"
        busy = _resume(cli, sid, "not while it is driven")  # a client drives it in the daemon: one driver
        assert busy.returncode != 0 and f"session {sid} is active" in busy.stderr, busy.stderr
        assert "Traceback" not in busy.stderr
        assert driver.finish().returncode == 0

        watcher = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        watcher.hello()
        assert watcher.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch"})["type"] == "ok"
        wait_until(lambda: lease_owner(cli, sid) is None, timeout=10, what="the watched session's lease to go")
        resumed = _resume(cli, sid, "second")  # another terminal, while the daemon hosts it for its watcher
        assert resumed.returncode == 0, resumed.stderr
        assert _result(resumed)["status"] == "completed"

        again = Client(cli, sid)  # driven in the daemon again: its lease taken back, the other run's events read
        again.send(type="prompt", text="third")
        assert again.wait_for("result")["status"] == "completed"
        assert again.finish().returncode == 0
        watcher.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    prompts = [b["text"] for m in show_in_process(cli, sid)["messages"] if m["role"] == "user" for b in m["content"]
               if b["type"] == "text"]
    assert prompts == ["first", "second", "third"], prompts  # each ran once, in order


def test_a_driver_attaching_while_another_process_drives_the_session_is_refused_and_gets_in_after(
        cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")])
    daemon = Daemon(cli)
    holder: subprocess.Popen[str] | None = None
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch"})["type"] == "ok"
        wait_until(lambda: lease_owner(cli, sid) is None, timeout=10, what="the watched session's lease to go")
        holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", sid], cwd=cli.cwd, env=cli.env(),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()
        other = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        other.hello()
        refused = other.ask({"type": "attach", "id": "d", "session_id": sid})
        assert (refused["type"], refused["code"], refused["fatal"]) == ("error", "session_busy", False), refused
        assert f"session {sid} is active in another process" in refused["message"], refused
        holder.communicate("", timeout=30)  # it lets the lease go
        assert other.ask({"type": "attach", "id": "d2", "session_id": sid})["type"] == "ok"
        assert lease_owner(cli, sid) is not None  # the driver's: driven here, and nowhere else meanwhile
        other.close()
        client.close()
    finally:
        kill_if_running(holder)
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


def test_a_call_another_process_parked_while_the_daemon_held_no_lease_is_asked_of_the_next_driver(
        cli: StrataCLI, tmp_path: Path) -> None:
    """`strata resume ID PROMPT` elsewhere parks a call (nobody to ask); the session is still hosted, idle, in the
    daemon. The next driver attaching there is asked about the call, and it runs once."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [text("one")],
                   [tool_use("w1", "write_file", path="a.txt", content="A\n")], [text("written")])
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=30)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": model})["session_id"]
        assert client.ask({"type": "attach", "id": "w", "session_id": sid, "role": "watch"})["type"] == "ok"
        wait_until(lambda: lease_owner(cli, sid) is None, timeout=10, what="the watched session's lease to go")
        assert _resume(cli, sid, "first").returncode == 0
        parked = _resume(cli, sid, "write a")
        assert parked.returncode == EXIT_AWAITING_APPROVAL, parked.stderr
        (row,) = status(cli)  # the daemon's status says so, although it did not park the call itself
        assert (row["phase"], row["waiting"]) == ("parked", [{"call_id": "w1", "tool": "write_file", "how": "parked"}])
        driver = Client(cli, sid)
        driver.wait_for("approval_request", timeout=30, call_id="w1")
        driver.send(type="approve", call_id="w1")
        assert driver.wait_for("result", timeout=30)["status"] == "completed"
        assert driver.finish().returncode == 0
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert (ws / "a.txt").read_text() == "A\n"
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    assert receipt["status"] == "done"
