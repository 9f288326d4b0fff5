"""Step 13: what the pipeline observed about each call (its decision path and outcome), handed to a Recorder.
`TimelineRecorder` turns a trace into timeline rows (masked) staged with the call's result, so they share its
commit: one `call` row per call with the deciding check, plus a row per hook verdict, per approval and per
receipt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.events import CallResult, PlannedCall
from core.masking import Masker
from core.timeline import TimelineDecision, TimelineEntry
from memory.session_writer import SessionWriter
from tool_executor.approval import Parked
from tool_executor.verdicts import Deny

if TYPE_CHECKING:
    from tool_executor.executor import CallEnv, Decision

SUMMARY_CHARS = 240
EXCERPT_MASK_CHARS = 2048


@dataclass(frozen=True)
class Step:
    """One entry of a call's decision path: which check, what it said, and the rule / hook / approver."""

    check: str
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class CallTrace:
    env: CallEnv
    call: PlannedCall
    decision: Decision
    result: CallResult | None
    """None for a call parked for approval."""
    receipt_id: str | None = None
    lock: str | None = None
    post_steps: tuple[Step, ...] = ()


class Recorder:
    """The base recorder keeps nothing; `TimelineRecorder` stages timeline rows."""

    def record(self, trace: CallTrace, writer: SessionWriter) -> None:
        """A call was decided (and, unless denied or parked, run)."""

    def settled(self, call: PlannedCall, result: CallResult, turn: int, writer: SessionWriter) -> None:
        """A call of an open batch was settled from its receipt on resume (never re-run)."""


def _first_line(text: str, limit: int) -> str:
    line = " | ".join(p.strip() for p in text.strip().splitlines() if p.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def call_decision(trace: CallTrace) -> tuple[TimelineDecision, str | None]:
    """The call's decision in the timeline's five words, and what decided it (check, rule, hook or approver)."""
    verdict = trace.decision.verdict
    if isinstance(verdict, Parked):
        return "parked", trace.decision.ask.asked_by if trace.decision.ask else "approval"
    if isinstance(verdict, Deny):
        if verdict.check == "approval":
            return "rejected", trace.decision.approver or "approval"
        return "denied", verdict.check
    if trace.decision.approver is not None:
        return "approved", trace.decision.approver
    return "allowed", verdict.rule or "policy"


class TimelineRecorder(Recorder):
    def __init__(self, masker: Masker) -> None:
        self.masker = masker

    def excerpt(self, text: str, limit: int) -> str:
        """A masked excerpt: masked before it is cut (a cut secret would no longer look like one). Long text is
        masked as a stream prefix, which lets out only text that cannot be part of a secret."""
        if len(text) <= EXCERPT_MASK_CHARS:
            return _first_line(self.masker.mask(text), limit)
        safe = self.masker.stream().feed(text[:EXCERPT_MASK_CHARS])
        return _first_line(safe, limit - 3) + "..."

    def record(self, trace: CallTrace, writer: SessionWriter) -> None:
        d = trace.decision
        mask = self.masker.mask
        turn, call_id, tool = trace.env.turn, trace.call.call_id, mask(d.tool)  # the model names the tool
        for step in d.steps:
            if step.check == "hook":
                writer.stage_timeline(TimelineEntry(kind="hook", turn=turn, call_id=call_id, tool=tool,
                                                    check=mask(step.detail.split(":", 1)[0]), outcome=step.outcome,
                                                    summary=self.excerpt(step.detail, SUMMARY_CHARS)))
        decision, by = call_decision(trace)
        if d.ask is not None:
            writer.stage_timeline(TimelineEntry(
                kind="approval", turn=turn, call_id=call_id, tool=tool,
                decision=decision if decision in ("approved", "rejected", "parked") else "denied",
                check=mask(d.approver or d.ask.asked_by), outcome=decision,
                summary=self.excerpt(f"asked by {d.ask.asked_by}: {'; '.join(d.ask.reasons)}", SUMMARY_CHARS),
                data={"args_sha256": d.input_sha256, "plan_digest": trace.env.plan_digest,
                      "approver": d.approver, "asked_by": mask(d.ask.asked_by)}))
        if trace.receipt_id is not None:
            writer.stage_timeline(TimelineEntry(kind="receipt", turn=turn, call_id=call_id, tool=tool,
                                                outcome="dispatched", check=trace.receipt_id,
                                                summary=f"receipt {trace.receipt_id} committed before dispatch"))
        for step in trace.post_steps:
            writer.stage_timeline(TimelineEntry(kind="hook", turn=turn, call_id=call_id, tool=tool,
                                                check=mask(step.detail.split(":", 1)[0]), outcome=step.outcome,
                                                summary=self.excerpt(f"post: {step.detail}", SUMMARY_CHARS)))
        result = trace.result
        outcome = result.status if result is not None else None
        tail = (f" -> {outcome}: {self.excerpt(result.content, 100)}" if result is not None
                else " -> waiting for a person")
        args = self.excerpt(json.dumps(dict(d.input), ensure_ascii=False, sort_keys=True), 120)
        summary = f"{tool} {args}{tail}"
        data: dict[str, Any] = {
            "steps": [[s.check, s.outcome, mask(s.detail)] for s in d.steps],
            "input_sha256": d.input_sha256, "plan_digest": trace.env.plan_digest}
        if d.tool != trace.call.tool:
            data["proposed_tool"] = mask(trace.call.tool)
        if trace.receipt_id:
            data["receipt_id"] = trace.receipt_id
        if trace.lock:
            data["lock"] = mask(trace.lock)
        writer.stage_timeline(TimelineEntry(
            kind="call", turn=turn, call_id=call_id, tool=tool, decision=decision, check=mask(by) if by else by,
            outcome=outcome, duration_ms=result.duration_ms if result is not None else None, summary=summary,
            data=data))

    def settled(self, call: PlannedCall, result: CallResult, turn: int, writer: SessionWriter) -> None:
        writer.stage_timeline(TimelineEntry(
            kind="call", turn=turn, call_id=call.call_id, tool=self.masker.mask(call.tool), decision="allowed",
            check="receipt", outcome=result.status, summary=self.excerpt(
                f"{call.tool} settled from receipt {result.receipt_id} on resume, not re-run -> {result.status}",
                SUMMARY_CHARS),
            data={"receipt_id": result.receipt_id, "settled_on_resume": True}))
