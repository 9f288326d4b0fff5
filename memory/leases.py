"""Session leases: one process drives a session at a time. A holder is identified by a random token plus its
pid, host and process start time (so a recycled pid is not mistaken for the owner). A lease whose owner runs on
this host is live while that process runs; on another host, until it expires unrenewed."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path

from core.clock import Clock
from core.state import SessionState
from memory.records import LeaseHolder, SessionStatus

LEASE_TTL = timedelta(seconds=60)


def process_start(pid: int) -> str:
    """The kernel's start time of `pid` (clock ticks since boot), or '' where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else ""


def new_holder(token: str, clock: Clock) -> LeaseHolder:
    pid = os.getpid()
    return LeaseHolder(token=token, pid=pid, host=socket.gethostname(), proc_start=process_start(pid),
                       expires_at=clock.now() + LEASE_TTL)


def make_liveness(clock: Clock):
    host = socket.gethostname()

    def alive(holder: LeaseHolder) -> bool:
        if holder.host != host:
            return holder.expires_at > clock.now()
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        if holder.proc_start and process_start(holder.pid) not in ("", holder.proc_start):
            return False  # the pid was recycled by another process
        return not _is_zombie(holder.pid)

    return alive


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].startswith("Z")


def describe(holder: LeaseHolder) -> str:
    return f"pid {holder.pid} on {holder.host}"


def resting_status(state: SessionState | None, before: SessionStatus) -> SessionStatus:
    """The status to leave a session in when a command that took its lease recorded nothing: derived from the
    state folded under the lease (a status read before taking it may be stale: another process may have run the
    session in between). A crashed session (`active`, its owner gone) stays as it was."""
    if state is None or before == "active":
        return before
    if any(c not in state.approvals for c in state.parked):
        return "awaiting_approval"
    return state.ended or "idle"
