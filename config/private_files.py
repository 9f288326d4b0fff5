"""Private files: the one place that decides the modes of what Strata creates in its home.

The home holds raw conversations, tool outputs and keys, so it is readable by its owner only: every directory
Strata creates (the home, its parents, `ledger/`, `logs/`, `locks/`) is 0700, and every file 0600, whatever the
umask. The umask can only take bits away from a mode passed to `mkdir` or `open`, so a mode is set exactly with
chmod right after creation. Nothing here loosens or repairs what already exists: an older home keeps its modes,
and `strata doctor` reports them (`loose_paths`) with the command that fixes them."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create `path` and any missing parents as 0700 (existing directories are left as they are)."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # made by another process meanwhile: theirs
        with contextlib.suppress(OSError):
            os.chmod(directory, DIR_MODE)
    if not path.is_dir():
        path.mkdir(mode=DIR_MODE, exist_ok=True)  # raises the error that explains why not (a file is in the way)
    return path


def open_private(path: Path, flags: int) -> int:
    """`os.open(path, flags | O_CREAT)`, a file created by this call being exactly 0600. Returns the descriptor."""
    for _ in range(3):
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
            break
        except FileExistsError:
            pass
        try:
            return os.open(path, flags & ~(os.O_CREAT | os.O_EXCL))
        except FileNotFoundError:
            continue  # removed between the two opens: try to create it again
    else:
        raise FileNotFoundError(f"cannot open {path}: it keeps disappearing")
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def create_private(path: Path) -> None:
    """Make sure `path` exists; if this call creates it, it is an empty 0600 file. For files another library
    opens by name (SQLite, the prompt history): they then keep this file's mode."""
    if path.exists():
        return
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
        finally:
            os.close(fd)


def loose_paths(home: Path, limit: int = 10_000) -> list[tuple[Path, int]]:
    """The home and what is in it (not following symlinks), where group or others have any permission: (path,
    mode) pairs, the home first. Reads only; at most `limit` entries are looked at."""
    found: list[tuple[Path, int]] = []
    try:
        top = os.lstat(home)
    except OSError:
        return found
    if stat.S_IMODE(top.st_mode) & 0o077:
        found.append((home, stat.S_IMODE(top.st_mode)))
    seen = 0
    stack = [home]  # a stack of its own, not os.walk: Python 3.11's recurses once per level, and a deep tree in the
    while stack:    # home would end `strata doctor` in a RecursionError
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                names = sorted(e.name for e in entries)
        except OSError:
            continue
        for name in names:
            seen += 1
            if seen > limit:
                return found
            path = directory / name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_IMODE(st.st_mode) & 0o077:
                found.append((path, stat.S_IMODE(st.st_mode)))
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)
    return found
