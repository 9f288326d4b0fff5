"""`strata mcp list` (the configured MCP servers, their tools and whether each is callable) and `strata mcp serve`
(Strata as an MCP server for MCP hosts, agent/mcp_serve). The SDK is imported only when one of them runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from agent.cli._common import Command, fail, notices
from agent.cli.options import WorkspacePath
from agent.cli.output import echo, echo_json
from core.errors import StrataError, UsageError
from core.terminal_text import one_line


@click.group(name="mcp")
def mcp_group() -> None:
    """MCP: list the configured servers and their tools, or serve Strata to an MCP host."""


@mcp_group.command(name="list")
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="The workspace whose trusted .strata/config.toml may declare servers too.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per server.")
def list_cmd(workspace: Path, as_json: bool) -> None:
    """Start the configured MCP servers, list their tools and say whether each is callable (and why not)."""
    cmd = Command()
    loaded = cmd.config(workspace, quiet=True)
    notices(loaded)
    said: list[str] = []

    async def main() -> list[dict[str, Any]]:
        from agent.mcp import MCP_LOG_DIR
        from tool_executor.mcp import open_mcp

        async with open_mcp(loaded.mcp.servers, log_dir=loaded.settings.home / MCP_LOG_DIR,
                            notify=said.append, mask=cmd.masker.mask) as mcp:
            views = [server_view(s) for s in mcp.statuses()]
        return views + [{"type": "server", "name": name, "up": False, "ignored": True,
                         "problem": "declared by an untrusted project config: never started", "tools": []}
                        for name in loaded.mcp.ignored]

    # What a server said (its tool names, its refusal to start) can quote its environment's secrets, and where it is
    # (a URL, its arguments) can hold one: every string shown is masked with the configured secrets.
    mask = cmd.masker.mask
    views = [_masked(view, mask) for view in cmd.run(main)]
    if as_json:
        for view in views:
            echo_json(view)
        return
    if not views:
        echo("no MCP servers configured ([mcp.servers.NAME] in the user config, or in a trusted project's)")
    for view in views:  # what a server said is shown within Strata's lines: its line breaks as escapes
        state = "up" if view["up"] else f"not available: {one_line(view['problem'])}"
        echo(f"{view['name']}: {state}" + (f"  ({view['transport']} {view['target']}, from {view['source']})"
                                          if "transport" in view else ""))
        for tool in view["tools"]:
            if tool["callable"]:
                p = tool["policy"]
                keys = f", resource keys {', '.join(p['resource_keys'])}" if p["resource_keys"] else ""
                echo(f"  {one_line(tool['name'])}: callable (safety {p['safety']}, effect {p['effect']}, "
                     f"pii {p['pii']}, timeout {p['timeout_s']:g}s{keys})")
            else:
                echo(f"  {one_line(tool['name'])}: unavailable: {one_line(tool['reason'])}")


def _masked(value: Any, mask: Callable[[str], str]) -> Any:
    """`value` (a `server_view`) with every string in it, keys too, masked; its shape unchanged (an input schema's
    property named `token` stays a schema)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {_masked(k, mask): _masked(v, mask) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, mask) for v in value]
    return value


def server_view(status: Any) -> dict[str, Any]:
    """The stable `mcp list --json` shape of one server (a tool_executor.mcp.ServerStatus)."""
    return {"type": "server", "name": status.name, "transport": status.transport, "target": status.target,
            "source": status.source, "up": status.up, "problem": status.problem,
            "tools": [{"name": t.name, "tool": t.tool, "callable": t.callable, "reason": t.reason,
                       "policy": t.policy.identity() if t.policy is not None else None,
                       "input_schema": dict(t.input_schema) if t.input_schema is not None else None}
                      for t in status.tools]}


@mcp_group.command(name="serve")
@click.option("--http", "http", metavar="HOST:PORT", default=None,
              help="Serve streamable HTTP on this loopback address instead of stdio (127.0.0.1, localhost or [::1]); "
                   "requests must bear the token --token-env (or [mcp.serve] token_env) names.")
@click.option("--token-env", "token_env", metavar="NAME", default=None,
              help="With --http: the environment variable holding the bearer token (16 characters or more) every "
                   "request must send as `Authorization: Bearer TOKEN`.")
@click.option("--model", "model_spec", metavar="M", help="The model `run_agent` uses unless the call names one.")
def serve_cmd(http: str | None, token_env: str | None, model_spec: str | None) -> None:
    """Serve Strata to an MCP host: `run_agent`, `get_timeline` and `list_sessions` (stdio by default)."""
    from agent.mcp_serve import bearer_token, parse_listen, serve

    try:
        listen = parse_listen(http) if http is not None else None
        if listen is None and token_env is not None:
            raise UsageError("--token-env applies only with --http (over stdio the host starts the server itself)")
    except UsageError as err:
        fail(err)
    cmd = Command()
    loaded = cmd.config(None, model=model_spec, quiet=True)  # each run's workspace adds its own project layer
    try:
        token = bearer_token(token_env, loaded.mcp.serve.token_env) if listen is not None else None
        serve(loaded, listen=listen, flags={"model": model_spec}, token=token)
    except StrataError as err:
        cmd.fail(err)
