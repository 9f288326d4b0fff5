"""Delegation in the serve daemon (issue 14): a child's approvals reach the parent's attached client, naming the
child, with a real `strata serve` and a real `strata attach --json` on a real socket."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI
from tests.ipc._wire import RawClient
from tests.serve._procs import (
    Client,
    Daemon,
    allow_in_user_config,
    child_writes_c,
    parked_session,
    prompted,
    serving,
    status_in_process,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_a_childs_approval_reaches_the_attached_client_naming_the_child(cli: StrataCLI, tmp_path: Path) -> None:
    ws, path = child_writes_c(tmp_path)
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
    rows = _sessions(cli)
    assert {r["id"]: r["parent_id"] for r in rows} == {sid: None, child: sid}
    delegated = next(e for e in driver.events() if e["kind"] == "call_result" and e["call_id"] == "p1")
    assert delegated["status"] == "ok" and "child wrote c.txt" in delegated["content"]


def _sessions(cli: StrataCLI) -> list[dict[str, Any]]:
    """`strata sessions --json`, read in this process (tests/_in_process_cli.py): the tests poll it."""
    return json_lines_in_process(cli, "sessions", "--json")


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


def _until(client: RawClient, kind: str, **fields: Any) -> dict[str, Any]:
    while True:
        line = client.line()
        assert line is not None, f"the daemon closed the connection before a {kind}"
        if line["type"] == kind and all(line.get(k) == v for k, v in fields.items()):
            return line


def test_a_childs_approval_request_is_answered_naming_the_session_it_names(cli: StrataCLI, tmp_path: Path) -> None:
    """A protocol client answers an `approval_request` with the `session_id` it carries. A child's call is asked of
    the parent's driver naming the child: an `approve` or `deny` naming the child, on the connection that was asked,
    decides it (as one naming the parent does). Before, it was `not_attached` ("attach first"), and attaching the
    child was `session_busy` naming the daemon itself, so a client following the protocol could not answer at all.
    A session the connection was not asked about is still `not_attached`, and nothing runs before the answer.
    Attaching the child, which the daemon itself runs, names the parent to attach to (before: "active in another
    process" naming the daemon's own pid)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="write c.txt and d.txt")], [text("parent done")]],
        "children": [[[tool_use("c1", "write_file", path="c.txt", content="c\n"),
                       tool_use("c2", "write_file", path="d.txt", content="d\n")], [text("child wrote c.txt")]]],
    }), encoding="utf-8")
    daemon = Daemon(cli)
    try:
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=60)
        client.hello()
        sid = client.ask({"type": "new_session", "id": "n", "workspace": str(ws), "model": f"script:{path}"})[
            "session_id"]
        assert client.ask({"type": "attach", "id": "a", "session_id": sid})["type"] == "ok"
        client.send(json.dumps({"type": "prompt", "id": "p", "session_id": sid, "text": "delegate it"}).encode()
                    + b"\n")
        ask = _until(client, "approval_request", call_id="p1")
        client.send(json.dumps({"type": "approve", "id": "ap1", "session_id": sid, "call_id": "p1",
                                "args_sha256": ask["args_sha256"], "plan_digest": ask["plan_digest"]}).encode()
                    + b"\n")
        child_ask = _until(client, "approval_request", call_id="c1")
        child = child_ask["session_id"]
        assert child != sid

        # Attaching the child itself, which this daemon runs for the parent's delegate call, says where to go.
        proc = cli.run("attach", child, "--json", input="")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"is a child session this daemon runs for a delegate call of session {sid}" in proc.stderr
        assert f"attach to session {sid}" in proc.stderr and "another process" not in proc.stderr

        other = {"type": "deny", "id": "x", "session_id": "not-" + child, "call_id": "c1"}
        assert client.ask(other)["code"] == "not_attached"
        forged = client.ask({"type": "approve", "id": "f", "session_id": child, "call_id": "c1",
                             "args_sha256": "0" * 64, "plan_digest": child_ask["plan_digest"]})
        assert forged["code"] == "stale_approval", forged
        assert not (ws / "c.txt").exists()

        approved = client.ask({"type": "approve", "id": "ap2", "session_id": child, "call_id": "c1",
                               "args_sha256": child_ask["args_sha256"], "plan_digest": child_ask["plan_digest"]})
        assert (approved["type"], approved["id"], approved["session_id"]) == ("ok", "ap2", child), approved
        second = _until(client, "approval_request", call_id="c2")
        assert second["session_id"] == child
        denied = client.ask({"type": "deny", "id": "dn", "session_id": child, "call_id": "c2", "reason": "not d"})
        assert (denied["type"], denied["id"]) == ("ok", "dn"), denied
        result = _until(client, "result", session_id=sid)
        assert result["status"] == "completed", result
        client.close()
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    assert (ws / "c.txt").read_text() == "c\n" and not (ws / "d.txt").exists()
    decisions = [(r["call_id"], r["decision"]) for r in json_lines_in_process(cli, "timeline", child, "--json")
                 if r["kind"] == "approval"]
    assert decisions == [("c1", "approved"), ("c2", "rejected")]


def test_a_driver_attaching_after_the_last_one_left_during_a_childs_ask_is_asked_and_the_child_runs_once(
        cli: StrataCLI, tmp_path: Path) -> None:
    """The driver leaves while a child's call waits for its answer: the child parks, and so does the parent (its
    delegate call waits on the child), letting its lease go. A driver attaching to the parent is asked about the
    child's call, as a driver attaching to a session whose own calls are parked is; approved, it runs once and
    the parent completes. Before, the parent was hosted as `idle` with nothing waiting: the new driver was asked
    nothing and nothing went on until a prompt came."""
    ws, path = child_writes_c(tmp_path)
    allow_in_user_config(cli, "delegate")
    with serving(cli):
        first = prompted(cli, ws, path, "delegate it")
        parent = first.session_id
        child = first.wait_for("approval_request", call_id="c1")["session_id"]
        assert first.finish().returncode == 0  # stdin ended while asked: it detaches at once, the call parks
        wait_until(lambda: [(r["session_id"], r["phase"]) for r in status_in_process(cli)] == [(parent, "parked")],
                   what="the parent to park")

        again = Client(cli, parent)
        ask = again.wait_for("approval_request", call_id="c1", timeout=30)
        assert ask["session_id"] == child and ask["input"] == {"path": "c.txt", "content": "c\n"}
        assert not (ws / "c.txt").exists()
        again.send(type="approve", call_id="c1")
        result = again.wait_for("result")
        assert (result["status"], result["exit_code"]) == ("completed", 0), result
        assert again.finish().returncode == 0
    assert (ws / "c.txt").read_text() == "c\n"
    (receipt,) = json_lines_in_process(cli, "receipts", child, "--json")
    assert (receipt["call_id"], receipt["status"]) == ("c1", "done")


def _reply(client: RawClient, request: dict[str, Any]) -> dict[str, Any]:
    """The reply to `request`, past the pushes that come before it."""
    client.send(json.dumps(request).encode() + b"\n")
    return _until_reply(client, request["id"])


def _until_reply(client: RawClient, request_id: str) -> dict[str, Any]:
    while True:
        line = client.line()
        assert line is not None, f"the daemon closed the connection before answering {request_id}"
        if line["type"] in ("ok", "error") and line["id"] == request_id:
            return line


def test_a_childs_call_is_decided_naming_the_child_on_a_connection_that_also_watches_the_child(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A client watches a parked child session (hosted for it without a lease) and drives the child's parent, whose
    delegate call waits on that child: the child's call is asked of it naming the child, and an `approve` naming the
    child, on that connection, decides it, as PROTOCOL.md says ("answered on that connection naming either"); the
    call runs once. Before, the watch attachment to the child was taken for the request's and the approval refused
    `not_driver` ("this client watches session ..."), though this very connection had been asked."""
    ws, path = child_writes_c(tmp_path)
    allow_in_user_config(cli, "delegate")
    with serving(cli):
        parent = parked_session(cli, ws, f"script:{path}", asked="c1")  # the parent waits on its child's call
        child = next(r["id"] for r in _sessions(cli) if r["parent_id"] == parent)
        client = RawClient(cli.home / "run" / "daemon.sock", timeout=60)
        try:
            client.hello()
            watch = {"type": "attach", "id": "w", "session_id": child, "role": "watch"}
            assert _reply(client, watch)["type"] == "ok"
            assert _reply(client, {"type": "attach", "id": "d", "session_id": parent})["type"] == "ok"
            ask = _until(client, "approval_request", call_id="c1")
            assert ask["session_id"] == child and not (ws / "c.txt").exists()
            approved = _reply(client, {"type": "approve", "id": "ap", "session_id": child, "call_id": "c1",
                                       "args_sha256": ask["args_sha256"], "plan_digest": ask["plan_digest"]})
            assert approved["type"] == "ok" and approved["session_id"] == child, approved
            result = _until(client, "result", session_id=parent)
            assert result["status"] == "completed", result
        finally:
            client.close()
    assert (ws / "c.txt").read_text() == "c\n"
    (receipt,) = json_lines_in_process(cli, "receipts", child, "--json")
    assert (receipt["call_id"], receipt["status"]) == ("c1", "done")


def test_a_watcher_of_a_parked_child_gets_what_its_parents_delegate_call_then_commits_in_the_child_live(
        cli: StrataCLI, tmp_path: Path) -> None:
    """A client watches a parked child session (hosted for it without a lease); a driver of the parent is asked the
    child's call and approves it, and the parent's delegate call runs the child to its end. The watcher gets every
    event the child commits meanwhile (the approval, the call's result, the child's answer), live, each once and in
    seq order, as a watcher of any session does. Before, it got the child's events up to its attach and then
    nothing: the child's commits, made by the parent's delegate call, reached no attachment."""
    ws, path = child_writes_c(tmp_path)
    allow_in_user_config(cli, "delegate")
    with serving(cli):
        parent = parked_session(cli, ws, f"script:{path}", asked="c1")
        child = next(r["id"] for r in _sessions(cli) if r["parent_id"] == parent)
        watcher = RawClient(cli.home / "run" / "daemon.sock", timeout=20)
        driver = RawClient(cli.home / "run" / "daemon.sock", timeout=60)
        try:
            watcher.hello()
            driver.hello()
            watch = {"type": "attach", "id": "w", "session_id": child, "role": "watch", "since_seq": 1}
            assert _reply(watcher, watch)["type"] == "ok"
            assert _reply(driver, {"type": "attach", "id": "d", "session_id": parent})["type"] == "ok"
            ask = _until(driver, "approval_request", call_id="c1")
            assert _reply(driver, {"type": "approve", "id": "ap", "session_id": parent, "call_id": "c1",
                                   "args_sha256": ask["args_sha256"], "plan_digest": ask["plan_digest"]})[
                "type"] == "ok"
            assert _until(driver, "result", session_id=parent)["status"] == "completed"
            events = _events_until(watcher, "assistant_message")  # the child's answer, once it ran c1
        finally:
            watcher.close()
            driver.close()
    assert [e["seq"] for e in events] == list(range(1, events[-1]["seq"] + 1)), events
    kinds = [e["kind"] for e in events]
    assert "approval_granted" in kinds and "call_result" in kinds, kinds
    assert (ws / "c.txt").read_text() == "c\n"


def _events_until(client: RawClient, kind: str) -> list[dict[str, Any]]:
    """The events `client` gets up to and including the first of `kind` (a timeout if it never comes)."""
    events = []
    while True:
        line = client.line()
        assert line is not None, f"the daemon closed the connection before a {kind} event; events: {events}"
        if line["type"] == "event":
            events.append(line)
            if line["kind"] == kind:
                return events
