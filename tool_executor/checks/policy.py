"""Step 4: policy. Rules from config and flags over per-mode defaults; deny beats ask beats allow.

Defaults: tools of safety level `read` are allowed in every mode; anything else (write, execute, network,
admin) asks. Whether an `ask` reaches a person, parks the call or becomes a denial is the approval step's
business (a mode with no human denies it unless the operator chose `--on-ask park`).

A rule's patterns are matched against arguments read according to their kind:
- path arguments: the workspace-relative and the absolute form of the resolved path (symlinks followed), never
  the raw spelling, so `./secrets/x`, `sub/../secrets/x` and `/abs/ws/secrets/x` all meet a `secrets/*` rule;
- a command (bash's `command`), as read by tool_executor/shell: an allow pattern matches only a line that is one
  simple command read with certainty, spelled normally (`command-word args...`); a deny or ask pattern matches
  every simple command the reader sees (through wrappers, quoting, `bash -c`, the command word's basename) and
  the text's fragments. Where the reader cannot see a command word (`$cmd`, `eval`, `source`, a shell reading
  standard input), a deny or ask pattern on the command cannot be relied on, so the call asks, whatever allows it;
- anything else: the argument as given (numbers and booleans as their JSON text).

A command with a NUL byte is denied here: bash cannot take one, and no rule changes that."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.policy import PermissionRule
from core.tools import ToolSpec
from tool_executor.paths import OutsideWorkspace, resolve_in_workspace
from tool_executor.shell import CommandLine, read_command
from tool_executor.verdicts import Ask, Deny, Pass, PolicyVerdict


def _path_forms(raw: str, workspace: Path) -> list[str]:
    try:
        resolved = resolve_in_workspace(workspace, raw)
    except OutsideWorkspace:
        return [raw]  # the scope check has already refused it; keep the raw form for deny rules
    root = Path(os.path.realpath(workspace))
    rel = "." if resolved == root else str(resolved.relative_to(root))
    return [rel, str(resolved)]


def _forms(spec: ToolSpec, name: str, value: Any, workspace: Path, action: str) -> list[str]:
    if not isinstance(value, str):
        return [] if value is None else [json.dumps(value)]
    if name in spec.path_args or (name == spec.primary_arg and spec.primary_kind == "path"):
        return _path_forms(value, workspace)
    if name == spec.primary_arg and spec.primary_kind == "command":
        line = read_command(value)
        if action == "allow":
            return [] if line.allow_text is None else [line.allow_text]
        return list(line.deny_texts)
    return [value]


def rule_matches(rule: PermissionRule, spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> bool:
    if not rule.matches_tool(spec.name):
        return False
    patterns = dict(rule.args)
    if rule.pattern is not None:
        if not spec.primary_arg:
            return False
        patterns.setdefault(spec.primary_arg, rule.pattern)
    for name, glob in patterns.items():
        forms = _forms(spec, name, args.get(name), workspace, rule.action)
        if not any(fnmatch.fnmatchcase(f, glob) for f in forms):
            return False
    return True


def _label(rule: PermissionRule) -> str:
    return f"{rule.action} rule {rule.text()!r} ({rule.source})"


def _command(spec: ToolSpec, args: Mapping[str, Any]) -> CommandLine | None:
    value = args.get(spec.primary_arg or "")
    return read_command(value) if spec.primary_kind == "command" and isinstance(value, str) else None


def _blind(rule: PermissionRule, spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> bool:
    """A deny or ask rule with a pattern on the command, whose other patterns match: it may be meant for a
    command the reader could not see."""
    command_pattern = rule.args.get(spec.primary_arg or "", rule.pattern)
    if rule.action == "allow" or command_pattern is None or not rule.matches_tool(spec.name):
        return False
    others = PermissionRule(action=rule.action, tool=rule.tool, source=rule.source,
                            args={k: v for k, v in rule.args.items() if k != spec.primary_arg})
    return rule_matches(others, spec, args, workspace)


def check_policy(spec: ToolSpec, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: str,
                 workspace: Path) -> PolicyVerdict:
    command = _command(spec, args)
    if command is not None and command.reading.invalid is not None:
        return Deny("policy", (f"{spec.primary_arg}: {command.reading.invalid}; nothing was run",))
    matching = [r for r in rules if rule_matches(r, spec, args, workspace)]
    denies = [r for r in matching if r.action == "deny"]
    if denies:
        return Deny("policy", tuple(f"denied by {_label(r)}" for r in denies))
    asks = [r for r in matching if r.action == "ask"]
    if asks:
        return Ask("policy", _label(asks[0]), tuple(f"{_label(r)} asks for approval" for r in asks))
    if command is not None and command.reading.opaque:
        blind = [r for r in rules if _blind(r, spec, args, workspace)]
        if blind:
            where = "; ".join(command.reading.opaque)
            return Ask("policy", _label(blind[0]), tuple(
                f"{_label(r)} cannot see every command this runs ({where}), so it asks for approval"
                for r in blind))
    allow = next((r for r in matching if r.action == "allow"), None)
    if allow is not None:
        return Pass(rule=_label(allow))
    if spec.safety == "read":
        return Pass(rule=f"default: {spec.safety} tools are allowed in {mode} mode")
    reason = f"{spec.name} ({spec.safety}, {spec.effect}) needs approval by default"
    if command is not None and command.reading.uncertain:
        reason += f" (an allow pattern cannot apply: {'; '.join(command.reading.uncertain)})"
    return Ask("policy", f"default: {spec.safety} tools ask in every mode", (reason,))
