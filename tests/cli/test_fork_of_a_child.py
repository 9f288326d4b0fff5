"""A fork of a delegated child is a session of its own, not a second child of the parent's call: its first event
names the session it was forked from (`parent_id`) and no parent's `delegate` call (before, it kept the child's
`parent_call_id`, so its log said the parent's call had started it). It keeps what bounds the child's plan, its
delegation depth and its narrowed tools: a fork never gets more than the session it continues (a child at
`delegate_max_depth` has no `delegate`, and neither has its fork when resumed). Real `strata run`, `fork`, `export`
and `resume` processes, a scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._in_process_cli import json_lines_in_process, run_in_process
from tests.cli._helpers import EFFECTS_LOG, text, tool_use
from tests.conftest import StrataCLI

ONE_DEEP = {"STRATA_DELEGATE_MAX_DEPTH": "1"}
"""A child of a top-level session is as deep as delegation goes: it has no `delegate`."""


def _script(path: Path) -> Path:
    path.write_text(json.dumps({
        "turns": [[text("delegating"), tool_use("p1", "delegate", task="write hello.txt")], [text("parent done")]],
        "children": [[[tool_use("c1", "bash", command=f"echo once >> {EFFECTS_LOG}")], [text("child done")],
                      [text("the fork goes on")]]],
    }), encoding="utf-8")
    return path


def _events(cli: StrataCLI, session_id: str) -> list[dict[str, Any]]:
    return [e for e in json_lines_in_process(cli, "export", session_id, "--format", "jsonl") if e["type"] == "event"]


def test_a_fork_of_a_child_names_its_source_and_no_parents_call_and_keeps_its_plan_bounds(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    script = _script(tmp_path / "s.json")
    ran = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "--allow",
                  "delegate", "--json", "go", env=ONE_DEEP)
    assert ran.returncode == 0, ran.stderr
    (child,) = [r for r in json_lines_in_process(cli, "sessions", "--json") if r["parent_id"] is not None]
    child_started = _events(cli, child["id"])[0]
    assert (child_started["kind"], child_started["parent_call_id"], child_started["depth"]) == (
        "session_started", "p1", 1)

    (forked,) = cli.json_lines("fork", child["id"], "--at-turn", "1", "--json")
    fork_id = forked["session_id"]
    fork_started = _events(cli, fork_id)[0]
    assert (fork_started["kind"], fork_started["parent_id"]) == ("session_started", child["id"])
    assert fork_started.get("parent_call_id") is None, fork_started  # no delegate call started it
    assert (fork_started["depth"], fork_started["tools_allowed"]) == (1, child_started["tools_allowed"])
    listed = {r["id"]: r for r in json_lines_in_process(cli, "sessions", "--json")}[fork_id]
    assert (listed["parent_id"], listed["depth"], listed["fork_seq"]) == (child["id"], 1, forked["fork_seq"])

    resumed = cli.run("resume", fork_id, "go on", "--json", "--allow", "bash", env=ONE_DEEP)
    assert resumed.returncode == 0, resumed.stderr
    (again,) = [e for e in _events(cli, fork_id) if e["kind"] == "session_resumed"]
    assert again["plan_digest"] == child_started["plan_digest"]  # the child's plan: no `delegate` handed out
    assert (workspace / EFFECTS_LOG).read_text(encoding="utf-8") == "once\n"  # nothing before the fork ran again
    page = run_in_process(cli, "export", fork_id, "--format", "html")
    assert page.returncode == 0, page.stderr
    html = Path(page.stdout.strip()).read_text(encoding="utf-8")
    assert "Forked from" in html and "Delegated by" not in html
