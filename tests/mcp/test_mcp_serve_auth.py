"""`strata mcp serve --http` answers only requests bearing its token: the real `strata` process on loopback, driven
by the official SDK's client (and by plain HTTP requests where a request the SDK would never send is the point).

It served anyone: any local process of any user that reached the port could call `run_agent` and have an agent work
in the owner's workspaces with the owner's API key. Now `--http` needs a token (`--token-env NAME` or
`[mcp.serve] token_env`), every request without `Authorization: Bearer TOKEN` is answered 401 before the SDK's
session machinery or a tool sees it, and the SDK's DNS-rebinding protection holds the Host header to the address
served."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI, write_script
from tests.mcp._servers import free_port, user_config
from tests.mcp.test_mcp_serve import TOKEN, TOKEN_ENV, http_session, structured, wait_listening

WRITE_RULE = '[[policy.rules]]\ntool = "write_file"\naction = "allow"\n'
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "1"}}}


@asynccontextmanager
async def served(cli: StrataCLI, workspace: Path, script: Path, *args: str,
                 env: dict[str, str] | None = None) -> AsyncIterator[tuple[str, subprocess.Popen[str]]]:
    """`strata mcp serve --http 127.0.0.1:PORT ARGS` (with `env`), once it listens: its URL and process; stopped
    after, its stderr checked for the token."""
    port = free_port()
    proc = _start(cli, workspace, ["--http", f"127.0.0.1:{port}", "--model", f"script:{script}", *args], env)
    try:
        await wait_listening(proc, "127.0.0.1", port)
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
        assert TOKEN not in out and TOKEN not in err, (out, err)


def _start(cli: StrataCLI, workspace: Path, args: list[str], env: dict[str, str] | None) -> subprocess.Popen[str]:
    return subprocess.Popen(cli.argv(["mcp", "serve", *args]), cwd=workspace, env=cli.env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    import httpx2

    async with httpx2.AsyncClient(timeout=60) as client:
        return await client.post(url, content=json.dumps(body), headers={**ACCEPT, **headers})


async def test_mcp_serve_http_answers_a_request_without_its_bearer_token_401_and_runs_nothing(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """With the token (from `[mcp.serve] token_env`) the SDK's client lists the tools and calls `list_sessions`.
    Without it, with another scheme or a wrong token, a request is 401: the SDK's client cannot initialize, and a
    `run_agent` call on a live session (its id known) runs nothing, where the same call bearing the token runs."""
    from mcp import MCPError

    user_config(cli, f'[mcp.serve]\ntoken_env = "{TOKEN_ENV}"\n\n' + WRITE_RULE)
    script = write_script(tmp_path / "script.json", [
        [tool_use("w1", "write_file", path="ran.txt", content="the agent ran\n")], [text("done")]])
    async with served(cli, workspace, script, env={TOKEN_ENV: TOKEN}) as (url, _):
        async with http_session(url) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"run_agent", "get_timeline", "list_sessions"}
            assert structured(await session.call_tool("list_sessions", {})) == []

        for token in (None, "wrong-token-0123456789abcdef", TOKEN[:-1], TOKEN + "x"):
            with pytest.raises(BaseException) as info:
                async with http_session(url, token):
                    pass
            err = info.value
            while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
                err = err.exceptions[0]
            assert isinstance(err, MCPError) and "missing or wrong bearer token" in str(err), repr(err)

        opened = await post(url, INITIALIZE, {"Authorization": f"Bearer {TOKEN}"})
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await post(url, initialized, {"Authorization": f"Bearer {TOKEN}",
                                              "mcp-session-id": session_id})).status_code == 202
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_agent", "arguments": {"prompt": "write it"}}}
        for authorization in (None, f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}x", TOKEN,
                              f"Bearer  {TOKEN}"):
            headers = {"mcp-session-id": session_id}
            if authorization is not None:
                headers["Authorization"] = authorization
            refused = await post(url, call, headers)
            assert refused.status_code == 401, (authorization, refused.status_code, refused.text)
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["message"].startswith("missing or wrong bearer token")
            assert TOKEN not in refused.text
        assert not (workspace / "ran.txt").exists()  # no refused call ran the agent

        ran = await post(url, call, {"Authorization": f"Bearer {TOKEN}", "mcp-session-id": session_id})
        assert ran.status_code == 200 and '"status":"completed"' in ran.text.replace(" ", ""), ran.text
        assert (workspace / "ran.txt").read_text(encoding="utf-8") == "the agent ran\n"  # the same call, with it


async def test_mcp_serve_http_refuses_a_request_whose_host_is_not_the_address_served(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """DNS rebinding: a page of another site whose name resolves to 127.0.0.1 sends its own Host (and Origin). The
    SDK's protection refuses those, and a loopback host with another port, even with the token."""
    script = write_script(tmp_path / "script.json", [[text("unused")]])
    async with served(cli, workspace, script, "--token-env", TOKEN_ENV, env={TOKEN_ENV: TOKEN}) as (url, _):
        port = url.split(":")[2].split("/")[0]
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{int(port) + 1}", f"localhost.evil:{port}"):
            refused = await post(url, INITIALIZE, {**bearer, "Host": host})
            assert refused.status_code == 421, (host, refused.status_code, refused.text)
            assert "mcp-session-id" not in refused.headers
        foreign = await post(url, INITIALIZE, {**bearer, "Origin": f"http://evil.example:{port}"})
        assert foreign.status_code == 403, foreign.text
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            taken = await post(url, INITIALIZE, {**bearer, "Host": host, "Origin": f"http://{host}"})
            assert taken.status_code == 200, (host, taken.status_code, taken.text)
        assert (await post(url, INITIALIZE, {"Host": "evil.example"})).status_code == 401  # the token comes first


@pytest.mark.parametrize(("args", "env", "says"), [
    ((), {}, "set `token_env = \"NAME\"` under `[mcp.serve]` in the user config, or pass `--token-env NAME`"),
    (("--token-env", TOKEN_ENV), {}, f"the environment variable {TOKEN_ENV} is not set"),
    (("--token-env", TOKEN_ENV), {TOKEN_ENV: ""}, f"the environment variable {TOKEN_ENV} is empty"),
    (("--token-env", TOKEN_ENV), {TOKEN_ENV: "fifteen-chars-x"}, "15 characters: 16 or more are required"),
    (("--token-env", TOKEN_ENV), {TOKEN_ENV: "has a space in it 0123"}, "visible ASCII characters only"),
    (("--token-env", "MY-TOKEN"), {}, "--token-env takes an environment variable name"),
])
def test_mcp_serve_http_refuses_to_start_without_a_token(cli: StrataCLI, workspace: Path, args: tuple[str, ...],
                                                        env: dict[str, str], says: str) -> None:
    """One `strata: error:` line saying how to set the token, exit 2, nothing listening; the value never shown."""
    port = free_port()
    run = subprocess.run(cli.argv(["mcp", "serve", "--http", f"127.0.0.1:{port}", *args]), cwd=workspace,
                         env=cli.env(env), capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == "", run
    (line,) = run.stderr.splitlines()
    assert line.startswith("strata: error: ") and says in line, line
    for value in env.values():
        assert not value or value not in line


def test_mcp_serve_token_env_from_the_config_must_name_a_set_variable_and_stdio_takes_no_token(
        cli: StrataCLI, workspace: Path) -> None:
    """`[mcp.serve] token_env` naming an unset variable is refused like the flag; `--token-env` without `--http`
    is a usage error (over stdio the host starts the server itself: there is nothing to authenticate)."""
    user_config(cli, f'[mcp.serve]\ntoken_env = "{TOKEN_ENV}"\n')
    run = cli.run("mcp", "serve", "--http", f"127.0.0.1:{free_port()}")
    assert run.returncode == 2 and run.stderr.splitlines() == [
        f"strata: error: `strata mcp serve --http` needs a bearer token, and the environment variable {TOKEN_ENV} "
        "is not set: set it to a token of 16 characters or more"], run.stderr
    stdio = cli.run("mcp", "serve", "--token-env", TOKEN_ENV, env={TOKEN_ENV: TOKEN})
    assert stdio.returncode == 2 and "--token-env applies only with --http" in stdio.stderr, stdio.stderr


def test_the_token_variable_is_read_once_and_removed_from_the_servers_environment() -> None:
    from agent.mcp_serve import bearer_token

    env = {TOKEN_ENV: TOKEN, "OTHER": "kept"}
    assert bearer_token(None, TOKEN_ENV, env) == TOKEN and env == {"OTHER": "kept"}
    env = {TOKEN_ENV: TOKEN, "FLAGGED": TOKEN + "-flag"}
    assert bearer_token("FLAGGED", TOKEN_ENV, env) == TOKEN + "-flag"  # the flag wins over the config



async def test_the_running_servers_environment_as_the_kernel_shows_it_does_not_hold_the_token(
        cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """`ps e` and /proc/PID/environ show the environment the process started with, which removing the variable
    from os.environ does not change: the token's bytes there are overwritten once it is read. A process the
    server starts (its children inherit the live environment) does not get the variable either."""
    script = write_script(tmp_path / "script.json", [[text("unused")]])
    async with served(cli, workspace, script, "--token-env", TOKEN_ENV, env={TOKEN_ENV: TOKEN}) as (_, proc):
        import anyio

        shown = await anyio.Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert TOKEN.encode() not in shown
        assert b"PATH=" in shown  # the rest of the environment is as it was
        listing = await anyio.run_process(["ps", "eww", "-p", str(proc.pid)], check=False)
        assert TOKEN.encode() not in listing.stdout


def test_config_show_names_the_token_variable_of_mcp_serve_never_its_value(cli: StrataCLI) -> None:
    user_config(cli, f'[mcp.serve]\ntoken_env = "{TOKEN_ENV}"\n')
    shown = cli.run("config", "show", "--json", env={TOKEN_ENV: TOKEN})
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["mcp"]["serve"]["token_env"] == TOKEN_ENV
    assert TOKEN not in shown.stdout + shown.stderr
