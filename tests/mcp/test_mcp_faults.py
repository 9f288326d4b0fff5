"""A server that dies during a call, through real `strata` processes and the SDK-written test server as a real
process: an effectful call's outcome is unknown (its receipt waits for `strata reconcile`, it is never re-run); a
read-only call is retried once on the restarted server and succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import call_results, events_of, result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import POLICIES, http_server, http_table, stdio_table, user_config


def starts(state: Path) -> int:
    return len((state / "started").read_text(encoding="utf-8").splitlines())


@pytest.fixture
def state(cli: StrataCLI, tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    user_config(cli, stdio_table(state) + POLICIES)
    (state / "die-once").touch()  # the next close_issue or search kills the server mid-call
    return state


def test_a_server_killed_during_an_effectful_call_leaves_an_unknown_receipt_for_reconcile(
        cli: StrataCLI, tmp_path: Path, workspace: Path, state: Path) -> None:
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__close_issue", repo="a/b", number=7)],
        [tool_use("c2", "mcp__tracker__search", query="after")],
        [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                 "--allow", "mcp__tracker__close_issue", "close it")
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "unknown" and "stopped during the call" in results["c1"]["content"]
    assert results["c2"]["is_error"] and "not available" in results["c2"]["content"]  # the server stays out
    assert run.returncode == 5, run.stderr  # unknown effects pending
    assert sum("MCP server 'tracker'" in line for line in run.stderr.splitlines()) == 1, run.stderr
    assert starts(state) == 1 and not (state / "closed.log").exists()  # never re-run, not even retried
    session_id = result_line(run.stdout)["session_id"]  # type: ignore[index]

    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert receipt["status"] == "unknown" and receipt["tool"] == "mcp__tracker__close_issue"
    decided = strata(cli, "reconcile", receipt["id"], "--not-applied", "--note", "the server died first")
    assert decided.returncode == 0, decided.stderr
    (after,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert after["status"] == "failed" and after["reconciled_by"]


def test_a_server_killed_during_a_read_only_call_is_restarted_and_the_call_retried_once(
        cli: StrataCLI, tmp_path: Path, workspace: Path, state: Path) -> None:
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__search", query="crash")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    result = call_results(events_of(run.stdout))["c1"]
    assert result["status"] == "ok" and "1 issue matches 'crash'" in result["content"]
    assert starts(state) == 2 and not (state / "die-once").exists()  # died once, started again, answered
    assert "notice" not in run.stderr, run.stderr  # the server came back: nothing to tell


def test_the_server_and_its_process_group_are_gone_when_the_session_ends(
        cli: StrataCLI, tmp_path: Path, workspace: Path, state: Path) -> None:
    (state / "die-once").unlink()
    (state / "spawn-child").touch()
    script = write_script(tmp_path / "script.json", [[text("nothing to do")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "hello")
    assert run.returncode == 0, run.stderr
    (pid,) = (int(line) for line in (state / "started").read_text(encoding="utf-8").splitlines())
    child = int((state / "child.pid").read_text(encoding="utf-8"))
    assert not alive(pid) and not alive(child)  # the server, and what it left behind in its process group


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper is dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    return "\tZ (zombie)" not in status


def test_an_http_server_killed_during_an_effectful_call_leaves_an_unknown_receipt(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "http-state"
    state.mkdir()
    (state / "die-once").touch()
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__close_issue", repo="a/b", number=7)], [text("done")]])
    with http_server(state) as url:
        user_config(cli, http_table(url) + POLICIES)
        run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                     "--allow", "mcp__tracker__close_issue", "close it")
    result = call_results(events_of(run.stdout))["c1"]
    assert result["status"] == "unknown" and run.returncode == 5, (result, run.stderr)
    assert not (state / "closed.log").exists()


def test_a_server_writing_junk_to_stdout_prints_no_traceback(cli: StrataCLI, tmp_path: Path, workspace: Path,
                                                            state: Path) -> None:
    (state / "die-once").unlink()
    (state / "junk-stdout").touch()
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__tracker__search", query="x")],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0 and run.stderr == "", run.stderr  # the SDK's complaint goes to the log only
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"


def test_a_server_whose_command_does_not_exist_could_not_be_started_and_the_others_serve(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The command runs through a shell (which records the process group), so a missing command was the shell's
    exit 127: the notice said the server 'closed the connection before it finished initialising' and pointed at its
    log. It says the server could not be started, naming the server and the command, on one line; the other server
    is used."""
    state = tmp_path / "state"
    state.mkdir()
    user_config(cli, stdio_table(state) + POLICIES + '\n[mcp.servers.ghost]\ncommand = "no-such-mcp-server-zq9"\n'
                '\n[mcp.servers.pathless]\ncommand = "./bin/also-missing-zq9"\n')
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__tracker__search", query="x")],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
    lines = run.stderr.splitlines()
    assert len(lines) == 2, run.stderr  # one line per server that could not start, nothing else
    for server, command in (("ghost", "no-such-mcp-server-zq9"), ("pathless", "./bin/also-missing-zq9")):
        (line,) = [line for line in lines if f"MCP server {server!r}" in line]
        assert "could not be started" in line and command in line, line
    listed = {view["name"]: view for view in json_lines_in_process(cli, "mcp", "list", "--json")}
    assert listed["tracker"]["up"] and not listed["ghost"]["up"]
    assert listed["ghost"]["problem"].startswith("could not be started (no-such-mcp-server-zq9: "), listed["ghost"]
