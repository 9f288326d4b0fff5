"""What only the SQLite store promises about the timeline: the database refuses edits and deletes, the migration
upgrades a database made before the timeline existed, the chain continues across processes, and filtered reads
stay inside the session's key range."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

import memory.migrations as migrations
from core.clock import SteppingClock
from core.errors import PersistError
from core.events import SessionStarted, UserMessage
from core.timeline import GENESIS_HASH, TimelineEntry, verify_chain
from memory import SqliteEventStore, Write
from tests.memory._legacy_db import legacy_db
from tests.memory._sqlite import T0, raw, record


def first_write(session_id: str, *timeline: TimelineEntry) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0),
                         (UserMessage(text="hello"), 0)], timeline=list(timeline))


def phase(summary: str) -> TimelineEntry:
    return TimelineEntry(kind="phase", summary=summary)


async def test_timeline_table_rejects_update_and_delete(store: SqliteEventStore, db_path: Path) -> None:
    """The database itself refuses to edit or delete a timeline row (append-only triggers)."""
    await store.create_session(record("s1"), first_write("s1", phase("a"), phase("b")))
    with raw(db_path) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE timeline SET summary = 'edited' WHERE key & 1099511627775 = 1")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM timeline")
        assert conn.execute("SELECT seq, summary FROM session_timeline ORDER BY seq").fetchall() == [
            (1, "a"), (2, "b")]
    assert verify_chain(await store.read_timeline("s1"), store.chain_key).ok


async def test_migration_upgrades_a_database_made_before_the_timeline(db_path: Path) -> None:
    """A file at schema version 1 (written by the code before this table existed) gains the timeline on open;
    its sessions and events are kept and new timeline rows chain from genesis."""
    before = legacy_db(db_path, 1, [("s1", first_write("s1"))], T0)["s1"].events
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'timeline'").fetchone() is None

    new = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        assert await new.read_events("s1") == before
        assert await new.read_timeline("s1") == []
        await new.commit("s1", Write(events=[(UserMessage(text="more"), 1)], timeline=[phase("first row")]))
        (row,) = await new.read_timeline("s1")
        assert (row.seq, row.prev_hash, row.summary) == (1, GENESIS_HASH, "first row")
        assert [e.seq for e in await new.read_events("s1")] == [1, 2, 3]
    finally:
        await new.close()
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(migrations.MIGRATIONS)
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]
        assert names[:2] == ["001_initial", "002_timeline"]
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"timeline_no_update", "timeline_no_delete", "events_no_update", "events_no_delete"} <= triggers


async def test_chain_continues_after_reopen(store: SqliteEventStore, db_path: Path) -> None:
    """A new store object (another process) reads the last row's hash from the table and chains after it."""
    await store.create_session(record("s1"), first_write("s1", phase("a"), phase("b")))
    await store.close()
    again = await SqliteEventStore.open(db_path)
    try:
        await again.commit("s1", Write(timeline=[phase("c")]))
        rows = await again.read_timeline("s1")
    finally:
        await again.close()
    assert [r.seq for r in rows] == [1, 2, 3]
    assert rows[2].prev_hash == rows[1].hash
    assert verify_chain(rows, store.chain_key).ok


async def test_a_stale_chain_head_fails_the_commit_instead_of_forking_the_chain(store: SqliteEventStore,
                                                                                db_path: Path) -> None:
    """If another writer appended rows behind this store's back, its next commit fails (nothing stored) rather
    than writing a second row 3; the commit after that reads the head again and chains correctly."""
    await store.create_session(record("s1"), first_write("s1", phase("a")))
    other = await SqliteEventStore.open(db_path)
    try:
        await other.commit("s1", Write(timeline=[phase("from another process")]))
    finally:
        await other.close()
    with pytest.raises(PersistError):
        await store.commit("s1", Write(timeline=[phase("stale")]))
    await store.commit("s1", Write(timeline=[phase("fresh")]))
    rows = await store.read_timeline("s1")
    assert [(r.seq, r.summary) for r in rows] == [(1, "a"), (2, "from another process"), (3, "fresh")]
    assert verify_chain(rows, store.chain_key).ok


async def test_filtered_reads_scan_only_the_sessions_key_range(store: SqliteEventStore) -> None:
    """A filtered timeline query searches one session's range of the unique `key` index, never the whole
    table, and needs no sort (the index gives the order)."""
    await store.create_session(record("s1"), first_write("s1", phase("a")))
    seen: list[str] = []
    await store._run(lambda conn: conn.set_trace_callback(seen.append))
    await store.read_timeline("s1", kinds=["call"], tools=["bash"], decisions=["denied"], turn=2, since_seq=1,
                              since_at=T0, limit=10)
    await store._run(lambda conn: conn.set_trace_callback(None))
    (query,) = [q for q in seen if "FROM timeline" in q and "decision" in q]
    plan = await store._run(lambda conn: conn.execute(f"EXPLAIN QUERY PLAN {query}").fetchall())
    details = " ".join(str(row[-1]) for row in plan)
    # the key index, or the rare decisions' (decision, key) index (migration 007): either way one session's range
    assert re.search(r"SEARCH timeline USING INDEX \w+ \((decision=\? AND )?key>\? AND key<\?\)", details), details
    assert "SCAN timeline" not in details, details
    assert "TEMP B-TREE" not in details, details


async def test_a_decision_filter_reads_only_the_rows_with_that_decision(store: SqliteEventStore) -> None:
    """`--decision denied` (or approved, rejected, parked) reads the partial index of the rows whose decision is
    not `allowed`, inside the session's key range, and returns exactly the rows a filter over every row would;
    `allowed` rows, and rows with no decision, are not in that index (they cost a commit no index write)."""
    decisions = ["allowed", "denied", None, "allowed", "parked", "approved", "allowed", "rejected", "denied", None]
    entries = [TimelineEntry(kind="call" if d else "phase", tool="bash" if d else None, decision=d,  # type: ignore[arg-type]
                             summary=f"row {i}") for i, d in enumerate(decisions)]
    await store.create_session(record("s1"), first_write("s1", *entries))
    await store.create_session(record("s2"), first_write("s2", *entries))
    every = await store.read_timeline("s1")
    for wanted in (["denied"], ["denied", "parked"], ["approved", "rejected"], ["allowed"], ["allowed", "denied"]):
        rows = await store.read_timeline("s1", kinds=["call"], decisions=wanted)  # type: ignore[arg-type]
        assert rows == [r for r in every if r.kind == "call" and r.decision in wanted], wanted

    seen: list[str] = []
    await store._run(lambda conn: conn.set_trace_callback(seen.append))
    await store.read_timeline("s1", kinds=["call"], decisions=["denied"])
    await store._run(lambda conn: conn.set_trace_callback(None))
    (query,) = [q for q in seen if "FROM timeline" in q and "decision" in q]
    plan = await store._run(lambda conn: conn.execute(f"EXPLAIN QUERY PLAN {query}").fetchall())
    details = " ".join(str(row[-1]) for row in plan)
    assert "USING INDEX timeline_rare_decision (decision=? AND key>? AND key<?)" in details, details
    indexed = await store._run(lambda conn: conn.execute(
        "SELECT decision FROM timeline INDEXED BY timeline_rare_decision WHERE decision <> 'allowed'").fetchall())
    assert sorted(d for (d,) in indexed) == sorted(2 * [d for d in decisions if d not in (None, "allowed")])


async def test_text_that_is_not_valid_unicode_does_not_fail_the_commit(store: SqliteEventStore) -> None:
    """A lone surrogate (output decoded with surrogateescape) is replaced when the row is stored, so the row
    stores and verifies instead of failing the commit it rides with."""
    entry = TimelineEntry(kind="call", tool="bash\udcff", summary="bytes \udc80 here", data={"out": "x\udcfe"})
    await store.create_session(record("s1"), first_write("s1", entry))
    (row,) = await store.read_timeline("s1")
    assert (row.tool, row.summary, row.data) == ("bash?", "bytes ? here", {"out": "x?"})
    assert verify_chain([row], store.chain_key).ok
