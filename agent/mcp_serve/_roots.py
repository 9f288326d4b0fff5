"""Where `run_agent` may work: a workspace must lie, symlinks resolved, under one of the roots the operator
configured (`[mcp.serve] roots`; default: the server's working directory), and so must the file of a `script:PATH`
model the host names. Anything else is refused."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from agent.models import script_path
from core.errors import UsageError


def allowed_roots(configured: Sequence[str], cwd: Path) -> list[Path]:
    roots = [Path(os.path.expanduser(r)) for r in configured] or [cwd]
    return [Path(os.path.realpath(cwd / r)) for r in roots]


def workspace_in_roots(requested: str | None, roots: Sequence[Path]) -> Path:
    """The workspace `requested` (None: the first root), resolved; UsageError when it lies outside every root."""
    if requested is None or not requested.strip():
        return roots[0]
    if "\x00" in requested:
        raise UsageError("the workspace must not contain a NUL character")
    path = Path(os.path.expanduser(requested))
    path = Path(os.path.realpath(path if path.is_absolute() else roots[0] / path))
    if not any(path == root or root in path.parents for root in roots):
        raise UsageError(f"the workspace {path} is not under the roots this server may use "
                         f"({', '.join(str(r) for r in roots)})")
    if not path.is_dir():
        raise UsageError(f"the workspace {path} is not a directory")
    return path


def model_in_roots(spec: str, roots: Sequence[Path]) -> str:
    """The model `spec` a host named, a `script:PATH` one with PATH resolved (relative to the first root, symlinks
    followed); UsageError when that file lies outside every root (the host would read any file the server can).
    Another model is `spec` itself."""
    path = script_path(spec)
    if path is None:
        return spec
    if "\x00" in path:
        raise UsageError("a script model's path must not contain a NUL character")
    given = Path(os.path.expanduser(path))
    resolved = Path(os.path.realpath(given if given.is_absolute() else roots[0] / given))
    if not any(root in resolved.parents for root in roots):
        raise UsageError(f"the script model {path} is not under the roots this server may use "
                         f"({', '.join(str(r) for r in roots)})")
    rest = spec.partition(":")[2]
    return f"script:{resolved}{rest[len(path):]}"  # the file checked is the file read (its #child=N kept)
