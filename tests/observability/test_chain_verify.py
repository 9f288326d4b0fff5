"""observability/chain_verify.py against a real SQLite file: both chains and both recorded heads agree on an
untouched session; a session written to while it is checked is not reported (one written to during every read
of its receipts says they were not compared); a ledger that lags is a note, one
that leads (the tail is gone) a truncation; a head of the wrong kind is named."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from datetime import datetime
from pathlib import Path

import pytest

from core.chain import ChainHead
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineDecision, TimelineEntry, TimelineRow
from memory import SqliteEventStore, Write
from memory.rows import Receipt, ReceiptStatus
from observability.chain_verify import RECEIPT_READS, verify_chains
from tests.memory._sqlite import raw, record


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "strata.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[SqliteEventStore]:
    s = await SqliteEventStore.open(db_path)
    try:
        yield s
    finally:
        await s.close()


def first(session_id: str) -> Write:
    return Write(events=[(SessionStarted(session_id=session_id, mode="headless", workspace="/ws",
                                         model="script:test", max_turns=5, plan_digest="p"), 0)],
                 timeline=[TimelineEntry(kind="lifecycle", summary="started")])


def turn(text: str) -> Write:
    return Write(events=[(UserMessage(text=text), 1)], timeline=[TimelineEntry(kind="phase", summary=text)])


async def _session(store: SqliteEventStore, commits: int = 4) -> ChainHead:
    await store.create_session(record("s1"), first("s1"))
    for i in range(commits):
        await store.commit("s1", turn(f"t{i}"))
    head = store.chain_head("s1")
    assert head is not None
    return head


async def test_an_untouched_session_verifies_with_both_heads(store: SqliteEventStore) -> None:
    """Both chains verify, the session row's head and the ledger's are the last rows: verified, no notes."""
    head = await _session(store)
    report = await verify_chains(store, "s1", head)
    assert (report.ok, report.problems, report.notes) == (True, (), ())
    assert report.session_head == report.ledger_head == head
    assert report.timeline is not None and report.timeline.last_seq == head.timeline_seq == 5
    assert report.events is not None and report.events.last_seq == head.events_seq == 5


async def test_a_lagging_ledger_is_a_note_and_a_leading_one_a_truncation(store: SqliteEventStore) -> None:
    """The ledger is written after commits: an older head is a note. A head past the chain's end means the tail
    is gone."""
    await store.create_session(record("s1"), first("s1"))
    await store.commit("s1", turn("a"))
    older = store.chain_head("s1")
    await store.commit("s1", turn("b"))
    head = store.chain_head("s1")
    assert older is not None and head is not None
    lagging = await verify_chains(store, "s1", older)
    assert lagging.ok and any("lags" in note for note in lagging.notes)
    ahead = head.model_copy(update={"timeline_seq": head.timeline_seq + 2, "events_seq": head.events_seq + 1})
    leading = await verify_chains(store, "s1", ahead)
    assert not leading.ok
    assert leading.problems[0] == ("timeline of session s1: truncated: the evidence ledger's last head names row 5, "
                                   "but the chain ends at row 3 (rows 4-5 removed)")


async def test_a_ledger_head_with_another_hash_is_a_rewrite(store: SqliteEventStore) -> None:
    """The row the ledger names exists but holds another hash: the rows were replaced (or the head edited)."""
    head = await _session(store)
    forged = head.model_copy(update={"events_hash": "e" * 64})
    report = await verify_chains(store, "s1", forged)
    assert not report.ok
    assert report.problems == ("state log of session s1: the evidence ledger's last head names event 5 with "
                               "another hash than the stored one (the rows were replaced, or the head was edited)",)


async def test_a_session_written_while_it_is_checked_is_not_reported(db_path: Path) -> None:
    """Each read is its own snapshot: rows committed between reading the head and reading the chains are not a
    finding, only a note."""

    class Busy(SqliteEventStore):
        wrote = False

        async def read_timeline(self, session_id: str, *, kinds: Collection[str] | None = None,
                                tools: Collection[str] | None = None,
                                decisions: Collection[TimelineDecision] | None = None, turn: int | None = None,
                                since_seq: int | None = None, since_at: datetime | None = None,
                                limit: int | None = None) -> list[TimelineRow]:
            if not self.wrote:
                self.wrote = True
                await self.commit(session_id, Write(events=[(UserMessage(text="meanwhile"), 2)],
                                                    timeline=[TimelineEntry(kind="phase", summary="meanwhile")]))
            return await super().read_timeline(session_id, kinds=kinds, tools=tools, decisions=decisions,
                                                turn=turn, since_seq=since_seq, since_at=since_at, limit=limit)

    store = await Busy.open(db_path)
    try:
        await _session(store)
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
        assert any("written to while it was checked" in note for note in report.notes)
        assert report.timeline is not None and report.timeline.last_seq == 6
    finally:
        await store.close()


async def test_a_session_written_during_every_read_says_its_receipts_were_not_compared(db_path: Path) -> None:
    """A session written to between every read of its receipts and its head: the receipts table is read again a
    bounded number of times (RECEIPT_READS), and then the report says it was not compared, rather than skipping
    the comparison silently. The chains still verify, as far as they were read."""

    class Busy(SqliteEventStore):
        reads = 0

        async def list_receipts(self, session_id: str | None = None,
                                status: ReceiptStatus | None = None) -> list[Receipt]:
            self.reads += 1
            assert session_id is not None
            await self.commit(session_id, turn(f"meanwhile {self.reads}"))
            return await super().list_receipts(session_id, status)

    store = await Busy.open(db_path)
    try:
        await _session(store)
        report = await verify_chains(store, "s1", None)
        assert report.ok, report.problems
        assert store.reads == RECEIPT_READS + 1
        assert (f"the receipts table was not compared with the timeline: the session was written to during each "
                f"of {RECEIPT_READS + 1} reads of both; check again once it is idle") in report.notes, report.notes
    finally:
        await store.close()


async def test_a_session_row_head_behind_the_chain_is_named(store: SqliteEventStore, db_path: Path) -> None:
    """A head moved back inside the database (the chain goes on past it) is a finding, not a lagging note."""
    await _session(store)
    with raw(db_path) as conn:
        conn.execute("UPDATE sessions SET head_events_seq = 3, head_events_hash = "
                     "(SELECT lower(hex(hash)) FROM events WHERE seq = 3) WHERE id = 's1'")
    report = await verify_chains(store, "s1", None)
    assert not report.ok
    assert report.problems[0].startswith("state log of session s1: the chain goes on past the session row's head "
                                         "(event 3; it ends at event 5)")
