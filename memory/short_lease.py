"""A session's lease held for a moment, waited out: `strata approve|deny`, `strata reconcile` and a probe hold it
for milliseconds while they record something, a process that drives the session for as long as it runs. Whatever
needs the lease (or needs it free) while another live process holds it tries again for up to SHORT_LEASE_S before
it calls the session running: the decision commands, reconcile, the daemon's turns and attaches, a delegate call
waiting for its child (agent/delegation.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from core.clock import Clock, SystemClock
from core.errors import SessionActive
from memory.leases import make_liveness
from memory.store import EventStore

SHORT_LEASE_S = 3.0
"""How long a lease another live process holds is waited for before the session is taken for running there: far
longer than a decision, a reconcile or a probe holds it (milliseconds, a few commits on a busy disk), far shorter
than a person waits for a refusal."""
POLL_S = 0.05
"""How often the lease is tried again meanwhile."""
WAITING_FOR_LEASE = "another process holds the session's lease; waiting a moment for it"
"""Logged once (info, so the log file has it) when a command, a turn or an attach waits for a lease another process
holds: what the pause was."""

T = TypeVar("T")


async def unless_held_long(attempt: Callable[[], Awaitable[T]], *,
                           waiting: Callable[[SessionActive], None] | None = None) -> T:
    """`attempt()`, tried again while it raises SessionActive (another live process holds the lease), for up to
    SHORT_LEASE_S; the last SessionActive once that is over (the holder is not recording a moment's decision: it
    runs the session). `attempt` must raise SessionActive before it changed anything. `waiting` is told the first
    time it waits (to log it). Each pause is an async sleep: the wait holds no other task of the process."""
    deadline = anyio.current_time() + SHORT_LEASE_S
    while True:
        try:
            return await attempt()
        except SessionActive as exc:
            if anyio.current_time() >= deadline:
                raise
            if waiting is not None:
                waiting(exc)
                waiting = None
            await anyio.sleep(POLL_S)


async def wait_for_momentary_lease(store: EventStore, session_id: str, *, clock: Clock | None = None,
                                   within: float = SHORT_LEASE_S) -> bool:
    """Whether the session's lease is free within `within` seconds: no holder, or a holder whose process is gone
    (memory/leases.py, the liveness taking a lease uses). False when a live holder still has it then. For a caller
    that needs the lease free rather than taking it itself (reconcile's check that the session is not running)."""
    alive = make_liveness(clock or SystemClock())
    deadline = anyio.current_time() + within
    while True:
        session = await store.get_session(session_id)
        if session.lease is None or not alive(session.lease):
            return True
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(POLL_S)
