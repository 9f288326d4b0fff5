"""A session's knowledge: the manifest built when it starts (or resumes), the index of that manifest, and the two
tools over it that join the session's tool plan.

A session gets the knowledge tools when its mode may read at least one declared dataset (`[knowledge.datasets.NAME]
modes`); its manifest covers exactly those datasets (a dataset the mode may not read is never read, and a change
to it is none of the session's business). The manifest digest is recorded in `SessionStarted` and in each
`SessionResumed`, and the plan digest covers it. A resume reads the corpus as it is now: when the manifest differs
from the one the model last heard of, the resume records the new one and a `KnowledgeChanged` event tells the
model (naming the documents that changed, when the previous index is still in the home). Nothing is ever swapped
in silence."""

from __future__ import annotations

from pathlib import Path

import anyio

from config import KnowledgeConfig, dataset_roots, project_roots
from core.events import KnowledgeChanged, Mode
from core.record import record
from core.tools import ToolSpec


@record
class SessionKnowledge:
    """The knowledge a session may read: the manifest's digest, its tools and datasets."""

    digest: str | None = None
    """The manifest's digest; None: the mode may read no dataset (no tools)."""
    tools: tuple[ToolSpec, ...] = ()
    datasets: tuple[str, ...] = ()
    """The datasets in the manifest (those the mode may read)."""
    problems: int = 0
    """Files of those datasets left out of the index (`strata knowledge list` says why)."""


@record
class KnowledgeSource:
    """Where a runtime's sessions read knowledge from: the declared datasets, the Strata home (the index) and
    whether the project's own datasets count (only once it is trusted)."""

    config: KnowledgeConfig
    home: Path
    project_trusted: bool = False

    def granted(self, mode: Mode) -> tuple[str, ...]:
        return tuple(d.name for d in self.config.datasets if mode in d.modes)

    async def open(self, workspace: Path, mode: Mode) -> SessionKnowledge:
        """Build the manifest of the datasets `mode` may read and make sure its index is in place (a worker
        thread: the files are read and hashed, and a changed corpus is indexed again)."""
        granted = self.granted(mode)
        if not granted:
            return SessionKnowledge()
        return await anyio.to_thread.run_sync(self._open, workspace, mode, granted)

    def _open(self, workspace: Path, mode: Mode, granted: tuple[str, ...]) -> SessionKnowledge:
        from memory.knowledge import KnowledgeIndex, KnowledgeService, knowledge_tools, load_corpus

        roots = dataset_roots(self.config, workspace=workspace, project_trusted=self.project_trusted)
        corpus = load_corpus({name: roots[name] for name in granted}, workspace=workspace,
                             project_roots=project_roots(self.config, workspace=workspace,
                                                         project_trusted=self.project_trusted))
        index = KnowledgeIndex(self.home, corpus)
        index.ensure()
        service = KnowledgeService(grants=self.config.grants(), index=index,
                                   common_term_share=self.config.common_term_share)
        manifest = corpus.manifest
        return SessionKnowledge(digest=manifest.digest, tools=tuple(knowledge_tools(service, mode)),
                                datasets=granted, problems=len(manifest.problems))


def knowledge_change(home: Path | None, previous: str | None, now: SessionKnowledge) -> KnowledgeChanged | None:
    """The event that tells the model its knowledge changed from manifest `previous` (the one it last heard of) to
    `now`'s, or None when it did not. The documents that changed are named when both indexes are in `home`."""
    if previous == now.digest:
        return None
    from core.knowledge import change_notice, corpus_changes
    from memory.knowledge import indexed_documents

    changes = None
    if home is not None and previous is not None and now.digest is not None:
        before = indexed_documents(home, previous)
        after = indexed_documents(home, now.digest)
        if before is not None and after is not None:
            changes = corpus_changes(before, after)
    return KnowledgeChanged(previous_digest=previous, digest=now.digest,
                            changed=changes.changed if changes else (), added=changes.added if changes else (),
                            removed=changes.removed if changes else (),
                            notice=change_notice(previous, now.digest, changes))
