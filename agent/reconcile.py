"""Reconciliation: decide an uncertain effect, by a person or by a tool's probe. Only `unknown` receipts, or
`dispatched` ones whose session owner is dead (a crash not yet resumed), can be reconciled. The runtime never
re-runs the call."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from core.clock import Clock
from core.errors import ReceiptError, SessionActive
from core.events import BatchProposed, Mode, PlannedCall
from core.hashing import sha256_json
from core.masking import Masker
from core.record import record
from core.tools import ToolContext, ToolSpec
from memory import Lease, Write, leased
from memory.rows import Receipt
from memory.short_lease import wait_for_momentary_lease
from memory.store import EventStore
from tool_executor import receipt_row, reconciliation
from tool_executor.middleware import normalise_paths

if TYPE_CHECKING:
    from agent.evidence_ledger import Ledgers


def person(via: str = "strata reconcile") -> str:
    """Who is deciding: user, host and terminal, and the command they used."""
    import getpass  # only when a person decides: kept off the start of `strata resume`

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    tty = os.ttyname(0) if os.isatty(0) else "no-tty"
    return f"person:{user}@{socket.gethostname()} ({tty}) via {via}"


class _Runtime(Protocol):
    """What reconciling needs of agent/session.py's Runtime."""

    @property
    def store(self) -> EventStore: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def masker(self) -> Masker: ...

    @property
    def ledgers(self) -> Ledgers | None: ...


async def _refuse_if_running(rt: _Runtime, receipt: Receipt) -> None:
    """Refused while the session runs; a lease held for a moment (another reconcile, a probe, a decision) is waited
    out (memory/short_lease.py)."""
    if not await wait_for_momentary_lease(rt.store, receipt.session_id, clock=rt.clock):
        raise ReceiptError(
            f"receipt {receipt.id} belongs to session {receipt.session_id}, which is running now; the call "
            "may still be in flight", receipt_id=receipt.id, hint="wait for the session to stop, then reconcile")


async def _decide(rt: _Runtime, lease: Lease, receipt: Receipt, *, applied: bool, note: str | None,
                  by: str) -> Receipt:
    """Commit the reconciliation of `receipt` (its updates and their receipt rows) under `lease`."""
    updates, changes = reconciliation(receipt, applied=applied, note=note, by=by)
    turn = lease.state.turn if lease.state is not None else 0
    rows = [receipt_row(c, turn=turn, call_id=receipt.call_id, tool=receipt.tool, masker=rt.masker).entry()
            for c in changes]
    await rt.store.commit(receipt.session_id, Write(receipt_updates=updates, timeline=rows,
                                                    lease_token=lease.holder.token))  # refused if taken over
    if rt.ledgers is not None:  # its rows are covered by the ledger's head, as the loop's commits are
        await rt.ledgers.note_commit(receipt.session_id, rt.store.chain_head(receipt.session_id))
    return await rt.store.get_receipt(receipt.id)


async def reconcile(rt: _Runtime, receipt_id: str, *, applied: bool, note: str | None,
                    by: str) -> tuple[Receipt, Receipt]:
    """Decide an `unknown` receipt (or a `dispatched` one whose session's process is gone) by hand, under the
    session's lease, so that a resume starting meanwhile is refused as active (or refuses this), instead of the
    two changing it at once. Each transition is a receipt row on the session's timeline."""
    before = await rt.store.get_receipt(receipt_id)
    if before.status not in ("unknown", "dispatched"):
        raise _not_open(before)
    await _refuse_if_running(rt, before)
    try:
        async with leased(rt, before.session_id) as lease:
            return await _decide_once(rt, lease, receipt_id, before, applied=applied, note=note, by=by)
    except SessionActive:  # taken between the check and ours: by another reconcile, most likely; once more
        await _refuse_if_running(rt, before)
        async with leased(rt, before.session_id) as lease:
            return await _decide_once(rt, lease, receipt_id, before, applied=applied, note=note, by=by)


async def _decide_once(rt: _Runtime, lease: Lease, receipt_id: str, before: Receipt, *, applied: bool,
                       note: str | None, by: str) -> tuple[Receipt, Receipt]:
    """Under the lease: the receipt as it is now (another reconcile may have decided it meanwhile), decided."""
    current = await rt.store.get_receipt(receipt_id)
    if current.status not in ("unknown", "dispatched"):
        raise _not_open(current)
    return before, await _decide(rt, lease, current, applied=applied, note=note, by=by)


def _not_open(receipt: Receipt) -> ReceiptError:
    """Why `receipt` cannot be reconciled. One already reconciled (by another person or a probe, perhaps a moment
    ago with the opposite verdict) says what was decided and by whom: its recorded decision is not changed."""
    if receipt.reconciled_by is not None and receipt.status in ("done", "failed"):
        said = "applied" if receipt.status == "done" else "not applied"
        note = f" ({receipt.note})" if receipt.note and receipt.note != said else ""
        return ReceiptError(f"receipt {receipt.id} was already reconciled as {said} by {receipt.reconciled_by}"
                            f"{note}; a recorded decision is not changed", receipt_id=receipt.id,
                            hint=f"`strata timeline {receipt.session_id}` shows the decision")
    return ReceiptError(f"receipt {receipt.id} is {receipt.status}, not unknown: nothing to reconcile",
                        receipt_id=receipt.id)


@record
class ProbeOutcome:
    """What a probe made of one receipt."""

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


async def probe_receipts(rt: _Runtime, tools: Sequence[ToolSpec], session_id: str | None = None) -> list[ProbeOutcome]:
    """Run each tool's probe over unknown receipts (and dispatched ones whose session owner is dead). A decided
    probe reconciles the receipt as `probe:<tool>` under the session's lease, like `reconcile`; the call itself
    is never run again. A session that is running is left alone (its calls may be in flight)."""
    specs = {t.name: t for t in tools}
    outcomes: list[ProbeOutcome] = []
    by_session: dict[str, list[Receipt]] = {}
    for r in await rt.store.list_receipts(session_id):
        if r.status in ("unknown", "dispatched"):
            by_session.setdefault(r.session_id, []).append(r)
    for sid, candidates in by_session.items():
        try:
            async with leased(rt, sid) as lease:
                calls = {c.call_id: c for item in await rt.store.read_events(sid)
                         if isinstance(item.event, BatchProposed) for c in item.event.calls}
                session = await rt.store.get_session(sid)
                for receipt in candidates:
                    outcomes.append(await _probe(rt, lease, specs, calls, Path(session.workspace), session.mode,
                                                 session.model, receipt))
        except SessionActive:
            outcomes.extend(ProbeOutcome(r, "skipped", "its session is running; the call may be in flight")
                            for r in candidates)
    return outcomes


async def _probe(rt: _Runtime, lease: Lease, specs: dict[str, ToolSpec], calls: dict[str, PlannedCall],
                 workspace: Path, mode: Mode, model: str, receipt: Receipt) -> ProbeOutcome:
    receipt = await rt.store.get_receipt(receipt.id)  # as it is under the lease
    if receipt.status not in ("unknown", "dispatched"):
        return ProbeOutcome(receipt, "skipped", f"it is {receipt.status} now")
    spec = specs.get(receipt.tool)
    if spec is None or spec.probe is None:
        return ProbeOutcome(receipt, "skipped", f"{receipt.tool} has no probe; reconcile it by hand")
    if not await anyio.to_thread.run_sync(workspace.is_dir):  # moved or removed: a file missing is no evidence
        return ProbeOutcome(receipt, "skipped", "the session's workspace is not there (moved or removed?); put it "
                                                "back, or reconcile it by hand")
    call = calls.get(receipt.call_id)
    args = _effective_args(call, receipt, spec, workspace) if call is not None else None
    if args is None:
        return ProbeOutcome(receipt, "skipped", "the call's arguments were rewritten by a hook; reconcile it by hand")
    ctx = ToolContext(session_id=receipt.session_id, mode=mode, model=model, turn=0, call_id=receipt.call_id,
                      workspace=workspace, idempotency_key=receipt.idempotency_key, deadline_s=spec.timeout_s)
    try:
        result = await spec.probe(args, ctx)
    except Exception as exc:  # a probe is read-only; its failure decides nothing
        return ProbeOutcome(receipt, "undecided", f"the probe failed: {type(exc).__name__}: {exc}")
    if result.verdict == "undecided":
        return ProbeOutcome(receipt, "undecided", result.note)
    after = await _decide(rt, lease, receipt, applied=result.verdict == "applied", note=f"probe: {result.note}",
                          by=f"probe:{receipt.tool}")
    return ProbeOutcome(receipt, result.verdict, result.note, after)
