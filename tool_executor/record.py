"""Step 13: what the pipeline observed about each call (its decision path and outcome), handed to a Recorder.
The timeline recorder (observability) turns a trace into hash-chained timeline rows in the same commit as the
call's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.events import CallResult, PlannedCall
from memory.session_writer import SessionWriter

if TYPE_CHECKING:
    from tool_executor.executor import CallEnv, Decision


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
