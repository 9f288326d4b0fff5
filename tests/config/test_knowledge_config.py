"""`[knowledge]` in config: dataset declarations with path, pii and modes, validated with errors naming the file,
key and reason; an untrusted project declares nothing; where each dataset's documents are read from."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import dataset_roots, trust_project
from core.errors import ConfigError
from tests.config._layout import Layout


def test_datasets_are_declared_with_path_pii_and_modes(tmp_path: Path) -> None:
    layout = Layout.make(tmp_path)
    layout.write_user('[knowledge]\ncommon_term_share = 0.4\n[knowledge.datasets.sops]\npath = "~/sops"\n'
                      'pii = "personal"\nmodes = ["interactive", "headless"]\n[knowledge.datasets.notes]\n')
    knowledge = layout.load().knowledge
    assert knowledge.common_term_share == 0.4
    sops, notes = knowledge.grants()["sops"], knowledge.grants()["notes"]
    assert (sops.pii, sops.modes, sops.source) == ("personal", ("interactive", "headless"), str(layout.user_file))
    assert (notes.pii, notes.modes) == ("internal", ())
    assert [d.path for d in knowledge.datasets] == [None, tmp_path / "sops"]


@pytest.mark.parametrize(("toml", "key", "reason"), [
    ('[knowledge.datasets.sops]\nmodes = ["chat"]\n', "knowledge.datasets.sops.modes[0]", "must be one of"),
    ('[knowledge.datasets.sops]\nmodes = ["headless", "headless"]\n', "knowledge.datasets.sops.modes",
     "listed twice"),
    ('[knowledge.datasets.sops]\npii = "secret"\n', "knowledge.datasets.sops.pii", "must be one of"),
    ('[knowledge.datasets."../x"]\n', 'knowledge.datasets["../x"]', "a dataset name is"),
    ('[knowledge.datasets.sops]\npath = "relative/dir"\n', "knowledge.datasets.sops.path",
     "must be an absolute path or start with ~"),
    ('[knowledge.datasets.sops]\nowner = "me"\n', "knowledge.datasets.sops.owner", "unknown key 'owner'"),
    ("[knowledge]\ncommon_term_share = 1.5\n", "knowledge.common_term_share", "must be at most 1"),
    ("[knowledge]\ncommon_term_share = 0\n", "knowledge.common_term_share", "must be greater than 0"),
])
def test_a_bad_value_is_one_error_naming_file_key_and_reason(tmp_path: Path, toml: str, key: str,
                                                              reason: str) -> None:
    layout = Layout.make(tmp_path)
    layout.write_user(toml)
    with pytest.raises(ConfigError) as info:
        layout.load()
    assert info.value.file == str(layout.user_file)
    assert info.value.key == key
    assert reason in info.value.message


def test_an_untrusted_project_declares_no_dataset_until_trusted(tmp_path: Path) -> None:
    """Declaring a dataset grants modes access to files: an untrusted project's declarations are ignored, with a
    notice; once trusted they apply, with relative paths read from the workspace."""
    layout = Layout.make(tmp_path)
    layout.write_project('[knowledge.datasets.runbooks]\npath = "docs/runbooks"\nmodes = ["headless"]\n')
    loaded = layout.load()
    assert loaded.knowledge.datasets == () and loaded.knowledge.ignored == ("runbooks",)
    assert any("knowledge datasets (runbooks) are ignored" in n for n in loaded.notices)
    trust_project(layout.home, layout.workspace)
    trusted = layout.load()
    (decl,) = trusted.knowledge.datasets
    assert decl.path == layout.workspace.resolve() / "docs" / "runbooks"
    assert trusted.knowledge.ignored == ()


def test_a_dataset_without_a_path_reads_the_user_dir_and_the_trusted_project_dir(tmp_path: Path) -> None:
    """`$XDG_DATA_HOME/strata/knowledge/NAME`, and `.strata/knowledge/NAME` only when the project is trusted."""
    layout = Layout.make(tmp_path)
    layout.write_user('[knowledge.datasets.sops]\nmodes = ["headless"]\n')
    data = tmp_path / "data"
    user_dir = data / "strata" / "knowledge" / "sops"
    project_dir = layout.workspace / ".strata" / "knowledge" / "sops"
    user_dir.mkdir(parents=True)
    project_dir.mkdir(parents=True)
    knowledge = layout.load(XDG_DATA_HOME=str(data)).knowledge
    env = layout.env(XDG_DATA_HOME=str(data))
    assert dataset_roots(knowledge, workspace=layout.workspace, project_trusted=False, env=env) == {
        "sops": (user_dir,)}
    assert dataset_roots(knowledge, workspace=layout.workspace, project_trusted=True, env=env) == {
        "sops": (user_dir, project_dir.resolve())}
