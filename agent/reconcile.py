"""Reconciliation by a person: decide an uncertain effect. Only `unknown` receipts, or `dispatched` ones whose
session owner is dead (a crash not yet resumed), can be reconciled. The runtime never re-runs the call."""

from __future__ import annotations

import getpass
import os
import socket

from core.clock import Clock
from core.errors import ReceiptError
from memory.leases import make_liveness
from memory.records import Receipt, ReceiptUpdate
from memory.store import EventStore


def person() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    tty = os.ttyname(0) if os.isatty(0) else "no-tty"
    return f"person:{user}@{socket.gethostname()} ({tty}) via strata reconcile"


async def reconcile(store: EventStore, clock: Clock, receipt_id: str, *, applied: bool, note: str | None,
                    by: str) -> tuple[Receipt, Receipt]:
    before = await store.get_receipt(receipt_id)
    if before.status == "dispatched":
        session = await store.get_session(before.session_id)
        if session.lease is not None and make_liveness(clock)(session.lease):
            raise ReceiptError(
                f"receipt {receipt_id} belongs to session {before.session_id}, which is running now; the call may "
                "still be in flight", receipt_id=receipt_id, hint="wait for the session to stop, then reconcile")
    elif before.status != "unknown":
        raise ReceiptError(f"receipt {receipt_id} is {before.status}, not unknown: nothing to reconcile",
                           receipt_id=receipt_id)
    after = await store.update_receipt(ReceiptUpdate(
        id=receipt_id, status="done" if applied else "failed", expect=("unknown", "dispatched"),
        note=note or ("applied" if applied else "not applied"), reconciled_by=by))
    return before, after
