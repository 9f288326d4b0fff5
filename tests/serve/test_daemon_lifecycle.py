"""Acceptance 3 and 4 of the serve daemon (issue 10) and its start and stop, with real `strata serve` processes:
a SIGKILL of the daemon during a `bash` call leaves the call `unknown` and never re-run, and the session goes on
when a client attaches; SIGTERM drains three sessions mid-turn within the grace period plus a few seconds, each left
resumable with a verifying timeline; one daemon per home; the detached (background) daemon."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process, run_in_process, show_in_process
from tests.cli._helpers import assert_clean_stderr, bash_mark, effect_counts, marker, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, allow_in_user_config, script, status, wait_until

pytestmark = pytest.mark.slow

GRACE_S = 2.0


def _verified(cli: StrataCLI, sid: str) -> None:
    proc = run_in_process(cli, "timeline", sid, "--verify", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] is True and report["verdict"] == "verified", proc.stdout


def _receipt(cli: StrataCLI, sid: str) -> dict[str, object]:
    (receipt,) = json_lines_in_process(cli, "receipts", sid, "--json")
    return receipt


def _marks(ws: Path) -> str:
    path = ws / "marks"
    return path.read_text() if path.exists() else ""


def _command(sleep: float) -> str:
    return f"echo start >> marks; sleep {sleep}; echo end >> marks"


def test_after_sigkill_of_the_daemon_during_bash_the_call_is_unknown_never_rerun_and_the_session_goes_on(
        cli: StrataCLI, tmp_path: Path) -> None:
    allow_in_user_config(cli, "bash")
    ws = tmp_path / "ws"
    ws.mkdir()
    model = script(tmp_path / "s.json", [tool_use("b1", "bash", command=_command(1))], [text("after the crash")])
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", model)
        sid = driver.session_id
        driver.send(type="prompt", text="run it")
        wait_until(lambda: _marks(ws) == "start\n", what="the command started")
        daemon.signal(signal.SIGKILL)
        assert daemon.wait() == -signal.SIGKILL
        assert driver.collect().returncode == 1  # its connection ended under it
    finally:
        daemon.stop()
    assert _receipt(cli, sid)["status"] == "dispatched"
    _verified(cli, sid)

    restarted = Daemon(cli)  # the dead daemon's socket is replaced
    try:
        again = Client(cli, sid)  # the driver's attach finishes the batch the crash left open
        result = again.wait_for("result")
        assert (result["status"], result["exit_code"], result["unknown_receipts"]) == ("completed", 5, 1)
        settled = [e for e in again.events() if e["kind"] == "call_result"]
        assert [(e["call_id"], e["status"]) for e in settled] == [("b1", "unknown")]
        assert again.finish().returncode == 0
    finally:
        restarted.stop()
    assert restarted.proc.returncode == 0, restarted.stderr
    receipt = _receipt(cli, sid)
    assert receipt["status"] == "unknown"
    assert _marks(ws) == "start\nend\n"  # it ran once, to its end, by itself; never again
    assert show_in_process(cli, sid)["session"]["status"] == "completed"
    _verified(cli, sid)


def test_sigterm_drains_three_sessions_mid_turn_within_the_grace_period_each_resumable_and_verified(
        cli: StrataCLI, tmp_path: Path) -> None:
    allow_in_user_config(cli, "bash")
    sleeps = [1, 60, 60]
    workspaces = []
    daemon = Daemon(cli, env={"STRATA_DRAIN_GRACE_S": str(GRACE_S)})
    drivers = []
    try:
        for i, sleep in enumerate(sleeps):
            ws = tmp_path / f"ws{i}"
            ws.mkdir()
            workspaces.append(ws)
            model = script(tmp_path / f"s{i}.json", [tool_use(f"b{i}", "bash", command=_command(sleep))],
                           [text(f"session {i} done")])
            drivers.append(Client(cli, "--new", "--workspace", str(ws), "--model", model))
        for driver in drivers:  # every client attached first: the turns start together
            driver.send(type="prompt", text="go")
        for ws in workspaces:
            wait_until(lambda ws=ws: _marks(ws).startswith("start\n"), what=f"the command in {ws.name} started")
        sent = time.monotonic()
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(GRACE_S + 30)
        assert daemon.exited_at is not None
        took = daemon.exited_at - sent
    finally:
        daemon.stop()
    assert code == 0, daemon.stderr
    # Bounded by the grace period, not by the 60-second commands; the slack is for a loaded 2-core machine.
    assert took < GRACE_S + 5.0, f"the drain took {took:.2f} s"
    sids = []
    for driver in drivers:
        result = driver.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("interrupted", 130), result
        driver.collect()
        sids.append(driver.session_id)

    finished, *stopped = sids
    assert _receipt(cli, finished)["status"] == "done" and _marks(workspaces[0]) == "start\nend\n"
    for sid, ws in zip(stopped, workspaces[1:], strict=True):
        receipt = _receipt(cli, sid)
        assert receipt["status"] == "unknown" and "SIGTERM" in str(receipt["note"])
        assert _marks(ws) == "start\n"  # its process group was killed
    for sid in sids:
        view = show_in_process(cli, sid)
        assert view["session"]["lease_owner"] is None and view["open_batch"] is None
        _verified(cli, sid)
    for sid in sids:  # resumable, and nothing runs twice
        resumed = cli.run("resume", sid, "go on", "--json")
        assert_clean_stderr(resumed)
        assert resumed.returncode == (0 if sid == finished else 5), resumed.stderr
        _verified(cli, sid)
    assert [_marks(ws) for ws in workspaces] == ["start\nend\n", "start\n", "start\n"]


def test_a_second_serve_on_the_same_home_exits_2_naming_the_running_daemon(cli: StrataCLI) -> None:
    daemon = Daemon(cli)
    try:
        second = cli.run("serve", "--foreground")
        assert second.returncode == 2
        (line, *_) = second.stderr.splitlines()
        assert line.startswith("strata: error:") and f"pid {daemon.pid}" in line, second.stderr
        assert_clean_stderr(second)
        assert status(cli) == []
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    gone = cli.run("serve", "--status")
    assert gone.returncode == 1 and "no Strata daemon" in gone.stderr
    assert_clean_stderr(gone)


def test_serve_without_foreground_detaches_and_reports_where_it_listens(cli: StrataCLI) -> None:
    started = cli.run("serve")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        assert str(cli.home / "run" / "daemon.sock") in started.stdout
        assert status(cli) == []
        again = cli.run("serve")
        assert again.returncode == 2 and f"pid {pid}" in again.stderr
        with open(f"/proc/{pid}/stat") as stat:  # detached: not in our session, no terminal
            fields = stat.read().rsplit(")", 1)[1].split()
        assert int(fields[3]) != os.getsid(0) and int(fields[4]) == 0
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), what="the daemon exited")
    assert not (cli.home / "run" / "daemon.sock").exists()


def test_serve_given_a_relative_home_detaches_into_that_home_and_its_sessions_keep_the_users_rules(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The detached daemon works in `/`: `STRATA_HOME=home strata serve` used to make it open `/home/...` (its
    socket where no client looks) and read the user's config file from `/` for each session, losing its rules."""
    ws = tmp_path / "ws"
    ws.mkdir()
    allow_in_user_config(cli, "bash")
    assert cli.cwd == tmp_path
    # Through the test's own directory's name: a daemon that got this wrong writes under `/<that name>`, never into
    # a directory that exists there.
    relative = {"STRATA_HOME": os.path.join("..", tmp_path.name, os.path.relpath(cli.home, tmp_path)),
                "XDG_CONFIG_HOME": os.path.join("..", tmp_path.name, os.path.relpath(cli.home, tmp_path),
                                                "xdg-config")}
    started = cli.run("serve", env=relative)
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    try:
        assert str(cli.home / "run" / "daemon.sock") in started.stdout, started.stdout
        client = Client(cli, "--new", "--workspace", str(ws), "--model",
                        script(tmp_path / "s.json", [bash_mark("b1")], [text("done")]))
        client.send(type="prompt", text="mark it")
        result = client.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0), result
        assert client.finish().returncode == 0
        assert not any(o["type"] == "approval_request" for o in client.out.seen)
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), what="the daemon exited")
    assert effect_counts(ws) == {marker("b1"): 1}
    assert not (cli.home / "run" / "daemon.sock").exists()


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
