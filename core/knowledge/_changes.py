"""What changed between two manifests a session read, and how the model is told of it.

A resumed session reads the corpus as it is now, never a copy of the old one; when its manifest is not the one
the model last heard of, the model is told in one runtime notice (the `knowledge_changed` event), so that a
procedure it read or cited before is not taken as still current. Which documents changed is named when the
previous manifest's documents can still be read (the home keeps the index of recent manifests); otherwise the
notice says only that the corpus changed."""

from __future__ import annotations

from collections.abc import Iterable

from core.knowledge._document import Document
from core.record import record

_NAMED = 20
"""At most this many documents are named per kind of change in the notice (all are in the event)."""


@record
class CorpusChanges:
    """The documents that differ between two versions of the knowledge corpus."""

    changed: tuple[str, ...] = ()
    """`dataset/id` of documents whose content (or source) differs."""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def corpus_changes(before: Iterable[Document], after: Iterable[Document]) -> CorpusChanges:
    old = {d.key: d for d in before}
    new = {d.key: d for d in after}
    changed = [k for k in sorted(old.keys() & new.keys()) if _bytes(old[k]) != _bytes(new[k])]
    return CorpusChanges(changed=tuple(_name(k) for k in changed),
                         added=tuple(_name(k) for k in sorted(new.keys() - old.keys())),
                         removed=tuple(_name(k) for k in sorted(old.keys() - new.keys())))


def change_notice(previous: str | None, digest: str | None, changes: CorpusChanges | None) -> str:
    """What the model is told: the two manifests, the documents that changed (when known) and what to do."""
    if digest is None:
        return (f"[strata] The knowledge index is no longer available to this session (it read manifest "
                f"{previous} before): knowledge_search and knowledge_get are gone. Do not cite procedures read "
                "earlier as current.")
    if previous is None:
        return (f"[strata] The knowledge index is available to this session now (manifest {digest}): "
                "knowledge_search and knowledge_get find operating procedures; cite a document by its id and "
                "content_sha256.")
    lines = [f"[strata] The knowledge corpus changed since you last read it: manifest {previous} is now {digest}."]
    if changes is None:
        lines.append("Which documents changed cannot be told (the previous index is gone).")
    else:
        for label, names in (("edited", changes.changed), ("added", changes.added), ("removed", changes.removed)):
            if names:
                more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
                lines.append(f"Documents {label}: {', '.join(names[:_NAMED])}{more}.")
        if not (changes.changed or changes.added or changes.removed):
            lines.append("No document's content changed (a file that cannot be indexed, or a dataset's place, did).")
    lines.append("Anything you read or cited from the knowledge index before may no longer match: get a document "
                 "again (knowledge_get) before you cite it, with its new content_sha256.")
    return "\n".join(lines)


def _bytes(doc: Document) -> tuple[str, str, tuple[str, ...]]:
    return (doc.content_sha256, doc.filename, doc.tags)


def _name(key: tuple[str, str]) -> str:
    return f"{key[0]}/{key[1]}"
