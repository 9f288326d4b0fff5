"""SessionWriter.stage_timeline: observations are never a barrier; they ride with the next commit, in the same
transaction as its events, and cost no commit of their own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.clock import SteppingClock
from core.errors import PersistError
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry, verify_chain
from memory import InMemoryEventStore, NewReceipt, SessionRecord, Write
from memory.session_writer import SessionWriter

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def writer(store: InMemoryEventStore) -> SessionWriter:
    started = SessionStarted(session_id="s1", mode="headless", workspace="/ws", model="script:t", max_turns=5,
                             plan_digest="p")
    await store.create_session(SessionRecord(id="s1", created_at=T0, updated_at=T0, mode="headless",
                                             workspace="/ws", model="script:t", status="idle"),
                               Write(events=[(started, 0)]))
    return SessionWriter(store, "s1")


async def test_staged_rows_are_no_barrier_and_ride_with_the_next_commit() -> None:
    """ensure_durable() does not commit for timeline rows alone; the next flush stores them with its events."""
    store = InMemoryEventStore(clock=SteppingClock(start=T0))
    w = await writer(store)
    before = store.commits
    w.stage_timeline(TimelineEntry(kind="phase", summary="plan"))
    w.stage_timeline(TimelineEntry(kind="call", call_id="c1", tool="read_file", decision="allowed"))
    assert (w.dirty, w.has_barrier) == (False, False)  # rows alone never cost a commit of their own
    await w.ensure_durable()
    assert store.commits == before
    assert await store.read_timeline("s1") == []
    stored = await w.commit(UserMessage(text="next"), 1)
    assert store.commits == before + 1
    rows = await store.read_timeline("s1")
    assert [(r.seq, r.kind) for r in rows] == [(1, "phase"), (2, "call")]
    assert {r.at for r in rows} == {stored[0].at}
    assert verify_chain(rows, store.chain_key).ok
    assert not w.dirty


async def test_staged_rows_ride_with_a_barrier_commit() -> None:
    """Rows staged before a receipt go out in the barrier's commit: still one commit."""
    store = InMemoryEventStore(clock=SteppingClock(start=T0))
    w = await writer(store)
    w.stage_timeline(TimelineEntry(kind="receipt", call_id="c1", summary="dispatched"))
    w.stage_receipt(NewReceipt(id="r1", call_id="c1", tool="bash", idempotency_key="s1:k1", args_sha256="a"))
    before = store.commits
    await w.ensure_durable()
    assert store.commits == before + 1
    assert [r.summary for r in await store.read_timeline("s1")] == ["dispatched"]


async def test_rows_of_a_failed_flush_are_dropped_with_it() -> None:
    """A commit that fails takes its staged rows with it: nothing is stored and nothing stays staged."""
    store = InMemoryEventStore(clock=SteppingClock(start=T0), fail_on_commit=lambda sid, write: bool(write.timeline))
    w = await writer(store)
    w.stage_timeline(TimelineEntry(kind="phase"))
    with pytest.raises(PersistError):
        await w.flush()
    assert await store.read_timeline("s1") == []
    assert not w.dirty
