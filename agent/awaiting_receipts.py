"""The receipts that await a person's decision (`strata reconcile`): those whose outcome is `unknown`, and those
still `dispatched` whose session's process is gone (a crash not yet resumed: the call may or may not have taken
effect), which `reconcile` accepts as well. A `dispatched` receipt of a session that runs now is a call in flight
and is not one of them; nor is a `delegate` receipt naming its child session (its outcome is the child's, and
resuming the parent resumes that child)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core.delegate_keys import DELEGATE, child_of
from memory.liveness import Holder
from memory.rows import Receipt
from memory.store import EventStore

SHOWN = 10
"""Receipts named in a hint at most."""


async def awaiting_decision(store: EventStore, alive: Callable[[Holder], bool],
                            receipts: Sequence[Receipt] | None = None) -> list[Receipt]:
    """Of `receipts` (every receipt when None), those awaiting a decision, in the store's order."""
    if receipts is None:
        receipts = await store.list_receipts()
    gone: dict[str, bool] = {}
    found = []
    for r in receipts:
        if r.status == "dispatched" and not (r.tool == DELEGATE and child_of(r.resource_keys) is not None):
            if r.session_id not in gone:
                lease = (await store.get_session(r.session_id)).lease
                gone[r.session_id] = lease is None or not alive(lease)
            if gone[r.session_id]:
                found.append(r)
        elif r.status == "unknown":
            found.append(r)
    return found


def awaiting_line(r: Receipt) -> str:
    """How a hint names one receipt awaiting a decision."""
    why = "dispatched; its process is gone, the outcome unknown" if r.status == "dispatched" else r.status
    return f"{r.id} (call {r.call_id}, {r.tool}, {why})"


def awaiting_hint(awaiting: Sequence[Receipt]) -> str:
    """The hint that names the receipts awaiting a decision (the first `SHOWN`), or says there are none."""
    if not awaiting:
        return "no receipt awaits a decision (`strata receipts` lists them all)"
    more = f", and {len(awaiting) - SHOWN} more" if len(awaiting) > SHOWN else ""
    return "awaiting a decision: " + ", ".join(awaiting_line(r) for r in awaiting[:SHOWN]) + more
