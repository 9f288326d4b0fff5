"""Decisions on parked calls, recorded from any terminal (`strata approve` / `strata deny`).

The decision is appended to the session's log under the session lease (so it never races a running session),
bound to the argument sha256 and plan digest the call was parked with. `strata resume` then runs the call if,
and only if, it still has exactly those arguments under that plan."""

from __future__ import annotations

from dataclasses import dataclass

from agent.session import Runtime
from core.errors import UsageError
from core.events import ParkedCall
from memory import Write, leased
from tool_executor import recorded_decision


@dataclass(frozen=True)
class Recorded:
    call: ParkedCall
    approved: bool
    still_waiting: tuple[str, ...]
    """Parked calls of the session that have no decision yet."""


async def record_decision(rt: Runtime, session_id: str, call_id: str, *, approve: bool, approver: str,
                          reason: str = "") -> Recorded:
    async with leased(rt, session_id) as lease:
        state = lease.state
        assert state is not None
        parked = state.parked.get(call_id)
        if parked is None:
            waiting = ", ".join(state.parked) or "none"
            raise UsageError(f"call {call_id} of session {session_id} is not waiting for approval",
                             hint=f"calls waiting for approval: {waiting} (see `strata show {session_id}`)")
        started = [r for r in await rt.store.list_receipts(session_id) if r.call_id == call_id]
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
        event, row = recorded_decision(parked, approve=approve, approver=approver, reason=reason, turn=state.turn,
                                       mask=rt.masker.mask)
        waiting_ids = tuple(c for c in state.parked if c != call_id and c not in state.approvals)
        await rt.store.commit(session_id, Write(events=[(event, state.turn)], timeline=[row.entry()],
                                                status="awaiting_approval" if waiting_ids else "idle"))
        lease.keep_status()  # the commit set it
        return Recorded(parked, approve, waiting_ids)
