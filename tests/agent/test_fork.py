"""Fork in-process (agent/fork.py) on the in-memory store and on SQLite: the copy, the rewritten first event, the
boundary check, and a fork of a fork whose export still draws each inherited call when it really ran."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.fork import fork_session
from agent.session import Runtime
from core.errors import SessionNotFound, UsageError
from core.events import SessionStarted
from core.ids import IdFactory
from core.state import fold
from memory import EventStore, SqliteEventStore, Write
from observability.export import build_trace, load_snapshot
from tests.observability._export_session import SID, build_session, masker


@pytest.fixture(params=["memory", "sqlite"])
async def runtime(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Runtime, list[int]]]:
    """A runtime over the hand-built session (copied into SQLite for the second store), and its boundaries."""
    built = await build_session()
    store: EventStore = built.store
    if request.param == "sqlite":
        store = await SqliteEventStore.open(tmp_path / "strata.db", clock=built.clock)
        source = built.store
        record = await source.get_session(SID)
        events = await source.read_events(SID)
        await store.create_session(record, Write(events=[(e.event, e.turn) for e in events]))
    rt = Runtime(store=store, clock=built.clock, ids=IdFactory(built.clock), tools=[], masker=masker())
    try:
        yield rt, built.boundary_seqs
    finally:
        await store.close()


async def test_fork_copies_the_prefix_and_names_itself(runtime: tuple[Runtime, list[int]]) -> None:
    """Events 1..SEQ with their turns; SessionStarted names the new session and its parent; the parent keeps its
    log; the fork folds to the parent's state at SEQ."""
    rt, boundaries = runtime
    at = boundaries[0]
    parent_events = await rt.store.read_events(SID)
    result = await fork_session(rt, SID, at)
    events = await rt.store.read_events(result.session_id)
    assert [(e.seq, e.turn) for e in events] == [(e.seq, e.turn) for e in parent_events[:at]]
    assert [e.event for e in events[1:]] == [e.event for e in parent_events[1:at]]
    first = events[0].event
    assert isinstance(first, SessionStarted)
    assert (first.session_id, first.parent_id) == (result.session_id, SID)
    assert await rt.store.read_events(SID) == parent_events
    parent_state, state = fold(parent_events[:at]), fold(events)
    assert state.messages == parent_state.messages and state.counters == parent_state.counters
    assert state.session_id == result.session_id and state.open_batch is None
    record = await rt.store.get_session(result.session_id)
    assert (record.parent_id, record.fork_seq, record.status, record.lease) == (SID, at, "idle", None)
    assert await rt.store.list_receipts(result.session_id) == []
    (row,) = await rt.store.read_timeline(result.session_id)
    assert (row.kind, row.outcome, row.data["fork_seq"]) == ("lifecycle", "forked", at)


async def test_only_batch_boundaries_can_be_forked(runtime: tuple[Runtime, list[int]]) -> None:
    """Inside an open batch (also one still open at the end of the log) the error names the nearest
    boundaries; past the end the error names the range; an unknown id is SessionNotFound."""
    rt, (first, second) = runtime
    inside = rf"seq {first + 1}: .*\(proposed at seq {first + 1}, closed at seq {second}\); "
    with pytest.raises(UsageError, match=inside + rf"the nearest batch boundaries are seq {first} and seq {second}"):
        await fork_session(rt, SID, first + 1)
    last = (await rt.store.read_events(SID))[-1].seq
    with pytest.raises(UsageError, match=r"still open\); the nearest batch boundaries are seq \d+$"):
        await fork_session(rt, SID, last)
    with pytest.raises(UsageError, match=f"seqs 1 to {last}"):
        await fork_session(rt, SID, last + 1)
    with pytest.raises(SessionNotFound):
        await fork_session(rt, "nope", 1)
    assert [s.id for s in await rt.store.list_sessions()] == [SID]


async def test_a_fork_of_a_fork_draws_inherited_calls_when_they_ran() -> None:
    """A fork's export places copied calls by its ancestors' rows (its own log's times are the fork's), and
    marks them inherited."""
    built = await build_session()
    rt = Runtime(store=built.store, clock=built.clock, ids=IdFactory(built.clock), tools=[], masker=masker())
    built.clock.advance(hours=1)
    child = await fork_session(rt, SID, built.boundary_seqs[1])
    built.clock.advance(hours=1)
    grandchild = await fork_session(rt, child.session_id, built.boundary_seqs[0])
    parent_trace = build_trace(await load_snapshot(rt.store, SID), masker())
    original = {c.call_id: c for c in parent_trace.calls}
    snapshot = await load_snapshot(rt.store, grandchild.session_id)
    trace = build_trace(snapshot, masker())
    assert [c.call_id for c in trace.calls] == ["c1", "c2", "c3"]
    for c in trace.calls:
        assert c.inherited
        assert (c.start, c.end) == (original[c.call_id].start, original[c.call_id].end)
    assert [m.outcome for m in trace.turns[0].model_calls] == ["retry", "ok"]
    assert trace.turns[0].start == parent_trace.turns[0].start < snapshot.record.created_at
    assert [m.what for m in trace.markers] == ["forked"]
    assert {r.session_id for r in snapshot.ancestry} == {SID}
