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
- a command (bash's `command`), as read by tool_executor/shell: an allow pattern matches only a line that is one
  simple command read with certainty, spelled normally (`command-word args...`); a deny or ask pattern matches
  every simple command the reader sees (through wrappers, quoting, `bash -c`, the command word's basename) and
  the text's fragments. Where the reader cannot see a command word (`$cmd`, `eval`, `source`, a shell reading
  standard input), a deny or ask pattern on the command cannot be relied on, so the call asks, whatever allows it;
- anything else: the argument as given (numbers and booleans as their JSON text).

The files a call reads without naming them (a recursive grep, glob or list_dir) are kept from it by `path_filter`:
the path globs of the deny and ask rules that apply to the call, which the handler consults before it opens or names
an entry (core/tools/path_filter.py).

A command with a NUL byte is denied here: bash cannot take one, and no rule changes that."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.policy import PermissionRule
from core.tools import PathFilter, ToolSpec
from core.tools.path_filter import any_form_matches, path_forms
from tool_executor.paths import OutsideWorkspace, resolve_in_workspace, workspace_root
from tool_executor.verdicts import Ask, Deny, Pass, PolicyVerdict

if TYPE_CHECKING:  # the reader is imported by the check of a bash call, when there is one
    from tool_executor.shell import CommandLine


def _path_forms(raw: str, workspace: Path) -> list[str]:
    try:
        resolved = resolve_in_workspace(workspace, raw)
    except OutsideWorkspace:
        return [raw]  # the scope check has already refused it; keep the raw form for deny rules
    return path_forms(resolved, workspace_root(workspace))


def _is_path(spec: ToolSpec, name: str) -> bool:
    return name in spec.path_args or (name == spec.primary_arg and spec.primary_kind == "path")


def _forms(spec: ToolSpec, name: str, value: Any, workspace: Path, action: str) -> list[str]:
    if not isinstance(value, str):
        return [] if value is None else [json.dumps(value)]
    if _is_path(spec, name):
        return _path_forms(value, workspace)
    if name == spec.primary_arg and spec.primary_kind == "command":
        from tool_executor.shell import read_command  # a bash call's check: a session without one never needs it

        line = read_command(value)
        if action == "allow":
            return [] if line.allow_text is None else [line.allow_text]
        return list(line.deny_texts)
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
    return PathFilter(root=workspace_root(workspace), globs=tuple(dict.fromkeys(globs)),
                      rules=tuple(labels))


def _label(rule: PermissionRule) -> str:
    return f"{rule.action} rule {rule.text()!r} ({rule.source})"


def _command(spec: ToolSpec, args: Mapping[str, Any]) -> CommandLine | None:
    value = args.get(spec.primary_arg or "")
    if spec.primary_kind != "command" or not isinstance(value, str):
        return None
    from tool_executor.shell import read_command  # a bash call's check: a session without one never needs it

    return read_command(value)


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
