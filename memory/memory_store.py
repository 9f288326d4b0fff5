"""An in-memory `EventStore` for tests: the same contract as the SQLite store (it passes the same conformance
suite), nothing durable. `fail_on_commit` makes chosen commits fail, to simulate a full disk."""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Collection
from datetime import datetime

from core.chain import GENESIS_HASH, ChainHead, ChainKey, EventChainRow, event_canonical
from core.clock import Clock, SystemClock, iso
from core.errors import DamagedSession, LeaseGone, PersistError, ReceiptError, SessionActive, SessionNotFound
from core.events import SCHEMA_VERSION, StoredEvent, storable_json
from core.timeline import TimelineDecision, TimelineEntry, TimelineRow, canonical_time, seal
from core.vocabulary import SessionStatus
from memory.leases import describe
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
from memory.store import LivenessCheck


class InMemoryEventStore:
    def __init__(self, clock: Clock | None = None,
                 fail_on_commit: Callable[[str, Write], bool] | None = None, chain_key: ChainKey | None = None) -> None:
        self.path = ":memory:"
        self.commits = 0
        self.chain_key: ChainKey | None = chain_key or ChainKey.throwaway()
        self.chain_problem: str | None = None
        self._chains: dict[str, list[EventChainRow]] = {}
        """Per session: the state log as stored rows (payload text and hash), for `read_event_chain`."""
        self._heads: dict[str, ChainHead] = {}
        """Per session: the head as the session row records it."""
        self._clock = clock or SystemClock()
        self._sessions: dict[str, SessionRecord] = {}
        self._events: dict[str, list[StoredEvent]] = {}
        self._timeline: dict[str, list[TimelineRow]] = {}
        self._receipts: dict[str, Receipt] = {}
        self._keys: set[str] = set()
        self._calls: set[tuple[str, str]] = set()
        self._blobs: dict[str, bytes] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._fail = fail_on_commit

    def shared_locks(self) -> None:
        return None  # one machine: the home's lock files are enough

    async def close(self) -> None:
        return None

    def _check_fail(self, session_id: str, write: Write) -> None:
        if self._fail is not None and self._fail(session_id, write):
            raise PersistError("commit failed: simulated full disk (database or disk is full)",
                               session_id=session_id, path=self.path)

    def _apply(self, session_id: str, write: Write, now: datetime) -> list[StoredEvent]:
        # Validate everything first so a failing write leaves nothing behind; an event that would not read back
        # is refused as the SQLite store refuses it.
        for event, _ in write.events:
            storable_json(event, session_id=session_id, path=self.path)
        ids: set[str] = set()
        keys: set[str] = set()
        calls: set[tuple[str, str]] = set()
        for new in write.new_receipts:
            if not new.idempotency_key.startswith(f"{session_id}:"):  # as the SQLite store: listings rely on it
                raise PersistError(f"commit failed: receipt {new.id}: its idempotency key does not start with its "
                                   f"session id {session_id}", session_id=session_id, path=self.path)
            call = (session_id, new.call_id)
            if (new.id in self._receipts or new.id in ids or new.idempotency_key in self._keys
                    or new.idempotency_key in keys or call in self._calls or call in calls):
                raise PersistError(f"commit failed: receipt for {new.call_id} already exists",
                                   session_id=session_id, path=self.path)
            ids.add(new.id)
            keys.add(new.idempotency_key)
            calls.add(call)
        for u in write.receipt_updates:
            current = self._receipts.get(u.id)
            if current is None or current.status not in u.expect:
                raise ReceiptError(f"receipt {u.id} is not in the expected state", receipt_id=u.id)
        log = self._events[session_id]
        seq = log[-1].seq if log else 0
        if write.snapshot is not None and not 0 < write.snapshot.seq <= seq + len(write.events):
            raise PersistError(f"commit failed: snapshot at seq {write.snapshot.seq}, but the log ends at "
                               f"{seq + len(write.events)}", session_id=session_id, path=self.path)
        stored = []
        key = self._key(session_id)
        chain = self._chains.setdefault(session_id, [])
        prev = chain[-1].hash if chain else GENESIS_HASH
        at = iso(now)
        for event, turn in write.events:
            seq += 1
            stored.append(StoredEvent(session_id=session_id, seq=seq, at=now, turn=turn, event=event))
            payload = event.model_dump_json()
            prev = key.digest(prev, event_canonical(session_id, seq, at, turn, event.kind, payload, SCHEMA_VERSION))
            chain.append(EventChainRow(session_id=session_id, seq=seq, at=at, turn=turn, kind=event.kind,
                                       payload=payload, schema_version=SCHEMA_VERSION, hash=prev))
        log.extend(stored)
        for blob in write.blobs:
            self._blobs.setdefault(blob.sha256, blob.data)
        if write.snapshot is not None:
            self._snapshots[session_id] = write.snapshot
        for new in write.new_receipts:
            self._keys.add(new.idempotency_key)
            self._calls.add((session_id, new.call_id))
            self._receipts[new.id] = Receipt(
                id=new.id, session_id=session_id, call_id=new.call_id, tool=new.tool, status="dispatched",
                idempotency_key=new.idempotency_key, args_sha256=new.args_sha256,
                resource_keys=new.resource_keys, created_at=now, updated_at=now)
        for u in write.receipt_updates:
            self._receipts[u.id] = self._updated(self._receipts[u.id], u, now)
        if write.timeline:
            self._chain(key, session_id, write.timeline, now)
        if write.events or write.timeline:
            self._heads[session_id] = self._head(session_id)
        rec = self._sessions[session_id]
        self._sessions[session_id] = rec.model_copy(
            update={"updated_at": now, "status": write.status or rec.status})
        return stored

    def _key(self, session_id: str) -> ChainKey:
        if self.chain_key is None:
            raise PersistError(f"cannot write: {self.chain_problem}", session_id=session_id, path=self.path)
        return self.chain_key

    def _head(self, session_id: str) -> ChainHead:
        chain, rows = self._chains.get(session_id) or [], self._timeline.get(session_id) or []
        return ChainHead(events_seq=chain[-1].seq if chain else 0,
                         events_hash=chain[-1].hash if chain else GENESIS_HASH,
                         timeline_seq=rows[-1].seq if rows else 0,
                         timeline_hash=rows[-1].hash if rows else GENESIS_HASH)

    def chain_head(self, session_id: str) -> ChainHead | None:
        return self._heads.get(session_id)

    async def chain_record(self, session_id: str) -> ChainRecord:
        await self.get_session(session_id)
        return ChainRecord(head=self._heads.get(session_id))

    async def read_event_chain(self, session_id: str, after_seq: int = 0,
                               limit: int | None = None) -> list[EventChainRow]:
        chain = self._chains.get(session_id, [])
        start = bisect.bisect_right(chain, after_seq, key=lambda r: r.seq)
        return chain[start:] if limit is None else chain[start:start + max(0, limit)]

    def _chain(self, key: ChainKey, session_id: str, entries: list[TimelineEntry], now: datetime) -> None:
        rows = self._timeline.setdefault(session_id, [])
        seq, prev = (rows[-1].seq, rows[-1].hash) if rows else (0, GENESIS_HASH)
        stamp = canonical_time(now)
        for entry in entries:
            seq += 1
            e, data, digest = seal(key, session_id, seq, stamp, prev, entry)
            # `data` as it reads back from JSON (tuples become lists), as the SQLite store returns it.
            rows.append(TimelineRow(session_id=session_id, seq=seq, at=now, kind=e.kind, turn=e.turn,
                                    call_id=e.call_id, tool=e.tool, decision=e.decision, check=e.check,
                                    outcome=e.outcome, duration_ms=e.duration_ms, summary=e.summary,
                                    data=json.loads(data), prev_hash=prev, hash=digest))
            prev = digest

    @staticmethod
    def _updated(r: Receipt, u: ReceiptUpdate, now: datetime) -> Receipt:
        return r.model_copy(update={
            "status": u.status, "updated_at": now,
            "outcome_sha256": u.outcome_sha256 if u.outcome_sha256 is not None else r.outcome_sha256,
            "note": u.note if u.note is not None else r.note,
            "reconciled_by": u.reconciled_by if u.reconciled_by is not None else r.reconciled_by,
            "process": u.process if u.process is not None else r.process,
        })

    async def create_session(self, record: SessionRecord, first: Write) -> list[StoredEvent]:
        self._check_fail(record.id, first)
        if record.id in self._sessions:
            raise PersistError(f"commit failed: session {record.id} exists", session_id=record.id)
        now = self._clock.now()
        self._sessions[record.id] = record.model_copy(update={"created_at": now, "updated_at": now})
        self._events[record.id] = []
        try:
            stored = self._apply(record.id, first, now)
        except BaseException:
            del self._sessions[record.id], self._events[record.id]
            self._timeline.pop(record.id, None)
            self._chains.pop(record.id, None)
            self._heads.pop(record.id, None)
            raise
        self.commits += 1
        return stored

    async def commit(self, session_id: str, write: Write) -> list[StoredEvent]:
        if session_id not in self._sessions:
            raise PersistError(f"commit failed: no session {session_id}", session_id=session_id)
        self._check_fail(session_id, write)
        lease = self._sessions[session_id].lease
        if write.lease_token is not None and (lease is None or lease.token != write.lease_token):
            raise LeaseGone(session_id, path=self.path)
        stored = self._apply(session_id, write, self._clock.now())
        self.commits += 1
        return stored


    async def update_receipt(self, update: ReceiptUpdate) -> Receipt:
        current = self._receipts.get(update.id)
        if current is None:
            raise ReceiptError(f"no receipt with id {update.id!r}", receipt_id=update.id,
                               hint="`strata receipts` lists them")
        if current.status not in update.expect:
            raise ReceiptError(f"receipt {update.id} is {current.status}; only "
                               f"{' or '.join(update.expect)} receipts can be changed this way",
                               receipt_id=update.id)
        self._receipts[update.id] = self._updated(current, update, self._clock.now())
        self.commits += 1
        return self._receipts[update.id]

    async def acquire_lease(self, session_id: str, holder: LeaseHolder, alive: LivenessCheck,
                            now: datetime) -> SessionRecord:
        rec = await self.get_session(session_id)
        if rec.lease is not None and rec.lease.token != holder.token and alive(rec.lease):
            raise SessionActive(session_id, describe(rec.lease), rec.lease)
        rec = rec.model_copy(update={"lease": holder, "status": "active", "updated_at": self._clock.now()})
        self._sessions[session_id] = rec
        self.commits += 1
        return rec

    async def renew_lease(self, session_id: str, holder: LeaseHolder) -> bool:
        rec = await self.get_session(session_id)
        if rec.lease is None or rec.lease.token != holder.token:
            return False
        self._sessions[session_id] = rec.model_copy(update={"lease": holder})
        return True

    async def release_lease(self, session_id: str, token: str, status: SessionStatus | None) -> None:
        rec = await self.get_session(session_id)
        if rec.lease is None or rec.lease.token != token:
            return
        self._sessions[session_id] = rec.model_copy(
            update={"lease": None, "status": status or rec.status, "updated_at": self._clock.now()})

    async def name_session(self, session_id: str, token: str, title: str) -> None:
        rec = await self.get_session(session_id)
        if rec.lease is not None and rec.lease.token == token:
            self._sessions[session_id] = rec.model_copy(update={"title": title})

    async def read_events(self, session_id: str, after_seq: int = 0,
                          upto_seq: int | None = None) -> list[StoredEvent]:
        log = self._events.get(session_id)
        if log is None:
            return []
        start = bisect.bisect_right(log, after_seq, key=lambda e: e.seq)
        end = len(log) if upto_seq is None else bisect.bisect_right(log, upto_seq, key=lambda e: e.seq)
        return log[start:end]

    async def read_latest_snapshot(self, session_id: str) -> Snapshot | None:
        return self._snapshots.get(session_id)

    async def get_blob(self, sha256: str) -> bytes | None:
        return self._blobs.get(sha256)

    async def read_timeline(self, session_id: str, *, kinds: Collection[str] | None = None,
                            tools: Collection[str] | None = None,
                            decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                            since_seq: int | None = None, since_at: datetime | None = None,
                            limit: int | None = None) -> list[TimelineRow]:
        out = [r for r in self._timeline.get(session_id, ())
               if (not kinds or r.kind in kinds) and (not tools or r.tool in tools)
               and (not decisions or r.decision in decisions) and (turn is None or r.turn == turn)
               and (since_seq is None or r.seq >= since_seq) and (since_at is None or r.at >= since_at)]
        return out if limit is None else out[:max(0, limit)]

    async def get_session(self, session_id: str) -> SessionRecord:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    async def list_sessions(self, *, damaged: list[DamagedSession] | None = None) -> list[SessionRecord]:
        return sorted(self._sessions.values(), key=lambda r: (r.created_at, r.id))

    async def list_receipts(self, session_id: str | None = None,
                            status: ReceiptStatus | None = None) -> list[Receipt]:
        out = [r for r in self._receipts.values()
               if (session_id is None or r.session_id == session_id) and (status is None or r.status == status)]
        return sorted(out, key=lambda r: (r.created_at, r.id))

    async def get_receipt(self, receipt_id: str) -> Receipt:
        try:
            return self._receipts[receipt_id]
        except KeyError:
            raise ReceiptError(f"no receipt with id {receipt_id!r}", receipt_id=receipt_id,
                               hint="`strata receipts` lists them") from None
