"""Project trust: until `trust_project` records the project file's sha256, its hooks and allow rules are ignored
(one notice says so) while its ask/deny rules and settings apply; editing the file revokes trust."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config import LoadedConfig, is_trusted, trust_project, trust_state, untrust
from core.errors import UsageError
from tests.config._layout import PROJECT_WITH_EVERYTHING, Layout


def _rules(loaded: LoadedConfig) -> list[tuple[str, str]]:
    return [(r.action, r.text()) for r in loaded.rules]


def test_untrusted_project_loosens_nothing(tmp_path: Path) -> None:
    """Allow rules and hooks of an untrusted project are ignored; ask/deny rules and settings still apply."""
    layout = Layout.make(tmp_path)
    layout.write_project(PROJECT_WITH_EVERYTHING)
    loaded = layout.load()
    assert _rules(loaded) == [("deny", "bash(rm *)"), ("ask", "write_*")]
    assert loaded.hooks == ()
    assert [r.text() for r in loaded.ignored_rules] == ["bash{command='git *'}"]
    assert [h.name for h in loaded.ignored_hooks] == ["hooks.pre_tool_use[0]", "hooks.stop[0]"]
    assert loaded.settings.max_turns == 7
    assert (loaded.project_file, loaded.project_trusted, loaded.project_trust) == (
        layout.project_file, False, "untrusted")
    assert loaded.notices == (
        f"project config {layout.project_file} is not trusted: its 2 hooks and 1 allow rule are ignored; "
        f"run `strata trust {layout.workspace.resolve()}` after reviewing it",)


def test_trusted_project_applies_fully(tmp_path: Path) -> None:
    """After trust_project the same file's hooks and allow rules are active and no notice is given."""
    layout = Layout.make(tmp_path)
    layout.write_project(PROJECT_WITH_EVERYTHING)
    record = trust_project(layout.home, layout.workspace)
    assert record.path == layout.project_file
    assert record.sha256 == hashlib.sha256(layout.project_file.read_bytes()).hexdigest()
    loaded = layout.load()
    assert _rules(loaded) == [("allow", "bash{command='git *'}"), ("deny", "bash(rm *)"), ("ask", "write_*")]
    assert [(h.name, h.command, h.timeout_s) for h in loaded.hooks] == [
        ("hooks.pre_tool_use[0]", "python3 check.py", 5.0), ("hooks.stop[0]", "make test", 10.0)]
    assert loaded.ignored_rules == () and loaded.ignored_hooks == () and loaded.notices == ()
    assert (loaded.project_trusted, loaded.project_trust, loaded.project_sha256) == (True, "trusted", record.sha256)


def test_editing_revokes_trust_until_trusted_again(tmp_path: Path) -> None:
    """Any edit changes the sha256: the project is untrusted again, and the notice says it changed."""
    layout = Layout.make(tmp_path)
    layout.write_project(PROJECT_WITH_EVERYTHING)
    trust_project(layout.home, layout.workspace)
    layout.write_project(PROJECT_WITH_EVERYTHING + "\n# harmless-looking comment\n")
    loaded = layout.load()
    assert loaded.hooks == () and loaded.project_trusted is False and loaded.project_trust == "changed"
    assert _rules(loaded) == [("deny", "bash(rm *)"), ("ask", "write_*")]
    assert loaded.notices == (
        f"project config {layout.project_file} changed since it was trusted: its 2 hooks and 1 allow rule are "
        f"ignored; run `strata trust {layout.workspace.resolve()}` again after reviewing it",)
    trust_project(layout.home, layout.workspace)
    assert layout.load().project_trusted is True


def test_untrust_forgets_the_project(tmp_path: Path) -> None:
    """untrust removes the record; a second untrust reports there was nothing to remove."""
    layout = Layout.make(tmp_path)
    layout.write_project(PROJECT_WITH_EVERYTHING)
    trust_project(layout.home, layout.workspace)
    assert untrust(layout.home, layout.workspace) is True
    assert untrust(layout.home, layout.workspace) is False
    loaded = layout.load()
    assert loaded.project_trust == "untrusted" and len(loaded.notices) == 1


def test_trust_record_format(tmp_path: Path) -> None:
    """`<home>/trusted_projects.json`: version 2, the project file's absolute path -> sha256, time trusted and the
    fingerprints of what its hooks may run; written by rename, so no temporary file is left beside it."""
    layout = Layout.make(tmp_path)
    layout.write_project("max_turns = 3\n")
    at = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = trust_project(layout.home, layout.workspace, now=at)
    stored = json.loads((layout.home / "trusted_projects.json").read_text())
    assert stored == {"version": 2, "projects": {str(layout.project_file): {
        "sha256": record.sha256, "trusted_at": "2025-01-02T03:04:05Z",
        "files": {".strata/config.toml": f"sha256:{record.sha256}"}}}}
    assert sorted(os.listdir(layout.home)) == [".trusted_projects.json.lock", "trusted_projects.json"]  # no tmp left
    assert is_trusted(layout.home, layout.project_file, record.sha256)
    assert not is_trusted(layout.home, layout.project_file, "0" * 64)
    assert trust_state(layout.home, layout.project_file, "0" * 64) == "changed"
    assert trust_state(layout.home, tmp_path / "other.toml", record.sha256) == "untrusted"


def test_trust_keeps_other_projects(tmp_path: Path) -> None:
    """Trusting one project leaves the records of others in place."""
    layout = Layout.make(tmp_path)
    other = Layout.make(tmp_path / "other")
    layout.write_project("max_turns = 3\n")
    other.write_project("max_turns = 4\n")
    trust_project(layout.home, layout.workspace)
    trust_project(layout.home, other.workspace)
    stored = json.loads((layout.home / "trusted_projects.json").read_text())["projects"]
    assert set(stored) == {str(layout.project_file), str(other.project_file)}


def test_trust_through_a_symlink_is_trust_of_the_real_file(tmp_path: Path) -> None:
    """The record is keyed by the resolved path, so a symlinked workspace is the same project."""
    layout = Layout.make(tmp_path)
    layout.write_project(PROJECT_WITH_EVERYTHING)
    link = tmp_path / "link"
    link.symlink_to(layout.workspace, target_is_directory=True)
    trust_project(layout.home, link)
    assert layout.load().project_trusted is True


def test_trust_needs_a_project_file(tmp_path: Path) -> None:
    """Trusting a directory without .strata/config.toml is a usage error naming the expected path."""
    layout = Layout.make(tmp_path)
    with pytest.raises(UsageError, match=r"no project config at .*/ws/\.strata/config\.toml"):
        trust_project(layout.home, layout.workspace)


@pytest.mark.parametrize(("text", "fragment"), [
    ('[[hooks.stop]]\ncommand = "x"\n', "its 1 hook is ignored"),
    ('[[policy.rules]]\ntool = "a"\naction = "allow"\n[[policy.rules]]\ntool = "b"\naction = "allow"\n',
     "its 2 allow rules are ignored"),
])
def test_notice_counts_what_was_ignored(tmp_path: Path, text: str, fragment: str) -> None:
    """The notice says exactly what was left out."""
    layout = Layout.make(tmp_path)
    layout.write_project(text)
    (notice,) = layout.load().notices
    assert fragment in notice


def test_untrusted_project_that_loosens_nothing_gives_no_notice(tmp_path: Path) -> None:
    """A project file with only settings and ask/deny rules applies in full, so there is nothing to warn about."""
    layout = Layout.make(tmp_path)
    layout.write_project('max_turns = 3\n[[policy.rules]]\ntool = "bash"\naction = "deny"\n')
    loaded = layout.load()
    assert loaded.notices == () and loaded.project_trusted is False
    assert _rules(loaded) == [("deny", "bash")]


def test_user_file_needs_no_trust(tmp_path: Path) -> None:
    """The user's own file is trusted by definition: its hooks and allow rules always apply."""
    layout = Layout.make(tmp_path)
    layout.write_user(PROJECT_WITH_EVERYTHING)
    loaded = layout.load()
    assert len(loaded.hooks) == 2 and ("allow", "bash{command='git *'}") in _rules(loaded)
    assert loaded.notices == ()
