"""Acceptance of MCP tools in sessions, through real `strata` processes and the test server written with the SDK's
high-level server (tests/mcp/tracker_server.py) as a real process, over stdio and over streamable HTTP on loopback.

A tool with a declared policy goes through the whole pipeline (policy default, a hook matched by a glob, approval,
receipt); a tool without one is unavailable with the reason and not in the plan; an untrusted project's server is
never started; a server that cannot start or hangs gives one notice and the session goes on."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import call_results, events_of, json_lines, result_line, strata, strata_set_up, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import POLICIES, http_server, http_table, stdio_table, user_config

HOOK = Path(__file__).with_name("block_13.py")


@contextlib.contextmanager
def declared(cli: StrataCLI, state: Path, transport: str, extra: str = "") -> Iterator[None]:
    """The tracker server declared in the user config, with its policies (and `extra`), over `transport`."""
    if transport == "http":
        with http_server(state) as url:
            user_config(cli, http_table(url) + POLICIES + extra)
            yield
    else:
        user_config(cli, stdio_table(state) + POLICIES + extra)
        yield


def closed(state: Path) -> list[str]:
    log = state / "closed.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_declared_mcp_tool_goes_through_policy_hooks_and_approval(cli: StrataCLI, tmp_path: Path,
                                                                    workspace: Path, transport: str) -> None:
    state = tmp_path / "state"
    hook = f'\n[[hooks.pre_tool_use]]\nmatcher = "mcp__tracker__*"\ncommand = "{sys.executable} {HOOK}"\n'
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__search", query="crash"),
         tool_use("c2", "mcp__tracker__close_issue", repo="a/b", number=7),
         tool_use("c3", "mcp__tracker__close_issue", repo="a/b", number=13),
         tool_use("c4", "mcp__tracker__delete_repo", repo="a/b")],
        [text("done")]])
    with declared(cli, state, transport, hook):
        first = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                       "--on-ask", "park", "close the crash issue")
        assert first.returncode == 4, first.stderr  # c2 waits for a person
        results = call_results(events_of(first.stdout))
        assert results["c1"]["status"] == "ok" and "alice@example.com" in results["c1"]["content"]
        assert results["c3"]["is_error"] and "issue 13 stays open" in results["c3"]["content"]  # the hook blocked it
        assert results["c4"]["is_error"] and results["c4"]["check"] == "resolve"  # no policy: not in the plan
        assert "c2" not in results and closed(state) == []  # parked by the default (write asks): nothing ran
        session_id = result_line(first.stdout)["session_id"]  # type: ignore[index]

        assert strata_set_up(cli, "approve", session_id, "c2").returncode == 0
        second = strata(cli, "resume", session_id, "--json")
        assert second.returncode == 0, second.stderr
        after = call_results(events_of(second.stdout))
        assert after["c2"]["status"] == "ok" and after["c2"]["content"] == "closed a/b#7"
        assert closed(state) == ["a/b#7"]  # once, and never issue 13

    (receipt,) = json_lines_in_process(cli, "receipts", session_id, "--json")
    assert receipt["tool"] == "mcp__tracker__close_issue" and receipt["status"] == "done"
    assert receipt["resource_keys"] == ["issue:a/b/7"]
    rows = json_lines_in_process(cli, "timeline", session_id, "--json")
    timeline = json.dumps(rows)
    assert "alice@example.com" not in timeline and "[MASKED:" in timeline  # masked like a built-in's result
    decisions = {(r.get("call_id"), r.get("decision")) for r in rows if r.get("call_id")}
    assert {("c2", "parked"), ("c2", "approved"), ("c3", "denied"), ("c4", "denied")} <= decisions, decisions


def test_a_tool_without_a_policy_is_listed_unavailable_with_the_reason(cli: StrataCLI, tmp_path: Path) -> None:
    state = tmp_path / "state"
    user_config(cli, stdio_table(state) + POLICIES + '\n[mcp.servers.tracker.tools.archive]\nsafety = "write"\n'
                'effect = "idempotent"\n')
    (server,) = json_lines(strata(cli, "mcp", "list", "--json").stdout)
    assert server["name"] == "tracker" and server["up"] and server["transport"] == "stdio"
    tools = {t["tool"]: t for t in server["tools"]}
    assert tools["close_issue"]["callable"] and tools["close_issue"]["policy"]["resource_keys"] == [
        "issue:{repo}/{number}"]
    assert tools["close_issue"]["input_schema"]["required"] == ["repo", "number"]
    assert not tools["delete_repo"]["callable"]
    assert "no resource policy declared" in tools["delete_repo"]["reason"]
    assert "[mcp.servers.tracker.tools.delete_repo]" in tools["delete_repo"]["reason"]
    assert not tools["archive"]["callable"] and "does not list it" in tools["archive"]["reason"]
    listing = strata(cli, "mcp", "list").stdout
    assert "mcp__tracker__delete_repo: unavailable: no resource policy declared" in listing
    doctor = strata(cli, "doctor").stdout
    assert "mcp__tracker__delete_repo unavailable: no resource policy declared" in doctor, doctor
    assert not [line for line in doctor.splitlines() if "permissions" in line and "/mcp" in line], doctor
    (shown,) = json_lines(strata(cli, "config", "show", "--json").stdout)
    assert sorted(shown["mcp"]["servers"]["tracker"]["policies"]) == ["archive", "close_issue", "fail", "search"]
    assert "tool without a policy here is unavailable" in strata(cli, "config", "show").stdout


def test_an_untrusted_project_never_starts_its_mcp_server(cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = tmp_path / "state"
    project = workspace / ".strata" / "config.toml"
    project.parent.mkdir()
    project.write_text(stdio_table(state) + POLICIES, encoding="utf-8")
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__tracker__search", query="x")],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    assert "its MCP servers (tracker) are not started" in run.stderr and "strata trust" in run.stderr
    assert call_results(events_of(run.stdout))["c1"]["check"] == "resolve"  # not in the plan
    listed = json_lines(strata(cli, "mcp", "list", "--json", "--workspace", str(workspace)).stdout)
    assert listed == [{"type": "server", "name": "tracker", "up": False, "ignored": True,
                       "problem": "declared by an untrusted project config: never started", "tools": []}]
    assert not (state / "started").exists()  # the marker the server writes when it starts

    trusted = strata(cli, "trust", str(workspace))
    assert trusted.returncode == 0 and "mcp server tracker:" in trusted.stdout  # what trusting it will start
    again = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert again.returncode == 0, again.stderr
    assert call_results(events_of(again.stdout))["c1"]["status"] == "ok"
    assert (state / "started").exists()


@pytest.mark.parametrize("fault", ["missing", "hang"])
def test_a_server_that_cannot_start_gives_one_notice_and_the_session_goes_on(
        cli: StrataCLI, tmp_path: Path, workspace: Path, fault: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    good = stdio_table(tmp_path / "other", name="other")
    if fault == "missing":
        bad = '[mcp.servers.tracker]\ncommand = "/nonexistent/mcp-server"\n'
    else:
        (state / "hang").touch()
        bad = stdio_table(state).replace("startup_timeout_s = 20", "startup_timeout_s = 1")
    user_config(cli, bad + good + POLICIES + '\n[mcp.servers.other.tools.search]\nsafety = "read"\n'
                'effect = "read_only"\n')
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__tracker__search", query="x"), tool_use("c2", "mcp__other__search", query="y")],
        [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    notices = [line for line in run.stderr.splitlines() if "MCP server 'tracker'" in line]
    reason = ("could not be started (/nonexistent/mcp-server: no such file)" if fault == "missing"
              else "did not finish initialising within 1 s")
    assert len(notices) == 1 and reason in notices[0] and "continues without its tools" in notices[0], run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["check"] == "resolve" and results["c2"]["status"] == "ok"


def test_an_is_error_result_is_an_error_result(cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    user_config(cli, stdio_table(tmp_path / "state") + POLICIES)
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__tracker__fail", reason="no disk")],
                                                     [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "try")
    result = call_results(events_of(run.stdout))["c1"]
    assert result["is_error"] and result["status"] == "error" and "no disk" in result["content"], result
