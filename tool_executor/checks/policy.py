"""Step 4: policy. Rules from config and flags over per-mode defaults; deny beats ask beats allow.

Defaults: tools of safety level `read` are allowed in every mode; anything else (write, execute, network,
admin) asks. Whether an `ask` reaches a person, parks the call or becomes a denial is the approval step's
business (a mode with no human denies it unless the operator chose `--on-ask park`).

A rule's `pattern` (flag form `tool(pattern)`) is matched against the tool's primary argument and against every
path argument the call gives (`grep`'s `path`, whose primary argument is a regex): a deny or ask rule applies when
any of them matches, an allow rule only when all of them do. `args` globs are matched against the named arguments,
each of which must match. Arguments are read according to their kind:
- path arguments: the workspace-relative and the absolute form of the resolved path (symlinks followed), never
  the raw spelling, so `./secrets/x`, `sub/../secrets/x` and `/abs/ws/secrets/x` all meet a `secrets/*` rule;
- a command (bash's `command`): an allow pattern matches only a simple command (no `;`, `&`, `|`, newline,
  backquote, `$(`, redirection); a deny or ask pattern matches the whole command or any of its simple parts;
- anything else: the argument as given (numbers and booleans as their JSON text).

The files a call reads without naming them (a recursive grep, glob or list_dir) are kept from it by `path_filter`:
the path globs of the deny and ask rules that apply to the call, which the handler consults before it opens or names
an entry (core/tools/path_filter.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.policy import PermissionRule
from core.tools import PathFilter, ToolSpec
from core.tools.path_filter import any_form_matches, path_forms
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
    return path_forms(resolved, Path(os.path.realpath(workspace)))


def _is_path(spec: ToolSpec, name: str) -> bool:
    return name in spec.path_args or (name == spec.primary_arg and spec.primary_kind == "path")


def _forms(spec: ToolSpec, name: str, value: Any, workspace: Path, action: str) -> list[str]:
    if not isinstance(value, str):
        return [] if value is None else [json.dumps(value)]
    if _is_path(spec, name):
        return _path_forms(value, workspace)
    if name == spec.primary_arg and spec.primary_kind == "command":
        if action == "allow":
            return [] if _CONTROL.search(value) else [value]
        parts = [p.strip() for p in re.split(r"[;&|\n`<>()$]+", value) if p.strip()]
        return [value.strip(), *parts, *(w for p in parts if (w := _command_word_first(p)) and w != p)]
    return [value]


def _pattern_targets(rule: PermissionRule, spec: ToolSpec) -> list[str]:
    """The arguments a rule's `pattern` is matched against: the primary argument, then each path argument (an
    argument the rule gives its own glob in `args` is judged by that glob only)."""
    names = [spec.primary_arg] if spec.primary_arg else []
    names += [n for n in spec.path_args if n not in names]
    return [n for n in names if n not in rule.args]


def _meets(spec: ToolSpec, name: str, value: Any, glob: str, workspace: Path, action: str) -> bool:
    return any_form_matches(_forms(spec, name, value, workspace, action), glob)


def _conditions_hold(rule: PermissionRule, spec: ToolSpec, args: Mapping[str, Any], workspace: Path, *,
                     skip_paths: bool = False) -> bool:
    """Every `args` glob matches its argument (path arguments left out with `skip_paths`)."""
    return all(_meets(spec, name, args.get(name), glob, workspace, rule.action)
               for name, glob in rule.args.items() if not (skip_paths and _is_path(spec, name)))


def rule_matches(rule: PermissionRule, spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> bool:
    if not rule.matches_tool(spec.name):
        return False
    if not _conditions_hold(rule, spec, args, workspace):
        return False
    if rule.pattern is None:
        return True
    given = [n for n in _pattern_targets(rule, spec) if args.get(n) is not None]
    if not given:
        return False
    hits = [_meets(spec, n, args[n], rule.pattern, workspace, rule.action) for n in given]
    # A deny or ask rule covers every path the call touches; an allow rule must cover all of them.
    return all(hits) if rule.action == "allow" else any(hits)


def path_filter(spec: ToolSpec, args: Mapping[str, Any], rules: Sequence[PermissionRule],
                workspace: Path) -> PathFilter | None:
    """The paths the call may not open or name while it walks the workspace: the path globs (`pattern`, and the
    `args` globs of path arguments) of every deny and ask rule on this tool whose other `args` globs match the
    call. An ask rule's paths are skipped too: a walk cannot stop to ask (naming the path as the call's own
    argument asks for it). None when no rule keeps anything from the call (a shell command walks nothing the
    handler could filter)."""
    if spec.primary_kind == "command":
        return None
    globs: list[str] = []
    labels: list[str] = []
    for rule in rules:
        if rule.action == "allow" or not rule.matches_tool(spec.name):
            continue
        if not _conditions_hold(rule, spec, args, workspace, skip_paths=True):
            continue
        mine = [g for n, g in rule.args.items() if _is_path(spec, n)]
        if rule.pattern is not None:
            mine.append(rule.pattern)
        if mine:
            globs.extend(mine)
            labels.append(_label(rule))
    if not globs:
        return None
    return PathFilter(root=Path(os.path.realpath(workspace)), globs=tuple(dict.fromkeys(globs)),
                      rules=tuple(labels))


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
