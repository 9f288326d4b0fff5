"""The wire protocol's messages, version 1: one JSON object per line, tagged by `type`.

Two discriminated unions, one per direction. A client sends `Request`s, each with an `id` of its choosing; the
daemon answers each with exactly one `Reply` (`hello_ok` to `hello`, otherwise `ok` or `error`) carrying that id,
and pushes `Push`es (committed events, approval requests, turn results, notices) whenever they happen. Requests
are strict (no coercion: `"1"` is not `1`, unknown fields are refused), because they come from outside.

The `event` push is the object `strata run --json` prints for a committed event (agent/cli/views.py
`event_view`, the one owner of that shape) plus the `session_id` it belongs to; it is kept typed here (the core
event union) and flattened on the wire. Tags are written by hand and never derived from class names."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_serializer, model_validator

from agent.cli.views import event_view
from agent.outcome import TurnStatus
from core.events import Event, StoredEvent
from core.tools import EffectClass, SafetyLevel

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS: tuple[int, ...] = (PROTOCOL_VERSION,)

RequestId = Annotated[str, Field(min_length=1, max_length=128)]
"""Chosen by the client, echoed in the one reply; a string (a number is refused), at most 128 characters."""
NO_NUL = r"^[^\x00]*$"
"""What names a file, a model or a session (a path, a spec, an id) holds no NUL byte: no path can, and no
PostgreSQL text can (a session id with one would reach that store as an internal error)."""
SessionId = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL)]
Text = Annotated[str, Field(max_length=1_000_000)]
Short = Annotated[str, Field(max_length=1_000)]
MAX_SEQ = 2**53
"""The largest seq a request may name: past every seq a store holds, and within every store's integer (a SQLite
or PostgreSQL integer holds at most 2**63 - 1) and every JSON reader's exact integers."""

ErrorCode = Literal[
    # the line itself (protocol errors: counted, see Limits.max_errors)
    "bad_json", "not_object", "unknown_type", "invalid", "bad_version",
    # the connection (the daemon closes it after the reply)
    "too_large", "hello_required", "peer_refused", "too_many_errors", "too_many_connections", "hello_timeout",
    "idle_timeout",
    # the request was read, and refused by the session side
    "unknown_session", "not_attached", "not_driver", "session_busy", "no_such_call", "stale_approval",
    "shutting_down", "too_many_sessions", "too_many_attachments", "refused", "internal",
]
"""Stable codes: clients branch on them, never on the message text."""

Role = Literal["drive", "watch"]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# -- client -> daemon ---------------------------------------------------------------------------------------------

class _Request(_Wire):
    id: RequestId
    v: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """Optional after the hello; when present it must be the version agreed in the hello."""


class Hello(_Request):
    """Must be the first line of a connection: the daemon answers `hello_ok`, or `bad_version` and closes."""

    type: Literal["hello"] = "hello"
    v: int  # required here
    client: Short = ""
    """Free text naming the client (`strata-attach 0.1.0`), for the daemon's log."""


class NewSession(_Request):
    type: Literal["new_session"] = "new_session"
    workspace: Annotated[str, Field(max_length=4096, pattern=NO_NUL)]
    model: Annotated[str, Field(max_length=1_000, pattern=NO_NUL)]
    mode: Literal["ipc"] = "ipc"


class Attach(_Request):
    """One client drives a session (sends prompts, answers approvals); any number watch."""

    type: Literal["attach"] = "attach"
    session_id: SessionId
    role: Role = "drive"
    since_seq: int | None = Field(default=None, ge=1, le=MAX_SEQ, exclude_if=lambda v: v is None)
    """The session's committed events from this seq are pushed first (1: all of them), then the live ones, none
    skipped or repeated in between. Absent: only the events committed after the attach."""


class Prompt(_Request):
    """Starts a turn; the `ok` says it started, the turn's end is a `result` push."""

    type: Literal["prompt"] = "prompt"
    session_id: SessionId
    text: Text


class Approve(_Request):
    """Bound like every approval: the daemon refuses it (`stale_approval`) unless `args_sha256` and
    `plan_digest` are the ones of the waiting call, as its `approval_request` gave them."""

    type: Literal["approve"] = "approve"
    session_id: SessionId
    call_id: Short
    args_sha256: Short
    plan_digest: Short
    scope: Literal["once", "session"] = "once"


class Deny(_Request):
    type: Literal["deny"] = "deny"
    session_id: SessionId
    call_id: Short
    reason: Short = ""
    interrupt: bool = Field(default=False, exclude_if=lambda v: not v)
    """True: the denial also stops the running turn, in the same step, as `interrupt` would (Ctrl-C at an approval
    question): no model call follows the denial. Absent (false): the turn goes on, the model told of the denial."""


class Interrupt(_Request):
    """Interrupts the session's running turn as Ctrl-C does (the batch is closed, the session stays resumable)."""

    type: Literal["interrupt"] = "interrupt"
    session_id: SessionId


class Detach(_Request):
    """Stops this connection's pushes for the session; the session keeps running (a waiting call parks)."""

    type: Literal["detach"] = "detach"
    session_id: SessionId


class Status(_Request):
    """Lists the daemon's sessions."""

    type: Literal["status"] = "status"


class Shutdown(_Request):
    """Drains the daemon as SIGTERM does. Any client may ask: every client is the daemon's own user."""

    type: Literal["shutdown"] = "shutdown"


Request = Annotated[
    Hello | NewSession | Attach | Prompt | Approve | Deny | Interrupt | Detach | Status | Shutdown,
    Field(discriminator="type"),
]
SessionRequest = NewSession | Attach | Prompt | Approve | Deny | Interrupt | Detach | Status | Shutdown
"""What the server hands to the Dispatcher: every request but the hello, which the server answers itself."""
RequestAdapter: TypeAdapter[Request] = TypeAdapter(Request)
REQUEST_TYPES: frozenset[str] = frozenset(
    m.model_fields["type"].default for m in get_args(get_args(Request)[0]))


# -- daemon -> client: replies ------------------------------------------------------------------------------------

class WaitingCall(_Wire):
    call_id: str
    tool: str
    how: Literal["asking", "parked"] = "asking"
    """`asking`: the driving client has its approval request now; `parked`: it waits for `strata approve|deny`
    or a driving client that attaches."""
    session_id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The session whose call it is when not the row's own: a child (or a session below it) that the row's delegate
    call waits on. Absent for the row's own call."""


class SessionInfo(_Wire):
    """One row of the `status` reply."""

    session_id: str
    status: str
    phase: str | None = None
    workspace: str = ""
    model: str = ""
    turn_running: bool = False
    drivers: int = 0
    watchers: int = 0
    waiting: tuple[WaitingCall, ...] = ()


class StoreCounts(_Wire):
    """The `status` reply's count of the store's writes since the daemon opened it."""

    commits: int
    """Transactions committed (a batch, its results, a session's start, ...): each durable when it returned."""
    fsyncs: int | None = None
    """Durable COMMITs made, one fsync each (group commit lets one carry several `commits`); null for a store
    that does not count them."""


class HelloOk(_Wire):
    type: Literal["hello_ok"] = "hello_ok"
    id: str
    v: int
    pid: int
    server: str
    versions: tuple[int, ...] = SUPPORTED_VERSIONS


class OkReply(_Wire):
    type: Literal["ok"] = "ok"
    id: str
    session_id: str | None = None
    """`new_session` and `attach`: the session."""
    role: Role | None = None
    """`attach`: the role granted."""
    sessions: tuple[SessionInfo, ...] | None = None
    """`status`: every session of the daemon."""
    store: StoreCounts | None = None
    """`status`: the store's commits and fsyncs since the daemon started."""


class ErrorReply(_Wire):
    type: Literal["error"] = "error"
    id: str | None
    """The request's id when one could be read from the line, else null."""
    code: ErrorCode
    message: str
    fatal: bool = False
    """The daemon closes the connection after this reply."""
    versions: tuple[int, ...] | None = None
    """`bad_version`: the versions the daemon speaks."""


# -- daemon -> client: pushes -------------------------------------------------------------------------------------

_EVENT_ENVELOPE = ("type", "session_id", "seq", "turn", "at")
_EVENT_CLASSES: dict[str, type[BaseModel]] = {
    c.model_fields["kind"].default: c for c in get_args(get_args(Event)[0])}


class EventPush(BaseModel):
    """A committed event of a session, flattened on the wire exactly as `run --json` prints it, plus its
    session id. Not strict: it carries the core event models, which read their own JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["event"] = "event"
    session_id: str
    seq: int
    turn: int
    at: datetime
    event: Event

    @classmethod
    def of(cls, item: StoredEvent) -> EventPush:
        return cls(session_id=item.session_id, seq=item.seq, turn=item.turn, at=item.at, event=item.event)

    @model_validator(mode="before")
    @classmethod
    def _unflatten(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "event" in data:
            return data
        event = {k: v for k, v in data.items() if k not in _EVENT_ENVELOPE}
        model = _EVENT_CLASSES.get(event.get("kind"))  # type: ignore[arg-type]
        if model is not None and "session_id" in model.model_fields and "session_id" in data:
            event["session_id"] = data["session_id"]  # an event's own field of that name (session_started)
        return {**{k: data[k] for k in _EVENT_ENVELOPE if k in data}, "event": event}

    @model_serializer(mode="plain")
    def _flatten(self) -> dict[str, Any]:
        view = event_view(StoredEvent(session_id=self.session_id, seq=self.seq, turn=self.turn, at=self.at,
                                      event=self.event))
        return {"type": "event", "session_id": self.session_id, **{k: v for k, v in view.items() if k != "type"}}


class ApprovalRequest(_Wire):
    """A call waits for the driving client's decision; everything it would run with is here."""

    type: Literal["approval_request"] = "approval_request"
    session_id: str
    call_id: str
    tool: str
    input: dict[str, Any]
    args_sha256: str
    asked_by: str
    reasons: tuple[str, ...]
    safety: SafetyLevel
    effect: EffectClass
    plan_digest: str
    pii: str = ""


class ParkedView(_Wire):
    call_id: str
    tool: str
    input: dict[str, Any]
    reasons: tuple[str, ...]
    asked_by: str


class ResultPush(_Wire):
    """The end of a turn, as `run --json` prints it (with `interrupted` for a turn an `interrupt` stopped)."""

    type: Literal["result"] = "result"
    session_id: str
    status: TurnStatus
    exit_code: int
    reason: str = ""
    unknown_receipts: int = 0
    parked: tuple[ParkedView, ...] = ()


class Notice(_Wire):
    """Something a client should show that answers no request (the daemon is draining, a driver left)."""

    type: Literal["notice"] = "notice"
    session_id: str | None = None
    level: Literal["info", "warning"] = "info"
    text: str
    kind: str | None = None
    """What happened, for a client to branch on: `detached`, `dropped` and `closed` end the client's attachment to
    the session (the last message it gets for it); `parked`, `driver_left` (to the watchers: nobody drives the
    session now), `driver_attached` (to the watchers: a client drives it again), `released`, `shutting_down`; null
    for a notice about the daemon itself. A client shows a kind it does not know by its text."""


class TextDelta(_Wire):
    """The model's text as it streams, before the message holding it is committed. Never persisted, and not
    guaranteed: a client that is behind misses some (the committed `assistant_message` or `batch_proposed` that
    follows has the whole text). `attempt` numbers the model call's attempts: a higher one means the text of the
    earlier attempts was void (retried). `offset`: the characters of this attempt's text before this delta, so a
    client that counted fewer knows it missed some."""

    type: Literal["text_delta"] = "text_delta"
    session_id: str
    text: str
    attempt: int
    offset: int


Push = Annotated[EventPush | ApprovalRequest | ResultPush | Notice | TextDelta, Field(discriminator="type")]
Reply = Annotated[HelloOk | OkReply | ErrorReply, Field(discriminator="type")]
ServerMessage = Annotated[
    HelloOk | OkReply | ErrorReply | EventPush | ApprovalRequest | ResultPush | Notice | TextDelta,
    Field(discriminator="type")]
ServerMessageAdapter: TypeAdapter[ServerMessage] = TypeAdapter(ServerMessage)


# -- what the Dispatcher answers (the server adds the request's id) ----------------------------------------------

class Ok(_Wire):
    session_id: str | None = None
    role: Role | None = None
    sessions: tuple[SessionInfo, ...] | None = None
    store: StoreCounts | None = None

    def reply(self, request_id: str) -> OkReply:
        return OkReply(id=request_id, session_id=self.session_id, role=self.role, sessions=self.sessions,
                       store=self.store)


class Refused(_Wire):
    code: ErrorCode
    message: str

    def reply(self, request_id: str) -> ErrorReply:
        return ErrorReply(id=request_id, code=self.code, message=self.message)


def encode(message: BaseModel) -> bytes:
    """One line of the wire: compact JSON, UTF-8, newline-terminated (a newline inside a string is escaped)."""
    return message.model_dump_json(exclude_none=False).encode() + b"\n"
