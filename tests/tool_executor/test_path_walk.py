"""A path argument below the workspace is resolved by walking only its own components from the workspace's root
(tool_executor/paths.py `_beneath`), each checked with `lstat` as `os.path.realpath` checks it; any `..` or symlink
sends it to `realpath` whole. The answer (or the refusal) is always the one `realpath` gives, and nothing is
remembered between two resolutions: a component swapped for a symlink in between is followed the next time. Its
text (`resolved_text`) is the `Path`'s text, and its workspace-relative text (`relative_text`) is the text of
`Path.relative_to`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tool_executor.paths import (
    OutsideWorkspace,
    relative_text,
    resolve_in_workspace,
    resolved_text,
    workspace_root,
)

_NAMES = ["d", "e", "f.txt", "missing", "in_dir", "in_file", "out_dir", "out_file", "dangling", "loop", ".", "..",
          ""]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A workspace (reached through a symlink) with files, directories and symlinks that stay in, lead out, lead
    nowhere or loop, and a directory outside it."""
    base = tmp_path_factory.mktemp("walk")
    ws, outside = base / "real-ws", base / "outside"
    for d in (ws / "d" / "e", outside / "d"):
        d.mkdir(parents=True)
    for f in (ws / "f.txt", ws / "d" / "f.txt", ws / "d" / "e" / "f.txt", outside / "f.txt"):
        f.write_text("x")
    for where in (ws, ws / "d"):
        (where / "in_dir").symlink_to(ws / "d")
        (where / "in_file").symlink_to(ws / "f.txt")
        (where / "out_dir").symlink_to(outside)
        (where / "out_file").symlink_to(outside / "f.txt")
        (where / "dangling").symlink_to(outside / "nothing")
        (where / "loop").symlink_to(where / "loop")
    (base / "ws-link").symlink_to(ws)
    return base / "ws-link", outside


def _as_realpath_says(workspace: Path, raw: str) -> Path | str:
    """What resolving with `os.path.realpath` of the whole path gives (the path, or the refusal's text)."""
    root = os.path.realpath(workspace)
    resolved = os.path.realpath(Path(root) / raw)
    if resolved == root or resolved.startswith(root.rstrip("/") + "/"):
        return Path(resolved)
    shown = f"{raw!r} resolves to {resolved}" if resolved != raw else f"{raw!r}"
    return f"path {shown}, which is outside the workspace {root}"


def _resolved(workspace: Path, raw: str) -> Path | str:
    try:
        return resolve_in_workspace(workspace, raw)
    except OutsideWorkspace as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(_NAMES), min_size=0, max_size=5), absolute=st.booleans(),
       trailing=st.booleans())
def test_a_path_below_the_workspace_resolves_as_realpath_resolves_it(
        tree: tuple[Path, Path], parts: list[str], absolute: bool, trailing: bool) -> None:
    workspace, _ = tree
    raw = "/".join(parts) + ("/" if trailing and parts else "")
    if absolute:  # spelled under the workspace's resolved root
        raw = os.path.realpath(workspace) + "/" + raw
    assert _resolved(workspace, raw) == _as_realpath_says(workspace, raw)
    try:
        text = resolved_text(workspace, raw)
    except OutsideWorkspace:
        return
    path, root = Path(text), workspace_root(workspace)
    assert resolve_in_workspace(workspace, raw) == path and str(path) == text
    assert relative_text(str(root), text) == ("." if path == root else str(path.relative_to(root)))


@pytest.mark.parametrize("raw", ["f.txt", "d/e/f.txt", "./d//e/", "d/missing/more", "f.txt/below", "", "."])
def test_paths_without_links_are_the_root_and_their_own_components(tree: tuple[Path, Path], raw: str) -> None:
    workspace, _ = tree
    assert resolve_in_workspace(workspace, raw) == _as_realpath_says(workspace, raw)


def test_a_directory_swapped_for_an_outside_symlink_is_followed_at_the_next_resolution(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "notes.txt").write_text("inside")
    (outside / "notes.txt").write_text("outside")
    assert resolve_in_workspace(ws, "sub/notes.txt") == (ws / "sub" / "notes.txt").resolve()
    assert workspace_root(ws) == ws.resolve()  # the root is remembered; the argument's walk is not
    (ws / "sub" / "notes.txt").unlink()
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)
    with pytest.raises(OutsideWorkspace, match="outside the workspace"):
        resolve_in_workspace(ws, "sub/notes.txt")
    with pytest.raises(OutsideWorkspace, match="outside the workspace"):
        resolve_in_workspace(ws, str(ws.resolve() / "sub" / "notes.txt"))


def test_a_file_swapped_for_an_outside_symlink_is_followed_at_the_next_resolution(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "a.txt").write_text("inside")
    (outside / "secret.txt").write_text("outside")
    assert resolve_in_workspace(ws, "a.txt") == (ws / "a.txt").resolve()
    (ws / "a.txt").unlink()
    (ws / "a.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(OutsideWorkspace, match="resolves to"):
        resolve_in_workspace(ws, "a.txt")
    (ws / "a.txt").unlink()
    (ws / "a.txt").symlink_to(ws / "inside.txt")  # a link that stays inside is followed to its target
    assert resolve_in_workspace(ws, "a.txt") == (ws / "inside.txt").resolve()


@pytest.mark.parametrize(("root", "resolved", "relative"), [
    ("/ws", "/ws", "."), ("/ws", "/ws/a", "a"), ("/ws", "/ws/a/b.txt", "a/b.txt"), ("/", "/", "."),
    ("/", "/etc/x", "etc/x"), ("//ws", "//ws/a", "a")])
def test_the_relative_text_is_the_text_of_relative_to(root: str, resolved: str, relative: str) -> None:
    assert relative_text(root, resolved) == relative
    assert relative == ("." if Path(resolved) == Path(root) else str(Path(resolved).relative_to(Path(root))))
