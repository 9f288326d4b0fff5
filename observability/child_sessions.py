"""Delegated child sessions beside their parents, for the views that show both: a child's row names its parent
(`parent_id`) and has no fork point (a fork's row has one, `fork_seq`). `tree_order` lists the sessions with each
child right after its parent (depth first, children oldest first); `depths` says how many delegations deep each
session is; `merge_children` puts a child's timeline rows in place, after the parent's row of the delegate call
that started it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from core.errors import SessionNotFound
from core.timeline import TimelineRow
from core.tools.delegate import DELEGATE, child_of
from memory.rows import SessionRecord
from memory.store import EventStore
from observability.session_timeline import load_timeline

T = TypeVar("T")


def is_child(record: SessionRecord) -> bool:
    """A delegated child (not a fork, which also names a parent)."""
    return record.parent_id is not None and record.fork_seq is None


def children(records: Sequence[SessionRecord], parent_id: str) -> list[SessionRecord]:
    """The children `parent_id` delegated to, oldest first (`records`: oldest first, as the store lists them)."""
    return [r for r in records if is_child(r) and r.parent_id == parent_id]


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
        else:
            value = depth(parent, seen | {record.id}) + (1 if is_child(record) else 0)
        found[record.id] = value
        return value

    for r in records:
        depth(r, frozenset())
    return found


def tree_order(records: Sequence[SessionRecord]) -> list[tuple[SessionRecord, int]]:
    """The sessions (oldest first) with each delegated child right after its parent, and each one's depth."""
    ids = {r.id for r in records}
    kids: dict[str, list[SessionRecord]] = {}
    roots: list[SessionRecord] = []
    for r in records:
        if is_child(r) and r.parent_id in ids:
            kids.setdefault(r.parent_id or "", []).append(r)
        else:
            roots.append(r)
    out: list[tuple[SessionRecord, int]] = []
    level = depths(records)

    def visit(record: SessionRecord) -> None:
        out.append((record, level[record.id]))
        for kid in kids.get(record.id, []):
            visit(kid)

    for root in roots:
        visit(root)
    return out


def merge_children(rows: Sequence[T], children_rows: Mapping[str, Sequence[T]], call_of: Callable[[T], str | None],
                   is_anchor: Callable[[T], bool]) -> list[T]:
    """`rows` with each child's rows (`children_rows`, by the parent's call id that started the child) right after
    the parent's anchor row of that call (its `call` row, `is_anchor`); a child whose anchor is not among `rows`
    (the parent's call has no row yet: it still runs) goes at the end."""
    out: list[T] = []
    placed: set[str] = set()
    for row in rows:
        out.append(row)
        call_id = call_of(row)
        if call_id is not None and call_id in children_rows and call_id not in placed and is_anchor(row):
            out.extend(children_rows[call_id])
            placed.add(call_id)
    for call_id, extra in children_rows.items():
        if call_id not in placed:
            out.extend(extra)
    return out


async def child_calls(store: EventStore, parent_id: str) -> dict[str, str]:
    """Child session id -> the parent's delegate call that started it, from the parent's receipts (each names its
    child as `session:<id>` before the child starts)."""
    found: dict[str, str] = {}
    for receipt in await store.list_receipts(parent_id):
        child = child_of(receipt.resource_keys) if receipt.tool == DELEGATE else None
        if child is not None:
            found[child] = receipt.call_id
    return found


def _is_anchor(row: TimelineRow) -> bool:
    """A child's rows go right after its delegate call's receipt was dispatched (where the child ran), or after the
    call's row when the filters leave receipt rows out."""
    return (row.kind == "receipt" and row.outcome == "dispatched") or row.kind == "call"


async def timeline_with_children(store: EventStore, session_id: str, *, depth: int = 0,
                                 **filters: Any) -> list[tuple[TimelineRow, int]]:
    """A session's timeline rows (filtered as `load_timeline`) with each delegated child's rows (filtered alike,
    and their children's, recursively) in place, each with its depth below `session_id`."""
    rows = [(row, depth) for row in await load_timeline(store, session_id, **filters)]
    calls = await child_calls(store, session_id)
    nested: dict[str, list[tuple[TimelineRow, int]]] = {}
    for child, call_id in calls.items():
        try:
            nested.setdefault(call_id, []).extend(
                await timeline_with_children(store, child, depth=depth + 1, **filters))
        except SessionNotFound:  # the parent stopped after the receipt, before the child started
            continue
    return merge_children(rows, nested, lambda item: item[0].call_id, lambda item: _is_anchor(item[0]))
