"""Every call of a session, denied ones included, has a timeline row naming what decided it: a session mixing
allowed, denied (scope, schema, policy, unknown tool) and approved calls, through the real CLI."""

from __future__ import annotations

from pathlib import Path

from tests._in_process_cli import json_lines_in_process, run_in_process
from tests.cli._helpers import result_line, text, tool_use
from tests.conftest import StrataCLI, write_script


def test_every_call_has_a_row_with_its_deciding_check(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """Six calls in one batch, one parked then approved: each call's final row says allowed / denied / approved
    and which check, rule or person decided; the chain verifies."""
    (workspace / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_ok", "read_file", path="a.txt"),
         tool_use("toolu_scope", "write_file", path="../outside.txt", content="x"),
         tool_use("toolu_schema", "read_file", path=3),
         tool_use("toolu_policy", "bash", command="rm -rf ."),
         tool_use("toolu_unknown", "launch_rockets", target="moon"),
         tool_use("toolu_asked", "write_file", path="notes.txt", content="hi\n")],
        [text("done")],
    ])
    run = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), "--deny", "bash(rm*)",
                  "--on-ask", "park", "--json", "go")
    assert run.returncode == 4, run.stderr
    result = result_line(run.stdout)
    assert result is not None
    session_id = result["session_id"]
    assert cli.run("approve", session_id, "toolu_asked").returncode == 0
    assert cli.run("resume", session_id).returncode == 0

    rows = json_lines_in_process(cli, "timeline", session_id, "--json", "--kind", "call")
    final = {r["call_id"]: r for r in rows}  # the last row of a call is its final decision
    assert set(final) == {"toolu_ok", "toolu_scope", "toolu_schema", "toolu_policy", "toolu_unknown", "toolu_asked"}
    expected = {
        "toolu_ok": ("allowed", "default: read tools are allowed in headless mode"),
        "toolu_scope": ("denied", "scope"),
        "toolu_schema": ("denied", "schema"),
        "toolu_policy": ("denied", "policy"),
        "toolu_unknown": ("denied", "resolve"),
    }
    for call_id, (decision, check) in expected.items():
        assert (final[call_id]["decision"], final[call_id]["check"]) == (decision, check), final[call_id]
    asked = [r for r in rows if r["call_id"] == "toolu_asked"]
    assert [r["decision"] for r in asked] == ["parked", "approved"]
    assert asked[-1]["check"].startswith("person:") and asked[-1]["outcome"] == "ok"
    assert all(r["prev_hash"] and r["hash"] for r in rows)
    approvals = json_lines_in_process(cli, "timeline", session_id, "--json", "--kind", "approval")
    assert [r["decision"] for r in approvals if r["call_id"] == "toolu_asked"] == ["parked", "approved", "approved"]
    denied = json_lines_in_process(cli, "timeline", session_id, "--json", "--decision", "denied")
    assert {r["call_id"] for r in denied} == {"toolu_scope", "toolu_schema", "toolu_policy", "toolu_unknown"}
    verify = run_in_process(cli, "timeline", session_id, "--verify")
    assert verify.returncode == 0 and "chain verified" in verify.stdout
