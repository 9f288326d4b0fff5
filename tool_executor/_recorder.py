"""Step 13: a call record as timeline rows (masked), staged so they share the commit of what they observe: a
`hook` row per hook verdict, an `approval` row when the call asked, a `receipt` row per receipt transition (staged
with the transition itself), and one `call` row with the deciding check and the whole decision path, staged with
the call's result (for a call settled by an interrupt or a resume: in the commit that closes its batch)."""

from __future__ import annotations

from typing import Any

from core.json_text import encoder
from core.masking import Masker
from core.timeline_rows import ApprovalRow, Asker, CallRow, HookRow, ReceiptRow, call_entry, receipt_entry
from memory.session_writer import SessionWriter
from tool_executor._call_record import CallRecord, ReceiptChange, Recorder

SUMMARY_CHARS = 240
_args_json = encoder(ensure_ascii=False, sort_keys=True)
"""`json.dumps(..., ensure_ascii=False, sort_keys=True)` with its encoder built once, not per call row."""


class TimelineRecorder(Recorder):
    def __init__(self, masker: Masker) -> None:
        self.masker = masker

    def receipt(self, record: CallRecord, change: ReceiptChange, writer: SessionWriter) -> None:
        writer.stage_timeline(receipt_entry(**_receipt_fields(  # ReceiptRow's entry, one validation
            change, turn=record.env.turn, call_id=record.call.call_id, tool=record.tool, masker=self.masker)))

    def call(self, record: CallRecord, writer: SessionWriter) -> None:
        mask, summary = self.masker.mask, self.masker.summary
        turn, call_id, tool = record.env.turn, record.call.call_id, mask(record.tool)  # the model names the tool
        d = record.decision
        for step in record.steps:
            if step.check == "hook":
                writer.stage_timeline(HookRow(turn=turn, call_id=call_id, tool=tool, hook=mask(step.by),
                                              verdict=step.outcome, summary=summary(step.detail, SUMMARY_CHARS)))
        decision, _ = record.verdict()
        if d is not None and d.ask is not None:
            writer.stage_timeline(ApprovalRow(
                turn=turn, call_id=call_id, tool=tool,
                decision=decision if decision in ("approved", "rejected", "parked") else "denied",
                by=mask(d.approver or d.ask.asked_by), outcome=decision or "denied",
                summary=summary(f"asked by {d.ask.asked_by}: {'; '.join(d.ask.reasons)}", SUMMARY_CHARS),
                args_sha256=d.input_sha256, plan_digest=record.env.plan_digest,
                asker=Asker(approver=d.approver, asked_by=mask(d.ask.asked_by))))
        for step in record.post_steps:
            writer.stage_timeline(HookRow(turn=turn, call_id=call_id, tool=tool, hook=mask(step.by),
                                          verdict=step.outcome, summary=summary(f"post: {step.detail}", SUMMARY_CHARS)))
        writer.stage_timeline(call_entry(**_call_fields(record, self.masker)))  # CallRow's entry, one validation


def call_row(record: CallRecord, masker: Masker) -> CallRow:
    """The call's own row: what decided it, how it ended, and its decision path."""
    return CallRow(**_call_fields(record, masker))


def _call_fields(record: CallRecord, masker: Masker) -> dict[str, Any]:
    """The call row's fields: `CallRow(**fields)` is the typed row, `call_entry(**fields)` its stored entry."""
    mask, summary = masker.mask, masker.summary
    result, d = record.result, record.decision
    decision, by = record.verdict()
    tool = mask(record.tool)
    outcome = result.status if result is not None else None
    if d is None and record.settled_on_resume:  # decided and started by the process that stopped
        assert result is not None
        how = (f"entered again on resume with receipt {result.receipt_id} (its work goes on, never twice)"
               if record.re_entered else f"settled from receipt {result.receipt_id} on resume, not re-run")
        return dict(turn=record.env.turn, call_id=record.call.call_id, tool=tool, decision=decision, by=by,
                    outcome=outcome, receipt_id=result.receipt_id, settled_on_resume=True,
                    summary=summary(f"{record.call.tool} {how} -> {outcome}", SUMMARY_CHARS))
    tail = (f" -> {outcome}: {summary(result.content, 100)}" if result is not None else " -> waiting for a person")
    args = summary(_args_json(dict(d.input if d is not None else record.call.input)), 120)
    proposed = mask(record.call.tool) if d is not None and d.tool != record.call.tool else None
    return dict(
        turn=record.env.turn, call_id=record.call.call_id, tool=tool, decision=decision,
        by=mask(by) if by else by, outcome=outcome,
        duration_ms=result.duration_ms if result is not None else None, summary=f"{tool} {args}{tail}",
        steps=tuple((s.check, s.outcome, mask(s.detail)) for s in record.steps) if d is not None else None,
        # The arguments' hash only when they are not the proposal's (a hook rewrote them): the proposal's is the
        # hash of the input the state log holds for this call (core/events.py PlannedCall).
        input_sha256=d.input_sha256 if d is not None and d.input_sha256 != record.call.input_sha256 else None,
        plan_digest=record.env.plan_digest, proposed_tool=proposed, receipt_id=record.receipt_id or None,
        lock=mask(record.lock) if record.lock else None, settled_by=mask(record.settled_by) if record.settled_by
        else None)


def receipt_row(change: ReceiptChange, *, turn: int, call_id: str, tool: str, masker: Masker) -> ReceiptRow:
    """One receipt transition of call `call_id` as a row: the receipt id is its `check`, the transition its
    `outcome`."""
    return ReceiptRow(**_receipt_fields(change, turn=turn, call_id=call_id, tool=tool, masker=masker))


def _receipt_fields(change: ReceiptChange, *, turn: int, call_id: str, tool: str, masker: Masker) -> dict[str, Any]:
    """The receipt row's fields: `ReceiptRow(**fields)` is the typed row, `receipt_entry(**fields)` its entry."""
    tool = masker.mask(tool)
    match change.transition:
        case "dispatched":
            text = f"receipt {change.receipt_id} committed before dispatch"
        case "reconciled":
            way = "applied" if change.status == "done" else "not applied"
            text = f"receipt {change.receipt_id} reconciled as {way} by {change.by}"
        case _:
            text = f"receipt {change.receipt_id} {change.transition}"
    if change.note and change.transition != "dispatched":
        text += f": {change.note}"
    return {"turn": turn, "call_id": call_id, "tool": tool, "receipt_id": change.receipt_id,
            "transition": change.transition, "status": change.status,
            "by": masker.mask(change.by) if change.by else None, "summary": masker.summary(text, SUMMARY_CHARS)}
