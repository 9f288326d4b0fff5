"""What the host sends an attachment, in the order it happens: committed events, approval requests (to the
driver only), turn results, notices, and the model's text as it streams (never persisted, and dropped for an
attachment that is behind). Typed here; `view()` gives each its JSON object, the shapes `strata run
--json` prints (agent/cli/views.py owns the event's shape) plus the session id, so a transport only encodes.

Also the rows of `SessionHost.status()`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent.cli.views import event_view
from agent.outcome import RunOutcome, TurnStatus
from core.events import ParkedCall, StoredEvent
from tool_executor import ApprovalRequest

"""How a turn ended: as `strata run` ends, or interrupted (the driver's interrupt, or a drain)."""

EXIT_INTERRUPTED = 130
"""A turn that was interrupted ends as Ctrl-C ends `strata run`."""

Phase = Literal["starting", "idle", "plan", "act", "approval", "parked", "released", "elsewhere", "closing"]
"""Where a hosted session is: `plan` waits on the model, `act` has a batch open, `approval` waits for the driver,
`parked` waits for a recorded decision (no lease held), `released` holds no lease after a failure (the next prompt
or driver resumes it; a driver attached at the failure has it taken back at once when it can be), `elsewhere` is
hosted without its lease while another live process holds it (`strata resume ID` in another terminal; a driver
attaching waits a moment for it, then is refused), `closing` is being drained."""


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionEvent(_Out):
    """One committed event: the same StoredEvent object reaches every attachment of the session."""

    type: Literal["event"] = "event"
    session_id: str
    item: StoredEvent

    def view(self) -> dict[str, Any]:
        view = event_view(self.item)
        return {"type": "event", "session_id": self.session_id, **{k: v for k, v in view.items() if k != "type"}}


class ApprovalAsk(_Out):
    """A call waits for the driving attachment's decision: everything it would run with, and why it is asked.
    An answer is bound to `args_sha256` and `plan_digest` (SessionHost.approve)."""

    type: Literal["approval_request"] = "approval_request"
    session_id: str
    call_id: str
    tool: str
    input: dict[str, Any]
    args_sha256: str
    plan_digest: str
    asked_by: str
    reasons: tuple[str, ...]
    safety: str
    effect: str
    pii: str

    @classmethod
    def of(cls, request: ApprovalRequest) -> ApprovalAsk:
        return cls(session_id=request.session_id, call_id=request.call_id, tool=request.tool,
                   input=dict(request.input), args_sha256=request.input_sha256, plan_digest=request.plan_digest,
                   asked_by=request.asked_by, reasons=request.reasons, safety=request.safety, effect=request.effect,
                   pii=request.pii)

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class ParkedView(_Out):
    call_id: str
    tool: str
    input: dict[str, Any]
    reasons: tuple[str, ...]
    asked_by: str

    @classmethod
    def of(cls, call: ParkedCall) -> ParkedView:
        return cls(call_id=call.call_id, tool=call.tool, input=dict(call.input), reasons=call.reasons,
                   asked_by=call.asked_by)


class TurnResult(_Out):
    """The end of a turn, as `strata run --json` prints its result."""

    type: Literal["result"] = "result"
    session_id: str
    status: TurnStatus
    exit_code: int
    reason: str = ""
    unknown_receipts: int = 0
    parked: tuple[ParkedView, ...] = ()

    @classmethod
    def of(cls, outcome: RunOutcome, parked: tuple[ParkedCall, ...]) -> TurnResult:
        return cls(session_id=outcome.session_id, status=outcome.status, exit_code=outcome.exit_code,
                   reason=outcome.reason, unknown_receipts=outcome.unknown_receipts,
                   parked=tuple(ParkedView.of(p) for p in parked))

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


NoticeKind = Literal["dropped", "detached", "driver_left", "driver_attached", "parked", "released", "shutting_down",
                     "closed"]


class Notice(_Out):
    """Something an attachment should show that is neither an event nor a result. `dropped`, `detached` and
    `closed` are the last message an attachment gets."""

    type: Literal["notice"] = "notice"
    session_id: str
    kind: NoticeKind
    text: str

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class TextDelta(_Out):
    """A piece of the model's text as it streams, before the message holding it is committed. Not an event: it is
    never persisted, and an attachment that is behind does not get it (agent/daemon/_attachment.py); the committed
    `assistant_message` or `batch_proposed` that follows carries the whole text.

    `attempt` numbers the model call's attempts (1 first): a delta of a higher attempt means the text of the earlier
    attempts of this call is void (it failed and was retried). `offset` is how many characters of this attempt's
    text came before this delta, so a client that counted fewer knows it missed some."""

    type: Literal["text_delta"] = "text_delta"
    session_id: str
    text: str
    attempt: int
    offset: int

    def view(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


Outbound = SessionEvent | ApprovalAsk | TurnResult | Notice | TextDelta


class WaitingCall(_Out):
    call_id: str
    tool: str
    how: Literal["asking", "parked"]
    """`asking`: the driver has the request now; `parked`: it waits for `strata approve` or a driver."""
    session_id: str | None = None
    """The session whose call it is when not the row's own: a child (or a session below it) that the row's delegate
    call waits on; None for the row's own call."""


class SessionInfo(_Out):
    """One row of `SessionHost.status()`."""

    session_id: str
    status: str
    """The session's stored status (`active`, `idle`, `awaiting_approval`, `completed`, ...)."""
    phase: Phase
    turn_running: bool
    workspace: str
    model: str
    drivers: int
    watchers: int
    waiting: tuple[WaitingCall, ...]
