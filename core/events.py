"""The state log's events: frozen pydantic models in one discriminated union on a hand-written `kind` tag.

Sequence numbers, times and turns are assigned by the store inside the append transaction and live on the
`StoredEvent` envelope, never on the event itself. Bump `SCHEMA_VERSION` with any incompatible change and
teach `fold` to read the old shape."""


from datetime import datetime
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from core.errors import UnstorableEvent
from core.event_readback import reads_back, register, same, same_plain
from core.hashing import sha256_json
from core.json_text import encoder as json_encoder
from core.messages import BLOCK_CLASSES, ContentBlock, TextBlock, ToolUseBlock
from core.policy import PermissionRule
from core.vocabulary import EVENT_SCHEMA_VERSION, CheckName, EndStatus, OnAsk
from core.vocabulary import Mode as Mode  # defined with the other shared words; imported from here too

SCHEMA_VERSION = EVENT_SCHEMA_VERSION

CallStatus = Literal["ok", "error", "denied", "timeout", "unknown"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class PlannedCall(_Event):
    call_id: str
    tool: str
    input: dict[str, Any]
    input_sha256: str
    """sha256 of the input's canonical JSON (core/proposal.py). The stores leave it out of the stored JSON when it
    is that (`storable_json`), and reading fills it in again."""
    refused: tuple[str, ...] = Field(default=(), exclude_if=lambda reasons: not reasons)
    """Why the plan phase refused the call (core/proposal.py): over a limit, or an input that cannot be stored.
    A refused call stays in the conversation and is denied by the `plan` check before anything else runs. Left
    out of the JSON when empty, so a call's stored shape is what it was before refusals existed."""

    @model_validator(mode="before")
    @classmethod
    def _hash_of_the_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "input_sha256" not in data and isinstance(data.get("input"), dict):
            return {**data, "input_sha256": sha256_json(data["input"])}
        return data


class SessionStarted(_Event):
    kind: Literal["session_started"] = "session_started"
    session_id: str
    mode: Mode
    workspace: str
    model: str
    rules: tuple[PermissionRule, ...] = ()
    max_turns: int
    plan_digest: str
    parent_id: str | None = None
    on_ask: OnAsk = "deny"
    """What `ask` means with no person to ask: deny, or park for `strata approve`."""
    parent_call_id: str | None = Field(default=None, exclude_if=lambda call: call is None)
    """A delegated child session (agent/delegation.py): the parent's `delegate` call that started it (its
    `parent_id` is the parent). None for a top-level session or a fork. Left out of the JSON when None."""
    depth: int = Field(default=0, exclude_if=lambda depth: depth == 0)
    """How many delegations deep the session is (0: top level; a child of a top-level session: 1)."""
    tools_allowed: tuple[str, ...] | None = Field(default=None, exclude_if=lambda tools: tools is None)
    """A child's narrowed plan: the only tool names it may have (its parent's, less those the parent removed);
    None: every tool of its mode. Kept so a resume narrows the plan again."""
    project_hooks_digest: str | None = None
    """Digest of the trusted project hooks the session started with (None: none). A resume that would run
    without them refuses unless the project is trusted again or a person says to go on without them."""
    knowledge_digest: str | None = Field(default=None, exclude_if=lambda digest: digest is None)
    """The knowledge manifest the session started with (core/knowledge, `kn_...`; also covered by `plan_digest`);
    None: its mode may read no dataset, so it has no knowledge tools. Left out of the JSON when None."""
    declared_tools: dict[str, str] | None = Field(default=None, exclude_if=lambda tools: not tools)
    """Tool name -> digest of its declaration, for the plan's declared tools (from MCP servers; also covered by
    `plan_digest`), so a resume can name the ones that changed. Left out of the JSON when there are none."""


class UserMessage(_Event):
    """Text the user (or the runtime on the user's behalf, e.g. a reconciliation notice) adds to the next
    user message."""

    kind: Literal["user_message"] = "user_message"
    text: str
    source: Literal["user", "runtime"] = "user"
    reconciled_receipts: tuple[str, ...] = ()
    """Receipts whose reconciled outcome this (runtime) message reports to the model."""


class TokenUsage(_Event):
    """What one model response cost, as the provider reported it (summed in state across the session)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class AssistantMessage(_Event):
    """A model turn with no tool calls: a proposal to finish."""

    kind: Literal["assistant_message"] = "assistant_message"
    content: tuple[ContentBlock, ...]
    usage: TokenUsage | None = None


class BatchProposed(_Event):
    """A model turn with tool calls. Committed durably before any of its calls runs."""

    kind: Literal["batch_proposed"] = "batch_proposed"
    batch_id: str
    content: tuple[ContentBlock, ...]
    calls: tuple[PlannedCall, ...] = ()
    """The calls to run. The stores leave them out of the stored JSON when they are exactly the content's
    `tool_use` blocks in order (id, name and input, none refused: the usual batch), and an event read without them
    has those (`_calls_of_the_content`; calls given, even none, are kept as given)."""
    usage: TokenUsage | None = None

    @model_validator(mode="after")
    def _calls_of_the_content(self) -> Self:
        # After, not before: a before validator of the event would make every read of one go through a dict.
        if "calls" not in self.model_fields_set:
            object.__setattr__(self, "calls", tuple(
                PlannedCall.model_construct(call_id=b.id, tool=b.name, input=b.input, input_sha256=sha256_json(b.input))
                for b in self.content if isinstance(b, ToolUseBlock)))
        return self

    def calls_of_the_content(self) -> bool:
        """Whether `calls` are what reading the stored JSON without them gives back (see `calls`)."""
        uses = [b for b in self.content if isinstance(b, ToolUseBlock)]
        return len(uses) == len(self.calls) and all(
            c.call_id == b.id and c.tool == b.name and not c.refused and _same_input(c, b.input)
            for c, b in zip(self.calls, uses, strict=True))


_dumps = json_encoder(ensure_ascii=False)
"""`json.dumps(value, ensure_ascii=False)` with its encoder built once (json.dumps builds one per call when given an
option): the same text, the same errors."""


def _same_input(call: PlannedCall, given: dict[str, Any]) -> bool:
    """Whether reading `given` back as the call's input gives exactly the call's input and digest. Not `==`:
    Python takes True and 1.0 for 1 and ignores key order, so a call's own values could be read back as the
    content's (compared as JSON text in their own key order, and the digest reading would compute)."""
    if call.input is not given and not same_plain(call.input, given):  # same_plain: the same text, told cheaply
        try:
            if _dumps(call.input) != _dumps(given):
                return False
        except (TypeError, ValueError):  # not JSON: serialising the event fails and says so
            return False
    return call.input_sha256 == sha256_json(given)


class BlobRef(_Event):
    """Where the full output of a call lives when it was too large for the state log (the `blobs` table)."""

    sha256: str
    """sha256 of the output's UTF-8 bytes: the blob's key (equal outputs are stored once)."""
    size: int
    """The output's size in bytes."""


class CallResult(_Event):
    """A call's outcome, in the one `tool_result` shape. An output over the blob threshold is kept whole as a
    blob (`blob`); then `content` holds a bounded excerpt and a note naming the blob, and that excerpt is what
    the model sees."""

    kind: Literal["call_result"] = "call_result"
    batch_id: str
    call_id: str
    tool: str
    status: CallStatus
    content: str
    is_error: bool
    """The stored JSON leaves it out when false (`storable_json`); reading puts it back."""
    check: CheckName | None = None
    reasons: tuple[str, ...] = ()
    receipt_id: str | None = None
    duration_ms: float | None = None
    blob: BlobRef | None = None

    @model_validator(mode="before")
    @classmethod
    def _error_only_when_said(cls, data: Any) -> Any:
        if isinstance(data, dict) and "is_error" not in data and data.get("kind") == "call_result":
            return {**data, "is_error": False}
        return data


class ParkedCall(_Event):
    """A call that waits for a person's decision (`--on-ask park`): exactly what was asked about."""

    call_id: str
    tool: str
    input: dict[str, Any]
    """The arguments as they stood when approval was asked (after any rewrite)."""
    input_sha256: str
    plan_digest: str
    reasons: tuple[str, ...]
    asked_by: str
    """The policy rule or hook that asked."""


class CallsParked(_Event):
    """Calls of the open batch that wait for approval; the session is `awaiting_approval` and the batch stays
    open until `strata resume`."""

    kind: Literal["calls_parked"] = "calls_parked"
    batch_id: str
    calls: tuple[ParkedCall, ...]


ApprovalScope = Literal["once", "session"]


class ApprovalGranted(_Event):
    """A person approved one call, bound to its argument sha256 and the plan digest: a changed call needs a new
    approval."""

    kind: Literal["approval_granted"] = "approval_granted"
    call_id: str
    tool: str
    args_sha256: str
    plan_digest: str
    approver: str
    scope: ApprovalScope = "once"
    asked_by: str = ""


class ApprovalRejected(_Event):
    kind: Literal["approval_rejected"] = "approval_rejected"
    call_id: str
    tool: str
    args_sha256: str
    approver: str
    reason: str = ""


class GrantAdded(_Event):
    """"Always for this session": later calls of `tool` asked by the same rule or hook are approved. Restored
    on resume."""

    kind: Literal["grant_added"] = "grant_added"
    tool: str
    asked_by: str
    approver: str
    call_id: str
    pattern: str | None = Field(default=None, exclude_if=lambda pattern: pattern is None)
    """Only calls matching this allow pattern (e.g. `git *` for bash, core/grant_scope.py); None: every call."""


class BatchCompleted(_Event):
    kind: Literal["batch_completed"] = "batch_completed"
    batch_id: str


class RulesAdded(_Event):
    """Permission rules added on resume (`strata resume ID --allow RULE`)."""

    kind: Literal["rules_added"] = "rules_added"
    rules: tuple[PermissionRule, ...]


class SessionResumed(_Event):
    kind: Literal["session_resumed"] = "session_resumed"
    plan_digest: str
    open_batch_id: str | None = None
    max_turns: int | None = None
    """A new turn limit given on resume (`strata resume --max-turns`); None keeps the current one."""
    on_ask: OnAsk | None = None
    """A new `--on-ask` given on resume; None keeps the session's."""
    project_hooks_digest: str | None = None
    """Digest of the trusted project hooks this run continues with (None: none)."""
    project_hooks_waived_by: str | None = None
    """The person who chose to continue without the project's hooks (`--without-project-hooks`), and how."""
    knowledge_digest: str | None = Field(default=None, exclude_if=lambda digest: digest is None)
    """The knowledge manifest this run reads (built when it resumed). When it differs from the one the model was
    last told of, a `KnowledgeChanged` tells the model before its next turn. Left out of the JSON when None."""
    declared_tools: dict[str, str] | None = Field(default=None, exclude_if=lambda tools: not tools)
    """The declared tools of this run's plan (see `SessionStarted.declared_tools`). When they differ from the ones
    the model was last told of, a `ToolsChanged` tells the model before its next turn."""


class KnowledgeChanged(_Event):
    """The knowledge corpus the session reads changed since the model was last told of it (a document edited,
    added or removed between runs): `notice` becomes runtime text in the next user message, so the model never
    cites a procedure it read under another manifest as if it were current."""

    kind: Literal["knowledge_changed"] = "knowledge_changed"
    previous_digest: str | None
    digest: str | None
    changed: tuple[str, ...] = ()
    """`dataset/id` of documents whose content changed, when the previous manifest could still be read."""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    notice: str


class ToolsChanged(_Event):
    """Tools from MCP servers changed since the model was last told of them (a schema or policy changed, a tool was
    added or removed between runs): `notice` becomes runtime text in the next user message, so the model does not
    call a tool as it was."""

    kind: Literal["tools_changed"] = "tools_changed"
    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tools: dict[str, str]
    """The declared tools the model is told of now (name -> digest)."""
    notice: str


class RepairRequested(_Event):
    """Verification asked the model to repair its answer: `instruction` becomes the next user message (from the
    runtime). Counted against the repair budget, which survives resume."""

    kind: Literal["repair_requested"] = "repair_requested"
    reason: str
    instruction: str
    by: str
    """`builtin:<check>` or the Stop hook that asked."""
    receipts: tuple[str, ...] = ()
    """Unknown receipts this repair reported to the model."""


class TurnVerified(_Event):
    kind: Literal["turn_verified"] = "turn_verified"


class Compacted(_Event):
    """The oldest `upto_message` messages of the conversation are replaced, for the model, by `summary` (one user
    message), so that the next request fits the context budget. Only the conversation the model sees changes:
    the events those messages came from stay in the log, and folding the log up to this event shows them again.
    The cut always falls before an assistant message, so no tool_use is separated from its tool_result."""

    kind: Literal["compacted"] = "compacted"
    upto_message: int
    summary: str
    tokens_before: int
    """Estimated tokens of the request before compaction."""
    tokens_after: int
    """Estimated tokens of the request after it."""


class SessionEnded(_Event):
    kind: Literal["session_ended"] = "session_ended"
    status: EndStatus
    reason: str = ""


Event = Annotated[
    SessionStarted | UserMessage | AssistantMessage | BatchProposed | CallResult | BatchCompleted
    | RulesAdded | SessionResumed | TurnVerified | SessionEnded | CallsParked | ApprovalGranted | ApprovalRejected
    | GrantAdded | RepairRequested | Compacted | KnowledgeChanged | ToolsChanged,
    Field(discriminator="kind"),
]

EventAdapter: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))  # built at first use

_BY_KIND: dict[str, type[BaseModel]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(Event)[0])}
_KIND_HEAD = '{"kind":"'


def parse_event_json(data: str | bytes) -> Event:
    """`EventAdapter.validate_json(data)`, building only the validators of the kinds a process meets: the union's
    validator holds every kind's, and building it was a good part of `strata resume`'s start (a resume reads a few
    kinds; bench/cli_startup.py). JSON that begins with its kind, as the stores write and give it back, is
    validated by that kind's class, which is what the union does with it (its `kind` tag picks the class); anything
    else, and anything that class refuses, goes to the union, so an error is the union's, word for word."""
    head = data[:40]
    kind = head.decode("latin-1") if isinstance(head, bytes) else head
    if kind.startswith(_KIND_HEAD) and (cls := _BY_KIND.get(kind[len(_KIND_HEAD):].partition('"')[0])) is not None:
        try:
            return cls.model_validate_json(data)  # type: ignore[return-value]  # one of Event's classes
        except ValueError:
            pass  # the union's own words below
    return EventAdapter.validate_json(data)


def storable_json(event: Event, *, session_id: str | None = None, path: str | None = None) -> str:
    """The event's JSON as the stores keep it, checked to read back as an event: the store never commits what
    `fold` could not open again. Fields that are None, and those `_stored_exclude` names, are left out when the
    event reads back the same without them (null values inside a field, a tool's arguments, are kept): the parse
    of that text, and a comparison, is the whole check (serialising happens anyway).
    Raises UnstorableEvent naming the event's kind (and the session and database, when given)."""
    try:
        left_out = _stored_exclude(event)
        data = compact_json(event, left_out)
        if _told_from_values(event, left_out):  # reads back as this very event: no need to parse it to know
            return data
        try:  # compact when that reads back as this very event, else every field
            same = parse_event_json(data) == event
        except ValueError:  # a field that must be given even when None
            same = False
        if not same:
            data = event.model_dump_json()
            parse_event_json(data)
    except (ValueError, RecursionError) as exc:  # pydantic's serialisation and validation errors are ValueErrors
        raise UnstorableEvent(event.kind, _first_line(exc), session_id=session_id, path=path) from None
    return data


def compact_json(event: Event, left_out: Any) -> str:
    """`event.model_dump_json(exclude_none=True, exclude=left_out)`: its serializer asked directly with the two
    options that differ from their defaults (`model_dump_json` passes all sixteen, each of which the serializer
    parses, about half of what serialising a small event costs; every other one's default is the serializer's
    own). tests/core/test_compact_json.py holds the two to the same text."""
    return type(event).__pydantic_serializer__.to_json(
        event, exclude=left_out, exclude_none=True).decode()


def _told_from_values(event: Event, left_out: Any) -> bool:
    """Whether the compact JSON reads back as `event`, told from its values alone (core/event_readback.py): True
    only where parsing it would find the very same event; False where it cannot tell (then it is parsed)."""
    if type(left_out) is dict:  # a planned call's hash left out of calls written out: parsed
        return False
    try:
        return reads_back(type(event), event, frozenset(left_out) if left_out else frozenset())
    except Exception:  # an odd value's own methods: parsed, as always
        return False


def _calls_read_back(proposal: Any, calls: Any) -> bool:
    """Whether reading a proposal whose JSON leaves its calls out (`_calls_of_the_content`) gives `calls` back: each
    a plain PlannedCall of its tool_use block's id, name and (equal) input, the hash of that input, nothing refused.
    The blocks themselves read back equal (their own check), so their input is plain JSON and reads back equal.
    Asked only where `_stored_exclude` left the calls out, which it does only when `calls_of_the_content()` holds:
    that already compared each call's hash with its block input's (the hash reading computes), so it is not
    computed a second time here."""
    if type(calls) is not tuple:
        return False
    uses = [b for b in proposal.content if type(b) is ToolUseBlock]
    if len(uses) != len(calls):
        return False
    for call, block in zip(calls, uses, strict=True):
        if (type(call) is not PlannedCall or call.__pydantic_extra__ or call.__pydantic_private__ is not None
                or len(call.__dict__) != len(PlannedCall.model_fields) or not same(call.refused, ())
                or not same(call.call_id, block.id) or not same(call.tool, block.name)
                or not (call.input is block.input or same(call.input, block.input))
                or type(call.input_sha256) is not str):
            return False
    return True


register(PlannedCall, frozenset({"_hash_of_the_input"}),
         {"input_sha256": lambda call, digest: type(call.input) is dict and same(digest, sha256_json(call.input))})
register(BatchProposed, frozenset({"_calls_of_the_content"}), {"calls": _calls_read_back})
register(CallResult, frozenset({"_error_only_when_said"}), {"is_error": lambda _result, flag: same(flag, False)})


def _stored_exclude(event: Event) -> Any:
    """What else the stored JSON leaves out, because reading gives it back: a proposal's calls when they are its
    content's tool_use blocks, else each planned call's input hash (computed from its input again), and a
    result's empty reasons and false is_error (the defaults)."""
    if isinstance(event, BatchProposed):
        return {"calls"} if event.calls_of_the_content() else {"calls": {"__all__": {"input_sha256"}}}
    if isinstance(event, CallResult):
        return {name for name, empty in (("reasons", not event.reasons), ("is_error", not event.is_error)) if empty}
    return None


def _first_line(exc: BaseException) -> str:
    """What went wrong, in one short line: a validation error's first error, else the exception's first line."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False)
        if errors:
            return str(errors[0].get("msg", "invalid"))[:300]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class StoredEvent(BaseModel):
    """An event as the store holds it: the envelope is assigned by the store in the append transaction."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    session_id: str
    seq: int
    at: datetime
    turn: int
    event: Event


_STORED_FIELDS = ("session_id", "seq", "at", "turn", "event")
_set = object.__setattr__


def stored_event(session_id: str, seq: int, at: datetime, turn: int, event: Event) -> StoredEvent:
    """`StoredEvent.model_construct(...)` of these five values (the store's own, already of their types), built as
    that builds it (the same `__dict__`, fields set, no extra, no private values) without its loop over the fields
    and their aliases: the store makes one for every event it commits, on its connection thread.
    tests/core/test_event_readback.py holds the two equal."""
    stored = StoredEvent.__new__(StoredEvent)
    _set(stored, "__dict__", {"session_id": session_id, "seq": seq, "at": at, "turn": turn, "event": event})
    _set(stored, "__pydantic_fields_set__", set(_STORED_FIELDS))
    _set(stored, "__pydantic_extra__", None)
    _set(stored, "__pydantic_private__", None)
    return stored


_FINISHED_GIVEN = frozenset({"batch_id", "call_id", "tool", "status", "content", "is_error", "receipt_id",
                             "duration_ms"})


def finished_result(batch_id: str, call_id: str, tool: str, status: Literal["ok", "error"], content: str,
                    is_error: bool, receipt_id: str | None, duration_ms: float) -> CallResult:
    """`CallResult(batch_id=..., call_id=..., tool=..., status=..., content=..., is_error=..., receipt_id=...,
    duration_ms=...)`, a handler's result (tool_executor/result.py `finished`, once per call), built as validating
    these values builds it (the same `__dict__`, fields set, no extra, no private values) without the validation
    where every value is already exactly of its field's type; anything else is validated, as always.
    tests/core/test_event_readback.py holds the two equal."""
    if (type(batch_id) is str and type(call_id) is str and type(tool) is str and (status == "ok" or status == "error")
            and type(status) is str and type(content) is str and type(is_error) is bool
            and (receipt_id is None or type(receipt_id) is str) and type(duration_ms) is float):
        result = CallResult.__new__(CallResult)
        _set(result, "__dict__", {"kind": "call_result", "batch_id": batch_id, "call_id": call_id, "tool": tool,
                                  "status": status, "content": content, "is_error": is_error, "check": None,
                                  "reasons": (), "receipt_id": receipt_id, "duration_ms": duration_ms, "blob": None})
        _set(result, "__pydantic_fields_set__", set(_FINISHED_GIVEN))
        _set(result, "__pydantic_extra__", None)
        _set(result, "__pydantic_private__", None)
        return result
    return CallResult(batch_id=batch_id, call_id=call_id, tool=tool, status=status, content=content,
                      is_error=is_error, receipt_id=receipt_id, duration_ms=duration_ms)


def text_block(text: str) -> TextBlock:
    return TextBlock(text=text)


def tool_uses(content: tuple[ContentBlock, ...]) -> list[ToolUseBlock]:
    return [b for b in content if isinstance(b, ToolUseBlock)]


def _built(cls: type[BaseModel], values: dict[str, Any], given: frozenset[str]) -> Any:
    """An instance of `cls` holding `values` (every field, in field order) with `given` as its fields set, no extra
    and no private values: what validating values already of their fields' exact types builds."""
    built = cls.__new__(cls)
    _set(built, "__dict__", values)
    _set(built, "__pydantic_fields_set__", set(given))
    _set(built, "__pydantic_extra__", None)
    _set(built, "__pydantic_private__", None)
    return built


_COMPLETED_GIVEN = frozenset({"batch_id"})


def batch_completed(batch_id: str) -> BatchCompleted:
    """`BatchCompleted(batch_id=batch_id)`, without the validation when `batch_id` is exactly a str (the loop closes
    every batch with one). tests/core/test_fast_models.py holds the two equal."""
    if type(batch_id) is str:
        return _built(BatchCompleted, {"kind": "batch_completed", "batch_id": batch_id},  # type: ignore[no-any-return]
                      _COMPLETED_GIVEN)
    return BatchCompleted(batch_id=batch_id)


_PLANNED_GIVEN = frozenset({"call_id", "tool", "input", "input_sha256", "refused"})


def planned_call(call_id: str, tool: str, args: dict[str, Any], input_sha256: str,
                 refused: tuple[str, ...]) -> PlannedCall:
    """`PlannedCall(call_id=..., tool=..., input=args, input_sha256=..., refused=...)` (the plan phase's, one a
    call), without the validation when every value is exactly of its field's type; the input is copied, as
    validation copies a dict (its values are kept as they are, as `Any` keeps them). Anything else is validated.
    tests/core/test_fast_models.py holds the two equal."""
    if (type(call_id) is str and type(tool) is str and type(args) is dict and all(type(k) is str for k in args)
            and type(input_sha256) is str and type(refused) is tuple and all(type(r) is str for r in refused)):
        return _built(PlannedCall, {"call_id": call_id, "tool": tool, "input": dict(args),  # type: ignore[no-any-return]
                                    "input_sha256": input_sha256, "refused": refused}, _PLANNED_GIVEN)
    return PlannedCall(call_id=call_id, tool=tool, input=args, input_sha256=input_sha256, refused=refused)


_PROPOSED_GIVEN = frozenset({"batch_id", "content", "calls", "usage"})


def batch_proposed(batch_id: str, content: tuple[ContentBlock, ...], calls: tuple[PlannedCall, ...],
                   usage: TokenUsage | None) -> BatchProposed:
    """`BatchProposed(batch_id=..., content=..., calls=..., usage=...)` (the plan phase's, one a model turn with
    calls), without the validation when every value is exactly of its field's type: blocks and calls of exactly
    their classes, which validation keeps as they are (and calls given leave `_calls_of_the_content` nothing to
    do). Anything else is validated. tests/core/test_fast_models.py holds the two equal."""
    if (type(batch_id) is str and type(content) is tuple and all(type(b) in BLOCK_CLASSES for b in content)
            and type(calls) is tuple and all(type(c) is PlannedCall for c in calls)
            and (usage is None or type(usage) is TokenUsage)):
        return _built(BatchProposed, {"kind": "batch_proposed", "batch_id": batch_id,  # type: ignore[no-any-return]
                                      "content": content, "calls": calls, "usage": usage}, _PROPOSED_GIVEN)
    return BatchProposed(batch_id=batch_id, content=content, calls=calls, usage=usage)
