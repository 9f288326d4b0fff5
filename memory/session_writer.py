"""A session's write-ahead buffer. Events and receipt changes are staged and committed together, so one
durable commit carries as much as the guarantees allow:

- a *barrier* (a `BatchProposed`, a new receipt, a finished effect's receipt update) must be durable before
  any tool dispatch; `ensure_durable()` commits the buffer if it holds one;
- anything else (a read-only call's result, a denial) may wait for the next commit, because it can be
  recomputed on resume;
- timeline rows are never a barrier: they ride along with whatever commit comes next, so observing costs no
  commit of its own (rows staged when the process dies are lost with the rest of the buffer).

After each commit the stored events are handed to `on_commit` (the loop applies them to its live state with the
same `apply` that `fold` uses)."""

from __future__ import annotations

from collections.abc import Callable

from core.events import BatchProposed, Event, StoredEvent
from core.faults import armed, fault_point
from core.timeline import TimelineEntry
from memory.records import NewReceipt, ReceiptUpdate, SessionStatus, Write
from memory.store import EventStore


class SessionWriter:
    def __init__(self, store: EventStore, session_id: str,
                 on_commit: Callable[[list[StoredEvent]], None] | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self._on_commit = on_commit
        self._pending = Write()
        self._barrier = False

    @property
    def dirty(self) -> bool:
        """Holds state to commit (events, receipt changes, a status). Timeline rows alone do not make the buffer
        dirty: they wait for the next state commit and never cost one of their own."""
        p = self._pending
        return bool(p.events or p.new_receipts or p.receipt_updates or p.status)

    @property
    def has_barrier(self) -> bool:
        return self._barrier

    def stage(self, event: Event, turn: int) -> None:
        self._pending.events.append((event, turn))
        if isinstance(event, BatchProposed):
            self._barrier = True

    def stage_receipt(self, receipt: NewReceipt) -> None:
        self._pending.new_receipts.append(receipt)
        self._barrier = True

    def stage_receipt_update(self, update: ReceiptUpdate) -> None:
        """A finished effect's outcome is a barrier too: it cannot be recomputed, so it is durable before the
        next tool starts (it usually rides along with that tool's receipt, so this costs no extra commit)."""
        self._pending.receipt_updates.append(update)
        self._barrier = True

    def stage_timeline(self, entry: TimelineEntry) -> None:
        """Stage an observation (already masked). Not a barrier: it is written with the next commit, in the same
        transaction as that commit's events."""
        self._pending.timeline.append(entry)

    def stage_status(self, status: SessionStatus) -> None:
        self._pending.status = status

    async def flush(self) -> list[StoredEvent]:
        """Commit everything staged in one durable transaction. On failure nothing is kept staged either:
        the caller must stop (PersistError propagates)."""
        if not self._pending:
            return []
        write, self._pending, self._barrier = self._pending, Write(), False
        stored = await self.store.commit(self.session_id, write)
        if self._on_commit is not None and stored:
            self._on_commit(stored)
        if armed("after_commit") and any(isinstance(e, BatchProposed) for e, _ in write.events):
            fault_point("after_commit")
        return stored

    async def ensure_durable(self) -> None:
        """Called before a tool dispatch: commits the buffer if it holds a barrier."""
        if self._barrier:
            await self.flush()

    async def commit(self, event: Event, turn: int) -> list[StoredEvent]:
        self.stage(event, turn)
        return await self.flush()
