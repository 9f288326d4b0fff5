"""A commit under a lease another process took is refused as LeaseGone (nothing of it kept) even when the late
writer's store still remembers the log heads of its own last writes, now behind the new holder's rows: its events
and timeline rows would take seqs the new holder already wrote. Two stores on one real SQLite file, as two
processes have (each remembers its own heads; only an acquire makes a store read them again)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.testing import T0
from agent.testing._store_conformance import alive, dead, events, holder, new_session, user
from core.clock import SteppingClock
from core.errors import LeaseGone
from core.timeline import TimelineEntry
from memory import SqliteEventStore, Write


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqliteEventStore, SqliteEventStore]]:
    """The late writer, holding tok-1 and having written under it, and the process that then took the lease
    (tok-2) and wrote an event and a timeline row."""
    late = await SqliteEventStore.open(tmp_path / "strata.db", clock=SteppingClock(start=T0))
    taker = await SqliteEventStore.open(tmp_path / "strata.db", clock=SteppingClock(start=T0))
    try:
        await new_session(late, "s1")
        await late.acquire_lease("s1", holder("tok-1"), alive, T0)
        mine = events(user("mine"), turn=1)
        mine.timeline = [TimelineEntry(kind="phase", turn=1, summary="mine")]
        mine.lease_token = "tok-1"
        await late.commit("s1", mine)
        await taker.acquire_lease("s1", holder("tok-2"), dead, T0)  # tok-1's owner was judged gone
        theirs = events(user("theirs"), turn=1)
        theirs.timeline = [TimelineEntry(kind="phase", turn=1, summary="theirs")]
        theirs.lease_token = "tok-2"
        await taker.commit("s1", theirs)
        yield late, taker
    finally:
        await late.close()
        await taker.close()


def _late(write: Write) -> Write:
    write.lease_token = "tok-1"
    return write


@pytest.mark.parametrize("what", ["events", "timeline rows"])
async def test_a_late_commit_with_stale_heads_is_refused_as_lease_gone(
        stores: tuple[SqliteEventStore, SqliteEventStore], what: str) -> None:
    late, taker = stores
    events_before = await taker.read_events("s1")
    rows_before = await taker.read_timeline("s1")
    write = (events(user("late"), turn=1) if what == "events"
             else Write(timeline=[TimelineEntry(kind="phase", turn=1, summary="late")]))
    with pytest.raises(LeaseGone):
        await late.commit("s1", _late(write))
    assert await taker.read_events("s1") == events_before
    assert await taker.read_timeline("s1") == rows_before
