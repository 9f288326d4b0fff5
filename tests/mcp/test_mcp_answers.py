"""What a server answers to one `tools/call` decides that call only (tests/mcp/answers_server.py, a hand-written
server as a real process over stdio, against real `strata` processes): a JSON-RPC error answer refuses the call
with the server's error and leaves the server up; a result Strata cannot read makes the call's outcome unknown at
once; a result that does not fit the tool's declared output schema is the result (output schemas of remote tools
are not enforced)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.cli._helpers import call_results, events_of, strata, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

ANSWERS = Path(__file__).with_name("answers_server.py")


def answers(cli: StrataCLI, tmp_path: Path, *, effectful: tuple[str, ...] = ()) -> Path:
    """Declares the server `a` (every tool read-only, except `effectful` ones); returns its state directory."""
    state = tmp_path / "answers-state"
    table = f'[mcp.servers.a]\ncommand = "{sys.executable}"\nargs = ["{ANSWERS}", "{state}"]\nstartup_timeout_s = 20\n'
    for tool in ("echo", "refuse", "refuse_params", "refuse_closed", "garbled", "garbled_frame", "shaped", "unshaped"):
        if tool in effectful:
            table += f'\n[mcp.servers.a.tools.{tool}]\nsafety = "write"\neffect = "effectful"\ntimeout_s = 60\n'
        else:
            table += f'\n[mcp.servers.a.tools.{tool}]\nsafety = "read"\neffect = "read_only"\ntimeout_s = 60\n'
    user_config(cli, table)
    return state


def starts(state: Path) -> int:
    return len((state / "started").read_text(encoding="utf-8").splitlines())


def calls(state: Path) -> list[str]:
    return [line.split()[0] for line in (state / "calls.log").read_text(encoding="utf-8").splitlines()]


def test_a_json_rpc_error_answer_refuses_that_call_only_and_the_server_stays_up(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """-32000 is also the code the SDK gives every call when the connection closes: a server's error answer with it
    made an effectful call's outcome unknown and gave the whole server up (the calls after it: 'not available'), even
    worded as the SDK's own 'Connection closed' (a gateway whose upstream closed). It refuses that call only."""
    state = answers(cli, tmp_path, effectful=("refuse", "refuse_closed"))
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__a__refuse", q="x"), tool_use("c2", "mcp__a__echo", q="same batch")],
        [tool_use("c3", "mcp__a__refuse_params", q="y")], [tool_use("c5", "mcp__a__refuse_closed", q="z")],
        [tool_use("c4", "mcp__a__echo", q="after")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                 "--allow", "mcp__a__refuse", "--allow", "mcp__a__refuse_closed", "go")
    results = call_results(events_of(run.stdout))
    for call_id, message in (("c1", "backend quota exceeded"), ("c3", "unknown repository"),
                             ("c5", "Connection closed")):
        assert results[call_id]["status"] == "error" and results[call_id]["is_error"], results[call_id]
        assert "MCP server 'a' refused the call" in results[call_id]["content"], results[call_id]
        assert message in results[call_id]["content"], results[call_id]
    assert "-32000" in results["c1"]["content"] and "-32602" in results["c3"]["content"]
    assert results["c2"]["status"] == "ok" and "echo same batch" in results["c2"]["content"]
    assert results["c4"]["status"] == "ok" and "echo after" in results["c4"]["content"]
    assert run.returncode == 0, run.stderr  # nothing unknown: a refusal is an answer
    assert "notice" not in run.stderr, run.stderr  # the server was never dropped
    assert starts(state) == 1 and calls(state).count("refuse") == 1  # neither restarted nor retried
    assert calls(state).count("refuse_closed") == 1


def test_a_result_strata_cannot_read_makes_the_calls_outcome_unknown_at_once(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A result that is not a CallToolResult crashed the call's handler (a traceback on stderr, an effectful call
    reported as an error: 'nothing was done'); an answer that is not JSON-RPC at all was dropped, and the call
    waited for its deadline. The server had the call either way: its outcome is unknown at once."""
    state = answers(cli, tmp_path, effectful=("garbled", "garbled_frame"))
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__a__garbled", q="x")], [tool_use("c2", "mcp__a__garbled_frame", q="y")],
        [tool_use("c3", "mcp__a__echo", q="after")], [text("done")]])
    began = time.monotonic()
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                 "--allow", "mcp__a__garbled", "--allow", "mcp__a__garbled_frame", "go")
    took = time.monotonic() - began
    results = call_results(events_of(run.stdout))
    for call_id in ("c1", "c2"):
        assert results[call_id]["status"] == "unknown", results[call_id]
        assert "could not read" in results[call_id]["content"], results[call_id]
    assert results["c3"]["status"] == "ok" and "echo after" in results["c3"]["content"]  # the server is still up
    assert run.returncode == 5, run.stderr  # unknown effects wait for `strata reconcile`
    assert "Traceback" not in run.stderr and "notice" not in run.stderr, run.stderr
    assert took < 30, took  # at once, not after the calls' 60-second deadline
    assert starts(state) == 1 and calls(state) == ["garbled", "garbled_frame", "echo"]  # neither retried


def test_an_unreadable_result_of_a_read_only_call_is_an_error_and_not_retried(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = answers(cli, tmp_path)
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__a__garbled", q="x")], [tool_use("c2", "mcp__a__echo", q="after")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "error" and "could not read" in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok"
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert starts(state) == 1 and calls(state).count("garbled") == 1


def test_a_result_that_does_not_fit_the_tools_output_schema_is_the_result_not_enforced(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = answers(cli, tmp_path)
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__a__shaped", q="x"), tool_use("c2", "mcp__a__unshaped", q="y")],
        [tool_use("c3", "mcp__a__echo", q="after")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go")
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "ok" and '{"n": "many"}' in results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "ok" and "no structure here" in results["c2"]["content"], results["c2"]
    assert results["c3"]["status"] == "ok"
    assert run.returncode == 0 and "notice" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert starts(state) == 1
