"""Step 7: approval. When policy or a hook asks, the call needs a decision by a person; the model can never
approve. In order:

1. a session grant ("always for this session") for this tool and the same asking rule or hook approves it;
2. a decision recorded for this call (`strata approve` / `strata deny` on a parked session) applies only if it
   was made for the same argument sha256 and plan digest; a changed call needs a new decision;
3. with no person to ask (headless, daemon, mcp) the call is denied, or parked with `--on-ask park`;
4. otherwise the session's Approver asks: yes, no, or always for this session; or it parks the call when the
   person it would ask is gone (the serve daemon's driving client detached)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from core.events import OnAsk as OnAsk  # re-exported: the approval step owns what `ask` means
from core.state import Approval, Grant


@dataclass(frozen=True)
class ApprovalRequest:
    """Everything a person needs to decide: the full call and why it is asked."""

    session_id: str
    call_id: str
    tool: str
    input: Mapping[str, Any]
    input_sha256: str
    safety: str
    effect: str
    pii: str
    reasons: tuple[str, ...]
    asked_by: str
    plan_digest: str


@dataclass(frozen=True)
class ApprovalAnswer:
    decision: Literal["yes", "no", "always"]
    approver: str
    """Who decided (e.g. `person:alice@host (/dev/pts/3)`); recorded with the decision."""
    reason: str = ""


class Approver(Protocol):
    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        """A person's answer, or `Parked` when the person who would answer is gone (a daemon's client detached):
        the call then waits durably for `strata approve` / `strata deny`, exactly as with `--on-ask park`."""
        ...


@dataclass(frozen=True)
class Approved:
    approver: str
    via: Literal["grant", "recorded", "asked"]
    answer: ApprovalAnswer | None = None


@dataclass(frozen=True)
class Rejected:
    approver: str
    reason: str
    via: Literal["recorded", "asked", "no_human"]
    answer: ApprovalAnswer | None = None


@dataclass(frozen=True)
class Parked:
    note: str = ""


ApprovalOutcome = Approved | Rejected | Parked


def from_record(request: ApprovalRequest, grants: Sequence[Grant],
                recorded: Approval | None) -> tuple[ApprovalOutcome | None, str]:
    """Steps 1 and 2: an outcome decided without asking anyone, or None and a note on why a record did not
    apply."""
    # A person's "no" to this very call stands, whatever grant ("always") was given for its tool since.
    if recorded is not None and recorded.decision == "rejected":
        return Rejected(recorded.approver, recorded.reason, "recorded"), ""
    # An ask may be the union of several askers ("rule A + hook B"): grants must cover every one of them.
    askers = request.asked_by.split(" + ")
    covering = [next((g for g in grants if g.tool == request.tool and g.asked_by in (a, request.asked_by)), None)
                for a in askers]
    if all(g is not None for g in covering):
        approvers = sorted({g.approver for g in covering if g is not None})
        return Approved(", ".join(approvers), "grant"), ""
    if recorded is None:
        return None, ""
    if recorded.args_sha256 != request.input_sha256:
        return None, (f"a decision by {recorded.approver} was recorded for different arguments; the call changed, "
                      "so it needs a new decision")
    if recorded.plan_digest != request.plan_digest:
        return None, (f"an approval by {recorded.approver} was given under a different tool plan; it needs a new "
                      "decision")
    return Approved(recorded.approver, "recorded"), ""
