"""Where a session can be forked, in the terms people see: timeline positions (the `seq` column of `strata
timeline`), turns, and event seqs.

A fork is taken after an event where no batch is open (agent/fork.py). The timeline rows and the events a commit
writes share its time, so a timeline position stands for every event committed up to and with it: position N
names the last event whose commit time is at most row N's. The points listed are the events after which no batch
is open and which end their commit (a point inside a commit has no position of its own; `--at-event` still names
it), each with its turn and the last call before it."""

from __future__ import annotations

from core.errors import InconsistentLog, UsageError
from core.events import CallResult, StoredEvent
from core.record import record
from core.state import FoldError, SessionState, apply
from core.timeline import TimelineRow


@record
class Walk:
    valid: list[int]
    """Seqs after which no batch is open: the points a fork may be taken at."""
    open_at: dict[int, tuple[str, int]]
    """Seq -> (batch id, seq it was proposed at) for seqs inside an open batch."""
    closed_at: dict[str, int]
    """Batch id -> seq of its batch_completed."""


def walk(session_id: str, events: list[StoredEvent]) -> Walk:
    state = SessionState()
    valid: list[int] = []
    open_at: dict[int, tuple[str, int]] = {}
    closed_at: dict[str, int] = {}
    for stored in events:
        before = state.open_batch
        try:
            apply(state, stored)
        except FoldError as exc:
            raise InconsistentLog(session_id, str(exc), hint="the log was left untouched; nothing was forked") from None
        batch = state.open_batch
        if batch is None:
            valid.append(stored.seq)
            if before is not None:
                closed_at[before.batch_id] = stored.seq
        else:
            open_at[stored.seq] = (batch.batch_id, batch.proposed_seq)
    return Walk(valid, open_at, closed_at)


@record
class ForkPoint:
    position: int
    """The timeline position (row seq) that names this point."""
    event_seq: int
    turn: int
    last_call: str | None
    """The last call before the point: `CALL_ID (TOOL) STATUS`; None when none came before it."""


def _last_call(events: list[StoredEvent], seq: int) -> str | None:
    for stored in reversed(events):
        ev = stored.event
        if stored.seq <= seq and isinstance(ev, CallResult):
            return f"{ev.call_id} ({ev.tool}) {ev.status}"
    return None


def event_at_position(session_id: str, events: list[StoredEvent], rows: list[TimelineRow], position: int) -> int:
    """The event seq timeline position `position` stands for (the last event committed up to it). A UsageError
    naming the nearest fork points when a batch is open there."""
    row = next((r for r in rows if r.seq == position), None)
    if row is None:
        last = rows[-1].seq if rows else 0
        raise UsageError(f"there is no timeline position {position}: the timeline has positions 1 to {last}",
                         hint="`strata fork ID --points` lists the positions a fork can be taken at")
    seq = max((e.seq for e in events if e.at <= row.at), default=0)
    if seq == 0:
        raise UsageError(f"timeline position {position} comes before the session's first event",
                         hint="`strata fork ID --points` lists the positions a fork can be taken at")
    if seq in walk(session_id, events).open_at:
        points = fork_points(session_id, events, rows)
        before = max((p.position for p in points if p.position < position), default=None)
        after = min((p.position for p in points if p.position > position), default=None)
        near = " and ".join(str(p) for p in (before, after) if p is not None) or "none"
        raise UsageError(f"cannot fork session {session_id} at timeline position {position}: a batch of calls is "
                         f"open there (event {seq}); the nearest fork points are positions {near}",
                         hint=f"`strata fork {session_id} --points` lists them with their turns and calls")
    return seq


def fork_points(session_id: str, events: list[StoredEvent], rows: list[TimelineRow]) -> list[ForkPoint]:
    """Every point a fork can be taken at that has a timeline position, oldest first."""
    valid = set(walk(session_id, events).valid)
    points = []
    for i, stored in enumerate(events):
        ends_commit = i + 1 == len(events) or events[i + 1].at != stored.at
        if stored.seq not in valid or not ends_commit:
            continue
        position = max((r.seq for r in rows if r.at <= stored.at), default=None)
        if position is None:
            continue
        points.append(ForkPoint(position, stored.seq, stored.turn, _last_call(events, stored.seq)))
    return points


def point_at_turn(session_id: str, events: list[StoredEvent], turn: int) -> int:
    """The event seq that ends turn `turn`: the last point where no batch is open whose event is of that turn or
    an earlier one. A turn that has not ended (its last event is inside an open batch: a call running in another
    process, or parked) is a UsageError naming the last point before it, never silently an earlier turn's end."""
    last_turn = events[-1].turn if events else 0
    if not 0 <= turn <= last_turn:
        raise UsageError(f"session {session_id} has turns 0 to {last_turn}, not {turn}",
                         hint=f"`strata fork {session_id} --points` lists the points a fork can be taken at")
    by_seq = {e.seq: e for e in events}
    walked = walk(session_id, events)
    candidates = [s for s in walked.valid if by_seq[s].turn <= turn]
    of_turn = [e.seq for e in events if e.turn == turn]
    if of_turn and of_turn[-1] in walked.open_at:  # the turn has not ended: a batch is running or parked in it
        earlier = max(candidates, default=None)
        instead = (f"; the last point before it is event {earlier} (turn {by_seq[earlier].turn})"
                   if earlier is not None else "")
        raise UsageError(f"cannot fork session {session_id} at the end of turn {turn}: the turn has not ended (a "
                         f"batch of calls is open at event {of_turn[-1]}, running or waiting for approval){instead}",
                         hint=f"`strata fork {session_id} --points` lists the points a fork can be taken at")
    if not candidates:
        raise UsageError(f"session {session_id} has no point to fork at by the end of turn {turn}",
                         hint=f"`strata fork {session_id} --points` lists the points a fork can be taken at")
    return max(candidates)
