"""Step 4: allow/deny. Session rules (`--allow`, `--deny`) over per-mode defaults; deny beats allow.

Defaults: read-only tools are allowed in every mode; anything else needs an allow rule in a mode with no human
(headless, daemon, mcp). The pipeline issue adds config rules, `ask`, approval and parking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.events import Mode
from core.policy import PermissionRule
from core.tools import ToolSpec
from tool_executor.verdicts import Deny, Pass, Verdict


def check_policy(spec: ToolSpec, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: Mode) -> Verdict:
    primary = args.get(spec.primary_arg) if spec.primary_arg else None
    primary_text = primary if isinstance(primary, str) else None
    matching = [r for r in rules if r.matches(spec.name, primary_text)]
    denies = [r for r in matching if r.action == "deny"]
    if denies:
        return Deny("policy", tuple(f"denied by rule --deny {r.text()!r} ({r.source})" for r in denies))
    allows = [r for r in matching if r.action == "allow"]
    if allows:
        return Pass(rule=f"--allow {allows[0].text()}")
    if spec.effect == "read_only":
        return Pass(rule=f"default: read-only tools are allowed in {mode} mode")
    return Deny("policy", (
        f"{spec.name} ({spec.safety}, {spec.effect}) is not allowed by default in {mode} mode; "
        f"the operator can allow it with --allow {spec.name}",
    ))
