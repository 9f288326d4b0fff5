"""What only the SQLite store promises about blobs and snapshots: migration 003 upgrades a version-2 file in
place, blobs cannot be edited, a session keeps one snapshot row, and reading the tail after a snapshot costs the
same whatever the session's length (a key range, not a scan)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import memory.migrations as migrations
from core.blobs import Blob
from core.clock import SteppingClock
from core.events import SessionStarted, UserMessage
from core.snapshot import SNAPSHOT_VERSION, dump_state
from core.state import fold
from core.timeline import TimelineEntry, verify_chain
from memory import Snapshot, SqliteEventStore, Write
from memory.restore import restore
from tests.memory._legacy_db import legacy_db, without_chain
from tests.memory._sqlite import T0, raw, record


def first_write(session_id: str, *texts: str) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0),
                         *[(UserMessage(text=t), 0) for t in texts]],
                 timeline=[TimelineEntry(kind="phase", summary="started")])


async def test_migration_003_upgrades_a_version_2_file(db_path: Path) -> None:
    """A file written at schema version 2 gains blobs and snapshots on open; its log and timeline are kept (the
    timeline re-chained under the key by 005), a session without a snapshot restores by folding its log, and the
    new tables work."""
    old = legacy_db(db_path, 2, [("s1", first_write("s1", "hello", "again"))], T0)
    before, timeline = old["s1"].events, old["s1"].timeline
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        assert conn.execute("SELECT name FROM sqlite_master WHERE name IN ('blobs', 'snapshots')").fetchall() == []

    new = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        assert await new.read_events("s1") == before
        assert without_chain(await new.read_timeline("s1")) == without_chain(timeline)
        assert verify_chain(await new.read_timeline("s1"), new.chain_key).ok
        restored = await restore(new, "s1")
        assert (restored.state, restored.snapshot_seq, restored.events_read) == (fold(before), 0, 3)
        snapshot = Snapshot(seq=3, version=SNAPSHOT_VERSION, data=dump_state(restored.state))
        blob = Blob("ab" * 32, b"z" * 20_000)
        await new.commit("s1", Write(events=[(UserMessage(text="more"), 0)], blobs=[blob], snapshot=snapshot))
        assert await new.get_blob(blob.sha256) == blob.data
        assert (await restore(new, "s1")).snapshot_seq == 3
    finally:
        await new.close()
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(migrations.MIGRATIONS)
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]
        assert names[:3] == ["001_initial", "002_timeline", "003_blobs_snapshots"]
        assert names == [name for name, _ in migrations.MIGRATIONS]


async def test_blobs_cannot_be_edited(store: SqliteEventStore, db_path: Path) -> None:
    """A stored blob is immutable: the database refuses an UPDATE."""
    await store.create_session(record("s1"), first_write("s1"))
    await store.commit("s1", Write(events=[(UserMessage(text="x"), 0)], blobs=[Blob("cd" * 32, b"data" * 5_000)]))
    with raw(db_path) as conn, pytest.raises(sqlite3.IntegrityError, match="immutable"):
        conn.execute("UPDATE blobs SET data = x'00'")


async def test_a_session_keeps_one_snapshot_row(store: SqliteEventStore, db_path: Path) -> None:
    """Each new snapshot replaces the session's earlier one (a cache of fold, not a history); other sessions'
    rows are untouched."""
    await store.create_session(record("s1"), first_write("s1", "a"))
    await store.create_session(record("s2"), first_write("s2", "b"))
    await store.commit("s2", Write(snapshot=Snapshot(seq=2, version="v", data=b"s2")))
    for i in range(5):
        await store.commit("s1", Write(events=[(UserMessage(text=str(i)), 0)],
                                       snapshot=Snapshot(seq=2 + i, version="v", data=b"s1")))
    with raw(db_path) as conn:
        rows = conn.execute("SELECT session_id, seq FROM session_snapshots ORDER BY session_id").fetchall()
    assert rows == [("s1", 6), ("s2", 2)]


async def _vm_steps(store: SqliteEventStore, session_id: str, after_seq: int) -> tuple[int, int]:
    """(SQLite VM steps, events) of one read_events(after_seq) call."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    await store._run(lambda conn: conn.set_progress_handler(count, 1))
    try:
        tail = await store.read_events(session_id, after_seq=after_seq)
    finally:
        await store._run(lambda conn: conn.set_progress_handler(None, 1))
    return steps[0], len(tail)


async def test_reading_the_tail_costs_the_same_in_a_short_and_a_long_session(store: SqliteEventStore) -> None:
    """read_events(after_seq) seeks into the key range: the last 20 events of a 5,000-event session cost the
    database as many steps as those of a 50-event one."""
    await store.create_session(record("short"), first_write("short", *map(str, range(49))))
    await store.create_session(record("long"), first_write("long", *map(str, range(4_999))))
    short, n_short = await _vm_steps(store, "short", after_seq=30)
    long, n_long = await _vm_steps(store, "long", after_seq=4_980)
    assert n_short == n_long == 20
    assert long <= short * 1.2 + 50, (short, long)


async def test_a_snapshot_is_stored_compressed_and_one_written_before_schema_8_still_reads(
        store: SqliteEventStore, db_path: Path) -> None:
    """A snapshot (the whole conversation as JSON) is kept zlib-compressed behind a prefix and read back as the
    bytes given, whatever they are (even bytes that begin with the prefix); a snapshot row written before schema 8
    (plain bytes) reads as it is."""
    texts = [f"message {i} " * 20 for i in range(30)]
    await store.create_session(record("s1"), first_write("s1", *texts))
    state = fold(await store.read_events("s1"))
    data = dump_state(state)
    await store.commit("s1", Write(events=[(UserMessage(text="more"), 1)],
                                   snapshot=Snapshot(seq=state.last_seq, version=SNAPSHOT_VERSION, data=data)))
    assert await store.read_latest_snapshot("s1") == Snapshot(seq=state.last_seq, version=SNAPSHOT_VERSION, data=data)
    with raw(db_path) as conn:
        (stored,) = conn.execute("SELECT data FROM snapshots").fetchone()
    assert stored.startswith(b"strata-zlib:") and len(stored) * 4 < len(data)
    tricky = b"strata-zlib:not compressed at all"
    await store.commit("s1", Write(events=[(UserMessage(text="again"), 2)],
                                   snapshot=Snapshot(seq=state.last_seq + 1, version="v", data=tricky)))
    assert (await store.read_latest_snapshot("s1")) == Snapshot(seq=state.last_seq + 1, version="v", data=tricky)
    with raw(db_path) as conn:
        conn.execute("UPDATE snapshots SET data = ?", (data,))  # as schema 7 wrote it: the bytes themselves
    assert (await store.read_latest_snapshot("s1")) == Snapshot(seq=state.last_seq + 1, version="v", data=data)
    with raw(db_path) as conn:
        conn.execute("UPDATE snapshots SET data = ?", (b"strata-zlib:damaged",))
    assert (await store.read_latest_snapshot("s1")) == Snapshot(seq=state.last_seq + 1, version="v", data=b"")
