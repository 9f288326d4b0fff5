"""Trust covers what a project's hooks execute from the workspace: every file under `.strata/` and every file a
hook command names, fingerprinted at `strata trust` and compared before each run (real files, real stat
identities); an older record without fingerprints fails closed until the project is trusted again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from config import hook_files, trust_project
from config.hook_files import HookFiles, covered_files, named_paths
from core.errors import ConfigError
from tests.config._layout import Layout

CONFIG = """\
[[hooks.pre_tool_use]]
matcher = "write_file"
command = "python3 .strata/check.py --rules=hooks/rules.toml && ./guard.sh"
"""


def _project(tmp_path: Path) -> Layout:
    layout = Layout.make(tmp_path)
    layout.write_project(CONFIG)
    ws = layout.workspace
    (ws / ".strata" / "check.py").write_text("print('a')\n")
    (ws / ".strata" / "lib").mkdir()
    (ws / ".strata" / "lib" / "util.sh").write_text("true\n")
    (ws / "hooks").mkdir()
    (ws / "hooks" / "rules.toml").write_text("x = 1\n")
    (ws / "guard.sh").write_text("#!/bin/sh\n")
    return layout


def _guard(layout: Layout) -> HookFiles:
    loaded = layout.load()
    assert loaded.project_trusted, loaded.notices
    return HookFiles(layout.workspace.resolve(), loaded.project_files, loaded.trust_command)


def _problem(layout: Layout) -> str | None:
    problem = _guard(layout).problem([CONFIG.split('"')[3]])
    return None if problem is None else problem.text()


def test_trust_fingerprints_the_strata_directory_and_the_files_hooks_name(tmp_path: Path) -> None:
    """The record holds every file under `.strata/` (nested ones too) and the workspace files a command names,
    as words or as `--option=value`; words that name nothing (`python3`, `&&`) are not files."""
    layout = _project(tmp_path)
    record = trust_project(layout.home, layout.workspace)
    assert sorted(record.files) == [".strata/check.py", ".strata/config.toml", ".strata/lib/util.sh", "guard.sh",
                                    "hooks/rules.toml"]
    assert all(v.startswith("sha256:") for v in record.files.values())
    assert _problem(layout) is None


def test_named_paths_reads_the_words_as_the_shell_would() -> None:
    """Quotes and escapes are undone and operators split off before a word is taken as a path; paths outside the
    workspace are not named."""
    root = Path("/w")
    assert named_paths("python3 '.strata/a b.py' >out.log;cat x\\ y ../up /etc/passwd", root) == (
        "python3", ".strata/a b.py", ">", "out.log", ";", "cat", "x y")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda ws: (ws / ".strata" / "check.py").write_text("print('evil')\n"), ".strata/check.py changed"),
    (lambda ws: (ws / ".strata" / "lib" / "json.py").write_text("x"), ".strata/lib/json.py was added"),
    (lambda ws: (ws / ".strata" / "lib" / "util.sh").unlink(), ".strata/lib/util.sh was removed"),
    (lambda ws: (ws / "guard.sh").write_text("#!/bin/sh\nexit 0\n"), "guard.sh changed"),
    (lambda ws: (ws / "hooks" / "rules.toml").unlink(), "hooks/rules.toml was removed"),
    (lambda ws: (ws / "guard.sh").unlink() or (ws / "guard.sh").symlink_to(ws / "hooks" / "rules.toml"),
     "guard.sh changed"),
])
def test_any_change_to_what_the_hooks_run_is_named(tmp_path: Path, change, expected: str) -> None:  # type: ignore[no-untyped-def]
    """A changed, added or removed file under `.strata/`, or a changed or removed named file, is the reason the
    hooks must not run."""
    layout = _project(tmp_path)
    trust_project(layout.home, layout.workspace)
    change(layout.workspace)
    problem = _problem(layout)
    assert problem is not None and problem.startswith(expected), problem


def test_a_named_file_that_appears_after_the_trust_is_a_change(tmp_path: Path) -> None:
    """A word of a hook command that named no file at trust time and names one now (say `./guard.sh` planted
    later) stops the hook."""
    layout = _project(tmp_path)
    (layout.workspace / "guard.sh").unlink()
    trust_project(layout.home, layout.workspace)
    (layout.workspace / "guard.sh").write_text("#!/bin/sh\n")
    assert _problem(layout) == "guard.sh, named by a hook command, appeared since the project was trusted"


def test_an_edit_hidden_behind_the_old_size_and_mtime_is_still_found(tmp_path: Path) -> None:
    """The stat cache keys on ctime too: rewriting a script with the same length and putting its mtime back (as
    `touch -r` would) is still seen as a change."""
    layout = _project(tmp_path)
    trust_project(layout.home, layout.workspace)
    guard = _guard(layout)
    command = CONFIG.split('"')[3]
    assert guard.problem([command]) is None
    script = layout.workspace / ".strata" / "check.py"
    st = script.stat()
    script.write_text("print('X')\n")  # same length
    os.utime(script, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert script.stat().st_size == st.st_size and script.stat().st_mtime_ns == st.st_mtime_ns
    problem = guard.problem([command])
    assert problem is not None and problem.text() == ".strata/check.py changed since the project was trusted"


def test_an_unchanged_tree_is_not_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the first check, checking an unchanged tree reads no file (a few stats per hook run)."""
    layout = _project(tmp_path)
    trust_project(layout.home, layout.workspace)
    guard = _guard(layout)
    command = CONFIG.split('"')[3]
    assert guard.problem([command]) is None
    reads: list[str] = []
    content = hook_files._Fingerprints._content

    def counting(path: str, st: os.stat_result, strict: bool) -> str:
        reads.append(path)
        return content(path, st, strict)

    monkeypatch.setattr(hook_files._Fingerprints, "_content", staticmethod(counting))
    for _ in range(3):
        assert guard.problem([command]) is None
    assert reads == []
    (layout.workspace / "guard.sh").write_text("#!/bin/sh\n")  # rewritten with the same bytes: read again, equal
    assert guard.problem([command]) is None
    assert reads == [str(layout.workspace.resolve() / "guard.sh")]


def test_a_fifo_under_strata_is_fingerprinted_without_being_opened(tmp_path: Path) -> None:
    """A FIFO (or device) is recorded by its kind, never read: trust and the check cannot hang on it."""
    layout = _project(tmp_path)
    os.mkfifo(layout.workspace / ".strata" / "pipe")
    record = trust_project(layout.home, layout.workspace)
    assert record.files[".strata/pipe"] == "special"
    assert _problem(layout) is None


def test_trust_refuses_to_cover_too_much(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Too many files under `.strata/`, or one too large, is one clear error and no trust recorded."""
    layout = _project(tmp_path)
    monkeypatch.setattr(hook_files, "MAX_FILES", 2)
    with pytest.raises(ConfigError, match=r"more than 2 files under .*\.strata"):
        trust_project(layout.home, layout.workspace)
    monkeypatch.setattr(hook_files, "MAX_FILES", 1000)
    monkeypatch.setattr(hook_files, "MAX_FILE_BYTES", 4)
    with pytest.raises(ConfigError, match="larger than"):
        covered_files(layout.workspace.resolve(), [])
    assert not (layout.home / "trusted_projects.json").exists()


def test_a_version_1_record_keeps_the_hooks_but_they_fail_closed(tmp_path: Path) -> None:
    """A record written before hook files were fingerprinted still trusts the config (its hooks are loaded, not
    silently dropped), but they refuse to run until `strata trust` records the files; that writes version 2."""
    layout = _project(tmp_path)
    record = trust_project(layout.home, layout.workspace)
    (layout.home / "trusted_projects.json").write_text(json.dumps({"version": 1, "projects": {
        str(layout.project_file): {"sha256": record.sha256, "trusted_at": "2025-01-02T03:04:05Z"}}}))
    loaded = layout.load()
    assert loaded.project_trusted and len(loaded.hooks) == 1 and loaded.project_files is None
    assert loaded.project_hooks_problem is not None and loaded.project_hooks_problem.change == "unrecorded"
    (notice,) = loaded.notices
    assert "fail closed" in notice and f"strata trust {layout.workspace.resolve()}" in notice
    trust_project(layout.home, layout.workspace)
    assert json.loads((layout.home / "trusted_projects.json").read_text())["version"] == 2
    assert layout.load().project_hooks_problem is None
