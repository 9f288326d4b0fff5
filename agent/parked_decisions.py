"""Decisions on parked calls, recorded from any terminal (`strata approve` / `strata deny`).

The decision is appended to the session's log under the session lease (so it never races a running session),
bound to the argument sha256 and plan digest the call was parked with. `strata resume` then runs the call if,
and only if, it still has exactly those arguments under that plan."""

from __future__ import annotations

from collections.abc import Sequence

from agent.ids import match_call
from agent.session import Runtime
from core.errors import UsageError
from core.events import Event, ParkedCall
from core.record import record
from core.state import SessionState
from memory import Write, leased
from memory.rows import Receipt
from memory.short_lease import unless_held_long
from tool_executor import recorded_decision


@record
class Recorded:
    call: ParkedCall
    approved: bool
    still_waiting: tuple[str, ...]
    """Parked calls of the session that have no decision yet."""


def waiting(state: SessionState) -> tuple[str, ...]:
    """The parked calls of a session that have no decision yet, in the order they were parked."""
    return tuple(c for c in state.parked if c not in state.approvals)


async def record_decision(rt: Runtime, session_id: str, call_id: str, *, approve: bool, approver: str,
                          reason: str = "") -> Recorded:
    """Decide one parked call (`call_id` exact or a unique prefix of at least 8 characters)."""
    (rec,) = await record_decisions(rt, session_id, [call_id], approve=approve, approver=approver, reason=reason)
    return rec


async def record_decisions(rt: Runtime, session_id: str, call_ids: Sequence[str] | None, *, approve: bool,
                           approver: str, reason: str = "") -> list[Recorded]:
    """Decide the parked calls named (None: every call still waiting) in one commit under the session lease.
    Nothing is recorded when one of them cannot be decided (a UsageError says why). A lease held for a moment (by
    another person's decision on another call, a reconcile, a probe) is waited for, up to SHORT_LEASE_S; one held
    longer is a running session (SessionActive)."""
    return await unless_held_long(  # SessionActive is raised before anything was recorded: the lease was not ours
        lambda: _record(rt, session_id, call_ids, approve=approve, approver=approver, reason=reason))


async def _record(rt: Runtime, session_id: str, call_ids: Sequence[str] | None, *, approve: bool, approver: str,
                  reason: str) -> list[Recorded]:
    async with leased(rt, session_id) as lease:
        state = lease.state
        assert state is not None
        if call_ids is None:
            call_ids = waiting(state)
            if not call_ids:
                raise UsageError(f"session {session_id} has no call waiting for a decision",
                                 hint=f"`strata show {session_id}` shows where it stands")
        for ref in call_ids:
            if match_call(list(state.parked), ref, session_id=session_id) is None:
                await _refuse_if_decided_already(rt, session_id, ref)
        receipts = await rt.store.list_receipts(session_id)
        chosen = [_decidable(state, session_id, ref, receipts) for ref in call_ids]
        events: list[tuple[Event, int]] = []
        rows = []
        for parked in chosen:
            event, row = recorded_decision(parked, approve=approve, approver=approver, reason=reason,
                                           turn=state.turn, mask=rt.masker.mask)
            events.append((event, state.turn))
            rows.append(row.entry())
        decided = {p.call_id for p in chosen}
        waiting_ids = tuple(c for c in waiting(state) if c not in decided)
        await rt.store.commit(session_id, Write(events=events, timeline=rows,
                                                status="awaiting_approval" if waiting_ids else "idle",
                                                lease_token=lease.holder.token))  # refused if taken over
        lease.keep_status()  # the commit set it
        if rt.ledgers is not None:  # its rows are covered by the ledger's head, as the loop's commits are
            await rt.ledgers.note_commit(session_id, rt.store.chain_head(session_id))
        return [Recorded(p, approve, waiting_ids) for p in chosen]


async def _refuse_if_decided_already(rt: Runtime, session_id: str, call_id: str) -> None:
    """A call that waits no more because someone decided it first (another terminal, the daemon's driving client)
    and it was acted on: the loser of that race is told who decided and how, not only that nothing waits."""
    rows = await rt.store.read_timeline(session_id, kinds=["approval"], decisions=["approved", "rejected"])
    earlier = next((r for r in reversed(rows) if r.call_id == call_id), None)
    if earlier is None:
        return
    said = "approved" if earlier.decision == "approved" else "denied"
    raise UsageError(f"call {call_id} of session {session_id} was already {said} by {earlier.check} and is no "
                     "longer waiting; a recorded decision is not changed",
                     hint=f"`strata timeline {session_id}` shows what came of it")


def _decidable(state: SessionState, session_id: str, ref: str, receipts: Sequence[Receipt]) -> ParkedCall:
    """The parked call `ref` names, if a decision can still change it; a UsageError saying why not otherwise."""
    call_id = match_call(list(state.parked), ref, session_id=session_id)
    parked = state.parked.get(call_id) if call_id is not None else None
    if parked is None or call_id is None:
        left = waiting(state)
        return_hint = (f"calls waiting for approval: {', '.join(left)} (`strata approve {session_id} --all` "
                       "approves them all)" if left else f"no call is waiting (see `strata show {session_id}`)")
        raise UsageError(f"call {ref} of session {session_id} is not waiting for approval", hint=return_hint)
    started = [r for r in receipts if r.call_id == call_id]
    if started:  # approved earlier and started by a resume that stopped: a decision can change nothing now
        r = started[0]
        raise UsageError(f"call {call_id} of session {session_id} has already started (receipt {r.id} is "
                         f"{r.status}); a decision can no longer change it",
                         hint=f"decide its outcome with `strata reconcile {r.id} --applied|--not-applied`, "
                              f"then `strata resume {session_id}`" if r.status in ("dispatched", "unknown")
                         else f"`strata resume {session_id}` settles it from its receipt")
    earlier = state.approvals.get(call_id)
    if earlier is not None:  # one person was told their decision holds: a second one does not overwrite it
        said = "approved" if earlier.decision == "approved" else "denied"
        raise UsageError(f"call {call_id} of session {session_id} was already {said} by {earlier.approver}; "
                         "a recorded decision is not changed",
                         hint=f"`strata resume {session_id}` acts on it")
    return parked
