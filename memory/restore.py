"""Restore a session's state: the latest snapshot plus the tail of the log after it, or, when there is no
snapshot to trust, the whole log. Either way the events are applied by `core.state.apply`, the function `fold`
uses, so both give the same state; the snapshot only saves replaying the head of a long log.

A snapshot is never trusted blindly: another version, data that does not load, or a tail that does not apply
to it makes restore ignore it (with a warning in the log) and fold the whole log instead.

A log that does not fold is the session's own fault, not the snapshot's: `restore` raises FoldError (callers that
can carry on without the state, such as `strata sessions`, catch it); `restore_or_report` raises the one-line
InconsistentLog every command prints. An event that does not load at all is a DamagedEvent from the store."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from core.errors import InconsistentLog
from core.log_fields import log_fields
from core.snapshot import SnapshotError, load_state
from core.state import FoldError, SessionState, apply, fold
from memory.store import EventStore

log = logging.getLogger("strata.restore")
"""Plain logging (core/log_fields.py): the command's setup masks it as any event (observability/logging.py), and
`strata show` need not import structlog."""


@dataclass
class Restored:
    """A session's state as restored: from which snapshot, and how many events of the log were read after it."""

    state: SessionState
    snapshot_seq: int
    """Seq of the snapshot restore started from; 0 when it folded the whole log."""
    events_read: int
    """Events read from the log (the tail after the snapshot, or all of them)."""


async def restore(store: EventStore, session_id: str) -> Restored:
    """Raises FoldError if the log itself is inconsistent, DamagedEvent (a StoreError) if an event it reads does
    not load."""
    snapshot = await store.read_latest_snapshot(session_id)
    if snapshot is not None:
        try:
            state = load_state(snapshot.data, snapshot.version, snapshot.seq)
            tail = await store.read_events(session_id, after_seq=snapshot.seq)
            for item in tail:
                apply(state, item)
            return Restored(state, snapshot.seq, len(tail))
        except (SnapshotError, FoldError) as exc:
            log.warning("snapshot ignored; folding the whole log",
                        extra=log_fields(session_id=session_id, seq=snapshot.seq, reason=str(exc)))
    events = await store.read_events(session_id)
    return Restored(fold(events), 0, len(events))


async def restore_or_report(store: EventStore, session_id: str, *, hint: str | None = None) -> Restored:
    """`restore` for a command that needs the state: a log that does not fold is an InconsistentLog (a
    StrataError: one line naming the session, the log left untouched) instead of a FoldError."""
    try:
        return await restore(store, session_id)
    except FoldError as exc:
        raise InconsistentLog(session_id, str(exc), hint=hint) from None
