"""The SQLite event store: WAL, `synchronous=FULL` by default, one writer connection per process, all access
through aiosqlite. A commit runs as one transaction in one hop to aiosqlite's worker thread, so a durable commit
costs one fsync and one thread round trip whatever it carries.

Over 400 lines as one concept: the `EventStore` protocol (memory/store.py) implemented over SQLite, each method
one transaction on the same connection; what stands apart already lives beside it (group commit, migrations,
chain binding, leases, the read-only opening, the database files)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Collection
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import anyio
from pydantic import ValidationError

from config.ledger_files import HEADS_SUFFIX, LEDGER_DIR
from config.private_files import create_private, private_dir
from core.chain import GENESIS_HASH, ChainHead, ChainKey, EventChainRow, chain_head, event_canonical
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
from core.events import SCHEMA_VERSION, StoredEvent, parse_event_json, storable_json, stored_event
from core.hashing import canonical_json as _canonical_json
from core.json_text import encoder as _json_encoder
from core.timeline import TimelineDecision, TimelineEntry, TimelineRow, canonical_time, seal
from core.vocabulary import Durability, SessionStatus
from memory import _bind_params, _read_only
from memory._db_files import DatabaseFiles, FilesChanged
from memory._encoding import (
    CHECKS,
    EVENT_KINDS,
    OUTCOMES,
    TIMELINE_KINDS,
    pack_data,
    pack_empty,
    pack_hash,
    pack_payload,
    pack_snapshot,
    pack_summary,
    pack_time,
    packed_data_json,
    packed_time,
    stored_datetime,
    unpack_hash,
    unpack_payload,
    unpack_snapshot,
    unpack_time,
)
from memory._foreign import ForeignDatabase, kept_from_checkpoint, refuse_foreign
from memory._group_commit import GroupCommit, GroupHooks
from memory._journal import is_locked, use_wal
from memory.chain_binding import ChainBinding, bind
from memory.copy import SessionDump
from memory.leases import describe
from memory.migrations import MIGRATIONS, migrate, read_as_is
from memory.read_sql import SESSION_SELECT, receipts_filter, timeline_filter
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
from memory.timeline_rows import TIMELINE_COLS as _TIMELINE_COLS
from memory.timeline_rows import timeline_row as _timeline_row
from memory.timeline_rows import with_prev_hash as _with_prev_hash

T = TypeVar("T")
_bind_params.register()  # None and bytes bound without sqlite3's adaptation look-up (memory/_bind_params.py)
log = logging.getLogger("strata.store")
_keys_json = _json_encoder()
"""`json.dumps` (its default options: the receipts' resource keys as they were always written), built once."""
"""Standard logging, as aiosqlite's: silent below warnings where nobody configured logging."""
_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
SEQ_BITS = 40
SEQ_MASK = (1 << SEQ_BITS) - 1

# `updated_at` is read as the later of the row's own stamp and the session's last event, so that a commit does not
# have to touch the sessions row (one page fewer in the WAL per commit).
_SESSION_SELECT = SESSION_SELECT
_SESSION_COLS = ("id, created_at, updated_at, mode, workspace, model, title, parent_id, fork_seq, status, "
                 "lease_token, lease_pid, lease_host, lease_proc_start, lease_expires")
_RECEIPT_INSERT = ("id, session_id, call_id, tool, status, idempotency_key, args_sha256, resource_keys, "
                   "created_at, updated_at, outcome_sha256, note, reconciled_by")
_RECEIPT_COLS = f"{_RECEIPT_INSERT}, process"
# Columns added by later migrations (006) are written only when there is something to write: a row without a
# lease or a process leaves them NULL by default.
_TIMELINE_INSERT = f"INSERT INTO timeline({_TIMELINE_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_EVENT_INSERT = ("INSERT INTO events(key, seq, kind, at, turn, payload, schema_version, hash) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
_hash_blob = bytearray.fromhex
"""A new row's hash as the BLOB it is stored as (its 32 bytes, `pack_hash`), as a bytearray: sqlite3 binds a
bytearray as it is, the same BLOB as the bytes of it, without the adaptation look-up every bytes parameter goes
through (memory/_bind_params.py)."""
_SET_HEAD = ("UPDATE sessions SET head_events_seq = ?, head_events_hash = ?, head_timeline_seq = ?, "
             "head_timeline_hash = ? WHERE num = ?")
_SET_HEAD_HELD = f"{_SET_HEAD} AND lease_token = ?"
"""The head, set only where the session's row holds the write's lease: no row changed means the lease is gone."""


class _RaceLost(Exception):
    pass


class _Unchainable(Exception):
    """A write to a database whose chain key this home does not hold (see memory/chain_binding.py)."""


class _FilesLost(Exception):
    """A commit refused because the database's files changed under the connection (memory/_db_files.py)."""

    def __init__(self, change: FilesChanged, saved: bool | None) -> None:
        super().__init__(change.path)
        self.change = change
        self.saved = saved


class SqliteEventStore:
    def __init__(self, db: aiosqlite.Connection, path: str, clock: Clock) -> None:
        self._db = db
        self.path = path
        self._clock = clock
        self._event_head: dict[str, tuple[int, str]] = {}
        """Per session: the last event's (seq, hash), set only after COMMIT (so it never runs ahead of, or behind,
        what is stored)."""
        self._nums: dict[str, int] = {}
        self._timeline_head: dict[str, tuple[int, str]] = {}
        """Per session: the last timeline row's (seq, hash), kept like `_event_head`."""
        self.commits = 0
        self._binding = ChainBinding(None, "the database is not open")
        self._files: DatabaseFiles | None = None
        """The database, WAL and shm files as the connection opened them, checked before each COMMIT."""
        self._group = GroupCommit(self._run, GroupHooks(before_commit=self._check_files,
                                                        after_failure=self._after_failure, forget=self._forget))

    @property
    def fsyncs(self) -> int:
        """Durable COMMITs made: each carried one or more of the `commits` (group commit)."""
        return self._group.groups

    def _check_files(self, conn: sqlite3.Connection) -> None:
        change = self._files.changed() if self._files is not None else None
        if change is not None:  # the commit would go to a file that is gone: refuse it, before any effect
            raise _FilesLost(change, None)

    @staticmethod
    def _after_failure(conn: sqlite3.Connection, exc: BaseException) -> None:
        if isinstance(exc, _FilesLost) and exc.change.salvageable and exc.saved is None:
            exc.saved = _salvage(conn)

    @property
    def chain_key(self) -> ChainKey | None:
        return self._binding.key

    @property
    def chain_problem(self) -> str | None:
        return self._binding.problem

    @classmethod
    async def open(cls, path: Path, *, durability: Durability = "full", clock: Clock | None = None,
                   busy_timeout_ms: int = 5000, read_only: bool = False) -> SqliteEventStore:
        """Open (creating if absent) and migrate. A corrupt, locked or unreadable file is reported, never
        recreated. `read_only`: for commands that only read; the database is opened read-only (memory/
        _read_only.py), so a home that cannot be written can still be read. A database that does not exist yet,
        or whose schema this Strata must upgrade first, is opened as a writer all the same (creating or
        migrating it, as a writer's first open would)."""
        clock = clock or SystemClock()
        if read_only:
            store = await cls._open_read_only(path, clock, busy_timeout_ms)
            if store is not None:
                return store
        where = str(path)
        _prepare(path)
        db = await _connect(where, where)
        store = cls(db, where, clock)
        try:
            def setup(conn: sqlite3.Connection) -> None:
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                conn.execute("PRAGMA schema_version").fetchone()  # fails fast on a non-database file
                refuse_foreign(conn, where)  # before anything writes to it (the journal mode included)
                mode = use_wal(conn, busy_timeout_ms / 1000)
                if mode.lower() != "wal":
                    raise StoreError(f"{where}: could not switch to WAL journal mode (got {mode})", path=where)
                conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
                synchronous = conn.execute("PRAGMA synchronous").fetchone()[0]
                conn.execute("PRAGMA foreign_keys = ON")
                migrate(conn, where, iso(clock.now()))
                store._binding = bind(conn, path.parent, iso(clock.now()))
                store._files = DatabaseFiles.capture(where)
                # What the connection really does, read back: the setting that decides what a power loss keeps.
                log.debug("database opened path=%s durability=%s synchronous=%s", where, durability,
                          _SYNCHRONOUS.get(synchronous, synchronous))

            await store._run(setup)
        except ForeignDatabase:
            with kept_from_checkpoint(where):
                await db.close()
            raise
        except StoreError:
            await db.close()
            raise
        except sqlite3.Error as exc:
            await db.close()
            raise _store_error(exc, where) from None
        except BaseException:  # cancelled (Ctrl-C while the open waits on a lock): the worker thread goes with it
            with anyio.CancelScope(shield=True):
                await db.close()
            raise
        return store

    @classmethod
    async def _open_read_only(cls, path: Path, clock: Clock, busy_timeout_ms: int) -> SqliteEventStore | None:
        """The database opened read-only, or None when it must be opened as a writer (absent, or a schema older
        than one read as it is: memory/migrations.py `read_as_is`)."""
        where = str(path)
        # pathlib's is_file off the loop, as anyio.Path does it, without importing anyio's file module (~1 ms)
        if not await anyio.to_thread.run_sync(Path(path).is_file, abandon_on_cancel=True):
            return None
        for uri in _read_only.uris(where):
            db = await _connect(uri, where, uri=True)

            store = cls(db, where, clock)

            def setup(conn: sqlite3.Connection, store: SqliteEventStore = store) -> int:
                conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if read_as_is(version):  # the chains are checked as a writer's open checks them
                    store._binding = bind(conn, path.parent, iso(clock.now()), read_only=True)
                return version

            try:
                version = await store._run(setup)
            except sqlite3.Error as exc:
                await db.close()
                if _read_only.needs_shm(exc) and "immutable" not in uri:
                    if _read_only.wal_holds_commits(where):
                        raise StoreError(f"cannot read {where}: its write-ahead log {where}-wal holds commits, and "
                                         f"no {where}-shm can be made here to read them with", path=where,
                                         hint="run the command once where the Strata home can be written, or on "
                                              "a writable copy of the whole home") from None
                    continue  # no WAL to lose: the database file holds everything (immutable)
                raise _store_error(exc, where) from None
            except BaseException:  # cancelled (Ctrl-C while it waits on a lock): the worker thread goes with it
                with anyio.CancelScope(shield=True):
                    await db.close()
                raise
            if read_as_is(version):  # current, or older only by indexes (memory/migrations.py)
                return store
            await db.close()
            if version > len(MIGRATIONS):
                raise StoreError(f"{where} has schema version {version}, newer than this Strata knows "
                                 f"({len(MIGRATIONS)})", path=where, hint="upgrade Strata to open this database")
            return None
        return None

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` with the raw connection on aiosqlite's worker thread, in one round trip."""
        db = self._db
        runner = getattr(db, "_execute", None)
        if runner is not None:
            result: T = await runner(fn, db._conn)  # aiosqlite's private hook: untyped, returns fn's result
            return result
        raise StoreError("this aiosqlite version lacks the single-hop transaction hook", path=self.path,
                         hint="install aiosqlite>=0.20,<0.23")

    def shared_locks(self) -> None:
        return None  # one machine: the home's lock files are enough

    async def close(self) -> None:
        await self._db.close()

    # -- writes --------------------------------------------------------------------------------------------

    def _num(self, conn: sqlite3.Connection, session_id: str) -> int:
        num = self._nums.get(session_id)
        if num is None:
            row = conn.execute("SELECT num FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise sqlite3.IntegrityError(f"no session {session_id}")
            num = self._nums[session_id] = row[0]
        return num

    def _key(self) -> ChainKey:
        key = self._binding.key
        if key is None:
            raise _Unchainable()
        return key

    @staticmethod
    def _last(conn: sqlite3.Connection, table: str, base: int) -> tuple[int, str]:
        found = conn.execute(f"SELECT key, hash FROM {table} WHERE key BETWEEN ? AND ? ORDER BY key DESC LIMIT 1",
                             (base, base | SEQ_MASK)).fetchone()
        return (0, GENESIS_HASH) if found is None else (found[0] & SEQ_MASK, unpack_hash(found[1]))

    def _append(self, conn: sqlite3.Connection, session_id: str, write: Write, at: str,
                committed: list[Callable[[], None]]) -> list[StoredEvent]:
        try:
            return self._append_rows(conn, session_id, write, at, committed)
        except (sqlite3.IntegrityError, _RaceLost):
            # A write made under a lease is checked by the head's UPDATE, after its INSERTs: a writer whose lease
            # another process took can collide first (its remembered heads are stale: UNIQUE on events.key or
            # timeline.key; a receipt the new holder settled). Then the failure is LeaseGone, as when the UPDATE
            # finds the lease gone; the transaction is rolled back either way. Nothing more on the normal path.
            if write.lease_token is not None:
                self._hold(conn, session_id, self._num(conn, session_id) << SEQ_BITS, write.lease_token)
            raise

    def _append_rows(self, conn: sqlite3.Connection, session_id: str, write: Write, at: str,
                     committed: list[Callable[[], None]]) -> list[StoredEvent]:
        key = self._key()
        base = self._num(conn, session_id) << SEQ_BITS
        token = write.lease_token
        if token is not None and not (write.events or write.timeline):  # (else checked with the head, below)
            self._hold(conn, session_id, base, token)
        seq, prev = self._event_head.get(session_id) or self._last(conn, "events", base)
        rows = []
        stored = []
        at_dt = datetime.fromisoformat(at)
        stamp = canonical_time(at_dt)  # the timeline's time text; the commit's own when the clock is in UTC
        at_packed = packed_time(at, at_dt, stamp)  # pack_time(at), without parsing and writing it again
        for event, turn in write.events:
            seq += 1
            # Read back before it is kept: an event that would not is UnstorableEvent, and the transaction rolls back.
            payload = storable_json(event, session_id=session_id, path=self.path)
            prev = key.digest(prev, event_canonical(session_id, seq, at, turn, event.kind, payload, SCHEMA_VERSION))
            rows.append((base | seq, seq, EVENT_KINDS.pack(event.kind), at_packed, turn,
                         pack_payload(event.kind, payload), SCHEMA_VERSION, _hash_blob(prev)))
            stored.append(stored_event(session_id, seq, at_dt, turn, event))
        if rows:
            conn.executemany(_EVENT_INSERT, rows)
        if write.new_receipts:
            for r in write.new_receipts:
                if not r.idempotency_key.startswith(f"{session_id}:"):
                    raise sqlite3.IntegrityError(f"receipt {r.id}: its idempotency key {r.idempotency_key!r} does "
                                                 f"not start with its session id {session_id}")
            conn.executemany(
                f"INSERT INTO receipts({_RECEIPT_INSERT}) VALUES (?, ?, ?, ?, 'dispatched', ?, ?, ?, ?, ?, "
                "NULL, NULL, NULL)",
                [(r.id, session_id, r.call_id, r.tool, r.idempotency_key, r.args_sha256,
                  _keys_json(list(r.resource_keys)), at, at) for r in write.new_receipts])
        for update in write.receipt_updates:
            self._update_receipt(conn, update, at)
        if write.status is not None:
            conn.execute("UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?", (write.status, at, session_id))
        if rows or write.timeline:
            timeline = (self._append_timeline(conn, key, session_id, base, write.timeline, at, stamp, at_packed)
                        if write.timeline
                        else self._timeline_head.get(session_id) or self._last(conn, "timeline", base))
            events = (seq, prev)
            # The head in the session row, in the same transaction: a truncated tail no longer matches it. A write
            # made under a lease sets it only where the row still holds that lease: the lease check and the head in
            # one statement (no row changed: the lease is gone, and the whole transaction is rolled back).
            if token is None:
                conn.execute(_SET_HEAD, (seq, prev, timeline[0], timeline[1], base >> SEQ_BITS))
            elif conn.execute(_SET_HEAD_HELD, (seq, prev, timeline[0], timeline[1], base >> SEQ_BITS,
                                               token)).rowcount != 1:
                raise LeaseGone(session_id, path=self.path)
            committed.append(lambda: self._set_heads(session_id, events, timeline))
        if write.blobs:
            conn.executemany("INSERT OR IGNORE INTO blobs(sha256, size, data) VALUES (?, ?, ?)",
                             [(b.sha256, b.size, b.data) for b in write.blobs])
        if write.snapshot is not None:
            self._put_snapshot(conn, base, seq, write.snapshot, at)
        return stored

    def _hold(self, conn: sqlite3.Connection, session_id: str, base: int, token: str) -> None:
        """In the write transaction (a takeover commits before or after it): LeaseGone unless the session's row
        holds the lease `token`."""
        holding = conn.execute("SELECT lease_token FROM sessions WHERE num = ?", (base >> SEQ_BITS,)).fetchone()
        if holding is None or holding[0] != token:
            raise LeaseGone(session_id, path=self.path)

    def _set_heads(self, session_id: str, events: tuple[int, str], timeline: tuple[int, str]) -> None:
        self._event_head[session_id] = events
        self._timeline_head[session_id] = timeline

    def _forget(self, session_id: str) -> None:
        self._event_head.pop(session_id, None)
        self._nums.pop(session_id, None)
        self._timeline_head.pop(session_id, None)

    def _append_timeline(self, conn: sqlite3.Connection, key: ChainKey, session_id: str, base: int,
                         entries: list[TimelineEntry], at: str, stamp: str,
                         at_packed: int | str) -> tuple[int, str]:
        """Chain and insert timeline rows in the commit's transaction: seq, time and hashes are assigned here
        (`at` is the commit's time as text, `stamp` its `canonical_time`, `at_packed` `at` as the events' column
        keeps it). Returns the new head (seq, hash)."""
        seq, prev = self._timeline_head.get(session_id) or self._last(conn, "timeline", base)
        stamp_packed = at_packed if stamp == at else pack_time(stamp)  # the same text (a UTC clock): packed once
        rows = []
        for entry in entries:
            seq += 1
            e, data, digest = seal(key, session_id, seq, stamp, prev, entry)
            # The hash is of `data` as given; the table keeps it packed, and the reader puts the detail back.
            data = packed_data_json(e.kind, e.check, e.data, data, _canonical_json)
            # prev_hash is left NULL: it is the hash of the row before (memory/_encoding.py).
            rows.append((base | seq, TIMELINE_KINDS.pack(e.kind), e.turn, e.tool, e.decision, stamp_packed, e.call_id,
                         CHECKS.pack(e.check), OUTCOMES.pack(e.outcome), e.duration_ms, None, _hash_blob(digest),
                         pack_summary(e.summary, e.outcome, e.tool, e.data), pack_empty(data)))
            prev = digest
        conn.executemany(_TIMELINE_INSERT, rows)
        return seq, prev

    def chain_head(self, session_id: str) -> ChainHead | None:
        events, timeline = self._event_head.get(session_id), self._timeline_head.get(session_id)
        if events is None or timeline is None:
            return None
        return chain_head(events[0], events[1], timeline[0], timeline[1])

    @staticmethod
    def _put_snapshot(conn: sqlite3.Connection, base: int, last_seq: int, snap: Snapshot, at: str) -> None:
        """Replace the session's snapshot. A snapshot beyond the log would hide events that were never written,
        so it is refused."""
        if not 0 < snap.seq <= last_seq:
            raise sqlite3.IntegrityError(f"snapshot at seq {snap.seq}, but the log ends at {last_seq}")
        conn.execute("DELETE FROM snapshots WHERE key BETWEEN ? AND ?", (base, base | SEQ_MASK))
        conn.execute("INSERT INTO snapshots(key, version, at, data) VALUES (?, ?, ?, ?)",
                     (base | snap.seq, snap.version, at, pack_snapshot(snap.data)))

    @staticmethod
    def _update_receipt(conn: sqlite3.Connection, u: ReceiptUpdate, at: str) -> None:
        marks = ",".join("?" for _ in u.expect)
        process = () if u.process is None else (u.process.model_dump_json(),)
        cur = conn.execute(
            "UPDATE receipts SET status = ?, updated_at = ?, outcome_sha256 = COALESCE(?, outcome_sha256), "
            "note = COALESCE(?, note), reconciled_by = COALESCE(?, reconciled_by)"
            + (", process = ?" if process else "") + f" WHERE id = ? AND status IN ({marks})",
            (u.status, at, u.outcome_sha256, u.note, u.reconciled_by, *process, u.id, *u.expect))
        if cur.rowcount != 1:
            raise _RaceLost(u.id)

    async def _transaction(self, session_id: str | None,
                           body: Callable[[sqlite3.Connection, str, list[Callable[[], None]]], T], *,
                           creates: bool = False) -> T:
        """Run `body` in one IMMEDIATE transaction on the worker thread, together with the other transactions that
        queued while the previous one was made durable (memory/_group_commit.py). Callbacks `body` registers run
        on that thread right after COMMIT (so the seq cache never runs ahead of, or behind, what is stored).
        `creates`: the transaction creates `session_id`, so when it fails there is no session to resume."""
        at = iso(self._clock.now())
        try:
            result: T = await self._group.submit(session_id, body, at)
        except _FilesLost as exc:
            raise _files_error(exc, self.path, session_id) from None
        except _RaceLost as exc:
            raise ReceiptError(f"receipt {exc.args[0]} is not in the expected state", receipt_id=exc.args[0]) from None
        except _Unchainable:
            raise PersistError(f"cannot write to {self.path}: {self.chain_problem}", session_id=session_id,
                               path=self.path, hint=self._binding.hint) from None
        except sqlite3.Error as exc:
            raise _persist_error(exc, self.path, session_id, creates=creates) from None
        self.commits += 1
        return result

    async def create_session(self, record: SessionRecord, first: Write) -> list[StoredEvent]:
        def body(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> list[StoredEvent]:
            lease = record.lease
            values = (record.id, at, at, record.mode, record.workspace, record.model, record.title,
                      record.parent_id, record.fork_seq, record.status, lease and lease.token, lease and lease.pid,
                      lease and lease.host, lease and lease.proc_start, lease and iso(lease.expires_at))
            columns, params = _SESSION_COLS, list(values)
            if lease is not None:
                columns, params = f"{columns}, lease_boot, lease_pid_ns", [*values, lease.boot_id, lease.pid_ns]
            conn.execute(f"INSERT INTO sessions({columns}) VALUES ({', '.join('?' for _ in params)})", params)
            self._forget(record.id)
            return self._append(conn, record.id, first, at, committed)

        return await self._transaction(record.id, body, creates=True)

    async def commit(self, session_id: str, write: Write) -> list[StoredEvent]:
        return await self._transaction(
            session_id, lambda conn, at, done: self._append(conn, session_id, write, at, done))


    async def load_session(self, dump: SessionDump) -> None:
        """A copied session, rows exactly as dumped (memory/copy.py), in one transaction."""
        def body(conn: sqlite3.Connection, at: str, committed: list[Callable[[], None]]) -> None:
            self._key()  # a home that cannot chain cannot take chained rows either
            rec = dump.record
            conn.execute(f"INSERT INTO sessions({_SESSION_COLS}) VALUES ({', '.join('?' * 15)})",
                         (rec.id, iso(rec.created_at), iso(rec.updated_at), rec.mode, rec.workspace, rec.model,
                          rec.title, rec.parent_id, rec.fork_seq, rec.status, None, None, None, None, None))
            self._forget(rec.id)
            base = self._num(conn, rec.id) << SEQ_BITS
            conn.executemany(_EVENT_INSERT, [(base | r.seq, r.seq, EVENT_KINDS.pack(r.kind), pack_time(r.at), r.turn,
                                              pack_payload(r.kind, r.payload), r.schema_version, pack_hash(r.hash))
                                             for r in dump.events])
            conn.executemany(_TIMELINE_INSERT, _copied_timeline(base, dump))
            conn.executemany(f"INSERT INTO receipts({_RECEIPT_COLS}) VALUES ({', '.join('?' * 14)})", [
                (r.id, r.session_id, r.call_id, r.tool, r.status, r.idempotency_key, r.args_sha256,
                 json.dumps(list(r.resource_keys)), iso(r.created_at), iso(r.updated_at), r.outcome_sha256, r.note,
                 r.reconciled_by, None if r.process is None else r.process.model_dump_json()) for r in dump.receipts])
            conn.executemany("INSERT OR IGNORE INTO blobs(sha256, size, data) VALUES (?, ?, ?)",
                             [(sha, len(data), data) for sha, data in dump.blobs.items()])
            if dump.snapshot is not None:
                conn.execute("INSERT INTO snapshots(key, version, at, data) VALUES (?, ?, ?, ?)",
                             (base | dump.snapshot.seq, dump.snapshot.version, at, pack_snapshot(dump.snapshot.data)))
            head, note = dump.chain.head, dump.chain.rechained
            if head is not None:
                conn.execute(_SET_HEAD, (head.events_seq, head.events_hash, head.timeline_seq, head.timeline_hash,
                                         base >> SEQ_BITS))
            if note is not None:
                conn.execute("UPDATE sessions SET chain_note = ? WHERE id = ?", (note.model_dump_json(), rec.id))

        await self._transaction(dump.record.id, body, creates=True)

    async def update_receipt(self, update: ReceiptUpdate) -> Receipt:
        def body(conn: sqlite3.Connection, at: str, _: list[Callable[[], None]]) -> None:
            if conn.execute("SELECT 1 FROM receipts WHERE id = ?", (update.id,)).fetchone() is None:
                raise _RaceLost(update.id)
            self._update_receipt(conn, update, at)

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
        def body(conn: sqlite3.Connection, at: str, _: list[Callable[[], None]]) -> None:
            # The log heads this store remembers are its own writes': another process may have written the
            # session since this store last held it (a daemon that gave the lease up), so they are read again.
            self._forget(session_id)
            row = conn.execute(f"SELECT {_SESSION_SELECT} FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(session_id)
            current = session_from_row(row).lease
            if current is not None and current.token != holder.token and alive(current):
                raise SessionActive(session_id, describe(current), current)
            conn.execute(
                "UPDATE sessions SET lease_token = ?, lease_pid = ?, lease_host = ?, lease_proc_start = ?, "
                "lease_expires = ?, lease_boot = ?, lease_pid_ns = ?, status = 'active', updated_at = ? WHERE id = ?",
                (holder.token, holder.pid, holder.host, holder.proc_start, iso(holder.expires_at), holder.boot_id,
                 holder.pid_ns, at, session_id))

        await self._transaction(session_id, body)
        return await self.get_session(session_id)

    async def renew_lease(self, session_id: str, holder: LeaseHolder) -> bool:
        def body(conn: sqlite3.Connection, at: str, _: list[Callable[[], None]]) -> bool:
            cur = conn.execute("UPDATE sessions SET lease_expires = ? WHERE id = ? AND lease_token = ?",
                               (iso(holder.expires_at), session_id, holder.token))
            return cur.rowcount == 1

        return await self._transaction(session_id, body)

    async def release_lease(self, session_id: str, token: str, status: SessionStatus | None) -> None:
        def body(conn: sqlite3.Connection, at: str, _: list[Callable[[], None]]) -> None:
            conn.execute(
                "UPDATE sessions SET lease_token = NULL, lease_pid = NULL, lease_host = NULL, "
                "lease_proc_start = NULL, lease_expires = NULL, lease_boot = NULL, lease_pid_ns = NULL, "
                "status = COALESCE(?, status), updated_at = ? "
                "WHERE id = ? AND lease_token = ?", (status, at, session_id, token))

        await self._transaction(session_id, body)

    async def name_session(self, session_id: str, token: str, title: str) -> None:
        def body(conn: sqlite3.Connection, at: str, _: list[Callable[[], None]]) -> None:
            conn.execute("UPDATE sessions SET title = ? WHERE id = ? AND lease_token = ?", (title, session_id, token))

        await self._transaction(session_id, body)

    # -- reads ---------------------------------------------------------------------------------------------

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await self._run(fn)
        except sqlite3.Error as exc:
            raise _store_error(exc, self.path) from None

    async def read_events(self, session_id: str, after_seq: int = 0,
                          upto_seq: int | None = None) -> list[StoredEvent]:
        def fn(conn: sqlite3.Connection) -> list[Any]:
            try:
                base = self._num(conn, session_id) << SEQ_BITS
            except sqlite3.IntegrityError:
                return []
            upto = SEQ_MASK if upto_seq is None else max(0, min(upto_seq, SEQ_MASK))
            return conn.execute(
                "SELECT seq, at, turn, kind, payload FROM events WHERE key > ? AND key <= ? ORDER BY key",
                (base | max(0, after_seq), base | upto)).fetchall()

        rows = await self._read(fn)
        events = []
        for seq, at, turn, kind, payload in rows:
            try:
                # The time first, then the event: a row damaged in both is named by its time, as before.
                when, event = stored_datetime(at), parse_event_json(unpack_payload(EVENT_KINDS.unpack(kind), payload))
                if type(seq) is int and type(turn) is int:  # the envelope is what it must be: nothing to validate
                    events.append(stored_event(session_id, seq, when, turn, event))
                else:  # an edited column: validating says what is wrong with it
                    events.append(StoredEvent(session_id=session_id, seq=seq, at=when, turn=turn, event=event))
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                raise DamagedEvent(session_id, seq, _decode_reason(exc), path=self.path) from None
        return events

    async def read_latest_snapshot(self, session_id: str) -> Snapshot | None:
        def fn(conn: sqlite3.Connection) -> Any:
            try:
                base = self._num(conn, session_id) << SEQ_BITS
            except sqlite3.IntegrityError:
                return None
            return conn.execute("SELECT key, version, data FROM snapshots WHERE key BETWEEN ? AND ? "
                                "ORDER BY key DESC LIMIT 1", (base, base | SEQ_MASK)).fetchone()

        row = await self._read(fn)
        return None if row is None else Snapshot(seq=row[0] & SEQ_MASK, version=row[1],
                                                 data=unpack_snapshot(bytes(row[2])))

    async def get_blob(self, sha256: str) -> bytes | None:
        row = await self._read(lambda conn: conn.execute(
            "SELECT data FROM blobs WHERE sha256 = ?", (sha256,)).fetchone())
        return None if row is None else bytes(row[0])

    async def read_timeline(self, session_id: str, *, kinds: Collection[str] | None = None,
                            tools: Collection[str] | None = None,
                            decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                            since_seq: int | None = None, since_at: datetime | None = None,
                            limit: int | None = None) -> list[TimelineRow]:
        def fn(conn: sqlite3.Connection) -> list[Any]:
            try:
                base = self._num(conn, session_id) << SEQ_BITS
            except sqlite3.IntegrityError:
                return []
            where, params = timeline_filter(
                base, kinds=kinds, tools=tools, decisions=decisions, turn=turn, since_seq=since_seq,
                since_at=canonical_time(since_at) if since_at is not None else None)
            sql = f"SELECT {_TIMELINE_COLS} FROM timeline WHERE {where} ORDER BY key"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(max(0, limit))
            return _with_prev_hash(conn, conn.execute(sql, params).fetchall())

        return [_timeline_row(session_id, r) for r in await self._read(fn)]

    async def read_event_chain(self, session_id: str, after_seq: int = 0,
                               limit: int | None = None) -> list[EventChainRow]:
        def fn(conn: sqlite3.Connection) -> list[Any]:
            try:
                base = self._num(conn, session_id) << SEQ_BITS
            except sqlite3.IntegrityError:
                return []
            sql = ("SELECT seq, at, turn, kind, payload, schema_version, hash FROM events "
                   "WHERE key > ? AND key <= ? ORDER BY key")
            params: list[int] = [base | max(0, min(after_seq, SEQ_MASK)), base | SEQ_MASK]
            if limit is not None:
                sql += " LIMIT ?"
                params.append(max(0, limit))
            return conn.execute(sql, params).fetchall()

        # Unvalidated: an edited row is checked as the values it now holds.
        return [EventChainRow.model_construct(session_id=session_id, seq=seq, at=unpack_time(at), turn=turn, kind=kind,
                                              payload=unpack_payload(kind, payload), schema_version=version,
                                              hash=unpack_hash(digest))
                for seq, at, turn, kind, payload, version, digest in
                ((seq, at, turn, EVENT_KINDS.unpack(code), payload, version, digest)
                 for seq, at, turn, code, payload, version, digest in await self._read(fn))]

    async def chain_record(self, session_id: str) -> ChainRecord:
        row = await self._read(lambda conn: conn.execute(
            "SELECT head_events_seq, head_events_hash, head_timeline_seq, head_timeline_hash, chain_note "
            "FROM sessions WHERE id = ?", (session_id,)).fetchone())
        if row is None:
            raise SessionNotFound(session_id)
        *head, note = row
        recorded = None
        if all(value is not None for value in head):
            fields = dict(zip(("events_seq", "events_hash", "timeline_seq", "timeline_hash"), head, strict=True))
            try:
                recorded = ChainHead.model_validate(fields)
            except ValidationError:  # edited into other types: compared as it is, so it matches nothing
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
        row = await self._read(lambda conn: conn.execute(
            f"SELECT {_SESSION_SELECT} FROM sessions WHERE id = ?", (session_id,)).fetchone())
        if row is None:
            raise SessionNotFound(session_id)
        return session_from_row(row)

    async def list_sessions(self, *, damaged: list[DamagedSession] | None = None) -> list[SessionRecord]:
        rows = await self._read(lambda conn: conn.execute(
            f"SELECT {_SESSION_SELECT} FROM sessions ORDER BY created_at, id").fetchall())
        return sessions_from_rows(rows, damaged)

    async def list_receipts(self, session_id: str | None = None,
                            status: ReceiptStatus | None = None) -> list[Receipt]:
        where, params = receipts_filter(session_id, status)  # shared with the quick read (memory/quick_read.py)
        rows = await self._read(lambda conn: conn.execute(
            f"SELECT {_RECEIPT_COLS} FROM receipts {where} ORDER BY created_at, id", params).fetchall())
        return [receipt_from_row(r) for r in rows]

    async def _maybe_receipt(self, receipt_id: str) -> Receipt | None:
        row = await self._read(lambda conn: conn.execute(
            f"SELECT {_RECEIPT_COLS} FROM receipts WHERE id = ?", (receipt_id,)).fetchone())
        return receipt_from_row(row) if row else None

    async def get_receipt(self, receipt_id: str) -> Receipt:
        receipt = await self._maybe_receipt(receipt_id)
        if receipt is None:
            raise ReceiptError(f"no receipt with id {receipt_id!r}", receipt_id=receipt_id,
                               hint="`strata receipts` lists them")
        return receipt



async def _connect(target: str, where: str, **options: Any) -> aiosqlite.Connection:
    connecting = aiosqlite.connect(target, isolation_level=None, **options)
    try:
        return await connecting
    except BaseException as exc:
        # aiosqlite queues a stop on its worker thread and does not wait for it; the thread then resolves a
        # future on this loop. Wait for it here, or it may do so after the loop has closed (a traceback); so too
        # when the connect was cancelled (Ctrl-C), the thread finishing the connect it had begun.
        thread = getattr(connecting, "_thread", None)
        if thread is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(thread.join, 5.0)
        if isinstance(exc, sqlite3.Error):
            raise _store_error(exc, where) from None
        raise


def _prepare(path: Path) -> None:
    """Create the data directory (0700) and the database file (0600); refuse a database path that is a directory
    before SQLite is asked to open it (it cannot, and a failed aiosqlite connect is racy, see `open`)."""
    where = str(path)
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise StoreError(f"cannot create the data directory {path.parent}: {exc.strerror}", path=where) from None
    if path.is_dir():
        raise StoreError(f"cannot use {where}: unable to open database file (it is a directory); it was left "
                         "untouched", path=where, hint="move it aside or set STRATA_HOME to another directory")
    _refuse_emptied(path)
    # SQLite creates a new database, and its WAL and SHM, with the main file's mode: create that file 0600 first.
    with contextlib.suppress(OSError):  # cannot (a read-only directory): SQLite reports it in its own words
        create_private(path)


def _held_sessions(home: Path) -> int:
    """How many sessions the home's evidence ledger has heads of (0: none, or the ledger cannot be listed)."""
    try:
        with os.scandir(home / LEDGER_DIR) as entries:
            return sum(1 for e in entries if e.name.endswith(HEADS_SUFFIX))
    except OSError:
        return 0


def _refuse_emptied(path: Path) -> None:
    """A database file of 0 bytes, or none at all, in a home whose ledger has heads of sessions was emptied or
    deleted (a truncation, a failed copy, a full disk, an `rm`): opening it would silently make a new, empty
    database in its place, and every session the heads name would be gone without a word. Refused instead, the
    file (or its absence) left as it is."""
    try:
        size: int | None = path.stat().st_size
    except FileNotFoundError:
        size = None
    except OSError:
        return
    if size not in (0, None):
        return
    held = _held_sessions(path.parent)
    if not held:
        return
    where = str(path)
    if size == 0:
        raise StoreError(f"{where} is empty (0 bytes), but this home's evidence ledger holds heads of {held} "
                         "session(s) it had; it was left untouched, not recreated", path=where,
                         hint="restore the database from a backup, or point STRATA_HOME at another directory")
    raise StoreError(f"{where} is missing, but this home's evidence ledger holds heads of {held} session(s) it "
                     "had; a new, empty database was not made in its place", path=where,
                     hint="restore the database from a backup; if this home's sessions are in PostgreSQL, set "
                          "STRATA_DB; to start afresh, move the home's ledger/ aside")


def _salvage(conn: sqlite3.Connection) -> bool:
    """Copy the commits of a deleted WAL (still open through `conn`) into the database file. True when all were."""
    try:
        busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error:
        return False
    return not busy and frames == copied


def _files_error(exc: _FilesLost, path: str, session_id: str | None) -> PersistError:
    change = exc.change
    what = "write-ahead log" if change.path.endswith("-wal") else "shared-memory index" if change.path.endswith(
        "-shm") else "database file"
    message = (f"commit to {path} refused: its {what} {change.path} was {change.how} while this process had it "
               "open, so the commit would not be durable")
    if exc.saved is True:
        message += "; the commits before it were copied into the database file"
    elif exc.saved is False:
        message += "; the commits since the last checkpoint could not all be copied into the database file"
    resume = f"`strata resume {session_id}`" if session_id is not None else "retry"
    hint = (f"no tool ran after the failed commit; find what removes files in the Strata home, make sure no other "
            f"strata process uses it, then {resume}")
    return PersistError(message, session_id=session_id, path=path, hint=hint)


def _decode_reason(exc: Exception) -> str:
    """What was wrong with a stored event, in one short line (a ValidationError's first error, without the
    input it quotes)."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False)
        if errors:
            first = errors[0]
            where = ".".join(str(part) for part in first.get("loc", ()))
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return f"{where + ': ' if where else ''}{first.get('msg', 'invalid')}{more}"
    return f"{type(exc).__name__}: {exc}"


def _persist_error(exc: sqlite3.Error, path: str, session_id: str | None, *, creates: bool) -> PersistError:
    """A failed commit, with what to do next: a lock held elsewhere passes (retry); anything else needs the
    database fixed first. A commit that would have created the session leaves nothing to resume."""
    if is_locked(exc):
        if creates or session_id is None:
            hint = "nothing was written; retry when the other process is done"
        else:
            hint = f"no tool ran after the failed commit; `strata resume {session_id}` when the other process is done"
        return PersistError(f"commit to {path} failed: it is locked by another process ({exc})",
                            session_id=session_id, path=path, hint=hint)
    fix = "nothing was written; fix the database and retry" if creates or session_id is None else None
    return PersistError(f"commit to {path} failed: {exc}", session_id=session_id, path=path, hint=fix)


def _store_error(exc: sqlite3.Error, path: str) -> StoreError:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return StoreError(f"{path} is not a usable Strata database ({text}); it was left untouched", path=path,
                          hint="move the file aside or set STRATA_HOME to another directory")
    if is_locked(exc):
        return StoreError(f"{path} is locked by another process ({text})", path=path,
                          hint="retry when the other process is done")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreError(f"cannot use {path}: {text}", path=path,
                          hint="check the file and directory permissions, or set STRATA_HOME")
    return StoreError(f"database error on {path}: {text}", path=path)


def _copied_timeline(base: int, dump: SessionDump) -> list[tuple[Any, ...]]:
    """A copied session's timeline rows as the table keeps them: a `prev_hash` that is the hash of the row before
    is left NULL (memory/_encoding.py), any other kept as it is, so the copy verifies exactly as the original."""
    rows, before = [], None
    for r in dump.timeline:
        linked = before is not None and before.seq == r.seq - 1
        derived = GENESIS_HASH if r.seq == 1 else before.hash if before is not None and linked else None
        prev = None if r.prev_hash == derived else pack_hash(r.prev_hash)
        packed = pack_data(r.kind, r.check, r.data)
        rows.append((base | r.seq, TIMELINE_KINDS.pack(r.kind), r.turn, r.tool, r.decision,
                     pack_time(canonical_time(r.at)), r.call_id, CHECKS.pack(r.check), OUTCOMES.pack(r.outcome),
                     r.duration_ms, prev, pack_hash(r.hash), pack_summary(r.summary, r.outcome, r.tool, r.data),
                     pack_empty(json.dumps(r.data if packed is None else packed, separators=(",", ":")))))
        before = r
    return rows
