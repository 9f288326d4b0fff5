"""An MCP server's input schema whose `pattern`s backtrack without end (tests/mcp/pattern_server.py, a real process)
against arguments the model writes, in a real `strata run`: Python's `re` took exponential time on `^(a+)+$` and
`aaaa...!`, before dispatch (so before any deadline), and the run hung. The patterns are matched within a budget:
a call whose arguments do not match is denied by the schema check as any other, one whose pattern cannot be matched
within the budget is denied as unevaluable with the pattern named, the others run, and the run ends. Where
jsonschema matches patterns with `re` itself (`patternProperties` beside `unevaluatedProperties`), the tool is
unavailable, with the reason."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.cli._helpers import call_results, events_of, strata, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

SERVER = Path(__file__).with_name("pattern_server.py")
TOOLS = ("lookup", "keyed", "named", "spell", "strict", "echo")


def pattern_table(state: Path) -> str:
    table = f'[mcp.servers.p]\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "{state}"]\nstartup_timeout_s = 20\n'
    return table + "".join(f'[mcp.servers.p.tools.{tool}]\nsafety = "read"\neffect = "read_only"\ntimeout_s = 5\n'
                           for tool in TOOLS)


def test_a_schema_pattern_that_backtracks_without_end_is_checked_within_a_budget_and_the_run_ends(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "p"
    user_config(cli, pattern_table(state))
    evil = "a" * 40 + "!"
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__p__lookup", key=evil), tool_use("c2", "mcp__p__keyed", **{evil: "x"}),
         tool_use("c3", "mcp__p__named", **{evil: 1}), tool_use("c4", "mcp__p__spell", word="a" * 60 + "b"),
         tool_use("c5", "mcp__p__lookup", key="aaaa"), tool_use("c6", "mcp__p__keyed", aaa="x"),
         tool_use("c7", "mcp__p__echo", q="hi")],
        [text("done")]])
    started = time.monotonic()
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    assert time.monotonic() - started < 50  # it ends (it hung for hours): the budget is 1 s per call's check
    results = call_results(events_of(run.stdout))
    for denied in ("c1", "c2", "c3"):  # checked, and not matching: denied as a schema error, nothing sent
        assert results[denied]["status"] == "denied", results[denied]
        assert "match" in results[denied]["content"], results[denied]
    assert results["c4"]["status"] == "denied", results["c4"]  # not decidable within the budget: unevaluable
    assert "cannot be evaluated" in results["c4"]["content"] and "^(a|aa)+$" in results["c4"]["content"]
    for ran in ("c5", "c6", "c7"):
        assert results[ran]["status"] == "ok", results[ran]
    calls = (state / "calls.log").read_text(encoding="utf-8").splitlines()
    assert sorted(line.split()[0] for line in calls) == ["echo", "keyed", "lookup"]  # only those that fit


def test_a_tool_whose_patterns_cannot_be_matched_within_a_limit_is_unavailable_with_the_reason(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "p"
    user_config(cli, pattern_table(state))
    (server,) = cli.json_lines("mcp", "list", "--workspace", str(workspace), "--json")
    tools = {t["tool"]: t for t in server["tools"]}
    assert not tools["strict"]["callable"], tools["strict"]
    assert "unevaluatedProperties with patternProperties" in tools["strict"]["reason"]
    assert all(tools[name]["callable"] for name in TOOLS if name != "strict"), tools
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__p__strict", **{"a" * 40 + "!": "x"})], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    result = call_results(events_of(run.stdout))["c1"]
    assert result["status"] == "denied" and "unknown tool" in result["content"], result  # never offered nor checked
    assert not (state / "calls.log").exists()
