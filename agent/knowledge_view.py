"""The knowledge datasets as people check them (`strata config show`, `strata doctor`): each declared dataset with
the modes that may read it, where it is read from, how many documents were found and the files left out of the
index and why (invalid UTF-8, two documents claiming one id, ...); the dataset directories found but not declared
(nothing may read them); and the declarations of an untrusted project, which are set aside. Reads the files (a
whole manifest is built), never the index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from config import LoadedConfig, dataset_roots, found_datasets, project_roots
from core.record import record


@record
class DatasetView:
    name: str
    modes: tuple[str, ...]
    pii: str
    source: str
    roots: tuple[str, ...]
    documents: int
    problems: tuple[str, ...]
    """One line per file left out of the index (`dataset: path: kind: detail`)."""


@record
class KnowledgeView:
    datasets: tuple[DatasetView, ...] = ()
    undeclared: dict[str, tuple[str, ...]] | None = None
    """Dataset directories found in the default places that no config declares, with where they are."""
    ignored: tuple[str, ...] = ()
    """Datasets an untrusted project file declares."""
    common_term_share: float = 0.25
    digest: str | None = None
    """The manifest of every declared dataset (a session's covers only those its mode may read)."""

    def as_json(self) -> dict[str, Any]:
        return {"common_term_share": self.common_term_share, "manifest_digest": self.digest,
                "datasets": {d.name: {"modes": list(d.modes), "pii": d.pii, "source": d.source, "roots": list(d.roots),
                                      "documents": d.documents, "problems": list(d.problems)}
                             for d in self.datasets},
                "undeclared": {n: list(p) for n, p in (self.undeclared or {}).items()},
                "ignored": list(self.ignored)}


def knowledge_view(loaded: LoadedConfig, workspace: Path) -> KnowledgeView:
    from memory.knowledge import load_corpus

    knowledge = loaded.knowledge
    trusted = loaded.project_trusted
    grants = knowledge.grants()
    undeclared = {n: tuple(str(p) for p in paths)
                  for n, paths in found_datasets(workspace=workspace, project_trusted=trusted).items()
                  if n not in grants}
    if not knowledge.datasets:
        return KnowledgeView(undeclared=undeclared, ignored=knowledge.ignored,
                             common_term_share=knowledge.common_term_share)
    corpus = load_corpus(dataset_roots(knowledge, workspace=workspace, project_trusted=trusted), workspace=workspace,
                         project_roots=project_roots(knowledge, workspace=workspace, project_trusted=trusted))
    manifest = corpus.manifest
    views = []
    for entry in manifest.datasets:
        g = grants[entry.name]
        views.append(DatasetView(name=entry.name, modes=tuple(g.modes), pii=g.pii, source=g.source,
                                 roots=entry.roots, documents=entry.documents,
                                 problems=tuple(p.line() for p in manifest.problems if p.dataset == entry.name)))
    return KnowledgeView(datasets=tuple(views), undeclared=undeclared, ignored=knowledge.ignored,
                         common_term_share=knowledge.common_term_share, digest=manifest.digest)
