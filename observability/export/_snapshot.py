"""A session as the exporters read it: the session row, the state log and its folded state, the timeline and the
receipts, read through the store in one place. Nothing here is masked yet: exporters mask what they write."""

from __future__ import annotations

from dataclasses import field

from core.chain import ChainKey
from core.errors import InconsistentLog, SessionNotFound
from core.events import AssistantMessage, BatchProposed, StoredEvent
from core.record import record
from core.state import FoldError, SessionState, fold
from core.timeline import TimelineRow, shown_rows
from memory.rows import Receipt, SessionRecord
from memory.store import EventStore
from observability.child_sessions import child_calls


@record
class SessionSnapshot:
    record: SessionRecord
    events: list[StoredEvent]
    """The state log in seq order."""
    state: SessionState
    """`fold(events)`: counters, messages, the open batch."""
    timeline: list[TimelineRow]
    """Observations in seq order, exactly as stored (summaries were masked when they were written)."""
    receipts: list[Receipt]
    """This session's effect receipts (a fork's copied results point at its parent's receipts, which stay there)."""
    ancestry: list[TimelineRow] = field(default_factory=list)
    """For a fork: what its parent (or an earlier ancestor) observed about the calls and model turns the fork
    copied, so they are drawn when they happened. These rows belong to the ancestors' timelines, not this one."""
    chain_key: ChainKey | None = None
    """The key the timeline is checked with (the store's); None: it cannot be checked here."""
    children: list[tuple[str, SessionSnapshot]] = field(default_factory=list)
    """The sessions this one delegated to, each with the call id of its delegate call (and their own children), so
    the HTML export nests a child's waterfall under that call."""

    @property
    def session_id(self) -> str:
        return self.record.id

    @property
    def unknown_receipts(self) -> int:
        return sum(1 for r in self.receipts if r.status == "unknown")


MAX_NESTED = 8
"""Delegation levels an export reads below the session (delegate_max_depth is at most 16, 2 by default)."""


SNAPSHOT_READS = 5
"""How often a session written to while it is read is read again before its export is taken as read."""


async def load_snapshot(store: EventStore, session_id: str, *, nested: int = MAX_NESTED) -> SessionSnapshot:
    """Read one session whole. SessionNotFound for an unknown id; a log `fold` rejects is a one-line error (an
    export of a corrupt log would describe a session that never was). The parts are read in several queries: a
    session committed to meanwhile (its head moved) is read again, so the state log, the timeline and the receipts
    describe one moment (a session still written to after `SNAPSHOT_READS` reads is exported as last read)."""
    for _ in range(SNAPSHOT_READS - 1):
        before = (await store.chain_record(session_id)).head
        snapshot = await _read(store, session_id, nested)
        if (await store.chain_record(session_id)).head == before:
            return snapshot
    return await _read(store, session_id, nested)


async def _read(store: EventStore, session_id: str, nested: int) -> SessionSnapshot:
    record = await store.get_session(session_id)
    events = await store.read_events(session_id)
    try:
        state = fold(events)
    except FoldError as exc:
        raise InconsistentLog(session_id, str(exc)) from None
    timeline = shown_rows(await store.read_timeline(session_id))
    receipts = await store.list_receipts(session_id)
    ancestry = await _ancestry(store, record, events)
    children: list[tuple[str, SessionSnapshot]] = []
    if nested > 0:
        for child, call_id in (await child_calls(store, session_id)).items():
            try:
                children.append((call_id, await load_snapshot(store, child, nested=nested - 1)))
            except SessionNotFound:  # the parent stopped after the receipt, before the child started
                continue
    return SessionSnapshot(record=record, events=events, state=state, timeline=timeline, receipts=receipts,
                           ancestry=ancestry, chain_key=store.chain_key, children=children)


async def _ancestry(store: EventStore, record: SessionRecord, events: list[StoredEvent]) -> list[TimelineRow]:
    """The ancestors' rows about the calls and model turns a fork copied, nearest ancestor first. A fork of a
    fork inherits from further up: each ancestor answers for what it ran itself."""
    if record.parent_id is None or record.fork_seq is None:
        return []
    calls: set[str] = set()
    turns: set[int] = set()
    for stored in events:
        if stored.seq > record.fork_seq:
            break
        if isinstance(stored.event, BatchProposed):
            calls.update(c.call_id for c in stored.event.calls)
            turns.add(stored.turn)
        elif isinstance(stored.event, AssistantMessage):
            turns.add(stored.turn)
    found: list[TimelineRow] = []
    ancestor: str | None = record.parent_id
    seen: set[str] = {record.id}
    while ancestor is not None and ancestor not in seen and (calls or turns):
        seen.add(ancestor)
        try:
            parent = await store.get_session(ancestor)
        except SessionNotFound:
            break
        rows = shown_rows(await store.read_timeline(ancestor))
        answered_calls = {r.call_id for r in rows if r.kind == "call" and r.call_id in calls}
        answered_turns = {r.turn for r in rows if r.kind == "model_attempt" and r.turn in turns}
        found += [r for r in rows if (r.call_id is not None and r.call_id in answered_calls)
                  or (r.kind == "model_attempt" and r.turn in answered_turns)]
        calls -= answered_calls
        turns -= answered_turns
        ancestor = parent.parent_id if parent.fork_seq is not None else None  # a delegated child's parent did
        # not run the child's calls
    return found
