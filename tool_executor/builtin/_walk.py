"""Walking the workspace for grep, glob and list_dir: inside the workspace only, never into a path the call's
`PathFilter` keeps from it (a skipped directory is not listed, a skipped file not opened, and both are counted),
never following a directory symlink while recursing (as pathlib's `**`, so no loops), and checking the call's
`Stop` flag at every entry, so a walk over a huge tree ends soon after its deadline or an interrupt."""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from core.tools import PathFilter, Stop
from tool_executor.paths import OutsideWorkspace, resolve_in_workspace, workspace_root

_WILDCARD = frozenset("*?[")


class Walker:
    def __init__(self, workspace: Path, path_filter: PathFilter | None, stop: Stop) -> None:
        self.root = workspace_root(workspace)
        self.filter = path_filter
        self.stop = stop
        self._skipped: set[Path] = set()

    @property
    def skipped(self) -> int:
        """How many distinct paths the filter kept from the walk."""
        return len(self._skipped)

    def blocked(self, path: Path) -> bool:
        if self.filter is not None and self.filter.skips(path):
            self._skipped.add(path)
            return True
        return False

    def inside(self, path: Path) -> Path | None:
        """Where `path` leads (symlinks followed) when that is inside the workspace, else None."""
        try:
            return resolve_in_workspace(self.root, str(path))
        except OutsideWorkspace:
            return None

    def rel(self, path: Path) -> str:
        return "." if path == self.root else str(path.relative_to(self.root))

    def entries(self, directory: Path, *, strict: bool = False) -> list[os.DirEntry[str]]:
        """The directory's entries sorted by name; an unreadable directory has none (or raises OSError, with
        `strict`)."""
        found: list[os.DirEntry[str]] = []
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    if len(found) % 512 == 0:
                        self.stop.check()
                    found.append(entry)
        except OSError:
            if strict:
                raise
            return []
        return sorted(found, key=lambda e: e.name)

    def files(self, start: Path) -> Iterator[Path]:
        """The regular files under the directory `start` (or `start` itself when it is a regular file), resolved,
        each once, in sorted path order. `start` is the call's own path argument, which the policy check has
        already judged, so the filter applies below it."""
        seen: set[Path] = set()
        if not start.is_dir():
            if _regular(start):
                yield start
            return
        stack: list[Path] = [start]
        while stack:
            directory = stack.pop()
            subdirs: list[Path] = []
            for entry in self.entries(directory):
                self.stop.check()
                path = Path(entry.path)
                if self.blocked(path):
                    continue
                if _plain_dir(entry):
                    subdirs.append(path)
                    continue
                resolved = self.inside(path)
                if resolved is None or resolved in seen or not _regular(resolved):
                    continue
                seen.add(resolved)
                yield resolved
            stack.extend(reversed(subdirs))

    def glob(self, pattern: str) -> Iterator[Path]:
        """Paths matching a workspace-relative glob (`*`, `?`, `[...]` within a name, `**` for any depth of
        directories), as pathlib matches them, each once."""
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        seen: set[Path] = set()
        for path in self._select(self.root, parts, 0):
            if path not in seen:
                seen.add(path)
                yield path

    def _select(self, directory: Path, parts: list[str], i: int) -> Iterator[Path]:
        self.stop.check()
        if i == len(parts):
            yield directory
            return
        part, last = parts[i], i == len(parts) - 1
        if part == "**":
            for sub in self._dirs_below(directory):
                yield from self._select(sub, parts, i + 1)
            return
        if _WILDCARD.isdisjoint(part):
            candidates = [directory / part] if os.path.lexists(directory / part) else []
        else:
            candidates = [Path(e.path) for e in self.entries(directory) if fnmatch.fnmatchcase(e.name, part)]
        for path in candidates:
            self.stop.check()
            resolved = self.inside(path)
            if resolved is None or self.blocked(path):
                continue
            if last:
                yield path
            elif resolved.is_dir():
                yield from self._select(path, parts, i + 1)

    def _dirs_below(self, directory: Path) -> Iterator[Path]:
        """`directory` and every directory under it, not through symlinks, not into skipped ones."""
        stack = [directory]
        while stack:
            current = stack.pop()
            yield current
            subdirs = [Path(e.path) for e in self.entries(current) if _plain_dir(e)]
            stack.extend(reversed([d for d in subdirs if not self.blocked(d)]))


def _plain_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _regular(path: Path) -> bool:
    """A regular file (FIFOs, sockets and devices are never opened by a walk)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False
