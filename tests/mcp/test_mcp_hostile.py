"""A hostile or broken MCP server (tests/mcp/hostile_server.py, the SDK's low-level server as a real process over
stdio) against real `strata` processes: what it lists or answers can make its own tools unavailable or its calls
errors, never crash or wedge the session."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import call_results, events_of, strata, strata_peak_rss, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

HOSTILE = Path(__file__).with_name("hostile_server.py")
OBJECT_Q = {"type": "object", "properties": {"q": {"type": "string"}}}


def hostile(cli: StrataCLI, tmp_path: Path, tools: list[dict[str, Any]], *, policies: list[str],
            results: dict[str, Any] | None = None, extra: str = "", page_size: int | None = None,
            tools_restarted: list[dict[str, Any]] | None = None) -> Path:
    """Declares the hostile server `h` listing `tools` (`tools_restarted` once started again), with a read-only
    policy for each of `policies`; returns its state directory."""
    state = tmp_path / "hostile-state"
    spec = tmp_path / "hostile-spec.json"
    listing: dict[str, Any] = {"tools_restarted": tools_restarted} if tools_restarted is not None else {}
    spec.write_text(json.dumps({"state": str(state), "tools": tools, "results": results or {},
                                "page_size": page_size, **listing}), encoding="utf-8")
    table = (f'[mcp.servers.h]\ncommand = "{sys.executable}"\nargs = ["{HOSTILE}", "{spec}"]\n'
             f'startup_timeout_s = 20\n{extra}')
    for name in policies:
        table += f'\n[mcp.servers.h.tools.{name}]\nsafety = "read"\neffect = "read_only"\n'
    user_config(cli, table)
    return state


def calls(state: Path) -> list[str]:
    log = state / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_a_tool_name_the_server_lists_twice_is_unavailable_and_the_session_runs(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = hostile(cli, tmp_path, [
        {"name": "search", "description": "the first", "inputSchema": OBJECT_Q},
        {"name": "search", "description": "the second", "inputSchema": {"type": "object", "properties": {
            "q": {"type": "not-a-type"}}}},
        {"name": "other", "description": "fine", "inputSchema": OBJECT_Q}], policies=["search", "other"])
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__search", q="x"), tool_use("c2", "mcp__h__other", q="y")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["check"] == "resolve" and results["c2"]["status"] == "ok"  # not in the plan
    assert calls(state) == ['other {"q": "y"}']
    (server,) = json_lines_in_process(cli, "mcp", "list", "--json")
    searches = [t for t in server["tools"] if t["tool"] == "search"]
    assert len(searches) == 2 and not any(t["callable"] for t in searches), searches
    assert all("lists more than one tool named so" in t["reason"] for t in searches), searches


def test_a_schema_that_cannot_be_evaluated_denies_the_call_and_the_session_goes_on(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    state = hostile(cli, tmp_path, [
        {"name": "loop", "inputSchema": {"type": "object", "allOf": [{"$ref": "#"}]}},
        {"name": "remote", "inputSchema": {"type": "object", "properties": {
            "q": {"$ref": "http://127.0.0.1:9/schema.json"}}}},
        {"name": "other", "inputSchema": OBJECT_Q}], policies=["loop", "remote", "other"])
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__loop", q="x"), tool_use("c2", "mcp__h__remote", q="x")],
        [tool_use("c3", "mcp__h__other", q="y")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    for call_id in ("c1", "c2"):
        assert results[call_id]["check"] == "schema", results[call_id]
        assert "input schema cannot be evaluated" in results[call_id]["content"], results[call_id]
    assert results["c3"]["status"] == "ok"
    assert calls(state) == ['other {"q": "y"}']  # neither denied call reached the server


def test_a_listing_the_client_cannot_read_is_named_in_the_notice_not_only_the_timeout(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The SDK drops an answer it cannot read, and the listing waited for the startup timeout (the notice said only
    that); the answer ends the listing at once (within its 20-second startup timeout, on a loaded machine too), and
    the notice says what could not be read."""
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(120):  # deeper than the SDK client reads (its server still writes it)
        deep = {"type": "object", "properties": {"a": deep}}
    state = hostile(cli, tmp_path, [{"name": "deep", "inputSchema": deep}], policies=["deep"])
    script = write_script(tmp_path / "script.json", [[text("nothing to do")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "look")
    assert run.returncode == 0, run.stderr
    (notice,) = [line for line in run.stderr.splitlines() if "MCP server 'h'" in line]
    assert "could not read the server's answer: it is not JSON-RPC (too deep to read)" in notice, notice
    assert "did not finish initialising" not in notice, notice
    assert "wrote 1 message to stdout that is not valid JSON-RPC" in notice, notice
    assert (state / "started").exists()


def test_every_page_of_a_paginated_tool_listing_is_read(cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    tools = [{"name": f"t{k}", "inputSchema": OBJECT_Q} for k in range(5)]
    state = hostile(cli, tmp_path, tools, policies=["t4"], page_size=2)
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__t4", q="last page")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
    assert calls(state) == ['t4 {"q": "last page"}']
    (server,) = json_lines_in_process(cli, "mcp", "list", "--json")
    assert [t["tool"] for t in server["tools"]] == ["t0", "t1", "t2", "t3", "t4"], server["tools"]


def test_a_tool_whose_input_schema_is_too_large_is_unavailable_and_its_server_starts_in_time(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A server listing a tool whose input schema is megabytes of small subschemas held every start for minutes
    (checking a schema against the meta-schema costs about a millisecond per subschema, and it was checked three
    times; 160 s for a 4 MB schema), and its schema would have gone into every model request. A schema over
    64 KiB makes the tool unavailable, with the reason, before anything checks it; the others serve."""
    many = {f"p{k}": {"type": "string", "description": "a field of a hostile server's tool"} for k in range(1500)}
    huge = {"type": "object", "properties": many}
    assert len(json.dumps(huge)) > 65536
    state = hostile(cli, tmp_path, [{"name": "huge", "inputSchema": huge}, {"name": "other", "inputSchema": OBJECT_Q}],
                    policies=["huge", "other"])
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__huge", p1="x"), tool_use("c2", "mcp__h__other", q="y")], [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["check"] == "resolve" and results["c2"]["status"] == "ok", results  # not in the plan
    assert calls(state) == ['other {"q": "y"}']
    (server,) = json_lines_in_process(cli, "mcp", "list", "--json")
    (listed,) = [t for t in server["tools"] if t["tool"] == "huge"]
    assert not listed["callable"] and "its input schema cannot be used: it is too large" in listed["reason"], listed
    assert f"at most {65536} bytes" in listed["reason"], listed


def test_a_server_that_lists_its_tools_differently_when_restarted_runs_no_call_against_the_changed_tools(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A server that died during a read-only call is started again and the call retried; the restarted server may
    list other tools (a new version installed meanwhile). The retry and every later call ran against whatever it
    listed now, in silence: a call checked against the schema the session started with went to a tool whose schema
    had changed, and a tool it no longer lists was called all the same. A call to a tool listed differently (or no
    more) since the session started is not run, and says why; an unchanged tool of the same server still serves."""
    path_only = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    state = hostile(cli, tmp_path, [
        {"name": "look", "inputSchema": OBJECT_Q}, {"name": "gone", "inputSchema": OBJECT_Q},
        {"name": "same", "inputSchema": OBJECT_Q}],
        tools_restarted=[{"name": "look", "inputSchema": path_only}, {"name": "same", "inputSchema": OBJECT_Q}],
        policies=["look", "gone", "same"], results={"look": {"die_once": True}})
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__look", q="x")],
        [tool_use("c2", "mcp__h__gone", q="y"), tool_use("c3", "mcp__h__look", q="z"),
         tool_use("c4", "mcp__h__same", q="w")],
        [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    assert results["c1"]["status"] == "error", results["c1"]
    assert "not retried: the server started again lists 'look' with another input schema" in \
        results["c1"]["content"], results["c1"]
    assert results["c2"]["status"] == "error" and "no longer lists 'gone'" in results["c2"]["content"], results["c2"]
    assert "no effect started" in results["c2"]["content"], results["c2"]
    assert results["c3"]["status"] == "error" and "lists 'look' with another input schema" in \
        results["c3"]["content"], results["c3"]
    assert results["c4"]["status"] == "ok", results["c4"]
    assert calls(state) == ['look {"q": "x"}', 'same {"q": "w"}']  # the first try only, then the unchanged tool


def test_a_tool_name_with_a_line_break_cannot_forge_a_line_of_mcp_list_or_doctor(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Control sequences in a server's tool names were made inert, but a line break was printed as one: a server
    could add a line of its own making to `strata mcp list` and `strata doctor` (here one that reads as a callable
    tool). A name is shown on its own line, its line breaks as visible escapes."""
    forged = "mcp__h__forged: callable (safety read, effect read_only, pii none, timeout 30s)"
    hostile(cli, tmp_path, [{"name": f"x\n  {forged}", "inputSchema": OBJECT_Q}], policies=[])
    listed = strata(cli, "mcp", "list")
    assert listed.returncode == 0, listed.stderr
    assert not any(line.lstrip().startswith(forged) for line in listed.stdout.splitlines()), listed.stdout
    assert "mcp__h__x\\n  mcp__h__forged" in listed.stdout, listed.stdout
    doctor = strata(cli, "doctor")
    assert not any(line.lstrip().startswith(forged) for line in doctor.stdout.splitlines()), doctor.stdout


def test_a_listing_of_many_tools_without_a_policy_is_not_schema_checked_and_the_session_starts_at_once(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A server listing 2,000 tools, each with a schema of its own of 80 properties (5 MB, a page the client reads),
    held every start for minutes after the listing, past its startup timeout: each schema was checked against the
    meta-schema (about a millisecond per subschema) although no policy was declared for the tool, which is
    unavailable whatever its schema. A tool without a policy is unavailable for that reason, its schema left
    unchecked; the declared tool serves."""
    many = [{"name": f"t{k}", "inputSchema": {"type": "object", "properties": {
        f"p{k}_{j}": {"type": "string", "minLength": 1} for j in range(80)}}} for k in range(2000)]
    state = hostile(cli, tmp_path, [*many, {"name": "other", "inputSchema": OBJECT_Q}], policies=["other"])
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__h__other", q="y")], [text("done")]])
    started = time.monotonic()
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    took = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
    assert calls(state) == ['other {"q": "y"}']
    assert took < 40, took  # the checks alone took 90 s before; seconds now
    (server,) = json_lines_in_process(cli, "mcp", "list", "--json")
    tools = {t["tool"]: t for t in server["tools"]}
    assert len(tools) == 2001 and tools["other"]["callable"], tools["other"]
    assert "no resource policy declared" in tools["t7"]["reason"], tools["t7"]


def test_a_path_argument_that_is_not_a_string_is_denied_when_the_servers_schema_lets_it_through(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`path_args` names the arguments the scope check confines to the workspace; it looked at strings only, leaving
    any other value to the schema check, which for a built-in tool declares them strings. A server's schema may
    declare nothing of the kind (`{"type": "object"}`), so a path given as a list or an object (`["/etc/passwd"]`)
    passed both checks and reached the server, which read it as it liked. Such a value is denied by the scope
    check, naming the argument; a string is confined as before, and a call within the workspace runs."""
    loose = {"type": "object"}
    typed = {"type": "object", "properties": {"path": {"type": "string"}}}
    policy = 'safety = "read"\neffect = "read_only"\npath_args = ["path"]\n'
    state = hostile(cli, tmp_path, [{"name": "open", "inputSchema": loose}, {"name": "typed", "inputSchema": typed}],
                    policies=[], extra=f"[mcp.servers.h.tools.open]\n{policy}[mcp.servers.h.tools.typed]\n{policy}")
    (workspace / "notes.txt").write_text("notes\n", encoding="utf-8")
    script = write_script(tmp_path / "script.json", [
        [tool_use("c1", "mcp__h__open", path=["/etc/passwd"]), tool_use("c2", "mcp__h__open", path={"p": "/etc"}),
         tool_use("c3", "mcp__h__open", path="/etc/passwd"), tool_use("c4", "mcp__h__typed", path=["/etc/passwd"]),
         tool_use("c5", "mcp__h__open", path="notes.txt")],
        [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "look")
    assert run.returncode == 0, run.stderr
    results = call_results(events_of(run.stdout))
    for call, kind in (("c1", "array"), ("c2", "object")):
        assert results[call]["status"] == "denied" and results[call]["check"] == "scope", results[call]
        assert f"path: a path argument must be a string (got {kind})" in results[call]["content"], results[call]
    assert results["c3"]["check"] == "scope", results["c3"]  # outside the workspace, as before
    assert results["c4"]["check"] == "schema", results["c4"]  # the schema declares a string: it says so, as before
    assert results["c5"]["status"] == "ok", results["c5"]
    assert calls(state) == ['open {"path": "notes.txt"}']


PAGED = Path(__file__).with_name("paged_server.py")


def test_a_tool_listing_of_many_large_pages_is_read_up_to_a_bound_of_tools_and_memory_stays_bounded(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Each page of a listing is bounded (a message line of 8 MiB), and so was their number (100), but not what they
    add up to: a server listing 100 pages of 20,000 tools made Strata hold millions of them (gigabytes, past its
    memory) before the session could start. Pages are read until they hold 10,000 tools: here the first page."""
    state = tmp_path / "paged"
    user_config(cli, f'[mcp.servers.p]\ncommand = "{sys.executable}"\nargs = ["{PAGED}", "{state}", "100", "20000"]\n'
                     'startup_timeout_s = 60\n[mcp.servers.p.tools.echo]\nsafety = "read"\neffect = "read_only"\n')
    script = write_script(tmp_path / "script.json", [[tool_use("c1", "mcp__p__echo", q="y")], [text("done")]])
    run, peak_mib = strata_peak_rss(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                                    "--json", "look", timeout=120)
    assert run.returncode == 0, run.stderr
    assert call_results(events_of(run.stdout))["c1"]["status"] == "ok"
    assert (state / "listed").read_text(encoding="ascii") == "1"  # the first page holds more than 10,000 tools
    assert peak_mib < 600, f"peak RSS {peak_mib:.0f} MiB"
