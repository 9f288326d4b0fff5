"""Workspace confinement: a path argument, resolved with symlinks followed, must stay inside the workspace; and
the project's own `.strata/` directory, inside it, is never written by the agent's tools."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import TypeVar

from config.hook_files import shell_words
from config.locations import PROJECT_DIR

_NAMES_PROJECT_DIR = re.compile(r"(?<![a-z0-9_-])" + re.escape(PROJECT_DIR) + r"(?![a-z0-9_-])")


class OutsideWorkspace(ValueError):
    pass


_ROOTS: dict[str, tuple[tuple[int, int, int], Path, bool]] = {}
"""Per workspace as given: the identity of the directory it led to, its realpath, and whether that is the same text."""
_ROOTS_MAX = 256

_Readings = dict[tuple[str, str | None], "Path | str | OutsideWorkspace"]
_READINGS: ContextVar[_Readings | None] = ContextVar("strata_path_readings", default=None)
_T = TypeVar("_T")


def one_reading(run: Callable[[], _T]) -> _T:
    """Run `run` (synchronous: the checks of one call, steps 1-5, which never wait) with each path argument
    and the workspace's root resolved once: the scope check, the middleware and the policy all read the same
    argument, and within one such pass they now share one `realpath` of it (and one confirmation of the root)
    instead of each resolving it again a few microseconds later. Nothing outside the pass is remembered: the next
    call's checks, and the tool's handler when it runs, resolve afresh (symlinks followed), so a path changed
    between the checks and the handler is judged again by the handler's own resolution, as before."""
    token = _READINGS.set({})
    try:
        return run()
    finally:
        _READINGS.reset(token)


def _identity(path: str | Path) -> tuple[int, int, int] | None:
    """The directory `path` leads to: device, inode and change time (a directory made anew, even on a reused
    inode, has another), or None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_ctime_ns


def workspace_root(workspace: Path) -> Path:
    """The workspace with every symlink resolved (`os.path.realpath`), as each check of a call needs it. A realpath
    walks every component of the path, and a call's checks need the root a few times over, so it is remembered per
    workspace and confirmed with two stats instead: the workspace and the remembered path must both still lead to
    the very directory it was resolved to (same device, inode and change time), else it is resolved again (one stat
    when the workspace is given as its realpath: both are then the same path).
    Arguments are never remembered beyond one pass of a call's checks (`one_reading`): each is resolved afresh,
    symlinks followed (`resolve_in_workspace`)."""
    key = os.fspath(workspace)
    readings = _READINGS.get()
    if readings is not None:
        read = readings.get((key, None))
        if isinstance(read, Path):
            return read
        root = _workspace_root(key)
        readings[(key, None)] = root
        return root
    return _workspace_root(key)


def _workspace_root(key: str) -> Path:
    known = _ROOTS.get(key)
    if known is not None:
        here = _identity(key)
        # A workspace given as its own realpath (the usual case: sessions record it resolved) is confirmed by that
        # one stat: the remembered path is the same text, so a second stat would ask the same question again.
        if here is not None and here == known[0] and (known[2] or _identity(known[1]) == here):
            return known[1]
    text = os.path.realpath(key)
    root = Path(text)
    there = _identity(root)
    if there is not None:
        if len(_ROOTS) >= _ROOTS_MAX:
            _ROOTS.clear()
        _ROOTS[key] = (there, root, text == key)
    return root


def resolve_in_workspace(workspace: Path, raw: str) -> Path:
    """Resolve `raw` (relative to the workspace, or absolute) following every symlink of its existing part.
    Raises OutsideWorkspace with the reason if the result leaves the workspace. Within `one_reading` the answer
    (or the refusal) for the same workspace and argument is given once and repeated."""
    return Path(resolved_text(workspace, raw))


def resolved_text(workspace: Path, raw: str) -> str:
    """`resolve_in_workspace`'s answer as the text of the path (a realpath: absolute, normalised), for the checks
    and handlers that need only its text: no `Path` is made (and none is asked for its text or parts)."""
    readings = _READINGS.get()
    if readings is None:
        return _resolve(workspace, raw)
    key = (os.fspath(workspace), raw)
    read = readings.get(key)
    if read is None:
        try:
            read = _resolve(workspace, raw)
        except OutsideWorkspace as exc:
            read = exc
        readings[key] = read
    if isinstance(read, OutsideWorkspace):
        raise OutsideWorkspace(*read.args)
    assert isinstance(read, str)
    return read


def relative_text(root: str, resolved: str) -> str:
    """The workspace-relative form of `resolved` (a `resolved_text` of a workspace whose root's text is `root`):
    `.` for the root itself, else the text below it (`str(Path(resolved).relative_to(root))`: both are realpaths,
    whose text has no empty or `.` component, so the text below the root is that relative path's text)."""
    if resolved == root:
        return "."
    return resolved[len(root):] if root.endswith("/") else resolved[len(root) + 1:]


def _resolve(workspace: Path, raw: str) -> str:
    if "\x00" in raw:
        raise OutsideWorkspace(f"path {raw!r} contains a NUL byte")
    root = workspace_root(workspace)
    top = os.fspath(root)
    resolved = _beneath(top, raw)
    if resolved is None:
        try:
            candidate = Path(raw).expanduser() if raw.startswith("~") else Path(raw)
        except RuntimeError:
            raise OutsideWorkspace(f"path {raw!r} names a home directory that cannot be resolved") from None
        if not candidate.is_absolute():
            candidate = root / candidate
        resolved = os.path.realpath(candidate)
    if not _inside(resolved, top):
        shown = f"{raw!r} resolves to {resolved}" if resolved != raw else f"{raw!r}"
        raise OutsideWorkspace(f"path {shown}, which is outside the workspace {root}")
    return resolved


def _beneath(root: str, raw: str) -> str | None:
    """`os.path.realpath` of `raw` for the common case, walking only the part below the workspace's root: `root` is
    already a realpath (`workspace_root`), and `raw` is relative or spelled under `root`, with no `..` and no
    component that is a symlink now. Each component is checked with `lstat` just as `realpath` checks it (a missing
    one is kept as written, as `realpath` does), so the answer is `realpath`'s; None when any component is `..` or a
    symlink (or `raw` is elsewhere): the caller resolves it with `realpath`, following the link. Nothing is
    remembered: every call walks its components afresh."""
    if raw.startswith("/"):
        if not raw.startswith(root if root.endswith("/") else root + "/"):
            return None
        raw = raw[len(root):]
    elif raw.startswith("~"):
        return None
    path = root
    for name in raw.split("/"):
        if not name or name == ".":
            continue
        if name == "..":
            return None
        path = path + name if path.endswith("/") else path + "/" + name
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue  # as `realpath` (not strict): a component that cannot be read is kept as it is
        if stat.S_ISLNK(mode):
            return None
    return path


def _inside(resolved: str, root: str) -> bool:
    """`Path(resolved) == Path(root) or Path(root) in Path(resolved).parents`, on the text: both are realpaths
    (absolute, normalised, no trailing separator but the root's own), whose text `Path` keeps as it is, so the
    comparison is the same without building a Path for each parent."""
    return resolved == root or resolved.startswith(root if root.endswith("/") else root + "/")


def relative_pattern_problem(pattern: str) -> str | None:
    """Why a glob pattern may not be used (absolute, or climbing out with '..'), or None."""
    if pattern.startswith(("/", "~")):
        return f"pattern {pattern!r} is absolute; patterns are relative to the workspace"
    if ".." in Path(pattern).parts:
        return f"pattern {pattern!r} climbs out of the workspace with '..'"
    return None


def in_project_dir(workspace: Path, resolved: Path) -> bool:
    """Is `resolved` (a path `resolve_in_workspace` returned) the workspace's `.strata/` directory or inside it?
    The name is compared case-blind: on a case-insensitive file system `.STRATA` is the same directory."""
    root = workspace_root(workspace)
    try:
        parts = resolved.relative_to(root).parts
    except ValueError:
        return False
    return bool(parts) and parts[0].casefold() == PROJECT_DIR


def names_project_dir(command: str) -> bool:
    """Does any word of a shell command, as written or after unquoting, name `.strata` (any case)? A reading,
    not a confinement: a command can build the name at run time (`d=.stra; ... ${d}ta`), which only the check of
    the hook files catches."""
    if _NAMES_PROJECT_DIR.search(command.casefold()):
        return True
    if not any(c in command for c in "'\"\\"):  # nothing to unquote: the words are the text as written
        return False
    return any(_NAMES_PROJECT_DIR.search(word.casefold()) for word in shell_words(command))
