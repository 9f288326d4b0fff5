"""Which key a database's chains are made with (memory/chain_binding.py), with real files: a new database takes
the home's key; a home with another key, no key or a malformed one reads but neither verifies nor writes, and
makes no key of its own; an older database is re-chained once, keeping what its unkeyed chain showed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from config.chain_key import chain_key_path
from core.chain import ChainKey
from core.clock import SteppingClock
from core.errors import PersistError
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry
from memory import SqliteEventStore, Write
from observability.chain_verify import verify_chains
from tests.memory._legacy_db import legacy_db
from tests.memory._sqlite import T0, raw, record


def first(session_id: str) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0),
                         (UserMessage(text="hello"), 0)],
                 timeline=[TimelineEntry(kind="phase", summary="one"), TimelineEntry(kind="phase", summary="two")])


async def _made(db_path: Path) -> str:
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        await store.create_session(record("s1"), first("s1"))
        assert store.chain_key is not None
        return store.chain_key.id
    finally:
        await store.close()


async def test_a_new_database_takes_the_homes_key(db_path: Path) -> None:
    """The first open creates chain.key (0600) beside the database and records its id, not the key."""
    key_id = await _made(db_path)
    path = chain_key_path(db_path.parent)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert key_id == ChainKey(bytes.fromhex(path.read_text().strip())).id
    with raw(db_path) as conn:
        assert conn.execute("SELECT key_id FROM chain_key").fetchall() == [(key_id,)]
        secret = path.read_text().strip()
        dump = "\n".join(conn.iterdump())
    assert secret not in dump


@pytest.mark.parametrize("case", ["missing", "other", "malformed"])
async def test_without_the_databases_key_nothing_is_verified_or_written(db_path: Path, case: str) -> None:
    """The key removed, replaced or damaged: the store opens and reads, verify cannot verify (never "verified"),
    a commit is refused with a hint, and no key file is made in its place."""
    await _made(db_path)
    path = chain_key_path(db_path.parent)
    if case == "missing":
        path.unlink()
    else:
        path.write_text("cd" * 32 if case == "other" else "not hex\n")
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        assert store.chain_key is None and store.chain_problem is not None and str(path) in store.chain_problem
        assert [e.seq for e in await store.read_events("s1")] == [1, 2]
        report = await verify_chains(store, "s1", None)
        assert (report.ok, report.verdict) == (False, "cannot_verify")
        assert report.problems[0].startswith("cannot verify session s1: ")
        with pytest.raises(PersistError) as err:
            await store.commit("s1", Write(events=[(UserMessage(text="more"), 1)]))
        assert err.value.hint is not None and "chain.key" in err.value.hint
    finally:
        await store.close()
    assert path.exists() == (case != "missing")
    with raw(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone() == (2,)


async def test_an_older_database_is_rechained_once_and_keeps_what_it_showed(db_path: Path) -> None:
    """A schema-4 file whose unkeyed chain was broken at row 2: after the upgrade both chains verify under the
    key, but the session's record keeps the break and verify reports it; a second open changes nothing."""
    legacy_db(db_path, 4, [("s1", first("s1")), ("s1", first("s1"))], T0)
    with raw(db_path) as conn:
        conn.execute("DROP TRIGGER timeline_no_update")
        conn.execute("UPDATE timeline SET summary = 'edited before the upgrade' WHERE key & 1099511627775 = 2")
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        record_ = await store.chain_record("s1")
        assert record_.rechained is not None
        assert (record_.rechained.timeline_rows, record_.rechained.events) == (4, 4)
        assert record_.rechained.unkeyed_problem == "row 2 was changed (hash mismatch)"
        report = await verify_chains(store, "s1", None)
        assert report.timeline is not None and report.timeline.ok and report.events is not None and report.events.ok
        assert not report.ok and "before the chain was keyed" in report.problems[0]
        hashes = [r.hash for r in await store.read_timeline("s1")]
    finally:
        await store.close()
    again = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    try:
        assert [r.hash for r in await again.read_timeline("s1")] == hashes
    finally:
        await again.close()


async def test_rechaining_leaves_the_append_only_guards_in_place(db_path: Path) -> None:
    """The triggers set aside while re-chaining are back afterwards."""
    legacy_db(db_path, 4, [("s1", first("s1"))], T0)
    store = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0))
    await store.close()
    with raw(db_path) as conn:
        for statement in ("UPDATE events SET turn = 3", "UPDATE timeline SET turn = 3", "DELETE FROM events"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
