"""Workspace confinement: a path argument, resolved with symlinks followed, must stay inside the workspace."""

from __future__ import annotations

import os
from pathlib import Path


class OutsideWorkspace(ValueError):
    pass


def resolve_in_workspace(workspace: Path, raw: str) -> Path:
    """Resolve `raw` (relative to the workspace, or absolute) following every symlink of its existing part.
    Raises OutsideWorkspace with the reason if the result leaves the workspace."""
    if "\x00" in raw:
        raise OutsideWorkspace(f"path {raw!r} contains a NUL byte")
    root = Path(os.path.realpath(workspace))
    try:
        candidate = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
    except RuntimeError:
        raise OutsideWorkspace(f"path {raw!r} names a home directory that cannot be resolved") from None
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = Path(os.path.realpath(candidate))
    if resolved != root and root not in resolved.parents:
        shown = f"{raw!r} resolves to {resolved}" if str(resolved) != raw else f"{raw!r}"
        raise OutsideWorkspace(f"path {shown}, which is outside the workspace {root}")
    return resolved


def relative_pattern_problem(pattern: str) -> str | None:
    """Why a glob pattern may not be used (absolute, or climbing out with '..'), or None."""
    if pattern.startswith(("/", "~")):
        return f"pattern {pattern!r} is absolute; patterns are relative to the workspace"
    if ".." in Path(pattern).parts:
        return f"pattern {pattern!r} climbs out of the workspace with '..'"
    return None
