"""Step 3: request middleware. Trusted rewrites registered in code (path normalisation, routing). A rewrite may
change the arguments or route to another tool, but never to one with a lower safety level or PII class: that
would slip past the policy the original call met (`bash` rewritten into `read_file` would skip an ask)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.record import record
from core.tools import PII_ORDER, SAFETY_ORDER, ToolSpec
from tool_executor.paths import OutsideWorkspace, relative_text, resolved_text, workspace_root


@record
class Rewrite:
    """A middleware's change to a call: the tool and arguments it runs with, and why."""

    tool: str
    input: Mapping[str, Any]
    reason: str
    by: str


Middleware = Callable[[ToolSpec, Mapping[str, Any], Path], Rewrite | None]


def normalise_paths(spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> Rewrite | None:
    """Path arguments become the workspace-relative form of the path the scope check resolved (symlinks
    followed), so the handler acts on exactly what was checked and rules see one spelling."""
    if not spec.path_args:
        return None
    root = os.fspath(workspace_root(workspace))
    changed: dict[str, Any] = {}
    for name in spec.path_args:
        value = args.get(name)
        if not isinstance(value, str) or not value:
            continue  # absent, mistyped or empty: the schema check reports it (checks flag, never fix)
        try:
            resolved = resolved_text(workspace, value)
        except OutsideWorkspace:
            continue  # the scope check refuses it
        rel = relative_text(root, resolved)
        if rel != value:
            changed[name] = rel
    if not changed:
        return None
    spelled = ", ".join(f"{k}: {args[k]!r} -> {v!r}" for k, v in changed.items())
    return Rewrite(spec.name, {**args, **changed}, f"paths normalised ({spelled})", "middleware:normalise_paths")


DEFAULT_MIDDLEWARE: tuple[Middleware, ...] = (normalise_paths,)


def downgrade(before: ToolSpec, after: ToolSpec) -> str | None:
    """Why routing `before` to `after` is refused, or None when it keeps the safety level and PII class."""
    problems = []
    if SAFETY_ORDER.index(after.safety) < SAFETY_ORDER.index(before.safety):
        problems.append(f"safety level from {before.safety} to {after.safety}")
    if PII_ORDER.index(after.pii) < PII_ORDER.index(before.pii):
        problems.append(f"PII class from {before.pii} to {after.pii}")
    if not problems:
        return None
    return f"rewrite of {before.name} to {after.name} would lower the " + " and the ".join(problems)
