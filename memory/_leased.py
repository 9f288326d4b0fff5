"""`leased(rt, session_id)`: the one way a command that is not the session's driver changes a session (records an
approval, reconciles or probes a receipt) and the way a resume takes it over: under the session's lease, so it
never races a process that drives the session (or another such command), with the state folded under the lease.

    async with leased(rt, session_id) as lease:     # SessionActive if a live process holds the lease
        ... lease.state ...                         # folded after the lease was taken
        await rt.store.commit(session_id, Write(...))
        lease.keep_status()                         # the commit set the status; leave it
    # released (shielded); the status is the resting one derived from lease.state, unless kept or set

`rt` is anything with a `store` and a `clock` (agent/session.py's Runtime). A driver that keeps the lease beyond
the block (a resume, whose LiveSession renews it) calls `lease.hand_over()`: then the block does not release it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from core.clock import Clock
from core.state import SessionState
from core.vocabulary import SessionStatus
from memory.leases import make_liveness, new_holder, release, resting_status
from memory.restore import restore_or_report
from memory.rows import LeaseHolder
from memory.store import EventStore


class HasStore(Protocol):
    @property
    def store(self) -> EventStore: ...

    @property
    def clock(self) -> Clock: ...


_UNSET = object()


@dataclass
class Lease:
    """A session's lease, held by this block: its holder, the status the session had before, and its state."""

    session_id: str
    holder: LeaseHolder
    before: SessionStatus
    state: SessionState | None = None
    _status: SessionStatus | object | None = field(default=_UNSET, repr=False)
    _handed_over: bool = field(default=False, repr=False)

    def keep_status(self) -> None:
        """Release without setting a status: a commit made under the lease set it."""
        self._status = None

    def set_status(self, status: SessionStatus) -> None:
        self._status = status

    def hand_over(self) -> None:
        """The lease outlives the block (its new owner renews and releases it)."""
        self._handed_over = True

    def release_status(self) -> SessionStatus | None:
        if self._status is _UNSET:
            return resting_status(self.state, self.before)
        return self._status  # type: ignore[return-value]


@asynccontextmanager
async def leased(rt: HasStore, session_id: str, *, token: str | None = None) -> AsyncIterator[Lease]:
    """Hold `session_id`'s lease for the block (SessionActive if a live process holds it; SessionNotFound for an
    unknown id), with the state restored under it. Released when the block ends, also on error or cancellation,
    in a status derived from that state unless the block said otherwise."""
    store, clock = rt.store, rt.clock
    before = (await store.get_session(session_id)).status
    holder = new_holder(token or f"lease-{os.urandom(8).hex()}", clock)
    await store.acquire_lease(session_id, holder, make_liveness(clock), clock.now())
    lease = Lease(session_id, holder, before)
    try:
        lease.state = (await restore_or_report(store, session_id)).state
        yield lease
    finally:
        if not lease._handed_over:
            with anyio.CancelScope(shield=True):
                await release(store, session_id, holder.token, lease.release_status())
