"""Step 4: policy. Rules from config and flags over per-mode defaults; deny beats ask beats allow.

Defaults: tools of safety level `read` are allowed in every mode; anything else (write, execute, network,
admin) asks. Whether an `ask` reaches a person, parks the call or becomes a denial is the approval step's
business (a mode with no human denies it unless the operator chose `--on-ask park`).

A rule's patterns are matched against arguments read according to their kind:
- path arguments: the workspace-relative and the absolute form of the resolved path (symlinks followed), never
  the raw spelling, so `./secrets/x`, `sub/../secrets/x` and `/abs/ws/secrets/x` all meet a `secrets/*` rule;
- a command (bash's `command`): an allow pattern matches only a simple command (no `;`, `&`, `|`, newline,
  backquote, `$(`, redirection); a deny or ask pattern matches the whole command or any of its simple parts;
- anything else: the argument as given (numbers and booleans as their JSON text)."""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.policy import PermissionRule
from core.tools import ToolSpec
from tool_executor.paths import OutsideWorkspace, resolve_in_workspace
from tool_executor.verdicts import Ask, Deny, Pass, PolicyVerdict

_CONTROL = re.compile(r"[;&|\n`<>]|\$[(\[{]")
"""What makes a command not simple for an allow pattern: operators, redirections, command and arithmetic
substitution, and braced parameter expansion (`${x@P}` can run a command with none of the others)."""
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac",
                       "select", "function", "coproc", "!", "{", "}", "time", "exec", "command", "builtin", "env",
                       "nohup", "nice", "sudo"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


def _command_word_first(part: str) -> str:
    """A simple command as a deny or ask pattern should see it: reserved words, prefixes such as `env` and
    `exec`, and variable assignments before the command word left out, and the command word unquoted
    (`A=1 \\rm x`, `then 'rm' x` -> `rm x`)."""
    words = part.split()
    while words and (words[0] in _RESERVED or _ASSIGNMENT.fullmatch(words[0])):
        words = words[1:]
    if words:
        words[0] = words[0].replace("\\", "").replace("'", "").replace('"', "")
    return " ".join(words)


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
        if action == "allow":
            return [] if _CONTROL.search(value) else [value]
        parts = [p.strip() for p in re.split(r"[;&|\n`<>()$]+", value) if p.strip()]
        return [value.strip(), *parts, *(w for p in parts if (w := _command_word_first(p)) and w != p)]
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


def check_policy(spec: ToolSpec, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: str,
                 workspace: Path) -> PolicyVerdict:
    matching = [r for r in rules if rule_matches(r, spec, args, workspace)]
    denies = [r for r in matching if r.action == "deny"]
    if denies:
        return Deny("policy", tuple(f"denied by {_label(r)}" for r in denies))
    asks = [r for r in matching if r.action == "ask"]
    if asks:
        return Ask("policy", _label(asks[0]), tuple(f"{_label(r)} asks for approval" for r in asks))
    allow = next((r for r in matching if r.action == "allow"), None)
    if allow is not None:
        return Pass(rule=_label(allow))
    if spec.safety == "read":
        return Pass(rule=f"default: {spec.safety} tools are allowed in {mode} mode")
    reason = f"{spec.name} ({spec.safety}, {spec.effect}) needs approval by default"
    value = args.get(spec.primary_arg or "")
    if spec.primary_kind == "command" and isinstance(value, str) and _CONTROL.search(value):
        reason += " (pattern rules never allow commands joined with ; & | or using $( ` < >)"
    return Ask("policy", f"default: {spec.safety} tools ask in every mode", (reason,))
