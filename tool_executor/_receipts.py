"""Effect receipts have one owner: this module. Every change of a receipt is made here, as a transition of one
state machine, staged with its timeline row in the same commit:

    (none) -> dispatched              committed before the handler starts (a barrier)
    dispatched -> done | failed       the handler finished (failed: also a call that never got its locks)
    dispatched -> unknown             its deadline passed, the run was interrupted while it ran, or the process
                                      stopped and a resume found it
    unknown -> reconciled             a person or a probe decided it: applied (done) or not applied (failed)

`settle_open_batch(cause)` is the one settlement of an open batch: used when a run is interrupted (Ctrl-C,
SIGTERM/SIGHUP, and later a daemon's shutdown or a budget), where every call without a result gets one and the
batch is closed; and by a resume after a crash, where a call with a receipt is settled from it (never run again)
and a call without one is left to run through the whole pipeline again. The runtime never re-runs a call whose
receipt exists."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import tool_executor.result as results
from core.errors import OrphanRunning
from core.events import BatchCompleted, CallResult, PlannedCall
from core.hashing import sha256_text
from core.processes import ProcessGroup
from core.record import record
from core.state import OpenBatch
from memory.rows import NewReceipt, Receipt, ReceiptStatus, ReceiptUpdate
from memory.session_writer import SessionWriter
from tool_executor._call_record import CallRecord, ReceiptChange, Recorder
from tool_executor._types import CallEnv
from tool_executor.locks import ResourceLocks
from tool_executor.orphans import settle_orphan

NEXT: Mapping[ReceiptStatus | None, frozenset[ReceiptStatus]] = {
    None: frozenset({"dispatched"}),
    "dispatched": frozenset({"done", "failed", "unknown"}),
    "unknown": frozenset({"done", "failed"}),
    "done": frozenset(),
    "failed": frozenset(),
}
"""The receipt state machine: the statuses each status may change to (`unknown -> done | failed` is a
reconciliation)."""


class Receipts:
    """Stages receipt transitions (the change and its row) for the calls of one session."""

    def __init__(self, writer: SessionWriter, recorder: Recorder) -> None:
        self.writer = writer
        self.recorder = recorder

    def _changed(self, record: CallRecord, change: ReceiptChange) -> None:
        record.receipts.append(change)
        self.recorder.receipt(record, change, self.writer)

    def dispatched(self, record: CallRecord, receipt: NewReceipt) -> None:
        """A new receipt: a barrier, durable before the handler starts."""
        self.writer.stage_receipt(receipt)
        record.receipt_id = receipt.id
        self._changed(record, ReceiptChange(receipt.id, "dispatched"))

    def finished(self, record: CallRecord, result: CallResult, process: ProcessGroup | None) -> None:
        """The handler ended: ok is done, error is failed, anything else (a deadline passed) unknown."""
        assert record.receipt_id is not None
        status: ReceiptStatus = "done" if result.status == "ok" else "failed" if result.status == "error" else "unknown"
        self._update(record, ReceiptUpdate(id=record.receipt_id, status=status,
                                           outcome_sha256=sha256_text(result.content), process=process))

    def never_started(self, record: CallRecord, why: str) -> None:
        assert record.receipt_id is not None
        self._update(record, ReceiptUpdate(id=record.receipt_id, status="failed", note=f"never started: {why}"))

    def unknown(self, record: CallRecord, receipt_id: str, note: str, process: ProcessGroup | None) -> None:
        self._update(record, ReceiptUpdate(id=receipt_id, status="unknown", note=note, process=process))

    def _update(self, record: CallRecord, update: ReceiptUpdate) -> None:
        assert update.status in NEXT["dispatched"], update
        self.writer.stage_receipt_update(update)
        self._changed(record, ReceiptChange(update.id, update.status, note=update.note or ""))


def reconciliation(receipt: Receipt, *, applied: bool, note: str | None,
                   by: str) -> tuple[list[ReceiptUpdate], list[ReceiptChange]]:
    """The updates (and their transitions) that reconcile `receipt`: an `unknown` one is decided; a `dispatched`
    one whose process stopped becomes `unknown` first, as a resume would have made it."""
    status: ReceiptStatus = "done" if applied else "failed"
    updates: list[ReceiptUpdate] = []
    changes: list[ReceiptChange] = []
    if receipt.status == "dispatched":
        stopped = "the process stopped after dispatch; reconciled before a resume"
        updates.append(ReceiptUpdate(id=receipt.id, status="unknown", note=stopped))
        changes.append(ReceiptChange(receipt.id, "unknown", note=stopped))
    elif status not in NEXT[receipt.status]:
        raise ValueError(f"receipt {receipt.id} is {receipt.status}: nothing to reconcile")
    said = note or ("applied" if applied else "not applied")
    updates.append(ReceiptUpdate(id=receipt.id, status=status, expect=("unknown",), note=said, reconciled_by=by))
    changes.append(ReceiptChange(receipt.id, "reconciled", note=said, status=status, by=by))
    return updates, changes


Cause = Literal["interrupt", "crash"]


@record
class SettleCause:
    """Why an open batch is settled: `interrupt` (the run is stopped now: `text` says by what) or `crash` (a
    resume found the batch a stopped process left open)."""

    kind: Cause
    text: str


@dataclass
class Settlement:
    """What `settle_open_batch` left: the calls still to run (only after a crash: those without a receipt)."""

    to_run: list[PlannedCall] = field(default_factory=list)


EndProcess = Callable[[str], Awaitable[ProcessGroup | None]]
ReEnter = Callable[[CallRecord, Receipt], Awaitable[None]]
"""Enters a call's handler again after a crash (a tool that `resumes`, e.g. delegate), filling the record's
result and finishing its receipt."""


async def settle_open_batch(batch: OpenBatch, cause: SettleCause, *, env: CallEnv, receipts: Mapping[str, Receipt],
                            owner: Receipts, in_flight: Mapping[str, CallRecord], locks: ResourceLocks | None = None,
                            kill_orphans: bool = False, end_process: EndProcess | None = None,
                            resumes: Callable[[str], bool] = lambda tool: False,
                            re_enter: ReEnter | None = None) -> Settlement:
    """Settle every call of `batch` that has no result yet, in proposal order, each with its call row:

    - a call whose receipt is `dispatched`: never re-run; `unknown` (after an interrupt, once its process group
      is gone; after a crash, once the command it left running is gone: waited for, or killed with
      `kill_orphans`; one still running stops here with OrphanRunning before anything runs beside it);
    - a call whose receipt is settled already (done, failed, unknown): its result from the receipt;
    - a call without a receipt: after an interrupt a "not run" result; after a crash it is returned, to run again;
    - after a crash, a call of a tool that `resumes` (delegate) whose receipt is `dispatched`: its handler is
      entered again (`re_enter`), which finishes the same work (the child its receipt names), never new work.

    After an interrupt the batch is closed (BatchCompleted) in the same commit."""
    left = Settlement()
    writer = owner.writer
    for call in batch.pending():
        receipt = receipts.get(call.call_id)
        record = in_flight.get(call.call_id) or CallRecord(env=env, call=call, batch_id=batch.batch_id)
        if cause.kind == "crash":
            if receipt is None:
                left.to_run.append(call)
                continue
            record.settled_on_resume = True
        record.settled_by = cause.text
        if (cause.kind == "crash" and receipt is not None and receipt.status == "dispatched" and re_enter is not None
                and resumes(receipt.tool)):
            record.re_entered = True
            record.receipt_id = receipt.id
            await re_enter(record, receipt)
            assert record.result is not None
        elif receipt is None:
            record.result = results.interrupted(batch.batch_id, call, None, cause.text)
        elif receipt.status == "dispatched":
            record.receipt_id = receipt.id
            if cause.kind == "interrupt":
                # The handler was cancelled and ended its process group; one that is still there goes now.
                process = await end_process(receipt.id) if end_process is not None else None
                verdict = record.interrupt_verdict
                note = f"{cause.text} while the call ran; not re-run"
                if verdict:
                    note += results.VERDICT_MARK + verdict
                owner.unknown(record, receipt.id, note, process)
                record.result = results.interrupted(batch.batch_id, call, receipt.id, cause.text, verdict)
            else:
                note, process = "process stopped after dispatch; not re-run", None
                if locks is not None:
                    orphan = await settle_orphan(locks, receipt, kill=kill_orphans)
                    if orphan.still_running:
                        raise OrphanRunning(env.session_id, call.call_id, receipt.tool, orphan.describe(),
                                            locks.timeout_s)
                    process, note = orphan.process, f"{note}; {orphan.note}" if orphan.note else note
                owner.unknown(record, receipt.id, note, process)
                receipt = receipt.model_copy(update={"status": "unknown", "process": process})
                record.result = results.after_crash(batch.batch_id, call, receipt)
        else:
            record.receipt_id = receipt.id
            record.result = results.after_crash(batch.batch_id, call, receipt)
        writer.stage(record.result, env.turn)
        owner.recorder.call(record, writer)
    if cause.kind == "interrupt":
        writer.stage(BatchCompleted(batch_id=batch.batch_id), env.turn)
    return left
