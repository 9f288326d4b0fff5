"""What only the SQLite store promises: durability settings, recorded migrations, an append-only log enforced by
the database, refusal to touch a file it cannot use, and data that outlives the process."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from core.errors import DamagedEvent, PersistError, StoreError
from core.events import SCHEMA_VERSION, AssistantMessage, SessionStarted, UserMessage
from core.messages import TextBlock
from memory import LeaseHolder, NewReceipt, ReceiptUpdate, SqliteEventStore, Write
from memory._encoding import EVENT_KINDS
from memory.migrations import MIGRATIONS, migrate
from tests.memory._sqlite import T0, raw, record


def first_write(session_id: str) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0),
                         (UserMessage(text="hello"), 0)])


async def pragma(store: SqliteEventStore, name: str) -> Any:
    return await store._run(lambda conn: conn.execute(f"PRAGMA {name}").fetchone()[0])


async def test_wal_and_synchronous_full_by_default(store: SqliteEventStore, db_path: Path) -> None:
    """The store runs in WAL mode (visible to any connection) with synchronous=FULL on its own connection."""
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert await pragma(store, "journal_mode") == "wal"
    assert await pragma(store, "synchronous") == 2  # FULL
    assert await pragma(store, "busy_timeout") == 5000
    assert await pragma(store, "foreign_keys") == 1


async def test_durability_normal_sets_synchronous_normal(tmp_path: Path) -> None:
    """durability="normal" trades the fsync per commit for synchronous=NORMAL, still in WAL mode."""
    s = await SqliteEventStore.open(tmp_path / "strata.db", durability="normal")
    try:
        assert await pragma(s, "synchronous") == 1  # NORMAL
        assert await pragma(s, "journal_mode") == "wal"
    finally:
        await s.close()


async def test_open_creates_missing_directories(tmp_path: Path) -> None:
    """Opening a database under directories that do not exist yet creates them."""
    path = tmp_path / "a" / "b" / "strata.db"
    s = await SqliteEventStore.open(path)
    await s.close()
    assert path.is_file()


async def test_migrations_are_recorded(store: SqliteEventStore, db_path: Path) -> None:
    """Every migration is named in schema_migrations, in order, and user_version equals their count."""
    with raw(db_path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]
        assert names == [name for name, _ in MIGRATIONS]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "events", "receipts", "schema_migrations"} <= tables


async def test_reopen_keeps_data_and_does_not_migrate_again(store: SqliteEventStore, db_path: Path) -> None:
    """Reopening an existing database keeps its sessions and applies no migration twice."""
    await store.create_session(record("s1"), first_write("s1"))
    await store.close()
    again = await SqliteEventStore.open(db_path)
    try:
        assert [r.id for r in await again.list_sessions()] == ["s1"]
        assert len(await again.read_events("s1")) == 2
    finally:
        await again.close()
    with raw(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


async def test_non_database_file_is_refused_and_left_untouched(db_path: Path) -> None:
    """A file that is not SQLite is a StoreError saying so; its bytes are unchanged and no side files appear."""
    junk = b"this is not a database, just bytes\x00\xff\x01" * 300
    await anyio.Path(db_path).write_bytes(junk)
    with pytest.raises(StoreError) as info:
        await SqliteEventStore.open(db_path)
    assert "not a usable Strata database" in str(info.value)
    assert info.value.path == str(db_path)
    assert info.value.hint
    assert await anyio.Path(db_path).read_bytes() == junk
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["strata.db"]


async def test_database_from_a_newer_strata_is_refused(db_path: Path) -> None:
    """A schema version beyond the known migrations is a StoreError, and the version is not rewritten."""
    with raw(db_path) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 7}")
    with pytest.raises(StoreError, match="newer"):
        await SqliteEventStore.open(db_path)
    with raw(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) + 7


async def test_events_table_rejects_update_and_delete(store: SqliteEventStore, db_path: Path) -> None:
    """The database itself refuses to edit or delete a stored event (append-only triggers)."""
    await store.create_session(record("s1"), first_write("s1"))
    with raw(db_path) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("UPDATE events SET payload = '{}' WHERE seq = 1")
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM events WHERE seq >= 1")
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 2
    assert [e.seq for e in await store.read_events("s1")] == [1, 2]


async def test_event_rows_carry_kind_and_schema_version(store: SqliteEventStore, db_path: Path) -> None:
    """Each event row records its kind, turn and the schema version it was written with."""
    await store.create_session(record("s1"), first_write("s1"))
    await store.commit("s1", Write(events=[(AssistantMessage(content=(TextBlock(text="hi"),)), 1)]))
    with raw(db_path) as conn:
        rows = conn.execute("SELECT seq, kind, turn, schema_version FROM events ORDER BY seq").fetchall()
    assert [(seq, EVENT_KINDS.unpack(kind), turn, version) for seq, kind, turn, version in rows] == [
        (1, "session_started", 0, SCHEMA_VERSION), (2, "user_message", 0, SCHEMA_VERSION),
        (3, "assistant_message", 1, SCHEMA_VERSION)]


async def test_everything_is_durable_across_close_and_reopen(store: SqliteEventStore, db_path: Path) -> None:
    """Sessions, events, receipts and leases read back identically after reopening; the log continues."""
    await store.create_session(record("s1"), first_write("s1"))
    await store.commit("s1", Write(events=[(UserMessage(text="more"), 1)], status="awaiting_approval",
                                   new_receipts=[NewReceipt(id="r1", call_id="c1", tool="write_file",
                                                            idempotency_key="s1:K1", args_sha256="a",
                                                            resource_keys=("file:/ws/x", "file:/ws/y"))]))
    await store.update_receipt(ReceiptUpdate(id="r1", status="unknown", note="deadline passed"))
    lease = LeaseHolder(token="tok", pid=77, host="h", proc_start="9", expires_at=T0 + timedelta(seconds=60))
    await store.acquire_lease("s1", lease, lambda _: True, T0)
    before = (await store.list_sessions(), await store.read_events("s1"), await store.list_receipts())
    await store.close()

    again = await SqliteEventStore.open(db_path)
    try:
        after = (await again.list_sessions(), await again.read_events("s1"), await again.list_receipts())
        assert after == before
        assert after[0][0].lease == lease
        assert [e.seq for e in await again.commit("s1", Write(events=[(UserMessage(text="next"), 2)]))] == [4]
    finally:
        await again.close()


async def test_commits_counts_one_per_commit(store: SqliteEventStore) -> None:
    """`commits` goes up by one per durable transaction, whatever it carries, and not for reads."""
    assert store.commits == 0
    await store.create_session(record("s1"), first_write("s1"))
    assert store.commits == 1
    for n in range(3):
        await store.commit("s1", Write(events=[(UserMessage(text=f"m{n}"), n), (UserMessage(text="x"), n)]))
    assert store.commits == 4
    await store.read_events("s1")
    await store.list_sessions()
    await store.list_receipts()
    assert store.commits == 4


def _damage_event(db_path: Path, seq: int, payload: str) -> None:
    """Edit a stored event behind the store's back (the append-only trigger dropped first), as a hand edit or a
    damaged disk would."""
    with raw(db_path) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (payload, seq))


@pytest.mark.parametrize("payload", ["{not json", '{"kind": "no_such_kind"}', '{"kind": "user_message"}'])
async def test_an_event_that_does_not_load_is_a_damaged_event_error(store: SqliteEventStore, db_path: Path,
                                                                    payload: str) -> None:
    """Reading an event whose payload is not a valid event is a DamagedEvent (a StoreError): one line naming the
    session and the seq, saying the log is damaged. Nothing is skipped, repaired or rewritten."""
    await store.create_session(record("s1"), first_write("s1"))
    _damage_event(db_path, 2, payload)
    with pytest.raises(DamagedEvent) as info:
        await store.read_events("s1")
    err = info.value
    assert isinstance(err, StoreError) and err.exit_code == 1
    assert (err.session_id, err.seq, err.path) == ("s1", 2, str(db_path))
    assert err.message.startswith("session s1 has a damaged log: event 2 does not load (")
    assert "\n" not in err.message and err.hint
    assert [e.seq for e in await store.read_events("s1", upto_seq=1)] == [1]  # the events before it still read
    with raw(db_path) as conn:
        assert conn.execute("SELECT payload FROM events WHERE seq = 2").fetchone()[0] == payload


async def test_a_database_path_that_is_a_directory_is_refused_and_kept(db_path: Path) -> None:
    """A directory where the database should be is a StoreError before SQLite is asked to open it; it is kept."""
    await anyio.Path(db_path).mkdir()
    await anyio.Path(db_path / "keep.txt").write_text("mine")
    with pytest.raises(StoreError) as info:
        await SqliteEventStore.open(db_path)
    assert f"cannot use {db_path}: unable to open database file" in info.value.message
    assert info.value.hint
    assert await anyio.Path(db_path / "keep.txt").read_text() == "mine"


async def test_a_commit_on_a_locked_database_says_it_is_locked_and_to_retry(db_path: Path) -> None:
    """A commit that fails because another process holds the write lock says so; a commit that would have created
    the session does not point at `strata resume` (there is no session), a later one does."""
    s = await SqliteEventStore.open(db_path, busy_timeout_ms=50)
    try:
        await s.create_session(record("s1"), first_write("s1"))
        with raw(db_path) as other:
            other.execute("BEGIN EXCLUSIVE")
            try:
                with pytest.raises(PersistError) as created:
                    await s.create_session(record("s2"), first_write("s2"))
                with pytest.raises(PersistError) as appended:
                    await s.commit("s1", Write(events=[(UserMessage(text="more"), 0)]))
            finally:
                other.execute("ROLLBACK")
        for err in (created.value, appended.value):
            assert "locked by another process" in err.message
            assert err.hint and "when the other process is done" in err.hint
        assert created.value.hint and "retry" in created.value.hint and "strata resume" not in created.value.hint
        assert appended.value.hint and "strata resume s1" in appended.value.hint
        assert [r.id for r in await s.list_sessions()] == ["s1"]
        assert len(await s.read_events("s1")) == 2
    finally:
        await s.close()


async def test_a_new_database_another_connection_is_writing_is_opened_once_it_is_done(db_path: Path) -> None:
    """Switching a rollback-journal file to WAL is refused by SQLite at once, without its busy wait, while another
    connection holds the write lock (ten processes opening a new home at the same instant): the open waits for
    the lock like any other write instead of failing "database is locked"."""
    with raw(db_path) as other:
        other.execute("PRAGMA journal_mode = DELETE")
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE someone_elses (x)")

        async def release_later() -> None:
            await anyio.sleep(0.3)
            other.execute("COMMIT")

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_later)
            store = await SqliteEventStore.open(db_path, busy_timeout_ms=5000)
    try:
        assert await pragma(store, "journal_mode") == "wal"
        assert await pragma(store, "user_version") == len(MIGRATIONS)
    finally:
        await store.close()


def test_a_process_that_waited_while_another_migrated_takes_the_write_lock_once(tmp_path: Path) -> None:
    """A process that found an old schema, then waited for the write lock while another process migrated it all,
    takes the lock once and finds the work done (it used to take it once per migration: ten processes opening a
    new home queued ~100 acquisitions, and one starved past its busy timeout on a loaded machine)."""
    path = tmp_path / "strata.db"
    with closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as first, \
            closing(sqlite3.connect(path, isolation_level=None, check_same_thread=False)) as late:
        first.execute("PRAGMA journal_mode = WAL")
        late.execute("PRAGMA busy_timeout = 5000")
        begun: list[str] = []
        late.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
        first.execute("BEGIN IMMEDIATE")
        waiting = threading.Thread(target=migrate, args=(late, str(path), "2026-01-01T00:00:00Z"))
        waiting.start()
        time.sleep(0.3)  # the late process has read version 0 and waits for the lock
        first.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        for index, (name, step) in enumerate(MIGRATIONS):
            step(first)
            first.execute("INSERT INTO schema_migrations(name, applied_at) VALUES (?, 'then')", (name,))
            first.execute(f"PRAGMA user_version = {index + 1}")
        first.execute("COMMIT")
        waiting.join(10)
        assert not waiting.is_alive()
        assert begun == ["BEGIN IMMEDIATE"]
        assert late.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)
