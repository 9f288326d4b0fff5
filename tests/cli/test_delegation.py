"""Delegation with real processes (issue 14, acceptance 1 and 2): a scripted parent delegates a task to a child
session that writes a file and answers; the parent gets the answer as the `delegate` result, and both sessions are
linked in the store. SIGKILL the parent while the child's `bash` runs, and right after the child finished but before
the parent recorded its result (fault point `after_child`): `strata resume PARENT` finishes with exactly one child,
no effect twice, and the child's answer as the parent's tool result. The runs, resumes, decisions and forks are
real `strata` processes; what the tests read back (`sessions`, `timeline`, `receipts`, `show`, `export`) runs in
the test's process (tests/_in_process_cli.py), the same commands with the same checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process, run_in_process, show_in_process
from tests.cli._helpers import EFFECTS_LOG, call_results, events_of, result_line, text, tool_use
from tests.conftest import StrataCLI

CHILD_ANSWER = "child wrote hello.txt"


def _script(path: Path, child_command: str) -> Path:
    path.write_text(json.dumps({
        "turns": [
            [text("delegating"), tool_use("p1", "delegate", task="write hello.txt")],
            [text("parent done")],
        ],
        "children": [[
            [tool_use("c1", "bash", command=child_command)],
            [text(CHILD_ANSWER)],
        ]],
    }), encoding="utf-8")
    return path


def _run_args(script: Path, ws: Path) -> list[str]:
    return ["run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash", "--allow", "delegate",
            "--json", "go"]


def _sessions(cli: StrataCLI) -> list[dict[str, Any]]:
    return json_lines_in_process(cli, "sessions", "--json")


def _one_parent_one_child(cli: StrataCLI) -> tuple[dict[str, Any], dict[str, Any]]:
    rows = _sessions(cli)
    parents = [r for r in rows if r["parent_id"] is None]
    children = [r for r in rows if r["parent_id"] is not None]
    assert len(parents) == 1 and len(children) == 1, rows
    assert children[0]["parent_id"] == parents[0]["id"]
    return parents[0], children[0]


def _until_started(proc: subprocess.Popen[str], started: Path) -> None:
    """Wait until the child's bash touched `started` (the parent must still run)."""
    deadline = time.monotonic() + 30
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child's bash never started"
        time.sleep(0.02)


def _delegate_result(stdout: str) -> dict[str, Any]:
    return call_results(events_of(stdout))["p1"]


@dataclass(frozen=True)
class Delegated:
    """A finished delegation made once for the module: the parent's run (its child wrote hello.txt and the
    effects log once), in a home the tests copy and a workspace they only read."""

    home: Path
    workspace: Path
    run: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def delegated(tmp_path_factory: pytest.TempPathFactory) -> Delegated:
    base = tmp_path_factory.mktemp("delegated")
    (base / "home").mkdir()
    (base / "ws").mkdir()
    maker = StrataCLI(base / "home", base)
    script = _script(base / "s.json", f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")
    return Delegated(maker.home, base / "ws", maker.run(*_run_args(script, base / "ws")))


@pytest.fixture
def finished(cli: StrataCLI, delegated: Delegated) -> Delegated:
    """The module's finished delegation, its home copied into this test's (no process has it open): what a test
    records there (a fork, another session) no other test sees. Its workspace is shared: a test that would run
    an effect of these sessions again makes its own (as the fork-and-resume test does)."""
    shutil.copytree(delegated.home, cli.home, dirs_exist_ok=True)
    return delegated


def test_a_child_writes_a_file_and_the_parent_gets_its_answer(cli: StrataCLI, finished: Delegated) -> None:
    proc = finished.run
    assert proc.returncode == 0, proc.stderr
    assert (finished.workspace / "hello.txt").read_text() == "hi\n"
    assert (finished.workspace / EFFECTS_LOG).read_text() == "once\n"
    result = _delegate_result(proc.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    parent, child = _one_parent_one_child(cli)
    assert child["status"] == "completed" and child["model"].endswith("#child=0")
    assert child["id"] in result["content"]
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["tool"] == "delegate" and receipt["resource_keys"] == [f"session:{child['id']}"]
    assert receipt["status"] == "done"


def test_a_child_that_parks_parks_its_parent_and_one_resume_after_the_decision_finishes_both(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    script = _script(tmp_path / "s.json", f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")
    args = ["run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "delegate",
            "--on-ask", "park", "go"]
    parked = cli.run(*args)
    assert parked.returncode == 4, parked.stderr  # awaiting approval: the child's bash asks, nobody is there
    parent, child = _one_parent_one_child(cli)
    assert (parent["status"], child["status"]) == ("awaiting_approval", "awaiting_approval")
    assert f"waiting: call p1 (delegate) waits: child session {child['id']} waits for approval" in parked.stdout
    assert f"strata approve {child['id']} --all" in parked.stdout and not (workspace / "hello.txt").exists()
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["status"] == "dispatched"  # the delegate call is neither finished nor unknown: it waits

    early = cli.run("resume", parent["id"])  # before the decision: the same child is asked again, and parks again
    assert early.returncode == 4, early.stderr
    assert len(_sessions(cli)) == 2 and not (workspace / "hello.txt").exists()

    approved = cli.run("approve", child["id"], "--all")
    assert approved.returncode == 0, approved.stderr
    resumed = cli.run("resume", parent["id"], "--json")  # enters the delegate call again: it resumes the child
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    parent2, child2 = _one_parent_one_child(cli)
    assert child2["id"] == child["id"] and (parent2["status"], child2["status"]) == ("completed", "completed")
    assert (workspace / EFFECTS_LOG).read_text() == "once\n" and (workspace / "hello.txt").read_text() == "hi\n"
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["status"] == "done"
    assert run_in_process(cli, "timeline", parent["id"], "--verify").returncode == 0


def test_killed_after_the_child_finished_resume_uses_its_recorded_result(cli: StrataCLI, tmp_path: Path,
                                                                          workspace: Path) -> None:
    script = _script(tmp_path / "s.json", f"echo once >> {EFFECTS_LOG}")
    killed = cli.run(*_run_args(script, workspace), env={"STRATA_FAULT": "after_child"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    parent, child = _one_parent_one_child(cli)
    assert child["status"] == "completed"
    child_events = len(json_lines_in_process(cli, "timeline", child["id"], "--json"))
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    assert (result_line(resumed.stdout) or {})["status"] == "completed"
    _one_parent_one_child(cli)
    assert len(json_lines_in_process(cli, "timeline", child["id"], "--json")) == child_events  # not run again
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_killed_while_the_childs_bash_runs_resume_resumes_that_child(cli: StrataCLI, tmp_path: Path,
                                                                      workspace: Path) -> None:
    started = workspace / "started"
    script = _script(tmp_path / "s.json", f"touch started; sleep 1; echo once >> {EFFECTS_LOG}")
    proc = cli.popen(*_run_args(script, workspace))
    try:
        _until_started(proc, started)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.communicate()
    parent, child = _one_parent_one_child(cli)
    assert child["status"] == "interrupted"  # its lease holder died
    resumed = cli.run("resume", parent["id"], "--json")  # waits for the orphaned bash, then settles it unknown
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    assert "1 effect(s) with unknown outcome" in result["content"]
    _, child2 = _one_parent_one_child(cli)
    assert child2["id"] == child["id"] and child2["status"] == "completed"
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"  # the bash ran once, never again


def test_ctrl_c_while_the_child_runs_says_the_child_stopped_with_its_parent(cli: StrataCLI, tmp_path: Path,
                                                                           workspace: Path) -> None:
    started = workspace / "started"
    script = _script(tmp_path / "s.json", "touch started; sleep 30")
    proc = cli.popen(*_run_args(script, workspace))
    try:
        _until_started(proc, started)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    parent, child = _one_parent_one_child(cli)
    # the delegate call's outcome stays unknown, and the hint says what is certain: the child stopped with it
    assert f"child session {child['id']} was stopped with this session" in err, err
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["status"] == "unknown" and f"strata show {child['id']}" in receipt["note"]
    assert child["status"] == "idle"  # stopped, not finished: only resuming it (itself) finishes it
    (bash,) = json_lines_in_process(cli, "receipts", child["id"], "--json")
    assert bash["status"] == "unknown"  # its own interrupted command, settled in it


def test_killed_after_the_childs_bash_finished_no_effect_runs_twice(cli: StrataCLI, tmp_path: Path,
                                                                     workspace: Path) -> None:
    script = _script(tmp_path / "s.json", f"echo once >> {EFFECTS_LOG}")
    # after_dispatch 1 is the child's bash (the parent's delegate call is still running).
    killed = cli.run(*_run_args(script, workspace), env={"STRATA_FAULT": "after_dispatch:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    parent, child = _one_parent_one_child(cli)
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert CHILD_ANSWER in result["content"], result
    _one_parent_one_child(cli)
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["status"] == "done" and receipt["resource_keys"] == [f"session:{child['id']}"]




def test_sessions_and_timeline_show_the_child_under_its_parent(cli: StrataCLI, finished: Delegated) -> None:
    assert finished.run.returncode == 0, finished.run.stderr
    parent, child = _one_parent_one_child(cli)
    assert (parent["depth"], child["depth"]) == (0, 1)
    listing = run_in_process(cli, "sessions").stdout.splitlines()
    at = next(i for i, line in enumerate(listing) if line.startswith(parent["id"]))
    assert listing[at + 1].startswith(f"  {child['id']}")
    rows = json_lines_in_process(cli, "timeline", parent["id"], "--children", "--json")
    owners = [r["session_id"] for r in rows]
    first, last = owners.index(child["id"]), len(owners) - 1 - owners[::-1].index(child["id"])
    assert set(owners[first:last + 1]) == {child["id"]}  # the child's rows together, in place
    before, after = rows[first - 1], rows[last + 1]
    assert (before["kind"], before["tool"], before["outcome"]) == ("receipt", "delegate", "dispatched")
    assert (after["kind"], after["tool"], after["outcome"]) == ("receipt", "delegate", "done")
    assert len(rows) == (len(json_lines_in_process(cli, "timeline", parent["id"], "--json"))
                         + len(json_lines_in_process(cli, "timeline", child["id"], "--json")))
    table = run_in_process(cli, "timeline", parent["id"], "--children").stdout
    assert f"[child {child['id'][:8]}]" in table


def test_a_fork_of_a_child_is_listed_right_after_it_at_its_depth(cli: StrataCLI, finished: Delegated,
                                                                  tmp_path: Path, workspace: Path) -> None:
    """Before, a fork of a child was listed among the top-level sessions, at the end, indented under whichever
    session came before it."""
    assert finished.run.returncode == 0, finished.run.stderr
    parent, child = _one_parent_one_child(cli)
    later = _script(tmp_path / "later.json", "true")  # another session, older than the fork
    assert cli.run("run", "--model", f"script:{later}", "--workspace", str(workspace), "later").returncode == 0
    (forked,) = cli.json_lines("fork", child["id"], "--at-event", "2", "--json")
    listing = [line for line in run_in_process(cli, "sessions").stdout.splitlines()[1:] if line.strip()]
    ids = [line.split()[0] for line in listing]
    at = ids.index(child["id"])
    assert ids[at - 1:at + 2] == [parent["id"], child["id"], forked["session_id"]]
    assert listing[at + 1].startswith(f"  {forked['session_id']}")
    assert {r["id"]: r["depth"] for r in _sessions(cli)}[forked["session_id"]] == 1


def test_forking_a_parent_before_its_delegate_call_does_not_fork_the_child(cli: StrataCLI, tmp_path: Path,
                                                                           workspace: Path) -> None:
    script = _script(tmp_path / "s.json", f"echo once >> {EFFECTS_LOG}")
    assert cli.run(*_run_args(script, workspace)).returncode == 0
    parent, child = _one_parent_one_child(cli)
    (forked,) = cli.json_lines("fork", parent["id"], "--at-event", "2", "--json")  # started, and the prompt
    rows = {r["id"]: r for r in _sessions(cli)}
    assert len(rows) == 3 and rows[forked["session_id"]]["depth"] == 0
    assert [r["id"] for r in rows.values() if r["parent_id"] and r["fork_seq"] is None] == [child["id"]]
    resumed = cli.run("resume", forked["session_id"], "--json")  # the fork delegates anew: its own child
    assert resumed.returncode == 0, resumed.stderr
    kids = {r["parent_id"]: r["id"] for r in _sessions(cli) if r["parent_id"] and r["fork_seq"] is None}
    assert kids[parent["id"]] == child["id"] and kids[forked["session_id"]] != child["id"]
    assert len(kids) == 2


def test_the_html_export_nests_the_childs_waterfall_under_the_delegate_call(cli: StrataCLI, finished: Delegated,
                                                                            tmp_path: Path) -> None:
    assert finished.run.returncode == 0, finished.run.stderr
    parent, child = _one_parent_one_child(cli)
    page = tmp_path / "parent.html"
    assert run_in_process(cli, "export", parent["id"], "--format", "html", "-o", str(page)).returncode == 0
    island = re.search(r'<script id="strata-data" type="application/json">(.*?)</script>', page.read_text(), re.S)
    assert island is not None
    rows = json.loads(island.group(1))["rows"]
    at = next(i for i, r in enumerate(rows) if r["kind"] == "call" and r["label"] == "delegate")
    nested = [r for r in rows[at + 1:] if r.get("child")]
    assert nested and all(r["session"] == child["id"] for r in nested)
    assert rows[at + 1: at + 1 + len(nested)] == nested  # right under the delegate call
    assert any(r["kind"] == "call" and r["label"].endswith("bash") for r in nested)
    call = rows[at]
    assert all(call["x0"] <= r["x0"] and r["x1"] <= call["x1"] for r in nested)  # within the call's bar
    child_page = tmp_path / "child.html"
    assert run_in_process(cli, "export", child["id"], "--format", "html", "-o", str(child_page)).returncode == 0
    assert f"child of <code>{parent['id']}</code>" in child_page.read_text()


def _parked_parent(cli: StrataCLI, tmp_path: Path, workspace: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    script = _script(tmp_path / "s.json", f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "delegate",
                     "--on-ask", "park", "go")
    assert parked.returncode == 4, parked.stderr
    return _one_parent_one_child(cli)


def _status(cli: StrataCLI, session_id: str) -> str:
    return next(r["status"] for r in _sessions(cli) if r["id"] == session_id)


def _leased(cli: StrataCLI, session_id: str) -> bool:
    """Whether a process took the session's lease (taking it records the status `active`), read from the home's
    database directly, read-only: what the wait loops poll, where a `strata sessions` process per poll cost more
    CPU than the rest of the test."""
    conn = sqlite3.connect(f"file:{cli.home / 'strata.db'}?mode=ro", uri=True)
    try:
        (status,) = conn.execute("SELECT status FROM sessions WHERE id = ?", (session_id,)).fetchone()
    finally:
        conn.close()
    return bool(status == "active")


def test_a_refused_decision_on_a_parent_waiting_for_its_child_leaves_it_awaiting_approval(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The parent has no parked call of its own (its delegate call waits in the child): `strata approve|deny
    PARENT` is refused, and the refusal does not make the parent look idle in `strata sessions`."""
    parent, child = _parked_parent(cli, tmp_path, workspace)
    for args in (("approve", parent["id"], "--all"), ("deny", parent["id"], "--all"), ("approve", parent["id"], "p1")):
        refused = cli.run(*args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert _status(cli, parent["id"]) == "awaiting_approval", args
    assert _status(cli, child["id"]) == "awaiting_approval"
    assert cli.run("approve", child["id"], "--all").returncode == 0
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert (_status(cli, parent["id"]), _status(cli, child["id"])) == ("completed", "completed")
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_a_new_prompt_for_a_parent_whose_child_still_waits_is_refused_not_dropped(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`strata resume PARENT PROMPT` while the child waits for a decision would park again and lose the prompt:
    it is refused before anything is recorded, naming the child to decide; once decided, the same command runs."""
    parent, child = _parked_parent(cli, tmp_path, workspace)
    events = len(json_lines_in_process(cli, "timeline", parent["id"], "--json"))
    refused = cli.run("resume", parent["id"], "and then say hi")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"strata approve {child['id']} --all" in refused.stderr, refused.stderr
    assert len(json_lines_in_process(cli, "timeline", parent["id"], "--json")) == events  # nothing recorded
    assert (_status(cli, parent["id"]), _status(cli, child["id"])) == ("awaiting_approval", "awaiting_approval")
    assert cli.run("approve", child["id"], "--all").returncode == 0
    resumed = cli.run("resume", parent["id"], "and then say hi", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert CHILD_ANSWER in _delegate_result(resumed.stdout)["content"]
    user_texts = [e.get("text") for e in events_of(resumed.stdout) if e["kind"] == "user_message"]
    assert "and then say hi" in user_texts, user_texts
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_a_grandchild_that_parks_is_the_session_the_parent_says_to_decide(cli: StrataCLI, tmp_path: Path,
                                                                         workspace: Path) -> None:
    """Parent -> child -> grandchild, the grandchild's write parks: the parent's waiting line names the session
    that holds the parked call (the child has none of its own), and doing what it says finishes all three."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="level 1")], [text("parent done")]],
        "children": [{
            "turns": [[tool_use("c1", "delegate", task="level 2")], [text("child done")]],
            "children": [[[tool_use("g1", "write_file", path="g.txt", content="g")], [text("grandchild done")]]],
        }],
    }), encoding="utf-8")
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "delegate",
                     "--on-ask", "park", "go")
    assert parked.returncode == 4, parked.stderr
    rows = _sessions(cli)
    parent = next(r for r in rows if r["depth"] == 0)
    grandchild = next(r for r in rows if r["depth"] == 2)
    waiting = next(line for line in parked.stdout.splitlines() if line.startswith("waiting: call p1"))
    told = re.findall(r"decide with strata approve (\S+) --all", waiting)
    assert told and told[-1] == grandchild["id"], waiting  # the outermost instruction, the one a person follows
    assert cli.run("approve", told[-1], "--all").returncode == 0
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert {r["status"] for r in _sessions(cli)} == {"completed"}
    assert (workspace / "g.txt").read_text() == "g"


def test_an_unknown_effect_of_a_grandchild_is_counted_in_the_parents_delegate_result(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The grandchild's command times out (its outcome unknown); the child answers as if all went well. The
    parent's delegate result still says an effect below it awaits reconciliation, naming the session that holds
    it, as it does for the child's own unknown effects."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "turns": [[tool_use("p1", "delegate", task="child task")], [text("parent done")]],
        "children": [{
            "turns": [[tool_use("c1", "delegate", task="grandchild task")], [text("child done")]],
            "children": [[[tool_use("g1", "bash", command="sleep 5", timeout_s=0.3)], [text("grandchild done")]]],
        }],
    }), encoding="utf-8")
    proc = cli.run(*_run_args(script, workspace))
    assert proc.returncode == 0, proc.stderr
    rows = _sessions(cli)
    (grandchild,) = [r for r in rows if r["depth"] == 2]
    assert grandchild["unknown_receipts"] == 1, rows
    result = _delegate_result(proc.stdout)
    assert result["status"] == "ok" and "child done" in result["content"], result
    assert ("1 effect(s) with unknown outcome in the sessions it delegated to await reconciliation: "
            f"strata receipts {grandchild['id']}") in result["content"], result


def test_every_export_of_a_child_masks_the_call_id_that_started_it(cli: StrataCLI, tmp_path: Path,
                                                                   workspace: Path) -> None:
    """A call id that is a configured secret (configured after the run, so the plan phase did not rename it) is
    masked wherever a child's export names the parent's delegate call: the OTLP link's attribute too."""
    call_id = "zkq7Vw3mPq9xT2"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[tool_use(call_id, "delegate", task="t")], [text("parent done")]],
                                  "children": [[[text("child done")]]]}), encoding="utf-8")
    assert cli.run(*_run_args(script, workspace)).returncode == 0
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[secrets]\nvalues = ["{call_id}"]\n', encoding="utf-8")
    (_, child) = _one_parent_one_child(cli)
    for fmt in ("jsonl", "html", "otlp"):
        exported = run_in_process(cli, "export", child["id"], "--format", fmt, "--output", "-")
        assert exported.returncode == 0, exported.stderr
        assert call_id not in exported.stdout, fmt
        assert "[MASKED:" in exported.stdout, fmt


def _busy_child(cli: StrataCLI, tmp_path: Path, workspace: Path) -> tuple[dict[str, Any], dict[str, Any],
                                                                          subprocess.Popen[str]]:
    """A parent parked on its child's approval; the child approved and driven by another `strata resume CHILD`,
    whose bash runs (it holds the child's lease) until `release` appears in the workspace."""
    script = _script(tmp_path / "s.json", f"touch started; while [ ! -e release ] && [ $SECONDS -lt 300 ]; "
                                          f"do sleep 0.05; done; "
                                          f"echo hi > hello.txt; echo once >> {EFFECTS_LOG}")
    parked = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "delegate",
                     "--on-ask", "park", "go")
    assert parked.returncode == 4, parked.stderr
    parent, child = _one_parent_one_child(cli)
    assert cli.run("approve", child["id"], "--all").returncode == 0
    driver = cli.popen("resume", child["id"], "--json")
    _until_started(driver, workspace / "started")
    return parent, child, driver


def _finish(driver: subprocess.Popen[str], workspace: Path) -> None:
    (workspace / "release").touch()
    _, err = driver.communicate(timeout=60)
    assert driver.returncode == 0, err


def _waits_for_its_child(cli: StrataCLI, parent_id: str) -> None:
    """The parent is listed (the quick way and the full way) and shown as waiting for its child, not for a
    decision; its row's status stays `awaiting_approval`."""
    for args in (("sessions", "--json"), ("--verbose", "sessions", "--json")):
        row = next(r for r in json_lines_in_process(cli, *args) if r["id"] == parent_id)
        assert (row["status"], row["stored_status"]) == ("waiting_for_child", "awaiting_approval"), args
    assert show_in_process(cli, parent_id)["session"]["status"] == "waiting_for_child"


def test_a_delegate_call_whose_child_another_process_drives_parks_and_a_later_resume_finishes_it_once(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Before, re-entering the delegate call while another process held the child's lease failed the call (the
    parent's model was told the child errored, though it went on running elsewhere). Now the parent parks (exit 4)
    saying which process drives the child, its delegate receipt stays `dispatched`, and a resume after the child
    finished takes the child's recorded result: the child's effect ran once."""
    parent, child, driver = _busy_child(cli, tmp_path, workspace)
    try:
        waits = cli.run("resume", parent["id"], "--json")
        assert waits.returncode == 4, (waits.stdout, waits.stderr)
        assert "Traceback" not in waits.stderr
        assert f"child session {child['id']} is being run by another process" in waits.stdout, waits.stdout
        (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
        assert receipt["status"] == "dispatched"
        assert driver.poll() is None  # the other process still drives the child, untouched
        _waits_for_its_child(cli, parent["id"])
    finally:
        _finish(driver, workspace)
    resumed = cli.run("resume", parent["id"], "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = _delegate_result(resumed.stdout)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    parent2, child2 = _one_parent_one_child(cli)
    assert (parent2["status"], child2["status"]) == ("completed", "completed")
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"
    (receipt,) = json_lines_in_process(cli, "receipts", parent["id"], "--json")
    assert receipt["status"] == "done"


def test_a_new_prompt_for_a_parent_whose_child_another_process_drives_is_refused_naming_the_child(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`strata resume PARENT PROMPT` while the child its delegate call waits on is driven elsewhere would park
    again and lose the prompt: refused (exit 2) in one line naming the child and its process, nothing recorded;
    once the child is done, the same command runs with the prompt."""
    parent, child, driver = _busy_child(cli, tmp_path, workspace)
    try:
        events = len(json_lines_in_process(cli, "timeline", parent["id"], "--json"))
        refused = cli.run("resume", parent["id"], "and then say hi")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        (line,) = [line for line in refused.stderr.splitlines() if line.startswith("strata: error:")]
        assert f"waiting for child session {child['id']}, which another process runs (pid {driver.pid}" in line
        assert len(json_lines_in_process(cli, "timeline", parent["id"], "--json")) == events  # nothing recorded
        assert driver.poll() is None
        _waits_for_its_child(cli, parent["id"])
    finally:
        _finish(driver, workspace)
    resumed = cli.run("resume", parent["id"], "and then say hi", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert CHILD_ANSWER in _delegate_result(resumed.stdout)["content"]
    user_texts = [e.get("text") for e in events_of(resumed.stdout) if e["kind"] == "user_message"]
    assert "and then say hi" in user_texts, user_texts
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_a_delegate_call_waits_a_moment_for_its_childs_lease_and_takes_the_result_once_it_is_free(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A child's lease held only briefly (a decision being recorded, a run about to end) does not park the parent:
    the delegate call waits for it a few seconds (agent/delegation.py CHILD_LEASE_WAIT_S), then takes the finished
    child's recorded result, without resuming the child again. Before, the parent parked at once."""
    parent, child, driver = _busy_child(cli, tmp_path, workspace)
    try:
        resume = cli.popen("resume", parent["id"], "--json")
        deadline = time.monotonic() + 30
        while not _leased(cli, parent["id"]):  # the parent holds its lease: its delegate call is next
            assert resume.poll() is None and time.monotonic() < deadline, resume.communicate()
            time.sleep(0.05)
    finally:
        _finish(driver, workspace)
    out, err = resume.communicate(timeout=60)
    assert resume.returncode == 0, (out, err)
    result = _delegate_result(out)
    assert result["status"] == "ok" and CHILD_ANSWER in result["content"], result
    rows = json_lines_in_process(cli, "timeline", child["id"], "--json")
    resumed = [r for r in rows if r["kind"] == "lifecycle" and r["outcome"] == "resumed"]
    assert len(resumed) == 1, resumed  # by the other process only: the parent did not resume the child again
    assert _status(cli, child["id"]) == "completed" and (workspace / EFFECTS_LOG).read_text() == "once\n"


def test_a_new_prompt_for_a_parent_waits_a_moment_for_its_childs_lease_instead_of_being_refused(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The child's lease held only for a moment (as `strata approve CHILD` holds it while it records a decision;
    here a process holds it until the test lets go): `strata resume PARENT PROMPT` waits for it (up to
    agent/delegation.py CHILD_LEASE_WAIT_S) instead of refusing the prompt as if another process drove the child,
    then runs the child, takes its result and hears the prompt. Before, it was refused (exit 2) at once."""
    parent, child = _parked_parent(cli, tmp_path, workspace)
    assert cli.run("approve", child["id"], "--all").returncode == 0
    holder = subprocess.Popen([sys.executable, "-m", "tests.serve._hold_lease", child["id"]], cwd=cli.cwd,
                              env=cli.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.communicate()
        resume = cli.popen("resume", parent["id"], "and then say hi", "--json")
        deadline = time.monotonic() + 30
        while resume.poll() is None and not _leased(cli, parent["id"]):  # it holds the parent's lease
            assert time.monotonic() < deadline, "the resume never took the parent's lease"
            time.sleep(0.02)
    finally:
        _, err = holder.communicate(input="", timeout=30)  # the decision is recorded: the child's lease is free
        assert holder.returncode == 0, err
    out, err = resume.communicate(timeout=60)
    assert resume.returncode == 0, (out, err)
    assert CHILD_ANSWER in _delegate_result(out)["content"]
    user_texts = [e.get("text") for e in events_of(out) if e["kind"] == "user_message"]
    assert "and then say hi" in user_texts, user_texts
    assert (workspace / EFFECTS_LOG).read_text() == "once\n"
