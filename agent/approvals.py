"""Decisions on parked calls, recorded from any terminal (`strata approve` / `strata deny`).

The decision is appended to the session's log under the session lease (so it never races a running session),
bound to the argument sha256 and plan digest the call was parked with. `strata resume` then runs the call if,
and only if, it still has exactly those arguments under that plan."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from agent.session import Runtime
from core.errors import UsageError
from core.events import ApprovalGranted, ApprovalRejected, ParkedCall
from core.state import SessionState
from core.timeline import TimelineEntry
from memory import Write
from memory.leases import make_liveness, new_holder, resting_status
from memory.restore import restore_or_report


@dataclass(frozen=True)
class Recorded:
    call: ParkedCall
    approved: bool
    still_waiting: tuple[str, ...]
    """Parked calls of the session that have no decision yet."""


async def record_decision(rt: Runtime, session_id: str, call_id: str, *, approve: bool, approver: str,
                          reason: str = "") -> Recorded:
    before = (await rt.store.get_session(session_id)).status
    holder = new_holder(rt.ids.uuid7(), rt.clock)
    await rt.store.acquire_lease(session_id, holder, make_liveness(rt.clock), rt.clock.now())
    recorded = False
    state: SessionState | None = None
    try:
        state = (await restore_or_report(rt.store, session_id)).state
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
        if approve:
            event: ApprovalGranted | ApprovalRejected = ApprovalGranted(
                call_id=call_id, tool=parked.tool, args_sha256=parked.input_sha256, plan_digest=parked.plan_digest,
                approver=approver, scope="once", asked_by=parked.asked_by)
        else:
            event = ApprovalRejected(call_id=call_id, tool=parked.tool, args_sha256=parked.input_sha256,
                                     approver=approver, reason=reason)
        waiting_ids = tuple(c for c in state.parked if c != call_id and c not in state.approvals)
        said = f"{'approved' if approve else 'denied'} by {approver}" + (f": {reason}" if reason else "")
        row = TimelineEntry(kind="approval", turn=state.turn, call_id=call_id, tool=parked.tool,
                            decision="approved" if approve else "rejected", check=approver,
                            outcome="recorded", summary=rt.masker.mask(said),
                            data={"args_sha256": parked.input_sha256, "plan_digest": parked.plan_digest})
        await rt.store.commit(session_id, Write(events=[(event, state.turn)], timeline=[row],
                                                status="awaiting_approval" if waiting_ids else "idle"))
        recorded = True
        return Recorded(parked, approve, waiting_ids)
    finally:
        with anyio.CancelScope(shield=True):  # nothing recorded: the session's status stays what it was
            await rt.store.release_lease(session_id, holder.token, None if recorded else resting_status(state, before))
