"""Migration 008 (memory/migrations.py, memory/_encoding.py) with real files: a schema-7 database (hex hashes, ISO
times, every prev_hash written out) is converted in place; the store reads back exactly the rows it read before,
both chains still verify under the same key, the views show hex and ISO text, and a row edited before the
upgrade is still named by verify afterwards."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from core.chain import GENESIS_HASH
from core.clock import SteppingClock
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry, TimelineRow, canonical_time, verify_chain
from memory import SqliteEventStore, Write, _encoding, migrations
from observability.chain_verify import verify_chains
from tests.memory._sqlite import T0, raw, record

SEQ = "key & 1099511627775"


def _writes(session_id: str) -> list[Write]:
    started = SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:test",
                             max_turns=5, plan_digest="p")
    return [Write(events=[(started, 0), (UserMessage(text="hello"), 0)],
                  timeline=[TimelineEntry(kind="phase", summary="one"), TimelineEntry(kind="phase", summary="two")]),
            *[Write(events=[(UserMessage(text=f"more {i}"), i)],
                    timeline=[TimelineEntry(kind="call", turn=i, tool="read", call_id=f"c{i}", outcome="ok",
                                            decision="denied" if i == 2 else "allowed", duration_ms=1.5,
                                            summary=f"call {i}", data={"n": i, "text": "ünïcode"}),
                              TimelineEntry(kind="phase", turn=i, summary=f"phase {i}")]) for i in range(1, 4)]]


async def _session(store: SqliteEventStore, sid: str) -> dict[str, object]:
    return {"events": await store.read_events(sid), "chain": await store.read_event_chain(sid),
            "timeline": await store.read_timeline(sid), "record": await store.chain_record(sid)}


async def _made(db_path: Path) -> tuple[dict[str, object], ...]:
    """Two sessions written by this store; what it reads back of them."""
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        for sid in ("s1", "s2"):
            first, *rest = _writes(sid)
            await store.create_session(record(sid), first)
            for write in rest:
                await store.commit(sid, write)
        return tuple([await _session(store, sid) for sid in ("s1", "s2")])
    finally:
        await store.close()


def _as_schema_7(db_path: Path, old: Path) -> None:
    """The same database as schema 7 wrote it: the first seven migrations, then every row with its hashes as hex
    text, its time as ISO text and its prev_hash written out (taken from the views, which show them so)."""
    with closing(sqlite3.connect(old, isolation_level=None)) as conn, closing(sqlite3.connect(db_path)) as new:
        conn.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for name, migration in migrations.MIGRATIONS[:7]:
            migration(conn)
            conn.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, ?)", (name, canonical_time(T0)))
        conn.execute("PRAGMA user_version = 7")
        columns = [r[1] for r in new.execute("PRAGMA table_info(sessions)")]
        for table, names in (("sessions", columns), ("chain_key", ["id", "key_id", "bound_at"])):
            for row in new.execute(f"SELECT {', '.join(names)} FROM {table}"):
                conn.execute(f"INSERT INTO {table}({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", row)
        for row in new.execute("SELECT (s.num << 40) | e.seq, e.seq, e.kind, e.at, e.turn, e.payload, "
                               "e.schema_version, e.hash FROM session_events e JOIN sessions s ON s.id = e.session_id "
                               "ORDER BY 1"):
            conn.execute("INSERT INTO events(key, seq, kind, at, turn, payload, schema_version, hash) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
        for row in new.execute("SELECT (s.num << 40) | t.seq, t.kind, t.turn, t.tool, t.decision, t.at, t.call_id, "
                               "t.check_name, t.outcome, t.duration_ms, t.prev_hash, t.hash, t.summary, t.data "
                               "FROM session_timeline t JOIN sessions s ON s.id = t.session_id ORDER BY 1"):
            conn.execute("INSERT INTO timeline(key, kind, turn, tool, decision, at, call_id, check_name, outcome, "
                         "duration_ms, prev_hash, hash, summary, data) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    (db_path.parent / "chain.key").rename(old.parent / "chain.key")


async def _read(db_path: Path) -> tuple[dict[str, object], ...]:
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        for sid in ("s1", "s2"):
            report = await verify_chains(store, sid, None)
            assert report.ok, report.problems
        return tuple([await _session(store, sid) for sid in ("s1", "s2")])
    finally:
        await store.close()


def test_the_genesis_hash_is_the_chains() -> None:
    assert _encoding.GENESIS_HASH == GENESIS_HASH


async def test_a_schema_7_database_reads_and_verifies_the_same_after_the_upgrade(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    made = await _made(tmp_path / "new" / "strata.db")
    old = tmp_path / "old" / "strata.db"
    _as_schema_7(tmp_path / "new" / "strata.db", old)
    with raw(old) as conn:
        assert conn.execute("SELECT typeof(at), typeof(prev_hash), length(hash) FROM timeline LIMIT 1").fetchone() \
            == ("text", "text", 64)
    assert await _read(old) == made
    with raw(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(migrations.MIGRATIONS),)
        kinds = conn.execute("SELECT DISTINCT typeof(at), typeof(prev_hash), typeof(hash), length(hash) "
                             "FROM timeline").fetchall()
        assert kinds == [("integer", "null", "blob", 32)]
        assert conn.execute("SELECT DISTINCT typeof(at), typeof(hash) FROM events").fetchall() == [("integer", "blob")]
        # The views show the values as before.
        first = conn.execute("SELECT at, prev_hash, hash FROM session_timeline WHERE session_id = 's1' AND seq = 1"
                             ).fetchone()
        timeline = made[0]["timeline"]
        assert isinstance(timeline, list) and isinstance(timeline[0], TimelineRow)
        assert first == (canonical_time(timeline[0].at), timeline[0].prev_hash, timeline[0].hash)
        second = conn.execute("SELECT prev_hash FROM session_timeline WHERE session_id = 's1' AND seq = 2").fetchone()
        assert second == (timeline[0].hash,)
        # Still append-only, and the rare decisions still indexed.
        for statement in ("UPDATE timeline SET summary = 'x'", "DELETE FROM events"):
            try:
                conn.execute(statement)
            except sqlite3.IntegrityError as exc:
                assert "append-only" in str(exc)
            else:
                raise AssertionError(f"{statement} was allowed")
        assert conn.execute("SELECT count(*) FROM timeline INDEXED BY timeline_rare_decision "
                            "WHERE decision <> 'allowed'").fetchone() == (2,)


async def test_an_edit_made_before_the_upgrade_is_still_named_after_it(tmp_path: Path) -> None:
    """A row whose prev_hash was forged, and a time edited into text that is not canonical: kept as they were, so
    verify names the same rows after the upgrade as the chain of schema 7 did."""
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    made = await _made(tmp_path / "new" / "strata.db")
    old = tmp_path / "old" / "strata.db"
    _as_schema_7(tmp_path / "new" / "strata.db", old)
    with raw(old) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute(f"UPDATE timeline SET prev_hash = '{'ab' * 32}' WHERE key >> 40 = 1 AND {SEQ} = 3")
        conn.execute(f"UPDATE timeline SET at = '2026-01-01 00:00:00' WHERE key >> 40 = 2 AND {SEQ} = 4")
    rows = made[0]["timeline"]
    assert isinstance(rows, list)
    forged = [r.model_copy(update={"prev_hash": "ab" * 32}) if r.seq == 3 else r for r in rows]
    store = await SqliteEventStore.open(old, clock=SteppingClock(start=T0))
    try:
        assert store.chain_key is not None
        expected = verify_chain(forged, store.chain_key)
        assert (expected.first_bad_seq, expected.reason) == (3, "row 3 was changed (hash mismatch)")
        s1 = await verify_chains(store, "s1", None)
        s2 = await verify_chains(store, "s2", None)
        assert not s1.ok and s1.problems[0].endswith(expected.reason), s1.problems
        assert not s2.ok and "row 4 was changed (hash mismatch)" in s2.problems[0], s2.problems
        assert (await store.read_timeline("s1"))[2].prev_hash == "ab" * 32
    finally:
        await store.close()
    with raw(old) as conn:
        assert conn.execute(f"SELECT typeof(prev_hash) FROM timeline WHERE key >> 40 = 1 AND {SEQ} = 3").fetchone() \
            == ("blob",)
        assert conn.execute(f"SELECT at FROM timeline WHERE key >> 40 = 2 AND {SEQ} = 4").fetchone() \
            == ("2026-01-01 00:00:00",)
