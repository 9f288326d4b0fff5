"""config/private_files.py: what Strata creates in its home is 0700 / 0600 whatever the umask; what exists is left
as it is; `loose_paths` finds what others could read."""

from __future__ import annotations

import inspect
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.private_files import create_private, loose_paths, open_private, private_dir


@pytest.fixture(params=[0o000, 0o022, 0o277])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_directories_and_their_missing_parents_are_0700(tmp_path: Path, umask: int) -> None:
    """The home and every parent this call creates are exactly 0700; an existing parent keeps its mode."""
    os.chmod(tmp_path, 0o755)
    home = private_dir(tmp_path / "a" / "b" / "home")
    assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", home)] == [0o700] * 3
    assert mode(tmp_path) == 0o755
    assert private_dir(home) == home  # again: nothing to do


def test_files_are_created_0600_and_existing_ones_left_alone(tmp_path: Path, umask: int) -> None:
    """A created file is exactly 0600; a file that exists keeps its mode (doctor reports it, nothing repairs)."""
    fd = open_private(tmp_path / "new", os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"x")
    os.close(fd)
    create_private(tmp_path / "empty")
    assert (mode(tmp_path / "new"), mode(tmp_path / "empty")) == (0o600, 0o600)
    old = tmp_path / "old"
    old.write_bytes(b"keep")
    os.chmod(old, 0o644)
    os.close(open_private(old, os.O_WRONLY | os.O_APPEND))
    create_private(old)
    assert (mode(old), old.read_bytes()) == (0o644, b"keep")


def test_loose_paths_names_what_others_can_read(tmp_path: Path) -> None:
    """The home and anything under it with group or other bits, symlinks skipped; a private home has none."""
    home = private_dir(tmp_path / "home")
    create_private(home / "strata.db")
    private_dir(home / "ledger")
    create_private(home / "ledger" / "s.jsonl")
    (home / "link").symlink_to("/etc/passwd")
    assert loose_paths(home) == []
    os.chmod(home, 0o755)
    os.chmod(home / "ledger" / "s.jsonl", 0o640)
    assert loose_paths(home) == [(home, 0o755), (home / "ledger" / "s.jsonl", 0o640)]


def test_loose_paths_reads_a_tree_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    """A tree nested deeper than Python's recursion allows (os.walk of 3.11 recurses once per level, and ended
    `strata doctor` in a RecursionError) is looked at whole: a loose file at its bottom is found."""
    home = private_dir(tmp_path / "home")
    deep = home
    for _ in range(400):
        deep = deep / "d"
        deep.mkdir(mode=0o700)
    (deep / "loose").write_text("x")
    os.chmod(deep / "loose", 0o644)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 250)  # room for the walk's own calls, not for 400 nested levels
    try:
        found = loose_paths(home)
    finally:
        sys.setrecursionlimit(limit)
    assert found == [(deep / "loose", 0o644)]
