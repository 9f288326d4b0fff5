"""Delegated child sessions beside their parents, for the views that show both: a child's row names its parent
(`parent_id`) and has no fork point (a fork's row has one, `fork_seq`). `tree_order` lists the sessions with each
child right after its parent (depth first, children oldest first); `depths` says how many delegations deep each
session is; `merge_children` puts a child's timeline rows in place, after the parent's row of the delegate call
that started it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from core.delegate_keys import DELEGATE, child_of
from core.errors import SessionNotFound
from core.timeline import TimelineRow
from memory.store import EventStore
from observability.session_timeline import load_timeline

T = TypeVar("T")


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
