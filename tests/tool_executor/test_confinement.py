"""Workspace confinement: the scope check, `resolve_in_workspace`, and the handlers' own re-checks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.ids import IdFactory
from core.policy import parse_rule
from core.tools import BoundToolPlan, ToolContext, ToolError
from tool_executor import Checked, Deny, Pass, ToolCallProcessor, builtin_tools
from tool_executor.builtin import fs
from tool_executor.paths import OutsideWorkspace, _inside, resolve_in_workspace


@pytest.fixture
def layout(tmp_path: Path, workspace: Path) -> dict[str, Path]:
    """A workspace with an outside directory next to it and symlinks pointing out of and into the workspace."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET needle\n")
    (workspace / "inside.txt").write_text("inside needle\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "nested.txt").write_text("nested needle\n")
    (workspace / "out_file").symlink_to(outside / "secret.txt")
    (workspace / "out_dir").symlink_to(outside, target_is_directory=True)
    (workspace / "in_link").symlink_to(workspace / "inside.txt")
    (workspace / "in_dir").symlink_to(workspace / "sub", target_is_directory=True)
    return {"ws": workspace, "outside": outside}


@pytest.fixture
def processor(workspace: Path) -> ToolCallProcessor:
    return ToolCallProcessor(BoundToolPlan(builtin_tools(), "headless"), workspace=workspace, ids=IdFactory())


def ctx(workspace: Path) -> ToolContext:
    return ToolContext(session_id="s", mode="headless", model="test", turn=1, call_id="c1", workspace=workspace,
                       idempotency_key="idem_test", deadline_s=30)


def decide(processor: ToolCallProcessor, tool: str, args: Mapping[str, Any], allow: tuple[str, ...] = ()) -> Checked:
    return processor.check(tool, args, [parse_rule("allow", a) for a in allow], "headless")


def assert_scope_denied(decision: Checked, *fragments: str) -> None:
    assert isinstance(decision.verdict, Deny), decision
    assert decision.verdict.check == "scope"
    text = " ".join(decision.verdict.reasons)
    for fragment in fragments:
        assert fragment in text


# -- resolve_in_workspace ----------------------------------------------------------------------------------


def test_resolve_relative_path_stays_inside(layout: dict[str, Path]) -> None:
    """A plain relative path resolves under the (real) workspace."""
    ws = layout["ws"]
    assert resolve_in_workspace(ws, "sub/nested.txt") == Path(os.path.realpath(ws)) / "sub" / "nested.txt"


def test_resolve_rejects_dotdot_escape(layout: dict[str, Path]) -> None:
    """`..` segments that climb above the workspace are refused, whatever comes after them."""
    ws = layout["ws"]
    for raw in ("../outside/secret.txt", "sub/../../outside/secret.txt", "..", "sub/../.."):
        with pytest.raises(OutsideWorkspace, match="outside the workspace"):
            resolve_in_workspace(ws, raw)


def test_resolve_allows_dotdot_that_stays_inside(layout: dict[str, Path]) -> None:
    """`..` that comes back down inside the workspace is fine (the check is on the resolved path)."""
    ws = layout["ws"]
    assert resolve_in_workspace(ws, "sub/../inside.txt") == Path(os.path.realpath(ws)) / "inside.txt"


def test_resolve_absolute_paths(layout: dict[str, Path]) -> None:
    """An absolute path is allowed only when it lies in the workspace; the workspace root itself is allowed."""
    ws = layout["ws"]
    real = Path(os.path.realpath(ws))
    assert resolve_in_workspace(ws, str(ws / "inside.txt")) == real / "inside.txt"
    assert resolve_in_workspace(ws, str(ws)) == real
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, str(layout["outside"] / "secret.txt"))
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "/etc/passwd")


def test_resolve_rejects_sibling_with_common_prefix(tmp_path: Path, workspace: Path) -> None:
    """A sibling directory whose name starts with the workspace's name is still outside (no string-prefix check)."""
    sibling = tmp_path / (workspace.name + "2")
    sibling.mkdir()
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(workspace, str(sibling / "x.txt"))


def test_resolve_follows_symlinks(layout: dict[str, Path]) -> None:
    """Symlinks are followed: out of the workspace is refused, into the workspace is allowed."""
    ws = layout["ws"]
    real = Path(os.path.realpath(ws))
    with pytest.raises(OutsideWorkspace, match="resolves to"):
        resolve_in_workspace(ws, "out_file")
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "out_dir/secret.txt")
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "out_dir/not/yet/there.txt")
    assert resolve_in_workspace(ws, "in_link") == real / "inside.txt"
    assert resolve_in_workspace(ws, "in_dir/nested.txt") == real / "sub" / "nested.txt"


def test_resolve_dangling_symlink_pointing_outside(layout: dict[str, Path]) -> None:
    """A dangling symlink is judged by where it points, so writing through it cannot create a file outside."""
    ws = layout["ws"]
    (ws / "dangling").symlink_to(layout["outside"] / "created-by-agent.txt")
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(ws, "dangling")


def test_resolve_workspace_given_through_a_symlink(tmp_path: Path, layout: dict[str, Path]) -> None:
    """A workspace reached through a symlink is compared by its real path, so its own files are still inside."""
    alias = tmp_path / "ws_alias"
    alias.symlink_to(layout["ws"], target_is_directory=True)
    assert resolve_in_workspace(alias, str(alias / "inside.txt")) == Path(os.path.realpath(layout["ws"])) / "inside.txt"
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(alias, "../outside/secret.txt")


def test_resolve_tilde_paths(layout: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`~` expands to the home directory, which is outside the workspace, so it is refused."""
    home = tmp_path / "fakehome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for raw in ("~", "~/.ssh/id_rsa", "~root/.bashrc"):
        with pytest.raises(OutsideWorkspace):
            resolve_in_workspace(layout["ws"], raw)


def test_resolve_tilde_unknown_user_is_refused_not_crashing(layout: dict[str, Path]) -> None:
    """`~nosuchuser/...` (a user that does not exist) is refused as outside, not an unexpected exception."""
    with pytest.raises(OutsideWorkspace):
        resolve_in_workspace(layout["ws"], "~strata_no_such_user_zz/x")


def test_resolve_rejects_nul_byte(layout: dict[str, Path]) -> None:
    """A NUL byte anywhere in a path is refused before touching the file system."""
    with pytest.raises(OutsideWorkspace, match="NUL"):
        resolve_in_workspace(layout["ws"], "inside.txt\x00../../etc/passwd")


# -- the scope check (through ToolCallProcessor.decide) ----------------------------------------------------


@pytest.mark.parametrize(("tool", "args", "fragment"), [
    ("read_file", {"path": "../outside/secret.txt"}, "path:"),
    ("read_file", {"path": "/etc/passwd"}, "/etc/passwd"),
    ("read_file", {"path": "out_file"}, "resolves to"),
    ("read_file", {"path": "out_dir/secret.txt"}, "outside the workspace"),
    ("list_dir", {"path": "out_dir"}, "outside the workspace"),
    ("list_dir", {"path": ".."}, "outside the workspace"),
    ("grep", {"pattern": "needle", "path": "out_dir"}, "outside the workspace"),
    ("read_file", {"path": "~/x"}, "outside the workspace"),
    ("read_file", {"path": "inside.txt\x00"}, "NUL"),
])
def test_scope_denies_read_paths_outside(layout: dict[str, Path], processor: ToolCallProcessor, tool: str,
                                         args: dict[str, Any], fragment: str) -> None:
    """Read-only tools with a path leaving the workspace are denied by the scope check."""
    assert_scope_denied(decide(processor, tool, args), fragment)


@pytest.mark.parametrize("path", ["out_dir/new.txt", "out_dir/deeper/new.txt", "../escape.txt", "out_file"])
def test_scope_denies_writes_outside(layout: dict[str, Path], processor: ToolCallProcessor, path: str) -> None:
    """write_file and edit_file outside the workspace (incl. new files under a symlinked dir) are denied, even
    when the tool is allowed by rule."""
    assert_scope_denied(decide(processor, "write_file", {"path": path, "content": "x"}, ("write_file",)))
    assert_scope_denied(decide(processor, "edit_file", {"path": path, "old": "a", "new": "b"}, ("edit_file",)))


@pytest.mark.parametrize(("tool", "args"), [
    ("read_file", {"path": "inside.txt"}),
    ("read_file", {"path": "in_link"}),
    ("read_file", {"path": "in_dir/nested.txt"}),
    ("list_dir", {"path": "."}),
    ("grep", {"pattern": "needle"}),
    ("glob", {"pattern": "**/*.txt"}),
])
def test_scope_allows_paths_inside(layout: dict[str, Path], processor: ToolCallProcessor, tool: str,
                                   args: dict[str, Any]) -> None:
    """Relative paths and symlinks that stay inside the workspace pass every check."""
    assert isinstance(decide(processor, tool, args).verdict, Pass)


def test_scope_allows_absolute_path_inside(layout: dict[str, Path], processor: ToolCallProcessor) -> None:
    """An absolute path that names a file in the workspace is allowed."""
    assert isinstance(decide(processor, "read_file", {"path": str(layout["ws"] / "inside.txt")}).verdict, Pass)


def test_scope_denies_tilde_unknown_user(layout: dict[str, Path], processor: ToolCallProcessor) -> None:
    """A `~user` path for a user that does not exist is denied by scope, never raises out of decide()."""
    assert_scope_denied(decide(processor, "read_file", {"path": "~strata_no_such_user_zz/x"}))


@pytest.mark.parametrize("pattern", ["/etc/*", "/**/*.txt", "~/*", "../*", "sub/../../*", "**/../../outside/*"])
def test_scope_denies_bad_glob_patterns(layout: dict[str, Path], processor: ToolCallProcessor, pattern: str) -> None:
    """Glob patterns that are absolute or contain a `..` part are denied by scope."""
    assert_scope_denied(decide(processor, "glob", {"pattern": pattern}), "pattern:")


# -- handlers called directly (defence in depth) -------------------------------------------------------


async def test_glob_never_lists_files_through_outside_symlinks(layout: dict[str, Path]) -> None:
    """glob reports files inside the workspace, never those reached through a symlink that points out."""
    out = await fs.glob_files({"pattern": "**/*"}, ctx(layout["ws"]))
    listed = set(out.text.splitlines())
    assert "inside.txt" in listed and "sub/nested.txt" in listed
    assert "out_file" not in listed and "out_dir" not in listed
    assert not any("secret" in line for line in listed)
    direct = await fs.glob_files({"pattern": "out_dir/*"}, ctx(layout["ws"]))
    assert direct.text == "(no matches)"


async def test_grep_skips_files_through_outside_symlinks(layout: dict[str, Path]) -> None:
    """grep over the workspace finds matches inside and never reads a file through an outside symlink."""
    out = await fs.grep({"pattern": "needle"}, ctx(layout["ws"]))
    assert "inside.txt:1:inside needle" in out.text
    assert "sub/nested.txt:1:nested needle" in out.text
    assert "SECRET" not in out.text


@pytest.mark.parametrize(("handler", "args"), [
    (fs.read_file, {"path": "../outside/secret.txt"}),
    (fs.read_file, {"path": "out_file"}),
    (fs.list_dir, {"path": "out_dir"}),
    (fs.grep, {"pattern": "needle", "path": "out_dir"}),
    (fs.grep, {"pattern": "needle", "path": "/etc"}),
    (fs.glob_files, {"pattern": "/etc/*"}),
    (fs.glob_files, {"pattern": "../outside/*"}),
    (fs.edit_file, {"path": "out_file", "old": "TOP", "new": "PWNED"}),
])
async def test_handlers_refuse_outside_paths(layout: dict[str, Path], handler: Any, args: dict[str, Any]) -> None:
    """Each fs handler re-checks its path and refuses an outside one even without the scope check."""
    with pytest.raises(ToolError):
        await handler(args, ctx(layout["ws"]))
    assert (layout["outside"] / "secret.txt").read_text() == "TOP SECRET needle\n"


@pytest.mark.parametrize("path", ["out_dir/new.txt", "out_dir/deep/new.txt", "../outside/new.txt", "/tmp/../x"])
async def test_write_file_handler_refuses_outside(layout: dict[str, Path], path: str) -> None:
    """write_file called directly with an outside path raises and creates nothing outside."""
    before = sorted(p.name for p in layout["outside"].iterdir())
    with pytest.raises(ToolError, match="outside the workspace"):
        await fs.write_file({"path": path, "content": "pwned"}, ctx(layout["ws"]))
    assert sorted(p.name for p in layout["outside"].iterdir()) == before


async def test_write_file_handler_refuses_dangling_outside_symlink(layout: dict[str, Path]) -> None:
    """Writing through a dangling symlink that points outside is refused and creates no file there."""
    target = layout["outside"] / "created-by-agent.txt"
    (layout["ws"] / "dangling").symlink_to(target)
    with pytest.raises(ToolError):
        await fs.write_file({"path": "dangling", "content": "pwned"}, ctx(layout["ws"]))
    assert not target.exists()


async def test_write_through_inside_symlink_is_allowed(layout: dict[str, Path]) -> None:
    """A symlink pointing inside the workspace may be written through; the target file changes."""
    await fs.write_file({"path": "in_link", "content": "new"}, ctx(layout["ws"]))
    assert (layout["ws"] / "inside.txt").read_text() == "new"


@pytest.mark.parametrize(("resolved", "root"), [
    ("/w", "/w"), ("/w/a", "/w"), ("/w/a/b", "/w"), ("/wx", "/w"), ("/wx/a", "/w"), ("/", "/w"), ("/a", "/"),
    ("/", "/"), ("//w/a", "/w"), ("//w/a", "//w"), ("/w/a", "//w"), ("/w.d/a", "/w"),
])
def test_the_text_containment_test_is_the_paths_own(resolved: str, root: str) -> None:
    """`_inside` answers as `Path` would for realpaths: the same directory, or one of its descendants."""
    assert _inside(resolved, root) == (Path(resolved) == Path(root) or Path(root) in Path(resolved).parents)
