"""Waiting out a session lease held for a moment. A command that changes a session it does not drive (a decision on
a parked call, a reconcile, a probe) takes the session's lease for milliseconds (memory/_leased.py); a second such
command meeting that lease waits for it instead of calling the session running. A lease held longer than
SHORT_LEASE_S is a running session's, and the caller refuses as it would have. Used by agent/parked_decisions.py
(`strata approve|deny`) and agent/reconcile.py (`strata reconcile`); it imports only the store's layer, so any
surface (agent/daemon included) may use it."""

from __future__ import annotations

import anyio

from core.clock import Clock, SystemClock
from memory.leases import make_liveness
from memory.store import EventStore

SHORT_LEASE_S = 3.0
"""How long a command waits for a session's lease to be released before it calls the session running: another
decision, a reconcile or a probe holds it for milliseconds, a running session for as long as it runs."""

POLL_S = 0.05
"""How often the lease is looked at while waiting."""


async def wait_for_momentary_lease(store: EventStore, session_id: str, *, clock: Clock | None = None,
                                   within: float = SHORT_LEASE_S) -> bool:
    """Whether the session's lease is free within `within` seconds: no holder, or a holder whose process is gone
    (memory/leases.py, the liveness taking a lease uses). False when a live holder still has it then."""
    alive = make_liveness(clock or SystemClock())
    deadline = anyio.current_time() + within
    while True:
        session = await store.get_session(session_id)
        if session.lease is None or not alive(session.lease):
            return True
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(POLL_S)
