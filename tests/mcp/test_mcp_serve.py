"""`strata mcp serve` driven by the official SDK's client (`mcp.ClientSession`) over stdio, as an MCP host would:
the real `strata` process, the scripted model, a real Strata home.

`run_agent` runs a headless one-shot session in mode `mcp`: a write allowed by a `[[policy.rules]]` rule of the
user config happens; `bash` is not in the plan (never offered; the scripted call is denied as not in the plan);
`get_timeline` on the returned id shows both calls' decisions, masked; a workspace outside the roots is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import json_lines, text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import user_config

SECRET_MAIL = "carol@example.com"


@asynccontextmanager
async def strata_mcp(cli: StrataCLI, cwd: Path, *args: str) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "agent", "mcp", "serve", *args],
                                   env=cli.env(), cwd=cwd)
    with (cli.home / "serve-stderr.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and set(content) == {"result"} \
            else content
    return json.loads(result.content[0].text)


async def test_an_mcp_host_runs_the_agent_and_reads_its_masked_timeline(cli: StrataCLI, tmp_path: Path,
                                                                        workspace: Path) -> None:
    user_config(cli, '[[policy.rules]]\ntool = "write_file"\naction = "allow"\n')
    script = write_script(tmp_path / "script.json", [
        [tool_use("w1", "write_file", path="notes.txt", content=f"contact {SECRET_MAIL}\n"),
         tool_use("b1", "bash", command="echo escaped > escaped.txt")],
        [text("wrote the notes")]])
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"run_agent", "get_timeline", "list_sessions"}
        assert "prompt" in tools["run_agent"].input_schema["required"]

        out = structured(await session.call_tool("run_agent", {"prompt": "write the notes"},
                                                 progress_callback=on_progress))
        assert out["status"] == "completed" and out["exit_code"] == 0 and out["unknown_effects"] == 0, out
        assert out["final_text"] == "wrote the notes"
        assert (workspace / "notes.txt").read_text(encoding="utf-8") == f"contact {SECRET_MAIL}\n"
        assert not (workspace / "escaped.txt").exists()

        rows = structured(await session.call_tool("get_timeline", {"session_id": out["session_id"]}))
        calls = {r["call_id"]: r for r in rows if r["kind"] == "call"}
        assert calls["w1"]["decision"] == "allowed" and calls["b1"]["decision"] == "denied", calls
        assert calls["b1"]["check"] == "resolve"  # not in the plan: bash was never offered
        assert SECRET_MAIL not in json.dumps(rows) and "[MASKED:" in json.dumps(rows)
        started = [r for r in rows if r["kind"] == "lifecycle" and "started" in r["summary"]]
        assert started and "mcp" in started[0]["summary"]

        sessions = structured(await session.call_tool("list_sessions", {}))
        assert [s["id"] for s in sessions] == [out["session_id"]] and sessions[0]["mode"] == "mcp"

        refused = await session.call_tool("run_agent", {"prompt": "go", "workspace": str(tmp_path.parent)})
        assert refused.is_error and "not under the roots" in refused.content[0].text
    assert any("turn 1" in m for m in progress), progress


async def test_run_agent_continues_a_session_by_id_and_the_operator_can_add_a_tool_back(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`allow_tools` puts `bash` back in mode `mcp`'s plan (still under policy: allowed here by a rule);
    `run_agent(..., session_id=...)` continues the session with a new prompt."""
    user_config(cli, '[mcp.serve]\nallow_tools = ["bash"]\n\n[[policy.rules]]\ntool = "bash"\naction = "allow"\n')
    script = write_script(tmp_path / "script.json", [
        [tool_use("b1", "bash", command="echo one > one.txt")], [text("first done")],
        [tool_use("b2", "bash", command="echo two > two.txt")], [text("second done")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        first = structured(await session.call_tool("run_agent", {"prompt": "first"}))
        assert first["status"] == "completed" and first["final_text"] == "first done", first
        second = structured(await session.call_tool("run_agent", {"prompt": "second",
                                                                  "session_id": first["session_id"]}))
        assert second["session_id"] == first["session_id"] and second["final_text"] == "second done", second
        unknown = await session.call_tool("run_agent", {"prompt": "x", "session_id": "no-such-session"})
        assert unknown.is_error and "no-such-session" in unknown.content[0].text
    assert (workspace / "one.txt").exists() and (workspace / "two.txt").exists()


TOKEN_ENV = "MCP_SERVE_TOKEN"
TOKEN = "test-token-0123456789abcdef"  # obviously fake


def serve_http(cli: StrataCLI, workspace: Path, port: int, script: Path,
               host: str = "127.0.0.1") -> subprocess.Popen[str]:
    """`strata mcp serve --http` on `host`:`port`, its requests to bear `TOKEN` (named by --token-env)."""
    return subprocess.Popen(cli.argv(["mcp", "serve", "--http", f"{host}:{port}", "--token-env", TOKEN_ENV,
                                      "--model", f"script:{script}"]),
                            cwd=workspace, env=cli.env({TOKEN_ENV: TOKEN}), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


async def wait_listening(proc: subprocess.Popen[str], host: str, port: int) -> None:
    import anyio

    with anyio.fail_after(30):
        while True:
            try:
                await (await anyio.connect_tcp(host, port)).aclose()
                return
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                await anyio.sleep(0.05)


@asynccontextmanager
async def http_session(url: str, token: str | None = TOKEN) -> AsyncIterator[Any]:
    """An initialized `mcp.ClientSession` over streamable HTTP at `url`, its requests bearing `token`."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client, \
            streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_strata_mcp_serve_over_streamable_http_on_loopback(cli: StrataCLI, tmp_path: Path,
                                                                 workspace: Path) -> None:
    from tests.mcp._servers import free_port

    refused = cli.run("mcp", "serve", "--http", "0.0.0.0:8765")
    assert refused.returncode == 2 and "loopback" in refused.stderr, refused.stderr
    script = write_script(tmp_path / "script.json", [[text("hello from http")]])
    port = free_port()
    proc = serve_http(cli, workspace, port, script)
    try:
        await wait_listening(proc, "127.0.0.1", port)
        async with http_session(f"http://127.0.0.1:{port}/mcp") as session:
            out = structured(await session.call_tool("run_agent", {"prompt": "say hello"}))
            assert out["status"] == "completed" and out["final_text"] == "hello from http"
            sessions = structured(await session.call_tool("list_sessions", {}))
            assert [s["id"] for s in sessions] == [out["session_id"]]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


async def test_run_agent_refuses_to_continue_a_session_a_person_started_so_its_bash_never_runs(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """A session `strata run` started has the person's plan (bash in it, allowed here by a rule): an MCP host that
    names it is refused in one line, by its full id or a prefix, and nothing of the host's turn runs."""
    user_config(cli, '[[policy.rules]]\ntool = "bash"\naction = "allow"\n')
    script = write_script(tmp_path / "script.json", [
        [text("started by a person")],
        [tool_use("b1", "bash", command="echo escaped > escaped.txt")], [text("done")]])
    started = cli.run("run", "--workspace", str(workspace), "--model", f"script:{script}", "--json", "hello")
    assert started.returncode == 0, started.stderr
    sid = json.loads(started.stdout.splitlines()[-1])["session_id"]
    events_before = len(json_lines_in_process(cli, "timeline", sid, "--json"))
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        for ref in (sid, sid[:13]):
            refused = await session.call_tool("run_agent", {"prompt": "run the shell", "session_id": ref})
            assert refused.is_error, refused.content
            message = refused.content[0].text
            assert "not by run_agent" in message and f"strata resume {sid}" in message, message
            assert "\n" not in message and "Traceback" not in message
    assert not (workspace / "escaped.txt").exists()
    assert len(json_lines_in_process(cli, "timeline", sid, "--json")) == events_before


async def test_run_agent_on_a_session_another_process_holds_is_one_busy_line_not_an_internal_error(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """The refusal comes from inside the run's task group (the lease is taken there): it reaches the host as the
    one line it is, and the session goes on in the process that holds it."""
    from tests.serve._procs import Client, Daemon

    script = write_script(tmp_path / "script.json", [[text("first")], [text("second")]])
    daemon = Daemon(cli)
    try:
        async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
            first = structured(await session.call_tool("run_agent", {"prompt": "first"}))
            driver = Client(cli, first["session_id"])  # the daemon holds the lease while a driver is attached
            busy = await session.call_tool("run_agent", {"prompt": "again", "session_id": first["session_id"]})
            assert busy.is_error, busy.content
            message = busy.content[0].text
            assert "is active in another process" in message and "internal error" not in message, message
            assert "ExceptionGroup" not in message and "\n" not in message
            driver.send(type="detach")
            assert driver.finish().returncode == 0
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr


async def test_run_agent_takes_max_turns_within_the_bounds_the_command_line_has_and_refuses_others_in_one_line(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`max_turns` over MCP has `--max-turns`' bounds (1 to 1,000,000): a host's 0, -1 or 10**30 is one line and
    starts no session; a value inside them runs."""
    script = write_script(tmp_path / "script.json", [[text("done")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        for bad in (0, -1, 1_000_001, 10**30):
            refused = await session.call_tool("run_agent", {"prompt": "go", "max_turns": bad})
            assert refused.is_error, (bad, refused.content)
            message = refused.content[0].text
            assert "max_turns must be from 1 to 1,000,000" in message and "\n" not in message, message
            assert "internal error" not in message and "Traceback" not in message
        assert structured(await session.call_tool("list_sessions", {})) == []
        out = structured(await session.call_tool("run_agent", {"prompt": "go", "max_turns": 1_000_000}))
        assert out["status"] == "completed" and out["final_text"] == "done", out


def test_mcp_serve_http_with_a_bad_port_says_so_in_one_line_and_exits_non_zero(cli: StrataCLI,
                                                                              workspace: Path) -> None:
    """A port in use was the HTTP server's own log line, out of range its traceback (bind's OverflowError), and
    `[::1]` reached name resolution with its brackets ('Name or service not known'). Each is one line of Strata's."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        in_use = taken.getsockname()[1]
        for address, says in ((f"127.0.0.1:{in_use}", "the port is in use"),
                              ("127.0.0.1:99999", "from 1 to 65535"), ("localhost:http", "from 1 to 65535"),
                              ("127.0.0.1:0", "from 1 to 65535"), ("[::1]:", "from 1 to 65535"),
                              ("[127.0.0.1]:8765", "loopback")):
            run = subprocess.run(cli.argv(["mcp", "serve", "--http", address, "--token-env", TOKEN_ENV]),
                                 cwd=workspace, env=cli.env({TOKEN_ENV: TOKEN}), capture_output=True, text=True,
                                 timeout=60)
            assert run.returncode != 0 and run.stdout == "", (address, run)
            (line,) = run.stderr.splitlines()
            assert line.startswith("strata: error: ") and says in line and address in line, (address, line)


async def test_strata_mcp_serve_over_http_on_the_ipv6_loopback(cli: StrataCLI, tmp_path: Path,
                                                               workspace: Path) -> None:
    import socket

    with socket.socket(socket.AF_INET6) as probe:
        probe.bind(("::1", 0))
        port = probe.getsockname()[1]
    script = write_script(tmp_path / "script.json", [[text("hello over ipv6")]])
    proc = serve_http(cli, workspace, port, script, host="[::1]")
    try:
        await wait_listening(proc, "::1", port)
        async with http_session(f"http://[::1]:{port}/mcp") as session:
            out = structured(await session.call_tool("run_agent", {"prompt": "say hello"}))
            assert out["status"] == "completed" and out["final_text"] == "hello over ipv6"
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


async def test_run_agent_reads_a_script_model_only_under_the_servers_roots(cli: StrataCLI, tmp_path: Path,
                                                                          workspace: Path) -> None:
    """`run_agent(model="script:PATH")` read any file the server could: its turns ran, and a file that is no script
    told the host what it is ('not valid JSON', its keys). A script model the host names must lie, symlinks
    resolved, under the roots (as its workspace must); the operator's own `--model` is not confined."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = write_script(outside / "script.json", [[text("read from outside the roots")]])
    (workspace / "link.json").symlink_to(secret)
    write_script(workspace / "inside.json", [[text("read from inside the roots")]])
    operators = write_script(tmp_path / "operator.json", [[text("the operator's model")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{operators}") as session:
        for spec in (f"script:{secret}", "script:link.json", f"script:{outside}/no-such.json",
                     f"script:{workspace}/../outside/script.json#child=0"):
            refused = await session.call_tool("run_agent", {"prompt": "x", "model": spec})
            assert refused.is_error and "not under the roots" in refused.content[0].text, (spec, refused.content)
            assert "outside the roots" not in refused.content[0].text
        out = structured(await session.call_tool("run_agent", {"prompt": "x", "model": "script:inside.json"}))
        assert out["final_text"] == "read from inside the roots", out
        out = structured(await session.call_tool("run_agent", {"prompt": "x"}))
        assert out["final_text"] == "the operator's model", out
    assert len(json_lines(cli.run("sessions", "--json").stdout)) == 2  # the refused calls started no session


async def test_mcp_serve_masks_a_configured_secret_in_a_server_notice(cli: StrataCLI, tmp_path: Path,
                                                                      workspace: Path) -> None:
    """A notice of `strata mcp serve` (an MCP server of a run that could not start) went to the host's log masked
    only by the patterns: a server quoting its environment's token showed it. It is masked like every configured
    secret."""
    from tests.mcp.test_mcp_answers import ANSWERS

    token = "quietvalue-zq84w"
    user_config(cli, f'[mcp.servers.b]\ncommand = "{sys.executable}"\nargs = ["{ANSWERS}", "{tmp_path / "b"}"]\n'
                     f'env = {{ ANSWERS_TOKEN = "{token}", ANSWERS_REFUSE_START = "1" }}\nstartup_timeout_s = 20\n')
    script = write_script(tmp_path / "script.json", [[text("done")]])
    async with strata_mcp(cli, workspace, "--model", f"script:{script}") as session:
        out = structured(await session.call_tool("run_agent", {"prompt": "x"}))
        assert out["status"] == "completed", out
    log = (cli.home / "serve-stderr.log").read_text(encoding="utf-8")
    assert "MCP server 'b'" in log and "bad credentials [MASKED:" in log, log
    assert token not in log, log
