"""Session leases: one process drives a session at a time. A holder is identified by a random token (renewed by
its heartbeat, and the only thing that releases or renews the lease) plus its pid, host, process start time, boot
and PID namespace. Whether a holder is alive is decided by its pid only where that pid means the same process: on
this host, in this boot and in this PID namespace (and with the same start time, so a recycled pid is not
mistaken for the owner). Anywhere else (another host, another boot with the same host name, another PID
namespace, where the pid may be nobody's or someone else's) the lease is live until it expires unrenewed."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from core.clock import Clock
from core.errors import StoreError
from core.processes import boot_id, pid_namespace, process_start
from core.state import SessionState
from core.vocabulary import SessionStatus
from memory.liveness import given_up, make_liveness
from memory.rows import LeaseHolder
from memory.store import EventStore

LEASE_TTL = timedelta(seconds=60)

__all__ = ["LEASE_TTL", "describe", "make_liveness", "new_holder", "process_start", "release", "resting_status"]


def new_holder(token: str, clock: Clock) -> LeaseHolder:
    pid = os.getpid()
    return LeaseHolder(token=token, pid=pid, host=socket.gethostname(), proc_start=process_start(pid),
                       boot_id=boot_id(), pid_ns=pid_namespace(), expires_at=clock.now() + LEASE_TTL)


async def release(store: EventStore, session_id: str, token: str, status: SessionStatus | None) -> None:
    """Release the lease `token` of `session_id`. When that cannot be written (StoreError: the database locked past
    the busy timeout, a full disk), this process gives the lease up all the same (memory/liveness.py `given_up`),
    so that it can take the session again once the database can be written; the error is raised."""
    try:
        await store.release_lease(session_id, token, status)
    except StoreError:
        given_up(token)
        raise


def describe(holder: LeaseHolder) -> str:
    where = " (in another PID namespace)" if (holder.pid_ns or pid_namespace()) != pid_namespace() else ""
    return f"pid {holder.pid} on {holder.host}{where}"


def resting_status(state: SessionState | None, before: SessionStatus) -> SessionStatus:
    """The status to leave a session in when a command that took its lease recorded nothing: derived from the
    state folded under the lease (a status read before taking it may be stale: another process may have run the
    session in between). A crashed session (`active`, its owner gone) stays as it was, and so does one awaiting
    approval whose open batch is still open (a parent whose delegate call waits for its child's decision)."""
    if state is None or before == "active":
        return before
    if any(c not in state.approvals for c in state.parked):
        return "awaiting_approval"
    if before == "awaiting_approval" and state.open_batch is not None:
        # A call of the open batch waits for a decision elsewhere (a delegated child's parked call, its receipt
        # `dispatched`): only the status says so, the fold holds no parked call for it. It waits until resumed.
        return before
    return state.ended or "idle"
