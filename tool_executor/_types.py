"""The values one call's path passes between its modules: what the pipeline reads from the session (`CallEnv`),
one entry of a decision path (`Step`), where the checks ended (`Checked`) and where the decision ended
(`Decision`). They live here, below every module that fills or reads them, so the checks, the pre-hooks, the
approval step, the effects, the call record and the post-hooks import this module and never each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.events import Event, Mode, ParkedCall, PlannedCall
from core.hashing import sha256_json
from core.policy import PermissionRule
from core.record import record
from core.state import Approval, Grant, SessionState
from core.tools import ToolSpec
from core.vocabulary import StepCheck
from tool_executor.verdicts import Ask, Deny, Parked, Pass

StepOutcome = Literal["allow", "ask", "deny", "rewrite", "block", "approved", "rejected", "parked", "withhold",
                      "add_context"]


@record
class Step:
    """One entry of a call's decision path: which check, what it said, who decided (`by`: the check itself, the
    rule, middleware, hook or person), and the reason as the model and the timeline read it (`detail`). Nothing
    reads `by` out of `detail`."""

    check: StepCheck
    outcome: StepOutcome
    detail: str = ""
    by: str = field(default="", kw_only=True)


@record
class CallEnv:
    """What the pipeline reads from the session for one call."""

    session_id: str
    mode: Mode
    model: str
    turn: int
    plan_digest: str
    rules: Sequence[PermissionRule] = ()
    grants: Sequence[Grant] = ()
    approvals: Mapping[str, Approval] = field(default_factory=dict)

    @classmethod
    def from_state(cls, state: SessionState, turn: int) -> CallEnv:
        return cls(session_id=state.session_id, mode=state.mode, model=state.model, turn=turn,
                   plan_digest=state.plan_digest, rules=tuple(state.rules), grants=tuple(state.grants),
                   approvals=dict(state.approvals))


@record
class Checked:
    """Where steps 1-5 ended: the deciding Deny, an Ask, or Pass, for the (possibly rewritten) call."""

    verdict: Pass | Ask | Deny
    spec: ToolSpec | None
    tool: str
    input: Mapping[str, Any]
    steps: tuple[Step, ...]


@record
class Decision:
    """Where steps 1-7 ended."""

    verdict: Pass | Deny | Parked
    spec: ToolSpec | None
    tool: str
    input: Mapping[str, Any]
    input_sha256: str
    steps: tuple[Step, ...]
    events: tuple[Event, ...] = ()
    """Approval records to commit with the call (ApprovalGranted, ApprovalRejected, GrantAdded)."""
    approver: str | None = None
    ask: Ask | None = None


@dataclass
class BatchRun:
    """What a batch left undone: calls parked for approval, and calls not started because an earlier one was
    parked (both go through the whole pipeline again on resume)."""

    parked: list[ParkedCall] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    waiting: WaitingCall | None = None
    """A dispatched call whose work waits for a person elsewhere (ToolWaits): the batch stops there and stays
    open; later calls of the batch run on resume."""


@record
class WaitingCall:
    """A call dispatched whose work waits for something elsewhere (a person, a child session)."""

    call_id: str
    tool: str
    reason: str


def effective_sha256(call: PlannedCall, args: Mapping[str, Any]) -> str:
    """The effective arguments' digest: the proposal's own when nothing rewrote them (no second hashing)."""
    return call.input_sha256 if args is call.input else sha256_json(args)
