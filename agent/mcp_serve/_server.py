"""`strata mcp serve`: Strata as an MCP server (the SDK's `MCPServer`), over stdio or streamable HTTP on loopback.
Its tools: `run_agent` (a headless one-shot session in mode `mcp`), `get_timeline` and `list_sessions` (read-only,
masked). A refusal or an error is a tool error with one masked line, never a crash of the server.

No `from __future__ import annotations` here: the SDK reads the tools' annotations (`Context` is imported where
the tools are defined) to build their input schemas."""


import os
from pathlib import Path
from typing import Any

import structlog

from agent.cli.output import echo
from agent.mcp_serve._agent import Serving, get_timeline, list_sessions, run_agent
from agent.mcp_serve._auth import BearerGate
from agent.mcp_serve._listen import ListenAddress, check_free
from agent.reading import configured_secrets
from config import LoadedConfig
from core.errors import StrataError
from core.masking import Masker

log = structlog.get_logger("strata.mcp_serve")

INSTRUCTIONS = ("Strata runs an agent session under its own policy: the model's tool calls are checked, approved "
                "by rule (there is no person to ask: `ask` means deny), recorded and receipted. `run_agent` returns "
                "the session id; `get_timeline` shows what the runtime decided for each call, masked.")


def build_server(config: LoadedConfig, *, cwd: Path, flags: dict[str, Any]) -> Any:
    """The MCP server over `config` (the one `strata mcp serve` was started with, without a project layer)."""
    from mcp.server.mcpserver import Context

    from agent.mcp_serve._served import Refusal, StrataMCPServer

    serving = Serving(config, cwd, flags)
    # What the host and the host's log see: masked with the patterns and the secrets this config names.
    masker = Masker.from_env(os.urandom(32), os.environ, extra_secrets=configured_secrets(config))
    server = StrataMCPServer("strata", mask=masker.mask, instructions=INSTRUCTIONS, log_level="WARNING")

    def refused(err: Exception) -> Refusal:
        err = _lone_error(err)
        if isinstance(err, StrataError):
            return Refusal(masker.mask(err.message + (f" ({err.hint})" if err.hint else "")))
        log.exception("mcp tool failed")
        return Refusal(masker.mask(f"internal error: {type(err).__name__}: {err}"))

    def notify(line: str) -> None:
        echo(f"strata: notice: {masker.mask(line)}", err=True)  # stderr: the host's log of this server

    @server.tool(name="run_agent")
    async def run_agent_tool(prompt: str, ctx: Context, workspace: str | None = None, model: str | None = None,
                             max_turns: int | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Run a Strata agent session on PROMPT in WORKSPACE (which must lie under the server's roots; default: the
        first root), headless, in mode `mcp`: no shell and no execute/admin tools, and whatever would ask a person
        is denied. Give SESSION_ID to continue an earlier session with a new prompt. Returns the session id,
        status, exit code, final text and the number of effects whose outcome is unknown."""

        async def progress(turn: float, message: str) -> None:
            await ctx.report_progress(turn, None, masker.mask(message))

        try:
            return await run_agent(serving, prompt, workspace=workspace, model=model, max_turns=max_turns,
                                   session_id=session_id, progress=progress, notify=notify)
        except Exception as err:
            raise refused(err) from None

    @server.tool(name="get_timeline")
    async def get_timeline_tool(session_id: str, kind: str | None = None, tool: str | None = None,
                                decision: str | None = None, since: int | None = None) -> list[dict[str, Any]]:
        """What the runtime observed in session SESSION_ID, masked: turns, model attempts, every call with its
        decision and outcome, hooks, approvals, receipts. Filter by row KIND, TOOL (its name), DECISION, or rows
        from seq SINCE on."""
        try:
            return await get_timeline(serving, session_id, kind=kind, tool=tool, decision=decision, since=since)
        except Exception as err:
            raise refused(err) from None

    @server.tool(name="list_sessions")
    async def list_sessions_tool() -> list[dict[str, Any]]:
        """Every session of this Strata home, oldest first (id, status, mode, workspace, title), masked."""
        try:
            return await list_sessions(serving)
        except Exception as err:
            raise refused(err) from None

    return server


def _lone_error(err: Exception) -> Exception:
    """The one error a task group wrapped (a refusal raised while a run's task group was open), as itself; `err`
    unchanged otherwise."""
    while isinstance(err, ExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    return err


def serve(config: LoadedConfig, *, listen: ListenAddress | None, flags: dict[str, Any],
          token: str | None = None) -> None:
    """Serve until the host closes stdin (stdio) or the process is stopped (HTTP, at `listen`, to requests bearing
    `token` only: StrataError when it cannot listen there)."""
    if listen is not None:
        check_free(listen)
    server = build_server(config, cwd=Path(os.getcwd()), flags=flags)
    if listen is None:
        server.run()
        return
    if token is None:
        raise ValueError("serving HTTP takes a bearer token")
    import anyio
    import uvicorn
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    from agent.mcp_serve._wire import MessageCheck

    app = server.streamable_http_app(host=listen.host, transport_security=loopback_security(listen),
                                     max_request_body_size=DEFAULT_MAX_REQUEST_BODY_SIZE)
    # The bearer check is the outermost layer: a request without the token reaches no session and no tool. Inside
    # it, a body the SDK cannot read is answered in plain words (agent/mcp_serve/_wire.py).
    checked = MessageCheck(app, limit=DEFAULT_MAX_REQUEST_BODY_SIZE, mask=server.mask)
    uv = uvicorn.Config(BearerGate(checked, token), host=listen.host, port=listen.port, log_level="warning",
                        access_log=False)
    anyio.run(uvicorn.Server(uv).serve)


def loopback_security(listen: ListenAddress) -> Any:
    """The SDK's DNS-rebinding protection, on and set to this address: a request whose Host header is not this
    loopback host and port (a page of another site whose name was made to resolve to 127.0.0.1), or whose Origin
    is another site's, is refused (421, 403) by the SDK's transport. The SDK turns it on by itself for loopback
    hosts, with any port; said here so that holds whatever the SDK's defaults become."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"{host}:{listen.port}" for host in ("127.0.0.1", "localhost", "[::1]")]
    if listen.port == 80:  # a client leaves the default port out of the Host header
        hosts += ["127.0.0.1", "localhost", "[::1]"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{host}" for host in hosts])
