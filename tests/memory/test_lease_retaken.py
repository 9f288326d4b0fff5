"""A long-lived store (the serve daemon's, one writer connection for every session it hosts) gives a session's
lease up and takes it again later, while another process wrote the session in between (`strata approve` records a
decision under the lease; `strata resume` runs a turn). What the store remembers of the session's log heads is its
own writes' only: taking the lease again must continue the log after the other process's events."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from core.clock import SteppingClock
from core.events import SessionStarted, UserMessage
from core.timeline import TimelineEntry
from memory import LeaseHolder, SqliteEventStore, Write
from observability.chain_verify import verify_chains
from tests.memory._sqlite import T0, record


def _holder(token: str) -> LeaseHolder:
    return LeaseHolder(token=token, pid=1, host="h", expires_at=T0 + timedelta(hours=1))


def _said(text: str, turn: int) -> Write:
    return Write(events=[(UserMessage(text=text), turn)],
                 timeline=[TimelineEntry(kind="lifecycle", outcome="noted", summary=text)])


async def test_a_store_that_takes_a_lease_again_continues_after_another_process_wrote_the_session(
        store: SqliteEventStore, db_path: Path) -> None:
    """Store A writes and lets the lease go; store B (another process) takes it, appends an event and a timeline
    row, lets it go; A takes it again and commits: its events follow B's (no collision with B's seq), and both
    hash chains verify."""
    start = SessionStarted(session_id="s1", mode="ipc", workspace="/ws", model="script:test", max_turns=5,
                           plan_digest="p")
    await store.create_session(record("s1"), Write(events=[(start, 0)]))
    await store.acquire_lease("s1", _holder("a"), lambda _: False, T0)
    await store.commit("s1", _said("from the daemon", 1))
    await store.release_lease("s1", "a", None)

    other = await SqliteEventStore.open(db_path, clock=SteppingClock(start=T0 + timedelta(minutes=1)))
    try:
        await other.acquire_lease("s1", _holder("b"), lambda _: False, T0)
        await other.commit("s1", _said("from another process", 1))
        await other.release_lease("s1", "b", None)
    finally:
        await other.close()

    await store.acquire_lease("s1", _holder("a2"), lambda _: False, T0)
    await store.commit("s1", _said("from the daemon again", 2))
    events = await store.read_events("s1")
    assert [(e.seq, getattr(e.event, "text", None)) for e in events] == [
        (1, None), (2, "from the daemon"), (3, "from another process"), (4, "from the daemon again")]
    report = await verify_chains(store, "s1", None)
    assert report.verdict == "verified", report.problems
