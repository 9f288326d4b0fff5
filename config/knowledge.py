"""Knowledge datasets as config declares them, and where their documents are found.

    [knowledge]
    common_term_share = 0.25          # a term in more than this share of a dataset's documents does not count

    [knowledge.datasets.sops]
    path = "~/sops"                   # optional; absolute or `~` in the user file, workspace-relative in a project's
    pii = "internal"                  # none | internal | personal | sensitive (default internal)
    modes = ["interactive", "headless"]   # the modes that may read it (default: none)

A declared dataset is read from its `path` when it has one; otherwise from the user's
`$XDG_DATA_HOME/strata/knowledge/NAME` (default `~/.local/share/strata/knowledge/NAME`) and, only when the project
is trusted, from the workspace's `.strata/knowledge/NAME`. A project file declares datasets (which grants modes
access to files) only once it is trusted, like its allow rules. A later file replaces a dataset's table whole."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from config.locations import PROJECT_DIR, _user_home, expand_user
from core.events import Mode
from core.tools.spec import PiiClass

if TYPE_CHECKING:
    from core.knowledge import DatasetGrant

DEFAULT_COMMON_TERM_SHARE = 0.25
"""Low enough that a word in a quarter of the documents ("python" in Python's documentation) does not count."""


class DatasetDecl(BaseModel):
    """One `[knowledge.datasets.NAME]` table as it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    path: Path | None = None
    """Absolute (resolved against the workspace for a project file); None: the default locations."""
    pii: PiiClass = "internal"
    modes: tuple[Mode, ...] = ()
    source: str
    """The file that declared it."""
    from_project: bool = False
    """Declared by the workspace's project file (its `path` is then the project's own, like `.strata/knowledge`)."""

    def grant(self) -> "DatasetGrant":
        from core.knowledge import DatasetGrant  # the knowledge models load when a grant is first asked for

        return DatasetGrant(name=self.name, pii=self.pii, modes=self.modes, source=self.source)


class KnowledgeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    common_term_share: float = DEFAULT_COMMON_TERM_SHARE
    datasets: tuple[DatasetDecl, ...] = ()
    """Sorted by name."""
    ignored: tuple[str, ...] = ()
    """Datasets an untrusted project file declares (not applied)."""

    def grants(self) -> "dict[str, DatasetGrant]":
        return {d.name: d.grant() for d in self.datasets}


def user_knowledge_dir(env: Mapping[str, str] | None = None) -> Path:
    """`$XDG_DATA_HOME/strata/knowledge` (default `~/.local/share/strata/knowledge`)."""
    env = os.environ if env is None else env
    base = expand_user(env["XDG_DATA_HOME"], variable="XDG_DATA_HOME") if env.get("XDG_DATA_HOME") else (
        _user_home(env) / ".local" / "share")
    return base / "strata" / "knowledge"


def project_knowledge_dir(workspace: Path) -> Path:
    return workspace.expanduser().resolve() / PROJECT_DIR / "knowledge"


def dataset_roots(knowledge: KnowledgeConfig, *, workspace: Path | None, project_trusted: bool,
                  env: Mapping[str, str] | None = None) -> dict[str, tuple[Path, ...]]:
    """Declared dataset -> the directories its documents are read from, in search order (a root that does not
    exist is kept: reading it reports `missing_root`, so a typo in a path is never an empty dataset in silence)."""
    out: dict[str, tuple[Path, ...]] = {}
    for decl in knowledge.datasets:
        if decl.path is not None:
            out[decl.name] = (decl.path,)
            continue
        roots = [user_knowledge_dir(env) / decl.name]
        if workspace is not None and project_trusted:
            roots.append(project_knowledge_dir(workspace) / decl.name)
        existing = tuple(r for r in roots if r.is_dir())
        out[decl.name] = existing or (roots[0],)
    return out


def project_roots(knowledge: KnowledgeConfig, *, workspace: Path | None, project_trusted: bool) -> frozenset[Path]:
    """The roots of `dataset_roots` that the project supplies (a project file's `path`, the workspace's
    `.strata/knowledge/NAME`), as opposed to the person's own (the user file's `path`, the user's knowledge
    directory): only these must stay inside the workspace, wherever the person's own lie (a workspace of $HOME holds
    `~/.local/share/strata/knowledge`)."""
    if workspace is None or not project_trusted:
        return frozenset()
    own = project_knowledge_dir(workspace)
    return frozenset((own / d.name) if d.path is None else d.path for d in knowledge.datasets
                     if d.path is None or d.from_project)


def found_datasets(*, workspace: Path | None, project_trusted: bool,
                   env: Mapping[str, str] | None = None) -> dict[str, tuple[Path, ...]]:
    """Every dataset directory in the default locations, declared or not (for `strata knowledge list`)."""
    bases = [user_knowledge_dir(env)]
    if workspace is not None and project_trusted:
        bases.append(project_knowledge_dir(workspace))
    out: dict[str, list[Path]] = {}
    for base in bases:
        try:
            entries = sorted(base.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and not entry.name.startswith("."):
                out.setdefault(entry.name, []).append(entry)
    return {name: tuple(paths) for name, paths in sorted(out.items())}
