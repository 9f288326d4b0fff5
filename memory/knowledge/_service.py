"""Search and get: the one path both the agent's tools and `strata knowledge` take.

Every request is decided in this order, and the first step that says no answers with a typed miss:
1. scope: the dataset grant check (core/knowledge/_grants.py), from config alone: nothing is read before it;
2. manifest: a session without one (no index was built for it) answers `no_manifest`;
3. lookup: `get` is an exact lookup of `doc:<id>` (the `doc:` prefix optional) in the granted datasets, never a
   search; `search` is a lexical search in which only discriminating terms count (core/knowledge/_terms.py).

Synchronous and blocking (SQLite); async callers use a worker thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from core.events import Mode
from core.knowledge import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Corpus,
    CorpusProblem,
    DatasetGrant,
    Hit,
    Hits,
    Miss,
    MissKind,
    best_section,
    check_scope,
    query_terms,
)
from core.utf8 import valid_text
from memory.knowledge._index import IndexRow, LexicalOutcome

DOC_PREFIX = "doc:"


class KnowledgeLookup(Protocol):
    """What the service reads from: the index of one corpus (memory/knowledge/_index.py KnowledgeIndex)."""

    corpus: Corpus

    def lexical(self, datasets: Sequence[str], terms: Sequence[str], share: float,
                limit: int) -> LexicalOutcome: ...

    def exact(self, datasets: Sequence[str], doc_id: str) -> tuple[IndexRow, ...]: ...


class KnowledgeService:
    def __init__(self, *, grants: Mapping[str, DatasetGrant], index: KnowledgeLookup | None,
                 common_term_share: float) -> None:
        self.grants = dict(grants)
        self.index = index
        self.share = common_term_share

    @property
    def digest(self) -> str | None:
        return self.index.corpus.manifest.digest if self.index is not None else None

    def search(self, query: str, *, mode: Mode, dataset: str | None = None,
               limit: int = DEFAULT_LIMIT) -> Hits | Miss:
        scope = self._scope(dataset, mode)
        if isinstance(scope, Miss):
            return scope
        assert self.index is not None
        terms = query_terms(query)
        if not terms:
            return self._miss("weak_match", "the query has no words to look for", dataset=dataset,
                              hint="search for the words a procedure would use")
        outcome = self.index.lexical(scope, terms, self.share, max(1, min(limit, MAX_LIMIT)))
        if outcome.rows:
            return Hits(hits=tuple(_lexical_hit(r) for r in outcome.rows), manifest_digest=self.digest or "")
        if outcome.common_terms:
            words = ", ".join(outcome.common_terms)
            verb = "occurs" if len(outcome.common_terms) == 1 else "occur"
            return self._miss("weak_match", f"no discriminating term: {words} {verb} in too many documents to "
                                            "tell them apart", dataset=dataset, common_terms=outcome.common_terms,
                              hint="add a word that is specific to the procedure you want")
        return self._miss("not_found", f"no document in {_datasets(scope)} holds any of: {', '.join(terms)}",
                          dataset=dataset)

    def get(self, doc_id: str, *, mode: Mode, dataset: str | None = None) -> Hits | Miss:
        scope = self._scope(dataset, mode)
        if isinstance(scope, Miss):
            return scope
        assert self.index is not None
        # An id from argv that is not UTF-8 holds surrogates, which SQLite cannot be asked with: no document
        # has such an id (a file whose name is not UTF-8 is reported `bad_name`), so it is looked up repaired.
        wanted = valid_text(doc_id.removeprefix(DOC_PREFIX))
        problems = [p for p in self.index.corpus.manifest.problems if p.dataset in scope and p.id == wanted]
        claimed = [p for p in problems if p.kind == "duplicate_id"]
        if claimed:
            return self._miss("ambiguous_id", f"{len(claimed)} documents claim id {wanted!r}: none is served",
                              dataset=dataset, doc_id=wanted, candidates=tuple(p.source_path for p in claimed),
                              hint="give each document its own id (front-matter `id:`)")
        rows = self.index.exact(scope, wanted) if wanted else ()
        if len(rows) > 1:
            return self._miss("ambiguous_id", f"id {wanted!r} is in {len(rows)} datasets", dataset=dataset,
                              doc_id=wanted, candidates=tuple(f"{r.document.dataset}/{r.document.id}" for r in rows),
                              hint="name the dataset")
        if rows:
            return Hits(hits=(_exact_hit(rows[0]),), manifest_digest=self.digest or "")
        if problems:
            return self._miss("not_found", f"document {wanted!r} is left out of the index: " + "; ".join(
                _problem(p) for p in problems), dataset=dataset, doc_id=wanted)
        return self._miss("not_found", f"no document has id {wanted!r} in {_datasets(scope)}", dataset=dataset,
                          doc_id=wanted, hint="ids are exact (front-matter `id:` or the path in the dataset); "
                                              "search to find one")

    def _scope(self, dataset: str | None, mode: Mode) -> tuple[str, ...] | Miss:
        scope = check_scope(self.grants, dataset, mode)
        if isinstance(scope, Miss):
            return scope
        if self.index is None:
            return Miss(kind="no_manifest", dataset=dataset, reason="this session has no knowledge manifest",
                        hint="declare datasets in config ([knowledge.datasets.NAME]); a session builds its manifest "
                             "when it starts")
        manifest = self.index.corpus.manifest
        present = tuple(d for d in scope if manifest.dataset(d) is not None)
        if not present:
            return self._miss("no_manifest", f"{_datasets(scope)} not in this session's manifest (declared after "
                                             "the session started)", dataset=dataset,
                              hint="start a new session (or resume this one) to read it")
        return present

    def _miss(self, kind: MissKind, reason: str, *, dataset: str | None = None, doc_id: str | None = None,
              hint: str | None = None, candidates: tuple[str, ...] = (),
              common_terms: tuple[str, ...] = ()) -> Miss:
        return Miss(kind=kind, reason=reason, hint=hint, dataset=dataset, id=doc_id, candidates=candidates,
                    common_terms=common_terms, manifest_digest=self.digest)


def _datasets(scope: Sequence[str]) -> str:
    return ("dataset " if len(scope) == 1 else "datasets ") + ", ".join(scope)


def _problem(p: CorpusProblem) -> str:
    return f"{p.source_path}: {p.kind.replace('_', ' ')} ({p.detail})"


def _exact_hit(row: IndexRow) -> Hit:
    d = row.document
    return Hit(dataset=d.dataset, id=d.id, filename=d.filename, tags=d.tags, text=row.text,
               byte_range=(d.content_offset, d.content_offset + d.content_bytes), content_sha256=d.content_sha256,
               content_bytes=d.content_bytes, source_path=d.source_path, source_sha256=d.source_sha256,
               method="exact")


def _lexical_hit(row: IndexRow) -> Hit:
    d = row.document
    start, end = best_section(row.text, row.matched_terms)
    text = row.text.encode("utf-8")[start:end].decode("utf-8")
    return Hit(dataset=d.dataset, id=d.id, filename=d.filename, tags=d.tags, text=text,
               byte_range=(d.content_offset + start, d.content_offset + end), content_sha256=d.content_sha256,
               content_bytes=d.content_bytes, source_path=d.source_path, source_sha256=d.source_sha256,
               method="lexical", score=row.score, matched_terms=row.matched_terms)
