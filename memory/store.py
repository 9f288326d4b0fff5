"""The `EventStore` protocol. Both the SQLite store and the in-memory fake pass one conformance suite
(`tests/memory/test_store_conformance.py`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime
from typing import Protocol

from core.chain import ChainHead, ChainKey, EventChainRow
from core.errors import DamagedSession
from core.events import StoredEvent
from core.timeline import TimelineDecision, TimelineRow
from core.vocabulary import SessionStatus
from memory.rows import (
    ChainRecord,
    LeaseHolder,
    Receipt,
    ReceiptStatus,
    ReceiptUpdate,
    SessionRecord,
    Snapshot,
    Write,
)

LivenessCheck = Callable[[LeaseHolder], bool]
"""Decides whether a lease's owner still runs (see memory/leases.py)."""


class SharedLocks(Protocol):
    """Exclusive locks by resource key, held by this process until given back or until it dies."""

    async def try_take(self, key: str) -> bool:
        """Take `key` if nobody else holds it; False when another process does. StoreError when the lock service
        cannot be reached."""
        ...

    async def give_back(self, key: str) -> None: ...


class EventStore(Protocol):
    path: str
    commits: int
    """Durable commits made through this store object (read by benchmarks and tests)."""

    @property
    def chain_key(self) -> ChainKey | None:
        """The key both chains are made and verified with; None when this home does not hold the key the database
        was chained with (then nothing can be verified or written, and `chain_problem` says why)."""
        ...

    @property
    def chain_problem(self) -> str | None: ...

    async def create_session(self, record: SessionRecord, first: Write) -> list[StoredEvent]:
        """Insert the session row and its first events in one commit."""
        ...

    async def commit(self, session_id: str, write: Write) -> list[StoredEvent]:
        """Append events, receipt changes and timeline rows atomically and durably; seq, time and envelope (both
        logs' keyed hash chains, and the head in the session row) assigned here. Raises PersistError if the
        commit does not hold; then nothing of `write` is stored."""
        ...

    async def read_events(self, session_id: str, after_seq: int = 0,
                          upto_seq: int | None = None) -> list[StoredEvent]:
        """Events with `after_seq < seq <= upto_seq`, in seq order; the cost follows the range read, not the
        session's length."""
        ...

    async def read_latest_snapshot(self, session_id: str) -> Snapshot | None:
        """The session's latest snapshot (None if it has none). Nothing checks its content here: see
        memory/restore.py."""
        ...

    async def get_blob(self, sha256: str) -> bytes | None:
        """A stored blob's bytes by sha256, or None."""
        ...

    async def read_timeline(self, session_id: str, *, kinds: Collection[str] | None = None,
                            tools: Collection[str] | None = None,
                            decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                            since_seq: int | None = None, since_at: datetime | None = None,
                            limit: int | None = None) -> list[TimelineRow]:
        """A session's timeline rows in seq order, exactly as stored. Filters combine with AND; an absent or
        empty collection does not filter. `since_seq` and `since_at` are inclusive. Never read by `fold`;
        an unknown session has an empty timeline."""
        ...

    async def read_event_chain(self, session_id: str, after_seq: int = 0,
                               limit: int | None = None) -> list[EventChainRow]:
        """The state log as stored (payload text, hash), seq order, for verification: nothing is parsed."""
        ...

    def chain_head(self, session_id: str) -> ChainHead | None:
        """Where the session's logs end as of this store's last commit to it (None before one, or after a failed
        one until the next): read right after a commit, it is the head that commit recorded."""
        ...

    async def chain_record(self, session_id: str) -> ChainRecord:
        """What the session row records: the head of its last commit, and a re-chaining note. SessionNotFound
        for an unknown id."""
        ...

    async def get_session(self, session_id: str) -> SessionRecord: ...

    async def list_sessions(self, *, damaged: list[DamagedSession] | None = None) -> list[SessionRecord]:
        """Oldest first. A row that does not read back as a session (edited outside Strata) is DamagedSession;
        given a `damaged` list, it is left out and added to that list instead (a listing shows the others)."""
        ...

    async def list_receipts(self, session_id: str | None = None,
                            status: ReceiptStatus | None = None) -> list[Receipt]: ...

    async def get_receipt(self, receipt_id: str) -> Receipt: ...

    async def update_receipt(self, update: ReceiptUpdate) -> Receipt:
        """A standalone guarded status change (reconciliation). ReceiptError if the row is not in
        `update.expect`."""
        ...

    async def acquire_lease(self, session_id: str, holder: LeaseHolder, alive: LivenessCheck,
                            now: datetime) -> SessionRecord:
        """Take the lease atomically, or raise SessionActive naming the live owner."""
        ...

    async def renew_lease(self, session_id: str, holder: LeaseHolder) -> bool:
        """Extend the lease if `holder.token` still holds it; False if it does not (another process took it)."""
        ...

    async def release_lease(self, session_id: str, token: str, status: SessionStatus | None) -> None: ...

    async def name_session(self, session_id: str, token: str, title: str) -> None:
        """Set the session's title (what listings call it) if `token` holds its lease; its log is untouched. A
        session started without a prompt (`strata chat`) is named after its first one."""
        ...

    def shared_locks(self) -> SharedLocks | None:
        """Resource locks that hold across every machine using this store (a database several machines share);
        None for a store of one machine, whose home's lock files are enough (tool_executor/locks.py)."""
        ...

    async def close(self) -> None: ...
