"""The call record: one object per call, filled as the call goes down its path (tool_executor/executor.py), and
the only thing the recorders read. It carries the decision (its steps, each with the check and who decided; the
approval), the receipt's transitions, the lock that was busy, the PostToolUse steps and the result, or the cause
that settled the call without a result of its own (an interrupt, a crash found on resume).

A `Recorder` turns records into observations: the timeline's rows (tool_executor/_recorder.py) and the evidence
ledger's (agent/evidence_ledger.py) are two projections of the same record."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.events import CallResult, PlannedCall
from core.record import record
from core.timeline import TimelineDecision
from core.timeline_rows import ReceiptTransition
from memory.session_writer import SessionWriter
from tool_executor._types import CallEnv, Decision, Step
from tool_executor.verdicts import Deny, Parked


@record
class ReceiptChange:
    """One transition of the call's effect receipt (tool_executor/_receipts.py)."""

    receipt_id: str
    transition: ReceiptTransition
    note: str = ""
    status: str | None = None
    """For `reconciled`: the status it was reconciled to (`done`: applied, `failed`: not applied)."""
    by: str | None = None
    """For `reconciled`: the person or probe that decided."""


@dataclass
class CallRecord:
    """Everything one call's path through the pipeline produced, filled in as it goes."""

    env: CallEnv
    call: PlannedCall
    batch_id: str
    decision: Decision | None = None
    """None for a call settled without being decided in this process (from its receipt on resume, or never
    reached before an interrupt)."""
    receipt_id: str | None = None
    receipts: list[ReceiptChange] = field(default_factory=list)
    lock: str | None = None
    """Why the call's resource keys could not be held (it never started)."""
    post_steps: tuple[Step, ...] = ()
    result: CallResult | None = None
    """None while the call runs, and for a call parked for approval."""
    settled_by: str | None = None
    """Why the call was settled rather than finished here: an interrupt's cause, or a crash found on resume."""
    settled_on_resume: bool = False
    interrupt_verdict: str | None = None
    """What the handler could say for certain when it was cancelled (ToolContext.on_interrupt), or None."""
    re_entered: bool = False
    """Settled on resume by entering its handler again (a tool that `resumes`: delegate), not from the receipt."""

    def tell_interrupt(self, verdict: str) -> None:
        self.interrupt_verdict = verdict

    @property
    def tool(self) -> str:
        """The tool the call became (a rewrite may change it)."""
        return self.decision.tool if self.decision is not None else self.call.tool

    @property
    def steps(self) -> tuple[Step, ...]:
        return self.decision.steps if self.decision is not None else ()

    def verdict(self) -> tuple[TimelineDecision | None, str | None]:
        """The decision in the timeline's five words, and what decided it (check, rule, hook or approver)."""
        d = self.decision
        if d is None:
            if self.settled_on_resume:
                return "allowed", "receipt"
            return None, "interrupt"
        if isinstance(d.verdict, Parked):
            return "parked", d.ask.asked_by if d.ask else "approval"
        if isinstance(d.verdict, Deny):
            if d.verdict.check == "approval":
                return "rejected", d.approver or "approval"
            return "denied", d.verdict.check
        if d.approver is not None:
            return "approved", d.approver
        return "allowed", d.verdict.rule or "policy"


class Recorder:
    """What observes call records. The base keeps nothing; the timeline's recorder stages rows, the ledger's
    writes beside it."""

    def call(self, record: CallRecord, writer: SessionWriter) -> None:
        """The call's path is over (run, denied, parked, or settled): its rows go with the result's commit."""

    def receipt(self, record: CallRecord, change: ReceiptChange, writer: SessionWriter) -> None:
        """The call's receipt changed; its row goes with the commit that carries the change."""
