"""Step 4: allow/deny. Session rules (`--allow`, `--deny`) over per-mode defaults; deny beats allow.

Defaults: read-only tools are allowed in every mode; anything else needs an allow rule in a mode with no human
(headless, daemon, mcp). The pipeline issue adds config rules, `ask`, approval and parking.

A rule's pattern is matched against the tool's primary argument, read according to its kind:
- path: the workspace-relative and the absolute form of the resolved path (symlinks followed), never the raw
  spelling, so `./secrets/x`, `sub/../secrets/x` and `/abs/ws/secrets/x` all meet a `secrets/*` rule;
- command: an allow pattern matches only a simple command (no `;`, `&`, `|`, newline, backquote, `$(`,
  redirection); a deny pattern matches the whole command or any of its simple parts;
- text: the argument as given."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.events import Mode
from core.policy import PermissionRule
from core.tools import ToolSpec
from tool_executor.paths import OutsideWorkspace, resolve_in_workspace
from tool_executor.verdicts import Deny, Pass, Verdict

_CONTROL = re.compile(r"[;&|\n`<>]|\$\(")


def _path_forms(raw: str, workspace: Path) -> list[str]:
    try:
        resolved = resolve_in_workspace(workspace, raw)
    except OutsideWorkspace:
        return [raw]  # the scope check has already refused it; keep the raw form for deny rules
    root = Path(os.path.realpath(workspace))
    rel = "." if resolved == root else str(resolved.relative_to(root))
    return [rel, str(resolved)]


def _candidates(spec: ToolSpec, value: str, workspace: Path, action: str) -> list[str]:
    if spec.primary_kind == "path":
        return _path_forms(value, workspace)
    if spec.primary_kind == "command":
        if action == "allow":
            return [] if _CONTROL.search(value) else [value]
        parts = [p.strip() for p in re.split(r"[;&|\n`<>()$]+", value) if p.strip()]
        return [value.strip(), *parts]
    return [value]


def _matches(rule: PermissionRule, spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> bool:
    if rule.pattern is None:
        return rule.matches(spec.name, None)
    value = args.get(spec.primary_arg) if spec.primary_arg else None
    if not isinstance(value, str):
        return False
    return any(rule.matches(spec.name, c) for c in _candidates(spec, value, workspace, rule.action))


def check_policy(spec: ToolSpec, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: Mode,
                 workspace: Path) -> Verdict:
    denies = [r for r in rules if r.action == "deny" and _matches(r, spec, args, workspace)]
    if denies:
        return Deny("policy", tuple(f"denied by rule --deny {r.text()!r} ({r.source})" for r in denies))
    allow = next((r for r in rules if r.action == "allow" and _matches(r, spec, args, workspace)), None)
    if allow is not None:
        return Pass(rule=f"--allow {allow.text()}")
    if spec.effect == "read_only":
        return Pass(rule=f"default: read-only tools are allowed in {mode} mode")
    hint = f"the operator can allow it with --allow {spec.name}"
    if spec.primary_kind == "command" and isinstance(args.get(spec.primary_arg or ""), str) \
            and _CONTROL.search(args[spec.primary_arg or ""]):
        hint += " (pattern rules never allow commands joined with ; & | or using $( ` < >)"
    return Deny("policy", (f"{spec.name} ({spec.safety}, {spec.effect}) is not allowed by default in {mode} mode; "
                           f"{hint}",))
