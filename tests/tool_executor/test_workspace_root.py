"""The workspace's resolved path is remembered between checks (tool_executor/paths.py `workspace_root`), confirmed
by one stat: it never outlives the directory it names, and it never stands in for resolving an argument, so a
symlink that leads out of the workspace is refused as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tool_executor.paths import OutsideWorkspace, one_reading, resolve_in_workspace, workspace_root


def test_the_root_is_the_workspace_with_symlinks_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert workspace_root(link) == Path(os.path.realpath(real))
    assert workspace_root(link) == Path(os.path.realpath(real))  # remembered, same answer


def test_a_workspace_symlink_that_now_leads_elsewhere_is_resolved_again(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    link = tmp_path / "ws"
    link.symlink_to(first)
    assert workspace_root(link) == first.resolve()
    link.unlink()
    link.symlink_to(second)
    assert workspace_root(link) == second.resolve()
    (second / "notes.txt").write_text("x")
    assert resolve_in_workspace(link, "notes.txt") == (second / "notes.txt").resolve()


def test_a_workspace_made_anew_under_the_same_name_is_resolved_again(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert workspace_root(ws) == ws.resolve()
    ws.rmdir()
    other = tmp_path / "other"
    other.mkdir()
    ws.symlink_to(other)  # the name now leads to another directory
    assert workspace_root(ws) == other.resolve()


def test_a_symlink_escape_is_refused_once_the_root_is_remembered(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (ws / "ok.txt").write_text("o")
    assert resolve_in_workspace(ws, "ok.txt") == (ws / "ok.txt").resolve()  # the root is remembered now
    (ws / "escape").symlink_to(outside)
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "escape/secret.txt")
    (ws / "later").symlink_to(outside / "secret.txt")  # made after the root was remembered
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "later")


def test_a_missing_workspace_is_resolved_without_remembering(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    assert workspace_root(gone) == Path(os.path.realpath(gone))
    gone.mkdir()
    assert workspace_root(gone) == gone.resolve()


def test_a_remembered_path_that_now_names_another_directory_is_not_used(tmp_path: Path) -> None:
    """The workspace still leads to the same directory, but by another way, and the remembered path now names
    another directory: resolving under it would leave the workspace, so the root is resolved again."""
    (tmp_path / "a" / "ws").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    key = link / "ws"
    assert workspace_root(key) == (tmp_path / "a" / "ws").resolve()
    (tmp_path / "a").rename(tmp_path / "c")
    link.unlink()
    link.symlink_to(tmp_path / "c")
    (tmp_path / "a" / "ws").mkdir(parents=True)  # the remembered path exists again, as another directory
    assert workspace_root(key) == (tmp_path / "c" / "ws").resolve()
    (tmp_path / "a" / "ws" / "x.txt").write_text("not the workspace's")
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(key, str(tmp_path / "a" / "ws" / "x.txt"))


def test_one_pass_of_checks_resolves_an_argument_once_and_the_next_pass_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "real.txt").write_text("r")
    (outside / "secret.txt").write_text("s")
    (ws / "f").symlink_to(ws / "real.txt")
    resolved: list[str] = []
    real = os.path.realpath

    def counting(path: str | os.PathLike[str], **kw: bool) -> str:
        resolved.append(os.fspath(path))
        return real(path, **kw)

    monkeypatch.setattr(os.path, "realpath", counting)
    expected = (ws / "real.txt").resolve()
    workspace_root(ws)

    def three_checks() -> list[Path]:
        return [resolve_in_workspace(ws, "f") for _ in range(3)]

    resolved.clear()
    assert one_reading(three_checks) == [expected] * 3
    assert len(resolved) == 1
    (ws / "f").unlink()
    (ws / "f").symlink_to(outside / "secret.txt")  # swapped between two calls' checks
    with pytest.raises(OutsideWorkspace):
        one_reading(three_checks)
    with pytest.raises(OutsideWorkspace):  # and outside any pass (the handler's own resolution)
        resolve_in_workspace(ws, "f")


def test_a_refusal_within_one_pass_is_repeated_for_every_check(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    def twice() -> list[str]:
        reasons = []
        for _ in range(2):
            try:
                resolve_in_workspace(ws, "../elsewhere.txt")
            except OutsideWorkspace as exc:
                reasons.append(str(exc))
        return reasons

    reasons = one_reading(twice)
    assert len(reasons) == 2 and reasons[0] == reasons[1] and "outside the workspace" in reasons[0]


def test_a_workspace_given_as_its_realpath_is_confirmed_with_one_stat_and_through_a_link_with_two(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = Path(os.path.realpath(tmp_path)) / "ws"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    stats: list[str] = []
    stat = os.stat

    def counting(path: str | os.PathLike[str], *args: object, **kw: object) -> os.stat_result:
        stats.append(os.fspath(path))
        return stat(path, *args, **kw)  # type: ignore[arg-type]

    assert workspace_root(real) == real and workspace_root(link) == real  # both remembered
    monkeypatch.setattr(os, "stat", counting)
    assert workspace_root(real) == real
    assert stats == [str(real)]
    stats.clear()
    assert workspace_root(link) == real
    assert stats == [str(link), str(real)]
    monkeypatch.undo()
    real.rmdir()  # the same name made anew as another directory: resolved again, however it was confirmed
    other = real.with_name("other")
    other.mkdir()
    real.symlink_to(other)
    assert workspace_root(real) == other
