"""The receipts whose outcome is `unknown` are read through their partial index (migration 011), on a real SQLite
file holding several sessions' receipts: the listing every run, resume and channel turn ends with
(`list_receipts(session, status="unknown")`) searches the index instead of walking every receipt of the session,
and the listing of all sessions' unknown receipts (`strata receipts --status unknown`, the store's and the quick
read's) scans only the index. A receipt that never becomes `unknown` is never in the index, so an ordinary commit
writes no page of it. A database at schema 10 (no index yet) opens and is upgraded by a writer, and is read as it
stands by a read-only open (a home that cannot be written) and by the quick read, with the same answers."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from memory import ReceiptUpdate, SqliteEventStore, Write
from memory.migrations import MIGRATIONS, READ_AS_IS_SINCE, apply_in_order
from memory.quick_read import QuickRead
from memory.read_sql import receipts_filter
from tests.memory._receipts import new_receipt, receipt_id, started
from tests.memory._sqlite import record

SESSIONS = ["01a00000-0000-7000-8000-00000000000a", "01a00000-0000-7000-8000-00000000000b",
            "01a00000-0000-7000-8000-00000000000c"]
UNKNOWN = {SESSIONS[0]: [4], SESSIONS[1]: [7, 21], SESSIONS[2]: []}
"""The receipts (by number) of each session that become `unknown`; the others end `done` or `failed`."""
PER_SESSION = 30
COLS = "id, session_id, status"


async def _filled(path: Path) -> SqliteEventStore:
    """Each session's receipts dispatched, then settled as the executor settles them: most `done` or `failed`, a
    few `unknown`."""
    store = await SqliteEventStore.open(path)
    for sid in SESSIONS:
        await store.create_session(record(sid), started(sid))
        await store.commit(sid, Write(new_receipts=[new_receipt(sid, n) for n in range(PER_SESSION)]))
        await store.commit(sid, Write(receipt_updates=[
            ReceiptUpdate(id=receipt_id(sid, n),
                          status="unknown" if n in UNKNOWN[sid] else "done" if n % 3 else "failed")
            for n in range(PER_SESSION)]))
    return store


def _expected(session_id: str | None) -> list[str]:
    return [receipt_id(sid, n) for sid in SESSIONS if session_id in (None, sid) for n in UNKNOWN[sid]]


def _plan(conn: sqlite3.Connection, session_id: str | None) -> str:
    """SQLite's plan of the listing's statement as the store prepares it (memory/sqlite_store.py `list_receipts`:
    the filter's text, its parameters bound)."""
    where, params = receipts_filter(session_id, "unknown")
    sql = f"SELECT {COLS} FROM receipts {where} ORDER BY created_at, id"
    return " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))


def _index_entries(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT id FROM receipts INDEXED BY receipts_unknown WHERE status = 'unknown' ORDER BY id")]


def test_the_unknown_filter_names_the_index_condition_as_a_literal() -> None:
    """The partial index's condition is in the statement's text, not in a bound value: SQLite proves it when it
    prepares the statement (a bound value is seen only by preparing the statement again at each execution)."""
    assert receipts_filter(SESSIONS[0], "unknown") == ("WHERE session_id = ? AND status = 'unknown'", [SESSIONS[0]])
    assert receipts_filter(None, "unknown") == ("WHERE status = 'unknown'", [])
    # the other statuses, and no status, as before: a session's by its idempotency-key range
    where, params = receipts_filter(SESSIONS[0], "done")
    assert where == "WHERE idempotency_key > ? AND idempotency_key < ? AND session_id = ? AND status = ?"
    assert params == [f"{SESSIONS[0]}:", f"{SESSIONS[0]};", SESSIONS[0], "done"]


async def test_unknown_receipts_are_read_through_their_partial_index(tmp_path: Path) -> None:
    """One session's unknown receipts: a search of the partial index by session; all sessions': a scan of the
    partial index alone, never of the table. The store's listing and the quick read's give exactly the unknown
    receipts, in creation order; the index holds those and no other."""
    db = tmp_path / "strata.db"
    store = await _filled(db)
    try:
        seen: list[str] = []
        await store._run(lambda conn: conn.set_trace_callback(seen.append))
        listed = {sid: [r.id for r in await store.list_receipts(sid, "unknown")] for sid in SESSIONS}
        every = [r.id for r in await store.list_receipts(None, "unknown")]
        await store._run(lambda conn: conn.set_trace_callback(None))
    finally:
        await store.close()
    assert listed == {sid: _expected(sid) for sid in SESSIONS}
    assert every == _expected(None)
    assert len([q for q in seen if "FROM receipts" in q]) == len(SESSIONS) + 1, seen

    with closing(sqlite3.connect(db)) as conn:
        assert _plan(conn, SESSIONS[1]) == ("SEARCH receipts USING INDEX receipts_unknown (session_id=?) | "
                                            "USE TEMP B-TREE FOR ORDER BY")
        assert _plan(conn, None) == "SCAN receipts USING INDEX receipts_unknown | USE TEMP B-TREE FOR ORDER BY"
        assert _index_entries(conn) == sorted(_expected(None))

    quick = QuickRead.open(db)
    assert quick is not None
    try:
        assert [r.id for r in quick.receipts(SESSIONS[1], "unknown")] == _expected(SESSIONS[1])
        assert [r.id for r in quick.receipts(None, "unknown")] == _expected(None)
        assert quick.unknown_receipts() == {sid: len(n) for sid, n in UNKNOWN.items() if n}
    finally:
        quick.close()


async def test_a_receipt_that_never_becomes_unknown_is_never_in_the_index(tmp_path: Path) -> None:
    """Dispatched, then done or failed (every call whose outcome is known): no index entry is written or removed;
    one that becomes unknown enters it, and leaves it when it is reconciled."""
    db = tmp_path / "strata.db"
    sid = SESSIONS[0]
    store = await SqliteEventStore.open(db)
    try:
        await store.create_session(record(sid), started(sid))
        await store.commit(sid, Write(new_receipts=[new_receipt(sid, n) for n in range(3)]))
        with closing(sqlite3.connect(db)) as conn:
            assert _index_entries(conn) == []
        await store.commit(sid, Write(receipt_updates=[ReceiptUpdate(id=receipt_id(sid, 0), status="done"),
                                                       ReceiptUpdate(id=receipt_id(sid, 1), status="failed"),
                                                       ReceiptUpdate(id=receipt_id(sid, 2), status="unknown")]))
        with closing(sqlite3.connect(db)) as conn:
            assert _index_entries(conn) == [receipt_id(sid, 2)]
        await store.update_receipt(ReceiptUpdate(id=receipt_id(sid, 2), status="done", expect=("unknown",),
                                                 reconciled_by="person"))
        with closing(sqlite3.connect(db)) as conn:
            assert _index_entries(conn) == []
        assert await store.list_receipts(sid, "unknown") == []
    finally:
        await store.close()


def _at_schema_10(db: Path) -> None:
    """The database as Strata at schema 10 left it: migration 011 only adds the index."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        conn.execute("DROP INDEX receipts_unknown")
        conn.execute("DELETE FROM schema_migrations WHERE name = '011_unknown_receipts'")
        conn.execute("PRAGMA user_version = 10")
    fresh = db.with_name("fresh.db")
    with closing(sqlite3.connect(fresh, isolation_level=None)) as conn:
        assert apply_in_order(conn, MIGRATIONS[:10], str(fresh), "2026-01-01T00:00:00+00:00") == 10
    schema = "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    with closing(sqlite3.connect(db)) as old, closing(sqlite3.connect(fresh)) as made:
        assert old.execute(schema).fetchall() == made.execute(schema).fetchall()


def _version(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


async def test_a_schema_10_database_is_read_as_it_stands_and_upgraded_by_a_writer(tmp_path: Path) -> None:
    """Read-only (the store's read-only open, the quick read): the same unknown receipts, nothing migrated. A
    writer's open: migration 011 runs once and indexes exactly the unknown receipts already there."""
    db = tmp_path / "strata.db"
    await (await _filled(db)).close()
    _at_schema_10(db)
    assert READ_AS_IS_SINCE == 10 and len(MIGRATIONS) == 11

    reader = await SqliteEventStore.open(db, read_only=True)
    try:
        assert [r.id for r in await reader.list_receipts(SESSIONS[1], "unknown")] == _expected(SESSIONS[1])
        assert [r.id for r in await reader.list_receipts(None, "unknown")] == _expected(None)
        assert reader.chain_key is not None  # its chains checked as a current database's are
    finally:
        await reader.close()
    quick = QuickRead.open(db)
    assert quick is not None
    try:
        assert [r.id for r in quick.receipts(None, "unknown")] == _expected(None)
    finally:
        quick.close()
    assert _version(db) == 10

    writer = await SqliteEventStore.open(db)
    try:
        assert [r.id for r in await writer.list_receipts(None, "unknown")] == _expected(None)
    finally:
        await writer.close()
    assert _version(db) == len(MIGRATIONS)
    with closing(sqlite3.connect(db)) as conn:
        assert _index_entries(conn) == sorted(_expected(None))
        assert [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")][-1] == \
            "011_unknown_receipts"


async def test_a_schema_9_database_is_still_migrated_before_it_is_read(tmp_path: Path) -> None:
    """Only the index-only migrations are read past: a schema older than READ_AS_IS_SINCE stores its words
    differently, so the quick read leaves it to the full way, whose open migrates it."""
    db = tmp_path / "strata.db"
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        assert apply_in_order(conn, MIGRATIONS[:9], str(db), "2026-01-01T00:00:00+00:00") == 9
    assert QuickRead.open(db) is None
    store = await SqliteEventStore.open(db, read_only=True)
    await store.close()
    assert _version(db) == len(MIGRATIONS)
