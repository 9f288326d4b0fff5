"""Sessions as a tree: a delegated child names its parent (`parent_id`) and has no fork point (a fork's row has
one, `fork_seq`). `tree_order` lists the sessions with each child right after its parent (depth first, children
oldest first); `depths` says how many delegations deep each session is. It takes any record with those fields:
the store's SessionRecord, or the quick read's (memory/quick_read.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Linked(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def fork_seq(self) -> int | None: ...


L = TypeVar("L", bound=Linked)


def is_child(record: Linked) -> bool:
    """A delegated child (not a fork, which also names a parent)."""
    return record.parent_id is not None and record.fork_seq is None


def children(records: Sequence[L], parent_id: str) -> list[L]:
    """The children `parent_id` delegated to, oldest first (`records`: oldest first, as the store lists them)."""
    return [r for r in records if is_child(r) and r.parent_id == parent_id]


def depths(records: Sequence[Linked]) -> dict[str, int]:
    """Each session's delegation depth (0: top level; a child: its parent's plus one; a fork: its source's)."""
    by_id = {r.id: r for r in records}
    found: dict[str, int] = {}

    def depth(record: Linked, seen: frozenset[str]) -> int:
        if record.id in found:
            return found[record.id]
        parent = by_id.get(record.parent_id) if record.parent_id is not None else None
        if parent is None or parent.id in seen:
            value = 0
        else:
            value = depth(parent, seen | {record.id}) + (1 if is_child(record) else 0)
        found[record.id] = value
        return value

    for r in records:
        depth(r, frozenset())
    return found


def tree_order(records: Sequence[L]) -> list[tuple[L, int]]:
    """The sessions (oldest first) with each delegated child right after its parent, and each one's depth. A fork
    of a delegated child (its depth is its source's) follows its source, at that depth: listed among the top-level
    sessions it would sit indented under whichever session came before it."""
    ids = {r.id for r in records}
    level = depths(records)
    kids: dict[str, list[L]] = {}
    roots: list[L] = []
    for r in records:
        if r.parent_id in ids and (is_child(r) or level[r.id] > 0):
            kids.setdefault(r.parent_id or "", []).append(r)
        else:
            roots.append(r)
    out: list[tuple[L, int]] = []

    def visit(record: L) -> None:
        out.append((record, level[record.id]))
        for kid in kids.get(record.id, []):
            visit(kid)

    for root in roots:
        visit(root)
    return out
