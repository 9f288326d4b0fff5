"""Migration 004: events and timeline rows are stored in append order with `key` as a unique index, so that a
session that is not the newest appends as cheaply as the newest one (no rebalancing in the middle of a full
leaf). The upgrade keeps every row, the chain and the guards; page counts are compared, not times."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import memory.migrations as migrations
from core.clock import SteppingClock
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry, verify_chain
from memory import SqliteEventStore, Write
from tests.memory._legacy_db import legacy_db, without_chain
from tests.memory._sqlite import T0, raw, record


def started(session_id: str) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0)],
                 timeline=[TimelineEntry(kind="lifecycle", outcome="started", summary="started")])


def turn(text: str) -> Write:
    return Write(events=[(UserMessage(text=text + " " + "x" * 300), 1), (UserMessage(text=text), 1)],
                 timeline=[TimelineEntry(kind="phase", turn=1, outcome="act", summary=f"{text} " + "y" * 200),
                           TimelineEntry(kind="call", turn=1, tool="bash", decision="allowed", summary=text)])


async def _interleaved(store: SqliteEventStore, sessions: tuple[str, ...], rounds: int) -> None:
    for sid in sessions:
        await store.create_session(record(sid), started(sid))
    for i in range(rounds):
        for sid in sessions:
            await store.commit(sid, turn(f"{sid} turn {i}"))


async def test_migration_004_keeps_every_row_the_chain_and_the_guards(db_path: Path) -> None:
    """A file at schema 3 (rows in key order, written as the store of that version wrote them) upgrades: every
    row is kept, the chain verifies (re-chained under the key by 005), the guards hold."""
    sessions = ("s1", "s2", "s3")
    old = legacy_db(db_path, 3, [(sid, started(sid)) for sid in sessions]
                    + [(sid, turn(f"{sid} turn {i}")) for i in range(20) for sid in sessions], T0)
    events = {sid: old[sid].events for sid in sessions}
    rows = {sid: old[sid].timeline for sid in sessions}
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 3

    new = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        for sid in ("s1", "s2", "s3"):
            assert await new.read_events(sid) == events[sid]
            assert without_chain(await new.read_timeline(sid)) == without_chain(rows[sid])
            assert verify_chain(await new.read_timeline(sid), new.chain_key).ok
        # Appends go on from where each session stopped: seq and the chain continue.
        stored = await new.commit("s1", turn("after the upgrade"))
        assert [e.seq for e in stored] == [events["s1"][-1].seq + 1, events["s1"][-1].seq + 2]
        after = await new.read_timeline("s1")
        assert without_chain(after[: len(rows["s1"])]) == without_chain(rows["s1"])
        assert verify_chain(after, new.chain_key).ok
        assert [r.seq for r in after[len(rows["s1"]):]] == [len(rows["s1"]) + 1, len(rows["s1"]) + 2]
    finally:
        await new.close()
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(migrations.MIGRATIONS)
        assert conn.execute("SELECT COUNT(*) FROM session_events WHERE session_id = 's2'").fetchone()[0] == 41
        assert conn.execute("SELECT COUNT(*) FROM session_timeline WHERE session_id = 's3'").fetchone()[0] == 41
        for table, guard in (("events", "append-only"), ("timeline", "append-only")):
            with pytest.raises(sqlite3.IntegrityError, match=guard):
                conn.execute(f"UPDATE {table} SET turn = 9")
            with pytest.raises(sqlite3.IntegrityError, match=guard):
                conn.execute(f"DELETE FROM {table}")
            key = conn.execute(f"SELECT key FROM {table} LIMIT 1").fetchone()[0]
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if r[1] not in ("pos", "key")]
            with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):  # (session, seq) stays unique
                conn.execute(f"INSERT INTO {table}(key, {', '.join(columns)}) SELECT key, {', '.join(columns)} "
                             f"FROM {table} WHERE key = ?", (key,))


def _frames(path: Path) -> int:
    with raw(path) as conn:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


async def test_an_older_session_appends_as_cheaply_as_the_newest(db_path: Path) -> None:
    """WAL frames (pages) written by the same commits made for the oldest and for the newest of three sessions
    with interleaved rows: with rows in key order, the oldest one's commits split full leaves in the middle of
    the b-tree and wrote ~1.8x the pages."""
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        await _interleaved(store, ("old", "mid", "new"), 30)
        pages = {}
        for sid in ("old", "new"):
            with raw(db_path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for i in range(60):
                await store.commit(sid, turn(f"measured {i}"))
            pages[sid] = _frames(db_path)
        assert pages["old"] <= pages["new"] * 1.15, pages
    finally:
        await store.close()
