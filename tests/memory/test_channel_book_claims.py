"""The channel book's thread claims, on the home's SQLite file and on PostgreSQL (where several daemons share one
book): a live holder keeps a thread, a released, dead or (on another host) expired one is taken over, renewing
says whether the claim is still held, and of two workers claiming at once exactly one wins. The book's other
promises hold on PostgreSQL as they do on SQLite (tests/memory/test_channel_book.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.clock import SystemClock
from memory.channel_book import BOOK_FILE, ChannelBook, IntakeRow
from memory.channel_book._sql import PostgresBookDb
from memory.leases import make_liveness, new_holder
from memory.rows import LeaseHolder
from tests._postgres import Cluster

CLOCK = SystemClock()
ALIVE = make_liveness(CLOCK)


def _migrated(url: str, home: Path) -> str:
    from memory.postgres import PostgresEventStore

    async def go() -> None:
        store = await PostgresEventStore.open(url, home=home)
        await store.close()

    asyncio.run(go())
    return url


def _pg_book(url: str) -> ChannelBook:
    db = PostgresBookDb.open(url)
    assert db is not None
    return ChannelBook(db, db.where)


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ChannelBook]]:
    """A function opening another connection to one fresh book."""
    if request.param == "sqlite":
        yield lambda: ChannelBook.open(tmp_path / BOOK_FILE)
    else:
        cluster: Cluster = request.getfixturevalue("postgres_cluster")
        url = _migrated(cluster.new_database(), tmp_path / "home")
        yield lambda: _pg_book(url)


def _foreign(token: str, *, expires_in_s: float) -> LeaseHolder:
    """A holder on another host: its pid cannot be checked from here, only its expiry."""
    return LeaseHolder(token=token, pid=1, host="another-host.example", expires_at=datetime.now(UTC)
                       + timedelta(seconds=expires_in_s))


def test_a_live_holder_keeps_the_thread_until_it_releases_it(opener: Callable[[], ChannelBook]) -> None:
    book = opener()
    me, other = new_holder("me", CLOCK), new_holder("other", CLOCK)
    assert book.claimed_by("team", "t1") is None
    assert book.claim("team", "t1", me, ALIVE)
    assert book.claim("team", "t1", me, ALIVE)  # claiming again is keeping it
    assert not book.claim("team", "t1", other, ALIVE)
    assert book.claim("team", "t2", other, ALIVE)  # another thread is another claim
    assert book.claimed_by("team", "t1") == "me"
    book.release_claim("team", "t1", "other")  # only the holder's token releases it
    assert not book.claim("team", "t1", other, ALIVE)
    book.release_claim("team", "t1", "me")
    assert book.claimed_by("team", "t1") is None
    assert book.claim("team", "t1", other, ALIVE)
    book.close()


def test_a_dead_holders_claim_is_taken_over_at_once_on_its_own_machine(opener: Callable[[], ChannelBook]) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = new_holder("dead", CLOCK).model_copy(update={"pid": int(gone.stdout), "proc_start": ""})
    book = opener()
    assert book.claim("team", "t1", dead, ALIVE)
    assert book.claim("team", "t1", new_holder("heir", CLOCK), ALIVE)  # unexpired, but its pid is gone
    assert book.claimed_by("team", "t1") == "heir"
    book.close()


def test_another_machines_claim_holds_until_it_expires_and_renewing_moves_that_on(
        opener: Callable[[], ChannelBook]) -> None:
    book = opener()
    assert book.claim("team", "t1", _foreign("far", expires_in_s=30), ALIVE)
    assert not book.claim("team", "t1", new_holder("near", CLOCK), ALIVE)
    assert book.renew_claim("team", "t1", "far", datetime.now(UTC) - timedelta(seconds=1))  # it lapsed
    assert not book.renew_claim("team", "t1", "near", datetime.now(UTC) + timedelta(seconds=60))
    assert book.claim("team", "t1", new_holder("near", CLOCK), ALIVE)
    assert not book.renew_claim("team", "t1", "far", datetime.now(UTC) + timedelta(seconds=60))  # it lost it
    book.close()


def test_of_two_workers_claiming_one_thread_at_once_exactly_one_wins(opener: Callable[[], ChannelBook]) -> None:
    books = [opener(), opener()]
    for round_ in range(25):
        thread = f"t{round_}"
        won: list[str] = []
        barrier = threading.Barrier(2)

        def claim(book: ChannelBook, token: str, thread: str = thread, barrier: threading.Barrier = barrier,
                  won: list[str] = won) -> None:
            barrier.wait()
            if book.claim("team", thread, new_holder(token, CLOCK), ALIVE):
                won.append(token)

        workers = [threading.Thread(target=claim, args=(b, f"w{i}")) for i, b in enumerate(books)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert len(won) == 1, (round_, won)
        assert books[0].claimed_by("team", thread) == won[0]
    for b in books:
        b.close()


def test_the_books_promises_hold_on_every_backend(opener: Callable[[], ChannelBook]) -> None:
    a, b = opener(), opener()
    assert a.bind("team", "t1", "s1") == "s1" and b.bind("team", "t1", "s2") == "s1"
    row = IntakeRow(channel="team", message_id="m1", thread_id="t1", session_id="s1", sender="x", rule="question",
                    reply_key="reply-m1")
    first = a.take_in(row)
    assert b.take_in(replace_row(row, session_id="elsewhere")) == first
    b.advance("team", "m1", "acked")
    a.advance("team", "m1", "replied")  # never back
    assert (found := a.intake("team", "m1")) is not None and found.status == "acked"
    t1 = a.add_task("team", "t1", "m1", "s1", "imperative")
    assert b.add_task("team", "t1", "m1", "s1", "imperative") == t1
    b.set_task_status(t1.id, "done")
    assert [(t.message_id, t.status) for t in a.tasks()] == [("m1", "done")]
    assert [(t.thread_id, t.session_id) for t in b.threads()] == [("t1", "s1")]
    a.close()
    b.close()


def replace_row(row: IntakeRow, **changes: str) -> IntakeRow:
    return row.model_copy(update=changes)
