"""Delegation in the serve daemon (issue 14): a child's approvals reach the parent's attached client, naming the
child, with a real `strata serve` and a real `strata attach --json` on a real socket."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Client, Daemon, allow_in_user_config, wait_until

pytestmark = pytest.mark.slow


def test_a_childs_approval_reaches_the_attached_client_naming_the_child(cli: StrataCLI, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="write c.txt")], [text("parent done")]],
        "children": [[[tool_use("c1", "write_file", path="c.txt", content="c\n")], [text("child wrote c.txt")]]],
    }), encoding="utf-8")
    daemon = Daemon(cli)
    try:
        driver = Client(cli, "--new", "--workspace", str(ws), "--model", f"script:{path}")
        sid = driver.session_id
        driver.send(type="prompt", text="delegate it")
        ask = driver.wait_for("approval_request", call_id="p1")
        assert ask["tool"] == "delegate" and ask["session_id"] == sid
        driver.send(type="approve", call_id="p1")
        child_ask = driver.wait_for("approval_request", call_id="c1")
        child = child_ask["session_id"]
        assert child != sid and child_ask["tool"] == "write_file"
        assert f"in child session {child} delegated by {sid}" in json.dumps(child_ask)
        assert not (ws / "c.txt").exists()  # nothing runs before the person's answer
        driver.send(type="approve", call_id="c1")
        result = driver.wait_for("result")
        assert result["status"] == "completed", result
        assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert (ws / "c.txt").read_text() == "c\n"
    rows = cli.json_lines("sessions", "--json")
    assert {r["id"]: r["parent_id"] for r in rows} == {sid: None, child: sid}
    delegated = next(e for e in driver.events() if e["kind"] == "call_result" and e["call_id"] == "p1")
    assert delegated["status"] == "ok" and "child wrote c.txt" in delegated["content"]


def _sessions(cli: StrataCLI) -> list[dict[str, Any]]:
    return cli.json_lines("sessions", "--json")


def test_a_prompt_to_a_hosted_parent_whose_child_another_process_drives_is_refused_not_lost(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A parent the daemon still hosts (with no driver, its lease let go between turns) whose delegate call waits on
    a child that `strata resume CHILD` now drives: a new prompt would finish the open batch first, park again on
    the busy child and never be heard. It is refused (`session_busy`, naming the child and its process), the session
    stays hosted and unchanged; once the child is done, the same prompt runs: the child's result is taken, the
    prompt heard, the child's effect ran once. Before, the turn parked and the prompt was dropped."""
    ws = tmp_path / "ws"
    ws.mkdir()
    allow_in_user_config(cli, "delegate")
    path = tmp_path / "s.json"
    command = ("touch started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; do sleep 0.05; done; "
               f"echo once >> {EFFECTS_LOG}")
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="run it")], [text("parent done")]],
        "children": [[[tool_use("c1", "bash", command=command)], [text("child ran it")]]],
    }), encoding="utf-8")
    daemon = Daemon(cli)
    driver: subprocess.Popen[str] | None = None
    try:
        first = Client(cli, "--new", "--workspace", str(ws), "--model", f"script:{path}")
        parent = first.session_id
        first.send(type="prompt", text="delegate it")
        child = first.wait_for("approval_request", call_id="c1")["session_id"]
        first.kill()  # the child's call parks; so does the parent's delegate call, the parent still hosted
        wait_until(lambda: {r["id"]: r["status"] for r in _sessions(cli)}.get(child) == "awaiting_approval",
                   what="the child to park")
        assert cli.run("approve", child, "--all").returncode == 0
        driver = cli.popen("resume", child, "--json")
        wait_until(lambda: (ws / "started").exists() or driver.poll() is not None, what="the child's bash")
        assert driver.poll() is None, driver.communicate()

        # Nobody drives the parent: the daemon lets its lease go. The driver attaching takes it back and must not
        # finish the open batch (it would only wait on the busy child, and the prompt be refused as "a turn runs").
        wait_until(lambda: {r["id"]: r["lease_owner"] for r in _sessions(cli)}.get(parent, "?") is None,
                   what="the parent's lease to go")
        again = Client(cli, parent)
        again.send(type="prompt", text="and then say hi")
        refused = again.out.wait_for(lambda o: o["type"] in ("error", "result"), 60, "an error or a result")
        assert refused["type"] == "error" and refused["code"] == "session_busy", refused
        assert f"child session {child}" in refused["message"] and f"pid {driver.pid}" in refused["message"], refused
        assert driver.poll() is None  # the other process still drives the child, untouched

        (ws / "release").touch()
        _, err = driver.communicate(timeout=60)
        assert driver.returncode == 0, err
        again.send(type="prompt", text="and then say hi")
        result = again.wait_for("result")
        assert result["status"] == "completed", result
        assert again.finish().returncode == 0
    finally:
        if driver is not None and driver.poll() is None:
            (ws / "release").touch()
            driver.communicate(timeout=60)
        daemon.stop()
    assert (ws / EFFECTS_LOG).read_text() == "once\n"
    texts = [e.get("text") for e in again.events() if e["kind"] == "user_message"]
    assert "and then say hi" in texts, texts
    delegated = next(e for e in again.events() if e["kind"] == "call_result" and e["call_id"] == "p1")
    assert delegated["status"] == "ok" and "child ran it" in delegated["content"], delegated
