"""What `strata mcp serve` (the real process) answers a host that sends what it cannot take: a message that is not
JSON-RPC, a tool call with wrong arguments, a call naming no tool, a `run_agent` on a session this very server is
running. Over stdio a message is a line written by hand to the server's stdin (no SDK client sends one that is not
JSON); the calls are made by the official SDK's client.

The SDK's stdio transport dropped a line it could not read (it logs the error at debug level): the host waited for
its own timeout. It is answered now (-32700 with id null for a line that is not JSON; -32600 naming what is wrong,
with the request's id when it can be read, for JSON that is no JSON-RPC message the server takes), and the server
reads on: each bad line below is followed by a ping, and the answer read first is the bad line's. Over streamable
HTTP the SDK answered such a body itself (400), but a lone surrogate as a parse error with id null ("unexpected end
of hex escape") and JSON that is no JSON-RPC message as -32602 with pydantic's twenty-line report: the same
errors as over stdio now."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config
from tests.mcp.test_mcp_serve import TOKEN, TOKEN_ENV, http_session, strata_mcp, structured
from tests.mcp.test_mcp_serve_auth import ACCEPT, served

INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "by-hand", "version": "1"}}}

BAD_LINES: list[tuple[str, int, Any, list[str]]] = [
    # the line, the error code, the id answered, what the message says
    ("this is not json", -32700, None, ["Parse error"]),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cursor": "\\ud800"}}', -32600, 7,
     ["Invalid Request", "params.cursor", "lone surrogate (\\ud800)"]),
    ('{"jsonrpc": "2.0", "id": "no-method"}', -32600, "no-method", ["Invalid Request", "method"]),
    ('{"jsonrpc": "1.0", "id": 8, "method": 5}', -32600, 8, ["jsonrpc", "'2.0'", "method", "valid string"]),
    ('{"jsonrpc": "2.0", "id": "\\udc00", "method": "ping"}', -32600, None, ["id: a string holds a lone surrogate"]),
    ("[1, 2]", -32600, None, ["batch"]),
    ("42", -32600, None, ["JSON object, not an integer"]),
    ("4.5", -32600, None, ["JSON object, not a number"]),
    ('"ping"', -32600, None, ["JSON object, not a string"]),
]


class ByHand:
    """`strata mcp serve` over stdio, its stdin written and its stdout read a line at a time."""

    def __init__(self, cli: StrataCLI, workspace: Path) -> None:
        self.proc = subprocess.Popen(cli.argv(["mcp", "serve"]), cwd=workspace, env=cli.env(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", errors="surrogateescape")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.finish()
        message: dict[str, Any] = json.loads(line)
        return message

    def finish(self) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        with self.proc.stdout, self.proc.stderr:
            return self.proc.stderr.read()


def test_mcp_serve_over_stdio_answers_a_line_that_is_not_json_rpc_and_reads_on(cli: StrataCLI,
                                                                              workspace: Path) -> None:
    server = ByHand(cli, workspace)
    try:
        server.send(json.dumps(INITIALIZE))
        assert server.answer()["id"] == "init"
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for n, (line, code, answered_id, says) in enumerate(BAD_LINES):
            server.send(line)
            server.send(json.dumps({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"}))
            error = server.answer()
            assert "error" in error, (line, error)  # before: the ping's answer came first (the line was dropped)
            assert error["id"] == answered_id and error["error"]["code"] == code, (line, error)
            message = error["error"]["message"]
            assert all(part in message for part in says) and "\n" not in message, (line, message)
            assert server.answer() == {"jsonrpc": "2.0", "id": f"ping-{n}", "result": {}}
        # an answer from the host that cannot be read is not answered (JSON-RPC never answers an answer)
        server.send('{"jsonrpc": "2.0", "id": 99, "result": {"x": "\\ud800"}}')
        server.send(json.dumps({"jsonrpc": "2.0", "id": "last", "method": "tools/list"}))
        listed = server.answer()
        assert listed["id"] == "last" and {t["name"] for t in listed["result"]["tools"]} == {
            "run_agent", "get_timeline", "list_sessions"}, listed
    finally:
        err = server.finish()
    assert server.proc.returncode == 0 and "Traceback" not in err, err


async def test_mcp_serve_over_http_answers_a_body_that_is_not_json_rpc_as_over_stdio(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    import httpx2

    script = write_script(tmp_path / "script.json", [[text("done")]])
    async with served(cli, workspace, script, "--token-env", TOKEN_ENV, env={TOKEN_ENV: TOKEN}) as (url, _), \
            httpx2.AsyncClient(timeout=60, headers={**ACCEPT, "Authorization": f"Bearer {TOKEN}"}) as client:
        for line, code, answered_id, says in BAD_LINES:
            answer = await client.post(url, content=line.encode("utf-8"))
            assert answer.status_code == 400, (line, answer.status_code, answer.text)
            error = answer.json()
            assert error["id"] == answered_id and error["error"]["code"] == code, (line, error)
            message = error["error"]["message"]
            assert all(part in message for part in says) and "\n" not in message, (line, message)
        async with http_session(url) as session:  # the server serves on
            assert {t.name for t in (await session.list_tools()).tools} == {"run_agent", "get_timeline",
                                                                             "list_sessions"}


async def test_a_tool_call_with_wrong_arguments_is_refused_with_one_line_per_problem(cli: StrataCLI,
                                                                                  workspace: Path) -> None:
    """The SDK's refusal was pydantic's report ('2 validation errors for get_timeline_toolArguments', then each
    problem over three lines with a link). Now each problem is one line naming the tool, the argument and what is
    wrong (the type sent, never the value), every problem listed."""
    async with strata_mcp(cli, workspace) as session:
        refused = await session.call_tool("get_timeline", {"session_id": 5, "since": "soon"})
        assert refused.is_error, refused.content
        assert refused.content[0].text.splitlines() == [
            "get_timeline: argument session_id: Input should be a valid string (got an integer)",
            "get_timeline: argument since: Input should be a valid integer, unable to parse string as an integer "
            "(got a string)"], refused.content[0].text
        refused = await session.call_tool("run_agent", {"max_turns": [3]})
        assert refused.is_error, refused.content
        assert refused.content[0].text.splitlines() == [
            "run_agent: argument prompt is required and missing",
            "run_agent: argument max_turns: Input should be a valid integer (got an array)"], refused.content[0].text
        assert structured(await session.call_tool("list_sessions", {})) == []  # nothing ran


async def test_a_call_naming_no_tool_or_an_unknown_one_says_so_and_names_the_tools_served(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """An empty tool name was answered 'Unknown tool: ' (the name it quoted being nothing). A name quoting a
    configured secret (an MCP server's `env` value) is masked, as every refusal of the server is."""
    token = "quietvalue-zq84w"
    user_config(cli, f'[mcp.servers.b]\ncommand = "{tmp_path / "never-started"}"\nenv = {{ B_TOKEN = "{token}" }}\n')
    async with strata_mcp(cli, workspace) as session:
        refused = await session.call_tool("", {})
        assert refused.is_error, refused.content
        assert refused.content[0].text == ("the call names no tool (its name is empty); this server's tools are "
                                           "get_timeline, list_sessions, run_agent"), refused.content[0].text
        refused = await session.call_tool("run\nagent", {})
        assert refused.is_error, refused.content
        assert refused.content[0].text == ("no tool named 'run\\nagent'; this server's tools are get_timeline, "
                                           "list_sessions, run_agent"), refused.content[0].text
        refused = await session.call_tool(f"use {token}", {})
        assert refused.is_error and "no tool named 'use [MASKED:" in refused.content[0].text, refused.content
        assert token not in refused.content[0].text, refused.content


async def test_run_agent_on_a_session_this_server_is_running_says_so_not_another_process(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A second `run_agent` naming the session a first one still runs was refused as 'active in another process
    (pid N ...)', N being the server's own pid. It names this server's other call now; the first call goes on."""
    user_config(cli, '[mcp.serve]\nallow_tools = ["bash"]\n\n[[policy.rules]]\ntool = "bash"\naction = "allow"\n')
    go = tmp_path / "go"
    script = write_script(tmp_path / "script.json", [
        [tool_use("b1", "bash", command=f"touch {tmp_path / 'waiting'}; while [ ! -e {go} ] && [ $SECONDS -lt 300 ]; "
                                         "do sleep 0.05; done")],
        [text("first done")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        first: dict[str, Any] = {}

        async def run_first() -> None:
            first.update(structured(await session.call_tool("run_agent", {"prompt": "wait for go"})))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_first)
            while not (tmp_path / "waiting").exists():  # noqa: ASYNC110 (a file another process makes)
                await anyio.sleep(0.05)
            (running,) = structured(await session.call_tool("list_sessions", {}))
            busy = await session.call_tool("run_agent", {"prompt": "again", "session_id": running["id"]})
            go.touch()
        assert busy.is_error, busy.content
        message = busy.content[0].text
        assert message.startswith(f"session {running['id']} is being run by another run_agent call of this server"), \
            message
        assert "another process" not in message and "\n" not in message, message
        assert first["status"] == "completed" and first["final_text"] == "first done", first


async def test_a_refusal_of_a_served_tool_reaches_the_host_in_our_words_only(cli: StrataCLI, workspace: Path,
                                                                             tmp_path: Path) -> None:
    """A tool of the server refusing a call (a StrataError, masked) reached the host as "Error executing tool
    get_timeline: no session ...": the SDK's prefix before our line. Now the line is ours alone, over stdio (the
    official SDK client) and for each tool."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    async with strata_mcp(cli, workspace) as session:
        refused = await session.call_tool("get_timeline", {"session_id": "0000aaaa-none"})
        assert refused.is_error, refused.content
        assert refused.content[0].text.startswith("no session with id '0000aaaa-none'"), refused.content[0].text
        refused = await session.call_tool("run_agent", {"prompt": "go", "workspace": str(outside)})
        assert refused.is_error, refused.content
        assert refused.content[0].text.startswith(f"the workspace {outside} is not under the roots"), \
            refused.content[0].text
        assert "Error executing tool" not in refused.content[0].text


async def test_get_timeline_refuses_a_kind_or_decision_it_does_not_know_instead_of_answering_no_rows(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`get_timeline` with a kind or decision Strata never writes (a typo: `calls`, `deny`) answered an empty list,
    which a host reads as "nothing of the kind happened"; `strata timeline --kind calls` is a usage error listing
    the kinds. It is refused in one line naming the values it takes; a known kind with no rows is still []."""
    script = write_script(tmp_path / "script.json", [[text("hello")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        sid = structured(await session.call_tool("run_agent", {"prompt": "hi"}))["session_id"]
        assert structured(await session.call_tool("get_timeline", {"session_id": sid, "kind": "call"})) == []  # no call
        refused = await session.call_tool("get_timeline", {"session_id": sid, "kind": "calls"})
        assert refused.is_error and refused.content[0].text == (
            "get_timeline: kind 'calls' is not one of phase, model_attempt, call, hook, approval, receipt, "
            "lifecycle"), refused.content
        refused = await session.call_tool("get_timeline", {"session_id": sid, "decision": "deny"})
        assert refused.is_error and refused.content[0].text == (
            "get_timeline: decision 'deny' is not one of allowed, denied, approved, rejected, parked"), refused.content
        lifecycle = structured(await session.call_tool("get_timeline", {"session_id": sid, "kind": "lifecycle"}))
        assert lifecycle and all(r["kind"] == "lifecycle" for r in lifecycle)
