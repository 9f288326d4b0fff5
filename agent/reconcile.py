"""Reconciliation: decide an uncertain effect, by a person or by a tool's probe. Only `unknown` receipts, or
`dispatched` ones whose session owner is dead (a crash not yet resumed), can be reconciled. The runtime never
re-runs the call."""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from core.clock import Clock
from core.errors import ReceiptError
from core.events import BatchProposed, PlannedCall
from core.hashing import sha256_json
from core.state import SessionState
from core.tools import ToolContext, ToolSpec
from memory.leases import make_liveness, new_holder, resting_status
from memory.records import Receipt, ReceiptUpdate
from memory.restore import restore_or_report
from memory.store import EventStore
from tool_executor.middleware import normalise_paths


def person(via: str = "strata reconcile") -> str:
    """Who is deciding: user, host and terminal, and the command they used."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    tty = os.ttyname(0) if os.isatty(0) else "no-tty"
    return f"person:{user}@{socket.gethostname()} ({tty}) via {via}"


async def reconcile(store: EventStore, clock: Clock, receipt_id: str, *, applied: bool, note: str | None,
                    by: str) -> tuple[Receipt, Receipt]:
    before = await store.get_receipt(receipt_id)
    update = ReceiptUpdate(id=receipt_id, status="done" if applied else "failed", expect=("unknown", "dispatched"),
                           note=note or ("applied" if applied else "not applied"), reconciled_by=by)
    if before.status == "unknown":
        return before, await store.update_receipt(update)
    if before.status != "dispatched":
        raise ReceiptError(f"receipt {receipt_id} is {before.status}, not unknown: nothing to reconcile",
                           receipt_id=receipt_id)
    # A dispatched receipt is one a resume would settle: decide it under the session's lease, so that a resume
    # starting meanwhile is refused as active (or refuses this), instead of the two changing it at once.
    session = await store.get_session(before.session_id)
    if session.lease is not None and make_liveness(clock)(session.lease):
        raise ReceiptError(
            f"receipt {receipt_id} belongs to session {before.session_id}, which is running now; the call may "
            "still be in flight", receipt_id=receipt_id, hint="wait for the session to stop, then reconcile")
    holder = new_holder(f"reconcile-{os.urandom(8).hex()}", clock)
    await store.acquire_lease(before.session_id, holder, make_liveness(clock), clock.now())
    state: SessionState | None = None
    try:
        state = (await restore_or_report(store, before.session_id)).state
        return before, await store.update_receipt(update)
    finally:
        with anyio.CancelScope(shield=True):  # a receipt is not the session's log: its status stays as it is
            await store.release_lease(before.session_id, holder.token, resting_status(state, session.status))


@dataclass(frozen=True)
class ProbeOutcome:
    receipt: Receipt
    verdict: str
    """applied, not_applied, undecided, or skipped (no probe, running session, arguments not found)."""
    note: str
    after: Receipt | None = None


def _effective_args(call: PlannedCall, receipt: Receipt, spec: ToolSpec, workspace: Path) -> dict[str, Any] | None:
    """The arguments the receipt was written for: the proposal as given or after path normalisation. A call a
    hook rewrote into something else is not guessed at."""
    candidates: list[dict[str, Any]] = [dict(call.input)]
    rewrite = normalise_paths(spec, call.input, workspace)
    if rewrite is not None:
        candidates.append(dict(rewrite.input))
    return next((c for c in candidates if sha256_json(c) == receipt.args_sha256), None)


async def probe_receipts(store: EventStore, clock: Clock, tools: Sequence[ToolSpec],
                         session_id: str | None = None) -> list[ProbeOutcome]:
    """Run each tool's probe over unknown receipts (and dispatched ones whose session owner is dead). A decided
    probe reconciles the receipt as `probe:<tool>`; the call itself is never run again."""
    specs = {t.name: t for t in tools}
    alive = make_liveness(clock)
    candidates = [r for r in await store.list_receipts(session_id) if r.status in ("unknown", "dispatched")]
    outcomes: list[ProbeOutcome] = []
    calls: dict[str, dict[str, PlannedCall]] = {}
    for receipt in candidates:
        session = await store.get_session(receipt.session_id)
        if receipt.status == "dispatched" and session.lease is not None and alive(session.lease):
            outcomes.append(ProbeOutcome(receipt, "skipped", "its session is running; the call may be in flight"))
            continue
        spec = specs.get(receipt.tool)
        if spec is None or spec.probe is None:
            outcomes.append(ProbeOutcome(receipt, "skipped", f"{receipt.tool} has no probe; reconcile it by hand"))
            continue
        if receipt.session_id not in calls:
            calls[receipt.session_id] = {c.call_id: c for item in await store.read_events(receipt.session_id)
                                         if isinstance(item.event, BatchProposed) for c in item.event.calls}
        call = calls[receipt.session_id].get(receipt.call_id)
        workspace = Path(session.workspace)
        args = _effective_args(call, receipt, spec, workspace) if call is not None else None
        if args is None:
            outcomes.append(ProbeOutcome(receipt, "skipped", "the call's arguments were rewritten by a hook; "
                                                             "reconcile it by hand"))
            continue
        ctx = ToolContext(session_id=receipt.session_id, mode=session.mode, model=session.model, turn=0,
                          call_id=receipt.call_id, workspace=workspace, idempotency_key=receipt.idempotency_key,
                          deadline_s=spec.timeout_s)
        try:
            result = await spec.probe(args, ctx)
        except Exception as exc:  # a probe is read-only; its failure decides nothing
            outcomes.append(ProbeOutcome(receipt, "undecided", f"the probe failed: {type(exc).__name__}: {exc}"))
            continue
        if result.verdict == "undecided":
            outcomes.append(ProbeOutcome(receipt, "undecided", result.note))
            continue
        after = await store.update_receipt(ReceiptUpdate(
            id=receipt.id, status="done" if result.verdict == "applied" else "failed",
            expect=("unknown", "dispatched"), note=f"probe: {result.note}", reconciled_by=f"probe:{receipt.tool}"))
        outcomes.append(ProbeOutcome(receipt, result.verdict, result.note, after))
    return outcomes
