"""Fork: a new session whose state log is another's up to a batch boundary, to try a different continuation
from there.

The copy is the parent's events 1..SEQ, each with its turn, committed in one transaction with the new session
row (parent id and fork seq) and a `forked` timeline row. Only the first event changes: `SessionStarted` names the
new session and its parent (the source), because the session id in the log is the one the loop writes to and
derives idempotency keys from; a fork of a delegated child names no parent's call (it is not that call's child)
but keeps the child's depth and narrowed tools. Event times are those of the fork's commit.

Effects before the fork point are never re-armed: SEQ must be a point where no batch is open, so every call in
the copy has its result and nothing is pending; the copied results stay as they were; receipts stay with the
parent (the fork has none until it runs something new). Resuming the fork continues from SEQ. The fork holds what
the copied log holds, its session rules and the "always" approvals a person gave (each named when it is made: a
call they cover runs in the fork without asking)."""

from __future__ import annotations

from agent.fork_points import Walk, walk
from agent.session import Runtime
from core.errors import StrataError, UsageError
from core.events import BatchProposed, CallResult, SessionStarted, StoredEvent
from core.record import record
from core.state import SessionState, apply
from core.timeline import TimelineEntry
from core.vocabulary import SessionStatus
from memory.rows import SessionRecord, Write


@record
class ForkResult:
    session_id: str
    parent_id: str
    fork_seq: int
    events: int
    turns: int
    """Assistant turns in the copied log: the scripted model continues the fork at this turn."""
    status: SessionStatus
    workspace: str = ""
    rules: tuple[str, ...] = ()
    """The session rules the fork inherits, as `allow bash (flag)`."""
    grants: tuple[str, ...] = ()
    """The "always" approvals of the copied log, as `bash(git *) by APPROVER`: they hold in the fork too, so its
    calls they cover run without asking."""
    later_calls: tuple[str, ...] = ()
    """The parent's calls after the fork point, as `CALL_ID (TOOL)` (`, no result yet` when running or parked):
    resuming the fork may propose them again."""


def _not_a_boundary(session_id: str, at_seq: int, walk: Walk) -> UsageError:
    batch_id, proposed = walk.open_at[at_seq]
    before = max((s for s in walk.valid if s < at_seq), default=None)
    after = min((s for s in walk.valid if s > at_seq), default=None)
    closed = walk.closed_at.get(batch_id)
    where = f"closed at seq {closed}" if closed is not None else "still open"
    options = [f"seq {s}" for s in (before, after) if s is not None]
    return UsageError(
        f"cannot fork session {session_id} at seq {at_seq}: batch {batch_id} is open there (proposed at seq "
        f"{proposed}, {where}); the nearest batch boundaries are {' and '.join(options)}",
        hint=f"fork at a batch boundary, e.g. `strata fork {session_id} --at-event "
             f"{after if after is not None else before}` (`--points` lists them by timeline position)")


def _later_calls(events: list[StoredEvent], at_seq: int) -> tuple[str, ...]:
    """The parent's calls proposed after `at_seq` and not denied, as `CALL_ID (TOOL)`; one without a result yet
    (running now, or parked for a decision) says so: it may still run in the parent."""
    results = {e.event.call_id: e.event.status for e in events
               if e.seq > at_seq and isinstance(e.event, CallResult)}
    return tuple(f"{c.call_id} ({c.tool}{', no result yet' if c.call_id not in results else ''})"
                 for e in events if e.seq > at_seq and isinstance(e.event, BatchProposed)
                 for c in e.event.calls if results.get(c.call_id) != "denied")


async def fork_session(rt: Runtime, source_id: str, at_seq: int) -> ForkResult:
    """Copy `source_id`'s log up to `at_seq` into a new session. SessionNotFound for an unknown id, UsageError
    for a seq outside the log or inside an open batch (naming the nearest boundaries); nothing is written then."""
    source = await rt.store.get_session(source_id)
    events = await rt.store.read_events(source_id)
    if not events:
        raise StrataError(f"session {source_id} has no events to fork")
    last = events[-1].seq
    if not 1 <= at_seq <= last:
        raise UsageError(f"cannot fork session {source_id} at seq {at_seq}: its log has seqs 1 to {last}",
                         hint=f"`strata fork {source_id} --points` lists the points a fork can be taken at")
    walked = walk(source_id, events)
    if at_seq in walked.open_at:
        raise _not_a_boundary(source_id, at_seq, walked)
    prefix = [e for e in events if e.seq <= at_seq]
    first = prefix[0].event
    assert isinstance(first, SessionStarted)  # fold checked it
    new_id = rt.ids.session_id()
    state = SessionState()
    for stored in prefix:
        apply(state, stored)
    status: SessionStatus = state.ended if state.ended is not None else "idle"
    now = rt.clock.now()
    record = SessionRecord(id=new_id, created_at=now, updated_at=now, mode=state.mode, workspace=state.workspace,
                           model=state.model, title=source.title, parent_id=source_id, fork_seq=at_seq,
                           status=status)
    # A fork is its own session, not a child of the call that delegated to its source: it names the session it
    # was forked from, no parent's call. It keeps its source's depth and narrowed tools (what bounds its plan), so
    # it never gets more than the session it continues (a child at delegate_max_depth gets no `delegate`).
    started = first.model_copy(update={"session_id": new_id, "parent_id": source_id, "parent_call_id": None})
    copied = [(started, prefix[0].turn)] + [(e.event, e.turn) for e in prefix[1:]]
    summary = (f"forked from session {source_id} at seq {at_seq} ({len(prefix)} events, {state.turn} turns); "
               "effects before the fork point are not re-run")
    row = TimelineEntry(kind="lifecycle", turn=state.turn, outcome="forked", summary=rt.masker.mask(summary),
                        data={"parent_id": source_id, "fork_seq": at_seq, "events": len(prefix),
                              "parent_last_seq": last})
    await rt.store.create_session(record, Write(events=copied, timeline=[row]))
    if rt.ledgers is not None:  # the new session's rows are covered by a head in its ledger from the start
        await rt.ledgers.note_commit(new_id, rt.store.chain_head(new_id))
    later = _later_calls(events, at_seq)
    rules = tuple(f"{r.action} {r.text()} ({r.source})" for r in state.rules)
    grants = tuple(f"{g.tool}{f'({g.pattern})' if g.pattern is not None else ''} by {g.approver}"
                   for g in state.grants)
    return ForkResult(session_id=new_id, parent_id=source_id, fork_seq=at_seq, events=len(prefix),
                      turns=state.turn, status=status, workspace=state.workspace, rules=rules, grants=grants,
                      later_calls=later)
