"""The timeline's read side (observability/session_timeline.py) against a real SQLite file: filtered loads,
verification that reads what the database really holds (edits made behind the store's back with the triggers
dropped are named), and following a session while it is driven."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest

from core.clock import SteppingClock
from core.errors import SessionNotFound
from core.events import SessionStarted
from core.timeline import TimelineEntry, TimelineRow
from memory import LeaseHolder, SessionRecord, SqliteEventStore, Write
from observability.session_timeline import follow, load_timeline, verify_session

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SEQ = "key & 1099511627775"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "strata.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteEventStore]:
    s = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0, step=timedelta(seconds=1)))
    try:
        yield s
    finally:
        await s.close()


def tamper(path: Path, *statements: str) -> None:
    """Edit the file as an attacker with sqlite3 would: drop the append-only triggers, then change rows."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("DROP TRIGGER IF EXISTS timeline_no_update")
        conn.execute("DROP TRIGGER IF EXISTS timeline_no_delete")
        for statement in statements:
            conn.execute(statement)


def entry(k: int) -> TimelineEntry:
    return TimelineEntry(kind="call" if k % 2 else "phase", turn=k // 3, call_id=f"c{k}", tool="bash" if k % 4 else
                         "read_file", decision="denied" if k % 3 == 0 else "allowed", outcome="ok",
                         duration_ms=float(k), summary=f"row {k}", data={"k": k})


async def session_with_rows(store: SqliteEventStore, n: int, session_id: str = "s1") -> None:
    started = SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:t", max_turns=5,
                             plan_digest="p")
    await store.create_session(
        SessionRecord(id=session_id, created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                      model="script:t", status="idle"),
        Write(events=[(started, 0)]))
    for start in range(0, n, 4):
        await store.commit(session_id, Write(timeline=[entry(k) for k in range(start + 1, min(n, start + 4) + 1)]))


async def test_load_timeline_filters_and_refuses_an_unknown_session(store: SqliteEventStore) -> None:
    """load_timeline passes its filters to the store (a time without offset is UTC); a wrong id is an error."""
    await session_with_rows(store, 10)
    assert [r.seq for r in await load_timeline(store, "s1", kinds=["call"], decisions=["denied"])] == [3, 9]
    rows = await load_timeline(store, "s1")
    naive = rows[4].at.replace(tzinfo=None)  # rows 5-8 were one commit, so they share its time
    assert [r.seq for r in await load_timeline(store, "s1", since_at=naive)] == [5, 6, 7, 8, 9, 10]
    with pytest.raises(SessionNotFound):
        await load_timeline(store, "ghost")


async def test_verify_session_of_an_untouched_timeline(store: SqliteEventStore) -> None:
    """An untouched timeline verifies, also when read in pages smaller than it."""
    await session_with_rows(store, 10)
    for page in (3, 10, 1000):
        result = await verify_session(store, "s1", page=page)
        assert (result.ok, result.rows) == (True, 10), page


@pytest.mark.parametrize(("statement", "bad", "reason"), [
    (f"UPDATE timeline SET summary = 'nothing happened' WHERE {SEQ} = 7", 7, "row 7 was changed (hash mismatch)"),
    (f"UPDATE timeline SET decision = 'allowed' WHERE {SEQ} = 3", 3, "row 3 was changed (hash mismatch)"),
    (f"UPDATE timeline SET decision = 'fine' WHERE {SEQ} = 3", 3, "row 3 was changed (hash mismatch)"),
    (f"UPDATE timeline SET data = 'not json' WHERE {SEQ} = 2", 2, "row 2 was changed (hash mismatch)"),
    (f"UPDATE timeline SET at = 'yesterday' WHERE {SEQ} = 1", 1, "row 1 was changed (hash mismatch)"),
    (f"UPDATE timeline SET turn = 'x' WHERE {SEQ} = 8", 8, "row 8 was changed (hash mismatch)"),
    (f"DELETE FROM timeline WHERE {SEQ} = 5", 5, "row 5 is missing"),
    (f"DELETE FROM timeline WHERE {SEQ} IN (1, 2)", 1, "rows 1-2 are missing"),
    (f"UPDATE timeline SET key = key + 100 WHERE {SEQ} = 4", 4, "row 4 is missing"),
])
async def test_verify_session_names_the_row_changed_in_the_database(store: SqliteEventStore, db_path: Path,
                                                                    statement: str, bad: int, reason: str) -> None:
    """An edit or delete made directly in the file (triggers dropped) is found and the row is named, even when
    the stored value is not one the row type allows."""
    await session_with_rows(store, 10)
    tamper(db_path, statement)
    result = await verify_session(store, "s1", page=4)
    assert (result.ok, result.first_bad_seq, result.reason) == (False, bad, reason)


async def test_verify_session_of_an_unknown_session_raises(store: SqliteEventStore) -> None:
    """Verifying a session that does not exist is an error, not an empty valid chain."""
    with pytest.raises(SessionNotFound):
        await verify_session(store, "ghost")


def holder() -> LeaseHolder:
    return LeaseHolder(token="tok", pid=1, host="h", expires_at=T0 + timedelta(minutes=5))


async def test_follow_yields_new_rows_until_the_session_is_released(store: SqliteEventStore) -> None:
    """follow yields what is there, then rows as they are committed, and ends once the driver releases the
    session, after yielding the rows of the last commit."""
    await session_with_rows(store, 3)
    await store.acquire_lease("s1", holder(), lambda _: True, T0)
    seen: list[TimelineRow] = []
    got_three = anyio.Event()

    async def tail() -> None:
        async for row in follow(store, "s1", poll_s=0.01, alive=lambda _: True, kinds=["call", "phase"]):
            seen.append(row)
            if len(seen) == 3:
                got_three.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(tail)
            await got_three.wait()
            await store.commit("s1", Write(timeline=[entry(4), entry(5)]))
            await store.commit("s1", Write(timeline=[entry(6)]))
            await store.release_lease("s1", "tok", "completed")
    assert [r.seq for r in seen] == [1, 2, 3, 4, 5, 6]


async def test_follow_of_a_session_nobody_drives_ends_after_the_stored_rows(store: SqliteEventStore) -> None:
    """A finished session, or one marked active whose owner is dead, is read once and the iterator ends."""
    await session_with_rows(store, 5)
    with anyio.fail_after(5):
        assert [r.seq async for r in follow(store, "s1", poll_s=0.01, since_seq=4)] == [4, 5]
        await store.acquire_lease("s1", holder(), lambda _: True, T0)
        assert [r.seq async for r in follow(store, "s1", poll_s=0.01, alive=lambda _: False, tools=["bash"])] == [
            1, 2, 3, 5]
