"""What the PostgreSQL store promises beyond the conformance suite: the database itself keeps the logs
append-only, two stores (two workers) writing one session keep one chain, and a bad URL or another home's key is
one clear error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import psycopg
import pytest

from agent.testing import T0
from config.chain_key import load_chain_key
from core.chain import EventChainVerifier
from core.clock import SteppingClock
from core.errors import PersistError, StoreError
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry, verify_chain
from memory import SessionRecord, Write
from memory.postgres import PostgresEventStore, redact
from tests._postgres import Cluster


def _record(session_id: str) -> SessionRecord:
    return SessionRecord(id=session_id, created_at=T0, updated_at=T0, mode="headless", workspace="/ws",
                         model="script:test", status="idle")


def _started(session_id: str) -> SessionStarted:
    return SessionStarted(session_id=session_id, mode="headless", workspace="/ws", model="script:test",
                          max_turns=10, plan_digest="plan-1")


@pytest.fixture
def database(postgres_cluster: Cluster) -> Iterator[str]:
    with postgres_cluster.database() as url:
        yield url


@pytest.fixture
async def store(database: str, tmp_path: Path) -> AsyncIterator[PostgresEventStore]:
    s = await PostgresEventStore.open(database, home=tmp_path / "home", clock=SteppingClock(start=T0))
    try:
        yield s
    finally:
        await s.close()


@pytest.mark.parametrize("statement", [
    "UPDATE events SET payload = '{}'",
    "DELETE FROM events",
    "UPDATE timeline SET summary = 'edited'",
    "DELETE FROM timeline",
    "TRUNCATE events CASCADE",
    "TRUNCATE timeline",
])
async def test_the_database_refuses_to_change_a_stored_event_or_timeline_row(store: PostgresEventStore, database: str,
                                                                            statement: str) -> None:
    await store.create_session(_record("s1"), Write(events=[(_started("s1"), 0), (UserMessage(text="hi"), 1)],
                                                    timeline=[TimelineEntry(kind="lifecycle", summary="started")]))
    with psycopg.connect(database, autocommit=True) as conn, pytest.raises(psycopg.Error, match="append-only"):
        conn.execute(statement)
    assert [e.seq for e in await store.read_events("s1")] == [1, 2]
    assert [r.summary for r in await store.read_timeline("s1")] == ["started"]


async def test_two_stores_writing_one_session_at_once_keep_one_chain(store: PostgresEventStore, database: str,
                                                                    tmp_path: Path) -> None:
    """Two store objects on one database (as two workers on two machines) commit to one session at the same time:
    the session row's lock orders them, so seqs run 1..n without a gap or a repeat and both chains verify."""
    await store.create_session(_record("s1"), Write(events=[(_started("s1"), 0)]))
    other = await PostgresEventStore.open(database, home=tmp_path / "home", clock=SteppingClock(start=T0))
    try:
        async def write(s: PostgresEventStore, tag: str) -> None:
            for k in range(25):
                await s.commit("s1", Write(events=[(UserMessage(text=f"{tag}{k}"), 1)],
                                           timeline=[TimelineEntry(kind="phase", summary=f"{tag}{k}")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, store, "a")
            tg.start_soon(write, other, "b")
    finally:
        await other.close()
    assert [e.seq for e in await store.read_events("s1")] == list(range(1, 52))
    key = store.chain_key
    assert key is not None
    verifier = EventChainVerifier(key)
    for row in await store.read_event_chain("s1"):
        assert verifier.feed(row)
    assert verifier.result().ok
    rows = await store.read_timeline("s1")
    assert [r.seq for r in rows] == list(range(1, 51))
    assert verify_chain(rows, key).ok
    head = (await store.chain_record("s1")).head
    assert head is not None and (head.events_seq, head.timeline_seq) == (51, 50)


async def test_an_unreachable_server_is_one_store_error_that_hides_the_password(tmp_path: Path) -> None:
    with socket_closed_port() as port:
        url = f"postgresql://strata:s3cret-pw@127.0.0.1:{port}/nowhere"
        with pytest.raises(StoreError) as info:
            await PostgresEventStore.open(url, home=tmp_path / "home", connect_timeout_s=2)
    message = str(info.value)
    assert "s3cret-pw" not in message and "\n" not in message
    assert message.startswith(f"cannot connect to postgresql://strata@127.0.0.1:{port}/nowhere")
    assert redact(url) == f"postgresql://strata@127.0.0.1:{port}/nowhere"


async def test_a_home_with_another_chain_key_reads_but_cannot_write(store: PostgresEventStore, database: str,
                                                                   tmp_path: Path) -> None:
    await store.create_session(_record("s1"), Write(events=[(_started("s1"), 0)]))
    (tmp_path / "another-home").mkdir()
    assert load_chain_key(tmp_path / "another-home", create=True) is not None  # a home with a key of its own
    stranger = await PostgresEventStore.open(database, home=tmp_path / "another-home")
    try:
        assert stranger.chain_key is None
        assert stranger.chain_problem is not None and "is not the key this database was chained with" in \
            stranger.chain_problem
        assert [e.seq for e in await stranger.read_events("s1")] == [1]
        with pytest.raises(PersistError, match="cannot write"):
            await stranger.commit("s1", Write(events=[(UserMessage(text="no"), 1)]))
    finally:
        await stranger.close()
    assert [e.seq for e in await store.read_events("s1")] == [1]


async def test_a_second_open_finds_the_schema_in_place(store: PostgresEventStore, database: str,
                                                       tmp_path: Path) -> None:
    again = await PostgresEventStore.open(database, home=tmp_path / "home")
    await again.close()
    with psycopg.connect(database, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM strata_schema ORDER BY name").fetchall()]
    assert names == ["001_initial", "002_channel_book", "003_proposals_without_calls"]


class socket_closed_port:
    """A loopback port nothing listens on, for the test's length."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        port: int = self._sock.getsockname()[1]
        return port

    def __exit__(self, *_: object) -> None:
        self._sock.close()
