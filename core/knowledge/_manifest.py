"""The manifest: every dataset, document and problem of a corpus, sorted, with one digest over all of them.

The digest covers each document's identity (dataset, id, filename, tags, source path, content offset) and both
digests of its bytes, and each problem, so any change to what a session could read (an edited, added, removed or
renamed file, a new problem) changes it. Datasets are listed by name with their roots. Sorting makes the digest
independent of the order the files were found in."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from core.hashing import sha256_json
from core.knowledge._document import CorpusProblem, DatasetName, Document, LoadedDocument
from core.record import record

MANIFEST_VERSION = 1


class DatasetEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: DatasetName
    roots: tuple[str, ...]
    """The directories its documents were read from (absolute), in the order they were searched."""
    documents: int


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    version: int = MANIFEST_VERSION
    datasets: tuple[DatasetEntry, ...]
    documents: tuple[Document, ...]
    problems: tuple[CorpusProblem, ...]
    digest: str
    """`kn_` + the first 32 hex digits of the sha256 of everything above (canonical JSON)."""

    def dataset(self, name: str) -> DatasetEntry | None:
        return next((d for d in self.datasets if d.name == name), None)


def manifest_digest(datasets: Iterable[DatasetEntry], documents: Iterable[Document],
                    problems: Iterable[CorpusProblem]) -> str:
    body = {"version": MANIFEST_VERSION,
            "datasets": [d.model_dump(mode="json") for d in datasets],
            "documents": [d.model_dump(mode="json") for d in documents],
            "problems": [p.model_dump(mode="json") for p in problems]}
    return "kn_" + sha256_json(body)[:32]


@record
class Corpus:
    """A manifest and the content text of each of its documents: what an index is built from."""

    manifest: Manifest
    texts: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))
    """(dataset, id) -> content text."""


def build_corpus(roots: Mapping[str, tuple[str, ...]], loaded: Iterable[LoadedDocument],
                 problems: Iterable[CorpusProblem]) -> Corpus:
    """The corpus of `roots` (dataset -> its root directories). Documents that claim one id in one dataset are all
    left out and each is reported as `duplicate_id` naming the others: which one is meant cannot be told."""
    by_key: dict[tuple[str, str], list[LoadedDocument]] = {}
    for item in loaded:
        by_key.setdefault(item.document.key, []).append(item)
    kept: list[LoadedDocument] = []
    found = list(problems)
    for items in by_key.values():
        if len(items) == 1:
            kept.append(items[0])
            continue
        paths = sorted(i.document.source_path for i in items)
        for item in items:
            doc = item.document
            others = ", ".join(p for p in paths if p != doc.source_path)
            found.append(CorpusProblem(dataset=doc.dataset, kind="duplicate_id", source_path=doc.source_path,
                                       source_sha256=doc.source_sha256, id=doc.id,
                                       detail=f"id {doc.id!r} is also claimed by {others}"))
    kept.sort(key=lambda i: (i.document.dataset, i.document.id))
    found.sort(key=lambda p: (p.dataset, p.source_path, p.kind, p.id or ""))
    counts: dict[str, int] = {}
    for item in kept:
        counts[item.document.dataset] = counts.get(item.document.dataset, 0) + 1
    datasets = tuple(DatasetEntry(name=name, roots=tuple(roots[name]), documents=counts.get(name, 0))
                     for name in sorted(roots))
    documents = tuple(i.document for i in kept)
    ordered = tuple(found)
    manifest = Manifest(datasets=datasets, documents=documents, problems=ordered,
                        digest=manifest_digest(datasets, documents, ordered))
    return Corpus(manifest=manifest, texts=MappingProxyType({i.document.key: i.text for i in kept}))
