"""The `EventStore` protocol (memory/store.py) on PostgreSQL, through psycopg 3 (async) and a psycopg-pool pool:
for teams whose sessions outgrow one machine, on a database engine they already trust. It passes the store
conformance suite unchanged (agent/testing), as the SQLite store does.

Each write is one transaction that first locks its session's row (`SELECT ... FOR UPDATE`): the row holds the
heads of both logs, so the next seq and the previous hash come from the database itself, and two writers, in one
process or on two machines, queue behind each other instead of forking a chain. Events and timeline rows are
append-only in the database (triggers, memory/postgres/_schema.py). A commit is durable when PostgreSQL says
COMMIT (its `synchronous_commit` and `fsync` settings decide what that means, as the server's operator set them).

The chain key is the home's (config/chain_key.py), as for SQLite: a database records the id of the key its chains
are made with, and a home holding another key can read but not verify or write.

Over 400 lines as one concept: the protocol over SQL, one transaction per method."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool
from pydantic import ValidationError

from core.chain import GENESIS_HASH, ChainHead, ChainKey, EventChainRow, event_canonical
from core.clock import Clock, SystemClock, iso
from core.errors import (
    DamagedEvent,
    DamagedSession,
    LeaseGone,
    PersistError,
    ReceiptError,
    SessionActive,
    SessionNotFound,
    StoreError,
)
from core.events import SCHEMA_VERSION, StoredEvent, parse_event_json, storable_json
from core.timeline import TimelineDecision, TimelineRow, canonical_time, seal
from core.vocabulary import SessionStatus
from memory.chain_binding import ChainBinding, home_key, matching
from memory.copy import SessionDump
from memory.leases import describe
from memory.postgres._advisory import AdvisoryLocks
from memory.postgres._nul_text import configure as nul_safe_text
from memory.postgres._schema import MIGRATION_LOCK, MIGRATIONS
from memory.rows import (
    ChainRecord,
    LeaseHolder,
    Receipt,
    ReceiptStatus,
    ReceiptUpdate,
    RechainNote,
    SessionRecord,
    Snapshot,
    Write,
    receipt_from_row,
    session_from_row,
    sessions_from_rows,
)
from memory.store import LivenessCheck
from memory.timeline_rows import timeline_row

T = TypeVar("T")
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
"""The pool's retries while a server is away are warnings of its own on stderr; the store reports what fails."""
Cursor = psycopg.AsyncCursor[Any]

_SESSION_SELECT = ("id, created_at, updated_at, mode, workspace, model, title, parent_id, fork_seq, status, "
                   "lease_token, lease_pid, lease_host, lease_proc_start, lease_expires, lease_boot, lease_pid_ns")
_RECEIPT_COLS = ("id, session_id, call_id, tool, status, idempotency_key, args_sha256, resource_keys, created_at, "
                 "updated_at, outcome_sha256, note, reconciled_by, process")
_TIMELINE_COLS = ("seq, kind, turn, tool, decision, at, call_id, check_name, outcome, duration_ms, prev_hash, hash, "
                  "summary, data")


class _RaceLost(Exception):
    """A guarded receipt change found the row in another state (or no row)."""


class _Refused(Exception):
    """A write the store refuses before PostgreSQL sees it (the message says why)."""


class PostgresEventStore:
    def __init__(self, pool: AsyncConnectionPool, where: str, clock: Clock, *, url: str,
                 read_only: bool = False) -> None:
        self._pool = pool
        self._read_only = read_only
        self.path = where
        """The database as people name it, without a password (in messages and `strata doctor`)."""
        self._clock = clock
        self._advisory = AdvisoryLocks(url, where)
        self._binding = ChainBinding(None, "the database is not open")
        self._heads: dict[str, ChainHead] = {}
        """Per session: the heads this store's last commit to it recorded (set only after COMMIT)."""
        self.commits = 0

    @property
    def chain_key(self) -> ChainKey | None:
        return self._binding.key

    @property
    def chain_problem(self) -> str | None:
        return self._binding.problem

    @classmethod
    async def open(cls, url: str, *, home: Path, clock: Clock | None = None, max_connections: int = 4,
                   connect_timeout_s: float = 10.0, read_only: bool = False) -> PostgresEventStore:
        """Connect, migrate (under an advisory lock) and bind the chain key of `home`. An unreachable server, a
        refused login or a database of a newer schema is a StoreError naming the database, never a traceback.
        `read_only` (the reading commands): a database of an older schema is read as it is, not migrated (a
        migration would shut out every older Strata still working on it, see `_schema`; a read changes nothing),
        and the store refuses to write; an empty database still gets the schema."""
        where = redact(url)
        pool = AsyncConnectionPool(url, min_size=1, max_size=max(1, max_connections), open=False,
                                   kwargs={"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s))},
                                   configure=nul_safe_text)
        hint = "check the URL, that the server runs, and the credentials"
        try:  # one plain connection first: a refusal is then the server's own reason, at once, not a pool timeout
            probe = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(connect_timeout_s)))
            await probe.close()
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to {where}: {_reason(exc)}", path=where, hint=hint) from None
        try:
            await pool.open(wait=True, timeout=connect_timeout_s)
        except Exception as exc:  # psycopg_pool's PoolTimeout carries the reason in its message
            await pool.close()
            raise StoreError(f"cannot connect to {where}: {_reason(exc)}", path=where, hint=hint) from None
        store = cls(pool, where, clock or SystemClock(), url=url, read_only=read_only)
        try:
            async with pool.connection() as conn:
                await _migrate(conn, where, reading=read_only)
                store._binding = await _bind(conn, home, iso(store._clock.now()))
        except psycopg.Error as exc:
            await pool.close()
            raise StoreError(f"database error on {where}: {_reason(exc)}", path=where) from None
        except BaseException:
            await pool.close()
            raise
        return store

    def shared_locks(self) -> AdvisoryLocks:
        return self._advisory

    async def close(self) -> None:
        await self._advisory.close()
        await self._pool.close()

    # -- writes --------------------------------------------------------------------------------------------

    def _key(self) -> ChainKey:
        key = self._binding.key
        if key is None:
            raise _Refused(f"cannot write to {self.path}: {self.chain_problem}")
        return key

    async def _transaction(self, session_id: str | None, body: Callable[[Cursor, str], Awaitable[T]], *,
                           creates: bool = False) -> T:
        if self._read_only:
            raise PersistError(f"{self.path} was opened for reading: nothing was written", session_id=session_id,
                               path=self.path)
        at = iso(self._clock.now())
        try:
            result = await self._begun(lambda cur: body(cur, at))
        except _RaceLost as exc:
            raise ReceiptError(f"receipt {exc.args[0]} is not in the expected state", receipt_id=exc.args[0]) from None
        except _Refused as exc:
            if session_id is not None:
                self._heads.pop(session_id, None)
            raise PersistError(f"commit failed: {exc}", session_id=session_id, path=self.path,
                               hint=self._binding.hint) from None
        except psycopg.Error as exc:
            if session_id is not None:
                self._heads.pop(session_id, None)
            fix = "nothing was written; fix the cause and retry" if creates or session_id is None else None
            raise PersistError(f"commit to {self.path} failed: {_reason(exc)}", session_id=session_id,
                               path=self.path, hint=fix) from None
        except BaseException:
            if session_id is not None:
                self._heads.pop(session_id, None)
            raise
        self.commits += 1
        return result

    async def _begun(self, body: Callable[[Cursor], Awaitable[T]], *, transaction: bool = True) -> T:
        """`body` on a pooled connection, in one transaction (`transaction`), else autocommit (a read). A pooled
        connection the server ended meanwhile (a restart, a failover, an idle timeout) fails at its first
        statement: the pool drops it and `body` starts again on another (each pooled connection may be such a one,
        so up to the pool's size plus one tries). Only where nothing of a write was sent yet: at BEGIN, or any
        read's. A failure after BEGIN is the caller's to report: it is not retried."""
        tries = 0
        while True:
            sent, used = False, None
            try:
                async with self._pool.connection() as conn:
                    used = conn
                    if not transaction:
                        async with conn.cursor() as cur:
                            return await body(cur)
                    async with conn.transaction(), conn.cursor() as cur:
                        sent = True
                        return await body(cur)
            except psycopg.OperationalError:
                tries += 1
                if sent or used is None or not used.broken or tries > self._pool.max_size:
                    raise

    async def _append(self, cur: Cursor, session_id: str, write: Write, at: str) -> tuple[list[StoredEvent],
                                                                                          ChainHead | None]:
        key = self._key()
        await cur.execute("SELECT head_events_seq, head_events_hash, head_timeline_seq, head_timeline_hash, "
                          "lease_token FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
        found = await cur.fetchone()
        if found is None:
            raise _Refused(f"no session {session_id}")
        if write.lease_token is not None and found[4] != write.lease_token:
            raise LeaseGone(session_id, path=self.path)  # under the row lock: a takeover is before or after this
        seq, prev, tl_seq, tl_prev = found[0], found[1] or GENESIS_HASH, found[2], found[3] or GENESIS_HASH
        rows, stored = [], []
        at_dt = datetime.fromisoformat(at)
        for event, turn in write.events:
            seq += 1
            payload = storable_json(event, session_id=session_id, path=self.path)
            prev = key.digest(prev, event_canonical(session_id, seq, at, turn, event.kind, payload, SCHEMA_VERSION))
            rows.append((session_id, seq, event.kind, at, turn, payload, SCHEMA_VERSION, prev))
            stored.append(StoredEvent.model_construct(session_id=session_id, seq=seq, at=at_dt, turn=turn,
                                                      event=event))
        if rows:
            await cur.executemany("INSERT INTO events (session_id, seq, kind, at, turn, payload, schema_version, "
                                  "hash) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", rows)
        for r in write.new_receipts:
            if not r.idempotency_key.startswith(f"{session_id}:"):
                raise _Refused(f"receipt {r.id}: its idempotency key does not start with its session id {session_id}")
        if write.new_receipts:
            await cur.executemany(
                "INSERT INTO receipts (id, session_id, call_id, tool, status, idempotency_key, args_sha256, "
                "resource_keys, created_at, updated_at) VALUES (%s, %s, %s, %s, 'dispatched', %s, %s, %s, %s, %s)",
                [(r.id, session_id, r.call_id, r.tool, r.idempotency_key, r.args_sha256,
                  json.dumps(list(r.resource_keys)), at, at) for r in write.new_receipts])
        for update in write.receipt_updates:
            await _update_receipt(cur, update, at)
        if write.timeline:
            stamp = canonical_time(at_dt)
            timeline = []
            for entry in write.timeline:
                tl_seq += 1
                e, data, digest = seal(key, session_id, tl_seq, stamp, tl_prev, entry)
                timeline.append((session_id, tl_seq, e.kind, e.turn, e.tool, e.decision, stamp, e.call_id, e.check,
                                 e.outcome, e.duration_ms, tl_prev, digest, e.summary, data))
                tl_prev = digest
            await cur.executemany(f"INSERT INTO timeline (session_id, {_TIMELINE_COLS}) VALUES "
                                  f"({', '.join(['%s'] * 15)})", timeline)
        head = None
        if rows or write.timeline:
            head = ChainHead(events_seq=seq, events_hash=prev, timeline_seq=tl_seq, timeline_hash=tl_prev)
            await cur.execute("UPDATE sessions SET head_events_seq = %s, head_events_hash = %s, "
                              "head_timeline_seq = %s, head_timeline_hash = %s, updated_at = %s WHERE id = %s",
                              (seq, prev, tl_seq, tl_prev, at, session_id))
        if write.status is not None:
            await cur.execute("UPDATE sessions SET status = %s, updated_at = %s WHERE id = %s",
                              (write.status, at, session_id))
        if write.blobs:
            await cur.executemany("INSERT INTO blobs (sha256, size, data) VALUES (%s, %s, %s) "
                                  "ON CONFLICT (sha256) DO NOTHING", [(b.sha256, b.size, b.data) for b in write.blobs])
        if write.snapshot is not None:
            snap = write.snapshot
            if not 0 < snap.seq <= seq:  # a snapshot beyond the log would hide events that were never written
                raise _Refused(f"snapshot at seq {snap.seq}, but the log ends at {seq}")
            await cur.execute("INSERT INTO snapshots (session_id, seq, version, at, data) VALUES (%s, %s, %s, %s, %s) "
                              "ON CONFLICT (session_id) DO UPDATE SET seq = EXCLUDED.seq, version = EXCLUDED.version, "
                              "at = EXCLUDED.at, data = EXCLUDED.data", (session_id, snap.seq, snap.version, at,
                                                                         snap.data))
        return stored, head

    async def _write(self, session_id: str, body: Callable[[Cursor, str], Awaitable[tuple[list[StoredEvent],
                                                                                      ChainHead | None]]], *,
                     creates: bool = False) -> list[StoredEvent]:
        stored, head = await self._transaction(session_id, body, creates=creates)
        if head is not None:
            self._heads[session_id] = head
        return stored

    async def create_session(self, record: SessionRecord, first: Write) -> list[StoredEvent]:
        async def body(cur: Cursor, at: str) -> tuple[list[StoredEvent], ChainHead | None]:
            lease = record.lease
            await cur.execute(
                "INSERT INTO sessions (id, created_at, updated_at, mode, workspace, model, title, parent_id, "
                "fork_seq, status, lease_token, lease_pid, lease_host, lease_proc_start, lease_expires, lease_boot, "
                "lease_pid_ns) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (record.id, at, at, record.mode, record.workspace, record.model, record.title, record.parent_id,
                 record.fork_seq, record.status, lease and lease.token, lease and lease.pid, lease and lease.host,
                 lease and lease.proc_start, lease and iso(lease.expires_at), lease and lease.boot_id,
                 lease and lease.pid_ns))
            return await self._append(cur, record.id, first, at)

        self._heads.pop(record.id, None)
        return await self._write(record.id, body, creates=True)

    async def commit(self, session_id: str, write: Write) -> list[StoredEvent]:
        return await self._write(session_id, lambda cur, at: self._append(cur, session_id, write, at))

    def chain_head(self, session_id: str) -> ChainHead | None:
        return self._heads.get(session_id)

    async def load_session(self, dump: SessionDump) -> None:
        """A copied session, rows exactly as dumped (memory/copy.py), in one transaction."""
        async def body(cur: Cursor, at: str) -> None:
            self._key()  # a home that cannot chain cannot take chained rows either
            rec, head, note = dump.record, dump.chain.head, dump.chain.rechained
            await cur.execute(
                "INSERT INTO sessions (id, created_at, updated_at, mode, workspace, model, title, parent_id, "
                "fork_seq, status, head_events_seq, head_events_hash, head_timeline_seq, head_timeline_hash, "
                "chain_note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (rec.id, iso(rec.created_at), iso(rec.updated_at), rec.mode, rec.workspace, rec.model, rec.title,
                 rec.parent_id, rec.fork_seq, rec.status, head.events_seq if head else 0,
                 head.events_hash if head else None, head.timeline_seq if head else 0,
                 head.timeline_hash if head else None, None if note is None else note.model_dump_json()))
            if dump.events:
                await cur.executemany(
                    "INSERT INTO events (session_id, seq, kind, at, turn, payload, schema_version, hash) VALUES "
                    "(%s, %s, %s, %s, %s, %s, %s, %s)",
                    [(rec.id, r.seq, r.kind, r.at, r.turn, r.payload, r.schema_version, r.hash) for r in dump.events])
            if dump.timeline:
                await cur.executemany(
                    f"INSERT INTO timeline (session_id, {_TIMELINE_COLS}) VALUES ({', '.join(['%s'] * 15)})",
                    [(rec.id, r.seq, r.kind, r.turn, r.tool, r.decision, canonical_time(r.at), r.call_id, r.check,
                      r.outcome, r.duration_ms, r.prev_hash, r.hash, r.summary, json.dumps(r.data))
                     for r in dump.timeline])
            if dump.receipts:
                await cur.executemany(
                    f"INSERT INTO receipts ({_RECEIPT_COLS}) VALUES ({', '.join(['%s'] * 14)})",
                    [(r.id, r.session_id, r.call_id, r.tool, r.status, r.idempotency_key, r.args_sha256,
                      json.dumps(list(r.resource_keys)), iso(r.created_at), iso(r.updated_at), r.outcome_sha256,
                      r.note, r.reconciled_by, None if r.process is None else r.process.model_dump_json())
                     for r in dump.receipts])
            if dump.blobs:
                await cur.executemany("INSERT INTO blobs (sha256, size, data) VALUES (%s, %s, %s) "
                                      "ON CONFLICT (sha256) DO NOTHING",
                                      [(sha, len(data), data) for sha, data in dump.blobs.items()])
            if dump.snapshot is not None:
                await cur.execute("INSERT INTO snapshots (session_id, seq, version, at, data) VALUES "
                                  "(%s, %s, %s, %s, %s)", (rec.id, dump.snapshot.seq, dump.snapshot.version, at,
                                                           dump.snapshot.data))

        self._heads.pop(dump.record.id, None)
        await self._transaction(dump.record.id, body, creates=True)

    async def update_receipt(self, update: ReceiptUpdate) -> Receipt:
        async def body(cur: Cursor, at: str) -> None:
            await _update_receipt(cur, update, at)

        try:
            await self._transaction(None, body)
        except ReceiptError:
            current = await self._maybe_receipt(update.id)
            if current is None:
                raise ReceiptError(f"no receipt with id {update.id!r}", receipt_id=update.id,
                                   hint="`strata receipts` lists them") from None
            raise ReceiptError(f"receipt {update.id} is {current.status}; only "
                               f"{' or '.join(update.expect)} receipts can be changed this way",
                               receipt_id=update.id) from None
        return await self.get_receipt(update.id)

    # -- leases --------------------------------------------------------------------------------------------

    async def acquire_lease(self, session_id: str, holder: LeaseHolder, alive: LivenessCheck,
                            now: datetime) -> SessionRecord:
        async def body(cur: Cursor, at: str) -> None:
            await cur.execute(f"SELECT {_SESSION_SELECT} FROM sessions WHERE id = %s FOR UPDATE", (session_id,))
            row = await cur.fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            current = session_from_row(row).lease
            if current is not None and current.token != holder.token and alive(current):
                raise SessionActive(session_id, describe(current), current)
            await cur.execute(
                "UPDATE sessions SET lease_token = %s, lease_pid = %s, lease_host = %s, lease_proc_start = %s, "
                "lease_expires = %s, lease_boot = %s, lease_pid_ns = %s, status = 'active', updated_at = %s "
                "WHERE id = %s", (holder.token, holder.pid, holder.host, holder.proc_start, iso(holder.expires_at),
                                  holder.boot_id, holder.pid_ns, at, session_id))

        self._heads.pop(session_id, None)  # another worker may have written the session since this store did
        await self._transaction(session_id, body)
        return await self.get_session(session_id)

    async def renew_lease(self, session_id: str, holder: LeaseHolder) -> bool:
        async def body(cur: Cursor, at: str) -> bool:
            await cur.execute("UPDATE sessions SET lease_expires = %s WHERE id = %s AND lease_token = %s",
                              (iso(holder.expires_at), session_id, holder.token))
            return cur.rowcount == 1

        return await self._transaction(session_id, body)

    async def release_lease(self, session_id: str, token: str, status: SessionStatus | None) -> None:
        async def body(cur: Cursor, at: str) -> None:
            await cur.execute(
                "UPDATE sessions SET lease_token = NULL, lease_pid = NULL, lease_host = NULL, lease_proc_start = NULL, "
                "lease_expires = NULL, lease_boot = NULL, lease_pid_ns = NULL, status = COALESCE(%s, status), "
                "updated_at = %s WHERE id = %s AND lease_token = %s", (status, at, session_id, token))

        await self._transaction(session_id, body)

    async def name_session(self, session_id: str, token: str, title: str) -> None:
        async def body(cur: Cursor, at: str) -> None:
            await cur.execute("UPDATE sessions SET title = %s WHERE id = %s AND lease_token = %s",
                              (title, session_id, token))

        await self._transaction(session_id, body)

    # -- reads ---------------------------------------------------------------------------------------------

    async def _fetch(self, sql: str, params: Collection[Any] = ()) -> list[Any]:
        async def select(cur: Cursor) -> list[Any]:
            await cur.execute(sql, list(params))
            return await cur.fetchall()

        try:
            return await self._begun(select, transaction=False)
        except psycopg.Error as exc:
            raise StoreError(f"database error on {self.path}: {_reason(exc)}", path=self.path) from None

    async def read_events(self, session_id: str, after_seq: int = 0,
                          upto_seq: int | None = None) -> list[StoredEvent]:
        sql = "SELECT seq, at, turn, payload FROM events WHERE session_id = %s AND seq > %s"
        params: list[Any] = [session_id, max(0, after_seq)]
        if upto_seq is not None:
            sql += " AND seq <= %s"
            params.append(upto_seq)
        events = []
        for seq, at, turn, payload in await self._fetch(sql + " ORDER BY seq", params):
            try:
                events.append(StoredEvent(session_id=session_id, seq=seq, at=datetime.fromisoformat(at), turn=turn,
                                          event=parse_event_json(payload)))
            except (ValueError, TypeError) as exc:
                raise DamagedEvent(session_id, seq, f"{type(exc).__name__}", path=self.path) from None
        return events

    async def read_latest_snapshot(self, session_id: str) -> Snapshot | None:
        rows = await self._fetch("SELECT seq, version, data FROM snapshots WHERE session_id = %s", [session_id])
        return None if not rows else Snapshot(seq=rows[0][0], version=rows[0][1], data=bytes(rows[0][2]))

    async def get_blob(self, sha256: str) -> bytes | None:
        rows = await self._fetch("SELECT data FROM blobs WHERE sha256 = %s", [sha256])
        return None if not rows else bytes(rows[0][0])

    async def read_timeline(self, session_id: str, *, kinds: Collection[str] | None = None,
                            tools: Collection[str] | None = None,
                            decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                            since_seq: int | None = None, since_at: datetime | None = None,
                            limit: int | None = None) -> list[TimelineRow]:
        clauses = ["session_id = %s", "seq >= %s"]
        params: list[Any] = [session_id, max(1, since_seq or 1)]
        for column, values in (("kind", kinds), ("tool", tools), ("decision", decisions)):
            if values:
                clauses.append(f"{column} = ANY(%s)")
                params.append(list(values))
        if turn is not None:
            clauses.append("turn = %s")
            params.append(turn)
        if since_at is not None:
            clauses.append("at >= %s")
            params.append(canonical_time(since_at))
        sql = f"SELECT {_TIMELINE_COLS} FROM timeline WHERE {' AND '.join(clauses)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(max(0, limit))
        return [timeline_row(session_id, r) for r in await self._fetch(sql, params)]

    async def read_event_chain(self, session_id: str, after_seq: int = 0,
                               limit: int | None = None) -> list[EventChainRow]:
        sql = ("SELECT seq, at, turn, kind, payload, schema_version, hash FROM events WHERE session_id = %s "
               "AND seq > %s ORDER BY seq")
        params: list[Any] = [session_id, max(0, after_seq)]
        if limit is not None:
            sql += " LIMIT %s"
            params.append(max(0, limit))
        return [EventChainRow.model_construct(session_id=session_id, seq=seq, at=at, turn=turn, kind=kind,
                                              payload=payload, schema_version=version, hash=digest)
                for seq, at, turn, kind, payload, version, digest in await self._fetch(sql, params)]

    async def chain_record(self, session_id: str) -> ChainRecord:
        rows = await self._fetch("SELECT head_events_seq, head_events_hash, head_timeline_seq, head_timeline_hash, "
                                 "chain_note FROM sessions WHERE id = %s", [session_id])
        if not rows:
            raise SessionNotFound(session_id)
        *head, note = rows[0]
        recorded = None
        if head[1] is not None and head[3] is not None:
            fields = dict(zip(("events_seq", "events_hash", "timeline_seq", "timeline_hash"), head, strict=True))
            try:
                recorded = ChainHead.model_validate(fields)
            except ValidationError:
                recorded = ChainHead.model_construct(**fields)
        rechained = None
        if note is not None:
            try:
                rechained = RechainNote.model_validate_json(note)
            except ValidationError:
                rechained = RechainNote(at="?", timeline_rows=0, events=0,
                                        unkeyed_problem=f"the re-chaining note is unreadable: {str(note)[:80]!r}")
        return ChainRecord(head=recorded, rechained=rechained)

    async def get_session(self, session_id: str) -> SessionRecord:
        rows = await self._fetch(f"SELECT {_SESSION_SELECT} FROM sessions WHERE id = %s", [session_id])
        if not rows:
            raise SessionNotFound(session_id)
        return session_from_row(rows[0])

    async def list_sessions(self, *, damaged: list[DamagedSession] | None = None) -> list[SessionRecord]:
        return sessions_from_rows(await self._fetch(f"SELECT {_SESSION_SELECT} FROM sessions ORDER BY created_at, id"),
                                  damaged)

    async def list_receipts(self, session_id: str | None = None,
                            status: ReceiptStatus | None = None) -> list[Receipt]:
        clauses, params = [], []
        if session_id is not None:
            clauses.append("session_id = %s")
            params.append(session_id)
        if status is not None:
            clauses.append("status = %s")
            params.append(status)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        return [receipt_from_row(r) for r in await self._fetch(f"SELECT {_RECEIPT_COLS} FROM receipts {where} "
                                                       "ORDER BY created_at, id", params)]

    async def _maybe_receipt(self, receipt_id: str) -> Receipt | None:
        rows = await self._fetch(f"SELECT {_RECEIPT_COLS} FROM receipts WHERE id = %s", [receipt_id])
        return receipt_from_row(rows[0]) if rows else None

    async def get_receipt(self, receipt_id: str) -> Receipt:
        receipt = await self._maybe_receipt(receipt_id)
        if receipt is None:
            raise ReceiptError(f"no receipt with id {receipt_id!r}", receipt_id=receipt_id,
                               hint="`strata receipts` lists them")
        return receipt


async def _update_receipt(cur: Cursor, u: ReceiptUpdate, at: str) -> None:
    process = None if u.process is None else u.process.model_dump_json()
    await cur.execute(
        "UPDATE receipts SET status = %s, updated_at = %s, outcome_sha256 = COALESCE(%s, outcome_sha256), "
        "note = COALESCE(%s, note), reconciled_by = COALESCE(%s, reconciled_by), process = COALESCE(%s, process) "
        "WHERE id = %s AND status = ANY(%s)",
        (u.status, at, u.outcome_sha256, u.note, u.reconciled_by, process, u.id, list(u.expect)))
    if cur.rowcount != 1:
        raise _RaceLost(u.id)


async def _migrate(conn: psycopg.AsyncConnection[Any], where: str, *, reading: bool = False) -> None:
    """Apply the migrations this database lacks, one transaction each, under an advisory lock. `reading`: only
    into an empty database; one of an older schema is left as it is (its rows read as they are)."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        cur = await conn.execute("SELECT to_regclass('strata_schema') IS NOT NULL")
        exists = (await cur.fetchone() or (False,))[0]
        applied: set[str] = set()
        if exists:
            cur = await conn.execute("SELECT name FROM strata_schema")
            applied = {r[0] for r in await cur.fetchall()}
        known = {name for name, _ in MIGRATIONS}
        if applied - known:
            unknown = ", ".join(sorted(applied - known))
            raise StoreError(f"{where} has schema migrations this Strata does not know ({unknown})",
                             path=where, hint="upgrade Strata to open this database")
        if reading and applied:
            return
        for name, sql in MIGRATIONS:
            if name in applied:
                continue
            async with conn.transaction():
                await conn.execute(sql.encode())
                await conn.execute("INSERT INTO strata_schema (name) VALUES (%s)", (name,))
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


async def _bind(conn: psycopg.AsyncConnection[Any], home: Path, now: str) -> ChainBinding:
    """The chain key of `home`, checked against (or, for a new database, recorded as) the database's."""
    cur = await conn.execute("SELECT key_id FROM chain_key WHERE id = 1")
    row = await cur.fetchone()
    recorded = None if row is None else str(row[0])
    key = home_key(home, recorded)
    if isinstance(key, ChainBinding):
        return key
    if recorded is None:
        await conn.execute("INSERT INTO chain_key (id, key_id, bound_at) VALUES (1, %s, %s) ON CONFLICT (id) "
                           "DO NOTHING", (key.id, now))
        cur = await conn.execute("SELECT key_id FROM chain_key WHERE id = 1")
        row = await cur.fetchone()
        recorded = None if row is None else str(row[0])
    return matching(home, key, recorded)



def redact(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the PostgreSQL database (its URL could not be read)"
    user = f"{info['user']}@" if info.get("user") else ""
    return f"postgresql://{user}{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def _reason(exc: BaseException) -> str:
    """The server's reason in one line."""
    if isinstance(exc, pg_errors.UniqueViolation):
        diag = exc.diag
        return f"a row with the same key already exists ({diag.constraint_name or 'unique key'})"
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__
