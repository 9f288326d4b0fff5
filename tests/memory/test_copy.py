"""Copying a home's sessions between stores (memory/copy.py): SQLite to PostgreSQL and back, rows exactly as stored,
so every chain still verifies; a rerun after an interruption ends identical; a session that differs, or whose rows
do not verify under the home's key, is refused with nothing of it written."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.testing import T0
from core.blobs import Blob
from core.chain import EventChainVerifier
from core.clock import SteppingClock
from core.errors import PersistError, SessionNotFound
from core.events import (
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    BlobRef,
    CallResult,
    PlannedCall,
    SessionStarted,
    UserMessage,
)
from core.messages import TextBlock, ToolUseBlock
from core.processes import ProcessGroup
from core.timeline import TimelineEntry, verify_chain
from core.timeline_rows import receipt_entry
from memory import NewReceipt, ReceiptUpdate, SessionRecord, Snapshot, SqliteEventStore, Write
from memory.copy import copy_sessions, dump_session
from memory.postgres import PostgresEventStore
from memory.store import EventStore
from tests._postgres import Cluster

SESSIONS = 12


def _record(sid: str) -> SessionRecord:
    return SessionRecord(id=sid, created_at=T0, updated_at=T0, mode="headless", workspace="/ws", model="script:t",
                         status="idle", title=f"title of {sid}")


async def _fill(store: EventStore, sid: str, k: int) -> None:
    """A session as the runtime leaves one: prompts and answers, an effectful call with its receipt settled (and
    its process), a large output kept as a blob, timeline rows, a snapshot, a final status."""
    await store.create_session(_record(sid), Write(
        events=[(SessionStarted(session_id=sid, mode="headless", workspace="/ws", model="script:t", max_turns=9,
                                plan_digest="p"), 0), (UserMessage(text=f"prompt {k}"), 1)],
        timeline=[TimelineEntry(kind="lifecycle", summary=f"started {sid}")]))
    call = PlannedCall(call_id="c1", tool="bash", input={"command": f"echo {k}"}, input_sha256=f"{k:064x}")
    await store.commit(sid, Write(
        events=[(BatchProposed(batch_id="b1", calls=(call,), content=(ToolUseBlock(id="c1", name="bash",
                                                                                   input=call.input),)), 1)],
        new_receipts=[NewReceipt(id=f"{sid}-r1", call_id="c1", tool="bash", idempotency_key=f"{sid}:c1",
                                 args_sha256=f"{k:064x}", resource_keys=("shell:/ws",))],
        timeline=[receipt_entry(turn=1, call_id="c1", tool="bash", receipt_id=f"{sid}-r1",
                                transition="dispatched")]))
    data = f"output {k} ".encode() * 3000
    ref = BlobRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    await store.commit(sid, Write(
        events=[(CallResult(batch_id="b1", call_id="c1", tool="bash", status="ok", content="excerpt", is_error=False,
                            receipt_id=f"{sid}-r1", blob=ref), 1), (BatchCompleted(batch_id="b1"), 1),
                (AssistantMessage(content=(TextBlock(text=f"answer {k}"),)), 1)],
        blobs=[Blob(ref.sha256, data)],
        receipt_updates=[ReceiptUpdate(id=f"{sid}-r1", status="done", outcome_sha256="ab" * 32,
                                       process=ProcessGroup(pid=4242, pgid=4242, start="100", boot_id="boot",
                                                            pid_ns="ns", host="host-a"))],
        timeline=[receipt_entry(turn=1, call_id="c1", tool="bash", receipt_id=f"{sid}-r1", transition="done"),
                  TimelineEntry(kind="call", turn=1, call_id="c1", tool="bash", decision="allowed", outcome="ok",
                                summary=f"bash echo {k}", data={"n": k, "tags": ["a", "b"]})],
        snapshot=Snapshot(seq=3, version="v", data=f"state {k}".encode()), status="completed"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
async def sqlite(home: Path) -> AsyncIterator[SqliteEventStore]:
    store = await SqliteEventStore.open(home / "strata.db", clock=SteppingClock(start=T0))
    for k in range(SESSIONS):
        await _fill(store, f"s{k:02d}", k)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def postgres(postgres_cluster: Cluster, home: Path) -> AsyncIterator[PostgresEventStore]:
    store = await PostgresEventStore.open(postgres_cluster.new_database(), home=home)
    try:
        yield store
    finally:
        await store.close()


async def _dumps(store: EventStore) -> list[object]:
    return [await dump_session(store, r.id) for r in await store.list_sessions()]


def _verifies(store: EventStore, dump: object) -> bool:
    from memory.copy import SessionDump

    assert isinstance(dump, SessionDump) and store.chain_key is not None
    verifier = EventChainVerifier(store.chain_key)
    for row in dump.events:
        verifier.feed(row)
    return verifier.result().ok and verify_chain(dump.timeline, store.chain_key).ok


async def test_sqlite_to_postgres_and_back_keeps_every_row_and_every_chain(sqlite: SqliteEventStore,
                                                                           postgres: PostgresEventStore,
                                                                           home: Path) -> None:
    report = await copy_sessions(sqlite, postgres)
    assert (len(report.copied), report.already) == (SESSIONS, [])
    original = await _dumps(sqlite)
    assert await _dumps(postgres) == original
    assert all(_verifies(postgres, d) for d in original)
    assert [r.head for r in [await postgres.chain_record(f"s{k:02d}") for k in range(SESSIONS)]] == \
        [r.head for r in [await sqlite.chain_record(f"s{k:02d}") for k in range(SESSIONS)]]

    # The copy's home holds the same chain key (the key travels with the home, never in a database).
    (home / "copy").mkdir(mode=0o700)
    key = home / "copy" / "chain.key"
    key.write_bytes((home / "chain.key").read_bytes())
    key.chmod(0o600)
    back = await SqliteEventStore.open(home / "copy" / "strata.db")
    try:
        await copy_sessions(postgres, back)
        assert await _dumps(back) == original
        assert all(_verifies(back, d) for d in original)
        # The copy is a store like any other: it takes the next commit on the chain it was given.
        await back.commit("s00", Write(events=[(UserMessage(text="after the move"), 2)]))
        assert _verifies(back, await dump_session(back, "s00"))
    finally:
        await back.close()


async def test_a_copy_run_again_after_an_interruption_ends_identical(sqlite: SqliteEventStore,
                                                                     postgres: PostgresEventStore) -> None:
    for k in range(4):  # the first run stopped after four sessions
        await postgres.load_session(await dump_session(sqlite, f"s{k:02d}"))
    report = await copy_sessions(sqlite, postgres)
    assert report.already == [f"s{k:02d}" for k in range(4)]
    assert report.copied == [f"s{k:02d}" for k in range(4, SESSIONS)]
    assert await _dumps(postgres) == await _dumps(sqlite)
    again = await copy_sessions(sqlite, postgres)
    assert (again.copied, len(again.already)) == ([], SESSIONS)


async def test_a_session_that_differs_in_the_target_stops_the_copy_naming_it(sqlite: SqliteEventStore,
                                                                             postgres: PostgresEventStore) -> None:
    await postgres.create_session(_record("s03"), Write(events=[(UserMessage(text="another history"), 0)]))
    with pytest.raises(PersistError, match=r"session s03 exists in .* and differs"):
        await copy_sessions(sqlite, postgres)
    # Every session is checked before any is written: the sessions before s03 were not copied either.
    assert [r.id for r in await postgres.list_sessions()] == ["s03"]
    assert [e.event for e in await postgres.read_events("s03")] == [UserMessage(text="another history")]


async def test_rows_that_do_not_verify_under_the_target_home_key_are_not_copied(
        sqlite: SqliteEventStore, postgres_cluster: Cluster, tmp_path: Path) -> None:
    """Copied into a database bound to another home's key, no session's rows would verify there: the copy stops
    before any is read, saying the keys differ (not that a session was changed), and nothing is written."""
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    target = await PostgresEventStore.open(postgres_cluster.new_database(), home=other_home)
    try:
        with pytest.raises(PersistError, match=r"its chain key \(key [0-9a-f]+\) is not this home's"):
            await copy_sessions(sqlite, target)
        assert await target.list_sessions() == []
        with pytest.raises(SessionNotFound):
            await target.get_session("s00")
    finally:
        await target.close()
