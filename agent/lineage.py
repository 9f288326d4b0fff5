"""Parent and child sessions of delegation, read from the store: a child's row names its parent (`parent_id`) and
has no fork point (a fork's row has one, `fork_seq`); its `SessionStarted` names the parent's call, its depth and
its narrowed plan (`ChildLink`, recorded when it starts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory import SessionRecord
from memory.store import EventStore


@dataclass(frozen=True)
class ChildLink:
    """What a child session is started with besides what every session has."""

    session_id: str
    """Chosen before the child starts and recorded on the parent's delegate receipt (core/tools/delegate.py)."""
    parent_id: str
    parent_call_id: str
    depth: int
    tools_allowed: tuple[str, ...]


def is_child(record: SessionRecord) -> bool:
    """A delegated child (not a fork, which also names a parent)."""
    return record.parent_id is not None and record.fork_seq is None


def children(records: Sequence[SessionRecord], parent_id: str) -> list[SessionRecord]:
    """The children `parent_id` delegated to, oldest first (`records`: oldest first, as the store lists them)."""
    return [r for r in records if is_child(r) and r.parent_id == parent_id]


async def children_of(store: EventStore, parent_id: str) -> list[SessionRecord]:
    return children(await store.list_sessions(), parent_id)


def depths(records: Sequence[SessionRecord]) -> dict[str, int]:
    """Each session's delegation depth (0: top level; a child: its parent's plus one; a fork: its source's)."""
    by_id = {r.id: r for r in records}
    found: dict[str, int] = {}

    def depth(record: SessionRecord, seen: frozenset[str]) -> int:
        if record.id in found:
            return found[record.id]
        parent = by_id.get(record.parent_id) if record.parent_id is not None else None
        if parent is None or parent.id in seen:
            value = 0
        elif is_child(record):
            value = depth(parent, seen | {record.id}) + 1
        else:  # a fork: as deep as the session it was forked from
            value = depth(parent, seen | {record.id})
        found[record.id] = value
        return value

    for r in records:
        depth(r, frozenset())
    return found
