"""Step 2: the session scope. Path arguments must resolve (symlinks followed) inside the workspace; glob
patterns must be relative and must not climb out."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.tools import ToolSpec
from tool_executor.paths import OutsideWorkspace, relative_pattern_problem, resolve_in_workspace
from tool_executor.verdicts import Deny, Pass, Verdict


def check_scope(spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> Verdict:
    reasons: list[str] = []
    for name in spec.path_args:
        value = args.get(name)
        if not isinstance(value, str):
            continue  # absent or mistyped: the schema check reports it
        try:
            resolve_in_workspace(workspace, value)
        except OutsideWorkspace as exc:
            reasons.append(f"{name}: {exc}")
    pattern = args.get("pattern") if spec.name == "glob" else None
    if isinstance(pattern, str):
        problem = relative_pattern_problem(pattern)
        if problem:
            reasons.append(f"pattern: {problem}")
    return Deny("scope", tuple(reasons)) if reasons else Pass()
