"""`strata trust [DIR]` and `strata config show`: reviewing and trusting a project's config, and seeing every
effective setting with where it came from. A bad config file is a usage error (exit 2): one line naming the file,
the key and the reason."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

import click

from agent.cli._common import fail
from agent.cli.options import WorkspacePath
from agent.cli.output import echo, echo_json
from agent.knowledge_view import knowledge_view
from agent.reading import configured_secrets
from agent.tool_deadlines import unknown_tool_deadlines
from config import (
    HOOK_EVENTS,
    ConfigFile,
    HookSpec,
    LoadedConfig,
    default_home,
    load_config,
    project_config_path,
    trust_project,
    untrust,
    user_config_path,
)
from config.locations import SETTING_KEYS
from config.settings import shown_setting
from core.errors import StrataError
from core.masking import Masker
from core.policy import PermissionRule


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@click.command()
@click.argument("directory", required=False, default=".", type=WorkspacePath())
@click.option("--revoke", is_flag=True, help="Forget the trust given to DIR's project config.")
def trust(directory: Path, revoke: bool) -> None:
    """Trust a project's config after reviewing it.

    Records the sha256 of DIR/.strata/config.toml (DIR defaults to the current directory), of every file under
    DIR/.strata/ and of every file in DIR a hook command names: its hooks and allow rules apply from then on, until
    the file is edited; a hook whose files changed blocks until DIR is trusted again."""
    home = default_home(os.environ)
    workspace = directory.resolve()
    command = f"strata trust {shlex.quote(str(workspace))}"
    try:
        if revoke:
            path = project_config_path(workspace)
            if untrust(home, workspace):
                echo(f"no longer trusted: {path}")
            else:
                echo(f"{path} was not trusted")
            return
        record = trust_project(home, workspace)
    except StrataError as err:
        fail(err)
    echo(f"trusted {record.path}")
    echo(f"sha256 {record.sha256}")
    for line in _summary(record.config):
        echo(f"  {line}")
    if record.files:
        echo(f"  {_plural(len(record.files), 'file')} the hooks may run, fingerprinted: "
             f"{', '.join(sorted(record.files))}")
    echo("editing the file revokes its trust, and a change to a file its hooks may run blocks them; review the "
         f"change and run `{command}` again")


def _summary(data: ConfigFile) -> list[str]:
    hooks = [(event, i, h) for event in HOOK_EVENTS for i, h in enumerate(getattr(data.hooks, event))]
    settings = [key for key in SETTING_KEYS if getattr(data, key) is not None]
    lines = [f"{_plural(len(hooks), 'hook')}, {_plural(len(data.policy.rules), 'rule')}, "
             f"{_plural(len(settings), 'setting')}"]
    for event, i, h in hooks:
        timeout = f" (timeout {h.timeout_s:g}s)" if h.timeout_s is not None else ""
        env = f" (gets {', '.join(h.env)})" if h.env else ""
        lines.append(f"hook {event}[{i}] on {h.matcher}: {h.command}{timeout}{env}")
    for i, r in enumerate(data.policy.rules):
        rule = PermissionRule(action=r.action, tool=r.tool, pattern=r.pattern, args=dict(r.args))
        lines.append(f"rule {i}: {r.action} {rule.text()}")
    lines.extend(f"setting {key} = {shown_setting(key, getattr(data, key))!r}" for key in settings)
    for name, server in (data.mcp.servers if data.mcp is not None else {}).items():
        target = server.url or " ".join([server.command or "", *server.args])
        policies = ", ".join(f"{t} ({p.safety}, {p.effect})" for t, p in server.tools.items()) or "none"
        lines.append(f"mcp server {name}: {target} (tools with a policy: {policies})")
    if data.secrets.env or data.secrets.values:
        lines.append(f"secrets: {_plural(len(data.secrets.env), 'variable name')}, "
                     f"{_plural(len(data.secrets.values), 'value')} (not shown)")
    return lines


@click.group(name="config")
def config_group() -> None:
    """Inspect the effective configuration."""


@config_group.command(name="show")
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="The workspace whose .strata/config.toml is the project layer.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def show_config(workspace: Path, as_json: bool) -> None:
    """Show every effective setting and where it came from, and the rules and hooks with their source and whether
    they are active."""
    try:
        loaded = load_config(workspace=workspace, env=os.environ)
        for unknown in unknown_tool_deadlines(loaded):
            raise unknown  # as `strata run` refuses it
    except StrataError as err:
        fail(err)
    view = config_view(loaded, workspace.resolve(), user_config_path(os.environ))
    if as_json:
        echo_json(view)
        return
    for line in _text(view):
        echo(line)


def config_view(loaded: LoadedConfig, workspace: Path, user_file: Path) -> dict[str, Any]:
    """The stable `config show --json` shape."""
    project_file = loaded.project_file or project_config_path(workspace)
    return {
        "workspace": str(workspace),
        "files": {
            "user": {"path": str(user_file), "found": str(user_file) in loaded.files},
            "project": {"path": str(project_file), "found": loaded.project_file is not None,
                        "trust": loaded.project_trust, "sha256": loaded.project_sha256},
        },
        "settings": {key: {"value": _plain(shown_setting(key, getattr(loaded.settings, key))), "source": source}
                     for key, source in loaded.sources.items()},
        "rules": [_rule_view(r, True) for r in loaded.rules] + [_rule_view(r, False) for r in loaded.ignored_rules],
        "hooks": [_hook_view(h, True) for h in loaded.hooks] + [_hook_view(h, False) for h in loaded.ignored_hooks],
        "secrets": {"env": list(loaded.secrets.env), "values": len(loaded.secrets.values)},
        "tools": {d.tool: {"timeout_s": d.timeout_s, "source": d.source} for d in loaded.tool_timeouts},
        "knowledge": knowledge_view(loaded, workspace).as_json(),
        "mcp": _mcp_view(loaded),
        "notices": list(loaded.notices),
    }


def _mcp_view(loaded: LoadedConfig) -> dict[str, Any]:
    """The declared MCP servers and their tools' policies (`strata mcp list` starts them and shows every tool a
    server lists, the ones without a policy as unavailable). A server's target is masked: a URL's password or
    token, a configured secret among its arguments (its environment's values are never shown)."""
    mask = Masker.from_env(os.urandom(32), os.environ, extra_secrets=configured_secrets(loaded)).mask
    return {"servers": {s.name: {"transport": s.transport, "target": mask(s.target()), "source": s.source,
                                 "policies": {tool: policy.identity() for tool, policy in s.tools}}
                        for s in loaded.mcp.servers},
            "ignored": list(loaded.mcp.ignored),
            "serve": {"roots": list(loaded.mcp.serve.roots), "allow_tools": list(loaded.mcp.serve.allow_tools),
                      "token_env": loaded.mcp.serve.token_env}}  # the variable's name; its value is never shown


def _plain(value: object) -> object:
    return str(value) if isinstance(value, Path) else value


def _rule_view(rule: PermissionRule, active: bool) -> dict[str, Any]:
    return {"action": rule.action, "tool": rule.tool, "pattern": rule.pattern, "args": dict(rule.args),
            "text": rule.text(), "source": rule.source, "active": active}


def _hook_view(hook: HookSpec, active: bool) -> dict[str, Any]:
    return {"event": hook.event, "name": hook.name, "matcher": hook.matcher, "command": hook.command,
            "timeout_s": hook.timeout_s, "source": hook.source, "active": active, "env": list(hook.env)}


_INACTIVE = "ignored (project not trusted)"


def _text(view: dict[str, Any]) -> list[str]:
    user, project = view["files"]["user"], view["files"]["project"]
    trust = {"trusted": "trusted", "untrusted": "not trusted", "changed": "changed since trusted"}
    lines = [f"workspace {view['workspace']}", "files:",
             f"  user     {user['path']} ({'read' if user['found'] else 'not found'})",
             f"  project  {project['path']} ("
             + (trust[project["trust"]] if project["found"] else "not found") + ")",
             "settings:"]
    width = max(len(k) for k in view["settings"])
    for key, item in view["settings"].items():
        value = "(not set)" if item["value"] is None else str(item["value"])
        lines.append(f"  {key:<{width}}  {value:<24}  {item['source']}")
    lines.append("rules:" if view["rules"] else "rules: none")
    for r in view["rules"]:
        state = "active" if r["active"] else _INACTIVE
        lines.append(f"  {r['action']:<5}  {r['text']}  from {r['source']}  {state}")
    lines.append("hooks:" if view["hooks"] else "hooks: none")
    for h in view["hooks"]:
        state = "active" if h["active"] else _INACTIVE
        env = f", env {' '.join(h['env'])}" if h["env"] else ""
        lines.append(f"  {h['name']} on {h['matcher']}: {h['command']} (timeout {h['timeout_s']:g}s{env})  "
                     f"from {h['source']}  {state}")
    secrets = view["secrets"]
    lines.append(f"secrets: env {', '.join(secrets['env']) or '(none)'}; {_plural(secrets['values'], 'value')} "
                 "(not shown)")
    lines.extend(f"tool {name}: deadline {item['timeout_s']:g}s  from {item['source']}"
                 for name, item in view["tools"].items())
    lines.extend(_knowledge_lines(view["knowledge"]))
    lines.extend(_mcp_lines(view["mcp"]))
    lines.extend(f"notice: {n}" for n in view["notices"])
    return lines


def _mcp_lines(view: dict[str, Any]) -> list[str]:
    if not view["servers"] and not view["ignored"]:
        return ["mcp: no servers declared"]
    lines = ["mcp servers (`strata mcp list` starts them and shows each tool; a tool without a policy here is "
             "unavailable):"]
    for name, s in view["servers"].items():
        lines.append(f"  {name}: {s['transport']} {s['target']}  from {s['source']}")
        for tool, p in s["policies"].items():
            keys = f", resource keys {', '.join(p['resource_keys'])}" if p["resource_keys"] else ""
            lines.append(f"    mcp__{name}__{tool}: safety {p['safety']}, effect {p['effect']}, pii {p['pii']}, "
                         f"timeout {p['timeout_s']:g}s{keys}")
    lines.extend(f"  {name}: ignored (project not trusted): never started" for name in view["ignored"])
    return lines


def _knowledge_lines(view: dict[str, Any]) -> list[str]:
    datasets = view["datasets"]
    if not datasets and not view["undeclared"]:
        return ["knowledge: no datasets declared"]
    lines = [f"knowledge: manifest {view['manifest_digest'] or '(none)'}, common_term_share "
             f"{view['common_term_share']:g}"]
    for name, d in datasets.items():
        modes = ", ".join(d["modes"]) or "none (no session may read it)"
        lines.append(f"  {name}: {d['documents']} document(s), modes {modes}, pii {d['pii']}  from {d['source']}")
        lines.extend(f"    read from {root}" for root in d["roots"])
        lines.extend(f"    left out: {p}" for p in d["problems"])
    for name, paths in view["undeclared"].items():
        lines.append(f"  {name}: found at {', '.join(paths)} but not declared, so nothing may read it "
                     f"([knowledge.datasets.{name}])")
    return lines
