"""A session's write-ahead buffer. Events and receipt changes are staged and committed together, so one
durable commit carries as much as the guarantees allow:

- a *barrier* (a `BatchProposed`, a new receipt, a finished effect's receipt update) must be durable before
  any tool dispatch; `ensure_durable()` commits the buffer if it holds one;
- anything else (a read-only call's result, a denial) may wait for the next commit, because it can be
  recomputed on resume;
- timeline rows are never a barrier: they ride along with whatever commit comes next, so observing costs no
  commit of its own (rows staged when the process dies are lost with the rest of the buffer).

After each commit the stored events are handed to `on_commit` (the loop applies them to its live state with the
same `apply` that `fold` uses).

Two things ride along with commits the loop makes anyway, so neither costs a commit of its own:

- a `CallResult` whose output is over the blob threshold is staged as a bounded excerpt plus the whole output as
  a blob (core/blobs.py), in the same write;
- given the live state, every `snapshot_every` events the state as of the last commit is written as a snapshot
  with the next commit that carries events (core/snapshot.py), encoding only the messages added since the last
  one. It lags that commit's events, which resume applies from the log like any tail."""

from __future__ import annotations

from collections.abc import Callable

from core.blobs import BLOB_THRESHOLD, spill
from core.events import BatchProposed, CallResult, Event, StoredEvent
from core.faults import armed, fault_point
from core.scopes import cancel_scope
from core.snapshot import SNAPSHOT_VERSION, StateEncoder
from core.state import SessionState
from core.timeline import TimelineEntry
from core.timeline_rows import Observation
from core.vocabulary import SessionStatus
from memory._group_commit import CALLER_SHIELDED
from memory.rows import NewReceipt, ReceiptUpdate, Snapshot, Write
from memory.store import EventStore


class SessionWriter:
    def __init__(self, store: EventStore, session_id: str,
                 on_commit: Callable[[list[StoredEvent]], None] | None = None, *,
                 state: SessionState | None = None, snapshot_every: int = 0,
                 blob_threshold: int = BLOB_THRESHOLD) -> None:
        self.store = store
        self.session_id = session_id
        self._on_commit = on_commit
        self._pending = Write()
        self._barrier = False
        self._state = state
        """The live state `on_commit` keeps current (snapshots are taken of it); None: no snapshots."""
        self.snapshot_every = snapshot_every
        self.snapshot_seq = 0
        """Seq of the session's latest snapshot (resume sets it from the one it loaded)."""
        self.blob_threshold = blob_threshold
        self._encoder = StateEncoder()
        self.lease_token: str | None = None
        """The lease this writer's session is driven under (set by its driver): every commit carries it, and the
        store refuses one made after another process took the lease over (LeaseGone)."""

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
        if isinstance(event, CallResult):
            event, blob = spill(event, self.blob_threshold)
            if blob is not None:
                self._pending.blobs.append(blob)
        elif isinstance(event, BatchProposed):
            self._barrier = True
        self._pending.events.append((event, turn))

    def stage_receipt(self, receipt: NewReceipt) -> None:
        self._pending.new_receipts.append(receipt)
        self._barrier = True

    def stage_receipt_update(self, update: ReceiptUpdate) -> None:
        """A finished effect's outcome is a barrier too: it cannot be recomputed, so it is durable before the
        next tool starts (it usually rides along with that tool's receipt, so this costs no extra commit)."""
        self._pending.receipt_updates.append(update)
        self._barrier = True

    def stage_timeline(self, row: Observation | TimelineEntry) -> None:
        """Stage an observation (a typed row, already masked; core/timeline_rows.py). Not a barrier: it is written
        with the next commit, in the same transaction as that commit's events."""
        self._pending.timeline.append(row if isinstance(row, TimelineEntry) else row.entry())

    def stage_status(self, status: SessionStatus) -> None:
        self._pending.status = status

    async def flush(self) -> list[StoredEvent]:
        """Commit everything staged in one durable transaction. On failure nothing is kept staged either:
        the caller must stop (PersistError propagates)."""
        if not self._pending:
            return []
        write, self._pending, self._barrier = self._pending, Write(), False
        write.lease_token = self.lease_token
        state = self._state
        if (write.events and state is not None and self.snapshot_every
                and state.last_seq - self.snapshot_seq >= self.snapshot_every):
            write.snapshot = Snapshot(seq=state.last_seq, version=SNAPSHOT_VERSION, data=self._encoder.dump(state))
        # Shielded: a cancellation (Ctrl-C) must not separate a commit that happens from the live state that
        # applies it; the store finishes the transaction on its thread either way. (Made per commit, so without
        # anyio's per-scope look-ups of the backend: core/scopes.py.)
        with cancel_scope(shield=True):
            shielded = CALLER_SHIELDED.set(True)  # the group commit's lead needs no shield of its own under this one
            try:
                stored = await self.store.commit(self.session_id, write)
            finally:
                CALLER_SHIELDED.reset(shielded)  # before `on_commit`: nothing it starts may inherit the mark
            if write.snapshot is not None:
                self.snapshot_seq = write.snapshot.seq
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
