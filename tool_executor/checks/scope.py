"""Step 2: the session scope. Path arguments must resolve (symlinks followed) inside the workspace; glob
patterns must be relative and must not climb out. Built in, and lifted by nothing (no rule, grant, approval or
rewrite: a rewritten call passes this step again): a tool that may write never writes the project's `.strata/`
directory (its config and the hook scripts a person trusted), and a shell command that names it is refused."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from config.locations import PROJECT_DIR
from core.tools import ToolSpec
from tool_executor.paths import (
    OutsideWorkspace,
    in_project_dir,
    names_project_dir,
    relative_pattern_problem,
    resolved_text,
)
from tool_executor.verdicts import Deny, Pass, Verdict

_WHY = "it holds the project's config and the hook scripts a person trusted, which the agent's tools never write"


def check_scope(spec: ToolSpec, args: Mapping[str, Any], workspace: Path) -> Verdict:
    reasons: list[str] = []
    for name in spec.path_args:
        value = args.get(name)
        if value is None:
            continue  # absent: nothing to confine
        if not isinstance(value, str):
            if not _declared_string(spec, name):  # an MCP server's schema may let any value through
                reasons.append(f"{name}: a path argument must be a string (got {_json_kind(value)}); the scope "
                               "check cannot confine anything else to the workspace")
            continue  # mistyped where the schema declares a string: the schema check reports it
        try:
            resolved = resolved_text(workspace, value)
        except OutsideWorkspace as exc:
            reasons.append(f"{name}: {exc}")
            continue
        if spec.safety != "read" and in_project_dir(workspace, Path(resolved)):
            reasons.append(f"{name}: path {value!r} is in the project's {PROJECT_DIR}/ directory; {_WHY}")
    command = args.get(spec.primary_arg) if spec.primary_kind == "command" and spec.primary_arg else None
    if isinstance(command, str) and names_project_dir(command):
        reasons.append(f"{spec.primary_arg}: the command names the project's {PROJECT_DIR}/ directory; {_WHY}, and "
                       "what a command writes cannot be told by reading it, so no command may name it")
    pattern = args.get("pattern") if spec.name == "glob" else None
    if isinstance(pattern, str):
        problem = relative_pattern_problem(pattern)
        if problem:
            reasons.append(f"pattern: {problem}")
    return Deny("scope", tuple(reasons)) if reasons else Pass()


def _declared_string(spec: ToolSpec, name: str) -> bool:
    """Whether the tool's schema declares argument `name` a string (every built-in path argument): the schema check
    then refuses any other value."""
    properties = spec.input_schema.get("properties")
    declared = properties.get(name) if isinstance(properties, Mapping) else None
    return isinstance(declared, Mapping) and declared.get("type") == "string"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list | tuple) else "object" if isinstance(value, Mapping) else "a value"
