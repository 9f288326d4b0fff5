"""Whether a lease's holder still runs (memory/leases.py says when its pid can tell): the check a reading command
makes to show an `active` session whose driver is gone as `interrupted`. It takes any holder with the lease's
fields, the store's LeaseHolder or the quick read's (memory/quick_read.py)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from core.clock import Clock
from core.errors import LeaseOwner
from core.process_facts import boot_id, is_zombie, pid_namespace, process_start


class Holder(LeaseOwner, Protocol):
    """A lease holder with its expiry (memory/rows.py LeaseHolder)."""

    @property
    def expires_at(self) -> datetime: ...


_given_up: set[str] = set()


def given_up(token: str) -> None:
    """This process let go of the lease `token` but could not write that down (its release failed: the database
    locked past the busy timeout, a full disk). The row still names this process, which runs on, so without this
    the session would look driven, to this very process too, for as long as it lives: a daemon's thread session
    was refused to the daemon itself for good. Its liveness checks take that lease as free from now on."""
    _given_up.add(token)


def make_liveness(clock: Clock) -> Callable[[Holder], bool]:
    host, boot, namespace = socket.gethostname(), boot_id(), pid_namespace()

    def alive(holder: Holder) -> bool:
        if _given_up and getattr(holder, "token", None) in _given_up:
            return False  # this process's own lease, let go of (`given_up`)
        # A row written before boots and namespaces were recorded has '' there: its pid is checked as before.
        if holder.host != host or (holder.boot_id or boot) != boot or (holder.pid_ns or namespace) != namespace:
            return holder.expires_at > clock.now()  # its pid cannot be checked from here
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        if holder.proc_start and process_start(holder.pid) not in ("", holder.proc_start):
            return False  # the pid was recycled by another process
        return not is_zombie(holder.pid)

    return alive


def held_here(holder: LeaseOwner) -> bool:
    """The holder is this very process (its pid, on this host, in this boot and PID namespace, with this process's
    start time: the same pid alone may be a recycled one's)."""
    pid = os.getpid()
    return (holder.pid == pid and holder.host == socket.gethostname()
            and (holder.boot_id or boot_id()) == boot_id() and (holder.pid_ns or pid_namespace()) == pid_namespace()
            and holder.proc_start in ("", process_start(pid)))
