"""The plan digest covers each MCP tool's schema and policy: a resume after the server changed a tool's schema
records the plan change, a call approved under the old plan is asked again, never run on the stale approval, and
the model is told which tools changed.
Real `strata` processes and the SDK-written test server as a real process."""

from __future__ import annotations

import json
from pathlib import Path

from tests._in_process_cli import json_lines_in_process, show_in_process
from tests.cli._helpers import call_results, events_of, result_line, strata, strata_set_up, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import POLICIES, stdio_table, user_config


def plan_digest(cli: StrataCLI, session_id: str) -> str:
    events = json_lines_in_process(cli, "export", session_id, "--format", "jsonl")
    (started,) = [e for e in events if e.get("kind") == "session_started"]
    return str(started["plan_digest"])


def test_a_changed_tool_schema_on_resume_is_a_plan_change_and_the_old_approval_is_asked_again(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    user_config(cli, stdio_table(state) + POLICIES)
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__close_issue", repo="a/b", number=7)], [text("done")]])
    first = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                   "--on-ask", "park", "close it")
    assert first.returncode == 4, first.stderr
    session_id = result_line(first.stdout)["session_id"]  # type: ignore[index]
    assert strata_set_up(cli, "approve", session_id, "c1").returncode == 0  # bound to this plan's digest

    (state / "schema-v2").touch()  # the server now lists close_issue with another input schema
    resumed = strata(cli, "resume", session_id, "--json")
    assert resumed.returncode == 4, resumed.stderr  # asked again (parked again), not run
    assert not (state / "closed.log").exists()
    assert "c1" not in call_results(events_of(resumed.stdout))

    rows = json_lines_in_process(cli, "timeline", session_id, "--json")
    (row,) = [r for r in rows if r["kind"] == "lifecycle" and r["summary"].startswith("session resumed")]
    assert "the tool plan changed since the last run" in row["summary"], row
    detail = json.dumps(row)
    assert plan_digest(cli, session_id) in detail  # the previous plan digest is recorded beside the new one
    asked = [r for r in rows if r["kind"] == "approval" and r["summary"].startswith("asked")]
    assert len(asked) == 2 and asked[-1]["seq"] > row["seq"], asked  # asked again after the resume

    assert strata_set_up(cli, "approve", session_id, "c1").returncode == 0  # a new decision, under the new plan
    done = strata(cli, "resume", session_id, "--json")
    assert done.returncode == 0, done.stderr
    assert call_results(events_of(done.stdout))["c1"]["status"] == "ok"
    (told,) = [e for e in events_of(done.stdout) if e["kind"] == "tools_changed"]  # once the batch is closed
    assert told["changed"] == ["mcp__tracker__close_issue"] and not told["added"] and not told["removed"]
    messages = json.dumps(show_in_process(cli, session_id)["messages"])
    assert "Tools from MCP servers changed since you last used them" in messages  # the model is told
    assert (state / "closed.log").read_text(encoding="utf-8").splitlines() == ["a/b#7 "]


def test_the_plan_digest_covers_an_mcp_tools_policy_but_built_in_digests_stay_as_they_were() -> None:
    from core.tools import BoundToolPlan, ToolOutput, ToolSpec
    from tool_executor import builtin_tools

    async def handler(args: object, ctx: object) -> ToolOutput:
        raise AssertionError("never called")

    def spec(keys: list[str], effect: str = "effectful") -> ToolSpec:
        return ToolSpec(name="mcp__t__x", description="", input_schema={"type": "object"}, handler=handler,
                        safety="write", effect=effect,  # type: ignore[arg-type]
                        declared={"server": "t", "transport": "stdio", "resource_keys": keys})

    digests = {BoundToolPlan([spec(["a:{x}"])], "headless").digest, BoundToolPlan([spec(["b:{x}"])], "headless").digest,
               BoundToolPlan([spec(["a:{x}"], "idempotent")], "headless").digest}
    assert len(digests) == 3
    builtins = builtin_tools()
    assert all("declared" not in t.identity() for t in builtins)
