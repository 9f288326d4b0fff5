"""Folded session state and `fold`, the only restore path.

`fold(events)` is pure: it builds a fresh `SessionState` from the log and touches nothing else. The loop keeps
its state current by applying each event it commits with the same `apply`, so the live state and a restored
state cannot drift apart. A snapshot (core/snapshot.py) is a fold's state saved at a seq: resume loads it and
applies the rest of the log with this same `apply`, which gives exactly `fold` of the whole log."""


from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, assert_never

from core.compaction import block_chars, compacted_messages, message_chars, messages_chars
from core.events import (
    ApprovalGranted,
    ApprovalRejected,
    AssistantMessage,
    BatchCompleted,
    BatchProposed,
    CallResult,
    CallsParked,
    Compacted,
    GrantAdded,
    KnowledgeChanged,
    Mode,
    ParkedCall,
    PlannedCall,
    RepairRequested,
    RulesAdded,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    StoredEvent,
    TokenUsage,
    ToolsChanged,
    TurnVerified,
    UserMessage,
)
from core.id_digests import IdDigests
from core.messages import ContentBlock, Message, TextBlock, message_of, tool_result_of
from core.policy import PermissionRule
from core.record import record
from core.vocabulary import EndStatus, OnAsk


class FoldError(ValueError):
    """The log breaks an invariant of the state machine (a corrupt or hand-edited log)."""


# No docstring: it is part of the state's schema digest (core/snapshot_version.py), and a new one would retire
# every stored snapshot.
@dataclass
class OpenBatch:
    batch_id: str
    content: tuple[ContentBlock, ...]
    calls: tuple[PlannedCall, ...]
    results: dict[str, CallResult] = field(default_factory=dict)
    proposed_seq: int = 0

    def pending(self) -> list[PlannedCall]:
        return [c for c in self.calls if c.call_id not in self.results]


@record
class Approval:
    """A person's recorded decision on one call, bound to the arguments and plan it was made for."""

    decision: Literal["approved", "rejected"]
    args_sha256: str
    approver: str
    plan_digest: str = ""
    reason: str = ""


@record
class Grant:
    """"Always for this session": calls of `tool` asked by `asked_by` are approved by `approver`."""

    tool: str
    asked_by: str
    approver: str
    pattern: str | None = None
    """Only calls matching this allow pattern (core/grant_scope.py), or every call of the tool (None)."""


@dataclass
class Counters:
    """Guard counters: restored by fold, so limits hold across resume."""

    assistant_turns: int = 0
    tool_calls: int = 0
    denials: int = 0
    unknown_outcomes: int = 0
    verified_turns: int = 0
    resumes: int = 0
    repairs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add_usage(self, usage: TokenUsage | None) -> None:
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cache_read_tokens += usage.cache_read_tokens
            self.cache_write_tokens += usage.cache_write_tokens


# No docstring: it is part of the state's schema digest (core/snapshot_version.py), and a new one would retire
# every stored snapshot.
@dataclass
class SessionState:
    session_id: str = ""
    mode: Mode = "headless"
    workspace: str = ""
    model: str = ""
    max_turns: int = 0
    plan_digest: str = ""
    parent_id: str | None = None
    parent_call_id: str | None = None
    """A delegated child: the parent's `delegate` call that started it (`SessionStarted.parent_call_id`)."""
    depth: int = 0
    """Delegations deep (0: top level)."""
    tools_allowed: list[str] | None = None
    """A child's narrowed plan (`SessionStarted.tools_allowed`); None: every tool of its mode."""
    on_ask: OnAsk = "deny"
    project_hooks_digest: str | None = None
    """The trusted project hooks the session last ran with (see `SessionStarted.project_hooks_digest`)."""
    knowledge_digest: str | None = None
    """The knowledge manifest the session's latest run reads (`SessionStarted`/`SessionResumed.knowledge_digest`)."""
    knowledge_told: str | None = None
    """The knowledge manifest the model was last told of (at the start, or by a `KnowledgeChanged`): while it
    differs from `knowledge_digest`, the model has yet to hear of the change."""
    declared_tools: dict[str, str] = field(default_factory=dict)
    """The declared (MCP) tools of the latest run's plan, name -> digest."""
    declared_told: dict[str, str] = field(default_factory=dict)
    """The declared tools the model was last told of (at the start, or by a `ToolsChanged`)."""
    rules: list[PermissionRule] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    open_batch: OpenBatch | None = None
    counters: Counters = field(default_factory=Counters)
    unknown_receipts: dict[str, str] = field(default_factory=dict)
    """Receipt id -> call id of calls the model was told have an unknown outcome, until it hears the
    reconciled one."""
    parked: dict[str, ParkedCall] = field(default_factory=dict)
    """Calls of the open batch waiting for a person's decision (`--on-ask park`)."""
    approvals: dict[str, Approval] = field(default_factory=dict)
    """Recorded decisions on calls that have no result yet, by call id."""
    grants: list[Grant] = field(default_factory=list)
    repairs_used: int = 0
    """Repairs asked since the person's last message (the budget is per request of the person)."""
    reported_unknown: set[str] = field(default_factory=set)
    """Unknown receipts verification has already pointed out to the model."""
    ended: EndStatus | None = None
    end_reason: str = ""
    context_chars: int = 0
    """The size of `messages` as `core.compaction.messages_chars` counts it, kept current by `apply` so the
    context budget is checked without walking the conversation."""
    compactions: int = 0
    call_ids: IdDigests = field(default_factory=IdDigests)
    """Every call id the session has used (compacted turns and forks included): the plan phase renames a model's
    id that repeats one (core/proposal.py), since an id names one call for the API and for the receipts. Kept as
    digests, so a long session's snapshot stays small (core/id_digests.py)."""
    last_seq: int = 0
    started: bool = False

    @property
    def turn(self) -> int:
        return self.counters.assistant_turns


def apply(state: SessionState, stored: StoredEvent) -> None:
    """Apply one event to `state` in place. Raises FoldError on an impossible sequence."""
    if stored.seq <= state.last_seq:
        raise FoldError(f"seq {stored.seq} does not follow {state.last_seq}")
    ev = stored.event
    if not state.started and not isinstance(ev, SessionStarted):
        raise FoldError(f"log starts with {ev.kind}, not session_started")
    state.last_seq = stored.seq
    match ev:
        case SessionStarted():
            if state.started:
                raise FoldError("second session_started")
            state.started = True
            state.session_id = ev.session_id
            state.mode = ev.mode
            state.workspace = ev.workspace
            state.model = ev.model
            state.max_turns = ev.max_turns
            state.plan_digest = ev.plan_digest
            state.parent_id = ev.parent_id
            state.parent_call_id = ev.parent_call_id
            state.depth = ev.depth
            state.tools_allowed = list(ev.tools_allowed) if ev.tools_allowed is not None else None
            state.on_ask = ev.on_ask
            state.project_hooks_digest = ev.project_hooks_digest
            state.knowledge_digest = state.knowledge_told = ev.knowledge_digest
            state.declared_tools = dict(ev.declared_tools or {})
            state.declared_told = dict(state.declared_tools)
            state.rules = list(ev.rules)
        case UserMessage():
            _require_no_open_batch(state, ev.kind)
            state.ended = None
            if ev.source == "user":
                state.repairs_used = 0
            for receipt_id in ev.reconciled_receipts:
                state.unknown_receipts.pop(receipt_id, None)
            _add_user_text(state, ev.text)
        case AssistantMessage():
            _require_no_open_batch(state, ev.kind)
            message = Message(role="assistant", content=ev.content)
            state.messages.append(message)
            state.context_chars += message_chars(message)
            state.counters.assistant_turns += 1
            state.counters.add_usage(ev.usage)
            state.ended = None  # the session runs again (e.g. resumed with a higher turn limit)
        case BatchProposed():
            _require_no_open_batch(state, ev.kind)
            if not ev.calls:
                raise FoldError(f"batch {ev.batch_id} has no calls")
            state.open_batch = OpenBatch(ev.batch_id, ev.content, ev.calls, proposed_seq=stored.seq)
            state.call_ids.update(c.call_id for c in ev.calls)
            state.counters.assistant_turns += 1
            state.counters.add_usage(ev.usage)
            state.ended = None
        case CallResult():
            batch = state.open_batch
            if batch is None or batch.batch_id != ev.batch_id:
                raise FoldError(f"call_result for batch {ev.batch_id}, which is not open")
            if ev.call_id not in {c.call_id for c in batch.calls}:
                raise FoldError(f"call_result for {ev.call_id}, which batch {ev.batch_id} did not propose")
            if ev.call_id in batch.results:
                raise FoldError(f"second call_result for {ev.call_id}")
            batch.results[ev.call_id] = ev
            state.parked.pop(ev.call_id, None)
            state.approvals.pop(ev.call_id, None)
            state.counters.tool_calls += 1
            if ev.status == "denied":
                state.counters.denials += 1
            elif ev.status == "unknown":
                state.counters.unknown_outcomes += 1
                if ev.receipt_id is not None:
                    state.unknown_receipts[ev.receipt_id] = ev.call_id
        case BatchCompleted():
            batch = state.open_batch
            if batch is None or batch.batch_id != ev.batch_id:
                raise FoldError(f"batch_completed for {ev.batch_id}, which is not open")
            missing = batch.pending()
            if missing:
                raise FoldError(f"batch {ev.batch_id} completed without results for "
                                f"{', '.join(c.call_id for c in missing)}")
            # Built as validation builds them, without it where the values are already of their exact types
            # (core/messages.py): the fold makes these every model turn.
            proposal = message_of("assistant", batch.content)
            results = message_of("user", tuple(
                tool_result_of(c.call_id, batch.results[c.call_id].content, batch.results[c.call_id].is_error)
                for c in batch.calls
            ))
            state.messages += (proposal, results)
            state.context_chars += message_chars(proposal) + message_chars(results)
            state.open_batch = None
            state.parked.clear()
        case CallsParked():
            batch = state.open_batch
            if batch is None or batch.batch_id != ev.batch_id:
                raise FoldError(f"calls_parked for batch {ev.batch_id}, which is not open")
            pending = {c.call_id for c in batch.pending()}
            for parked in ev.calls:
                if parked.call_id not in pending:
                    raise FoldError(f"calls_parked names {parked.call_id}, which is not a pending call")
                state.parked[parked.call_id] = parked
                state.approvals.pop(parked.call_id, None)  # a new question: an older answer no longer stands
        case ApprovalGranted():
            state.approvals[ev.call_id] = Approval("approved", ev.args_sha256, ev.approver, ev.plan_digest)
        case ApprovalRejected():
            state.approvals[ev.call_id] = Approval("rejected", ev.args_sha256, ev.approver, reason=ev.reason)
        case GrantAdded():
            state.grants.append(Grant(ev.tool, ev.asked_by, ev.approver, ev.pattern))
        case RulesAdded():
            state.rules.extend(ev.rules)
        case SessionResumed():
            state.counters.resumes += 1
            state.plan_digest = ev.plan_digest
            if ev.max_turns is not None:
                state.max_turns = ev.max_turns
            if ev.on_ask is not None:
                state.on_ask = ev.on_ask
            state.project_hooks_digest = ev.project_hooks_digest
            state.knowledge_digest = ev.knowledge_digest
            state.declared_tools = dict(ev.declared_tools or {})
        case KnowledgeChanged():
            _require_no_open_batch(state, ev.kind)
            state.knowledge_told = ev.digest
            _add_user_text(state, ev.notice)
        case ToolsChanged():
            _require_no_open_batch(state, ev.kind)
            state.declared_told = dict(ev.tools)
            _add_user_text(state, ev.notice)
        case RepairRequested():
            _require_no_open_batch(state, ev.kind)
            state.counters.repairs += 1
            state.repairs_used += 1
            state.reported_unknown.update(ev.receipts)
            _add_user_text(state, ev.instruction)
        case Compacted():
            _require_no_open_batch(state, ev.kind)
            try:
                state.messages = compacted_messages(state.messages, ev.upto_message, ev.summary)
            except ValueError as exc:
                raise FoldError(str(exc)) from None
            state.context_chars = messages_chars(state.messages)
            state.compactions += 1
        case TurnVerified():
            state.counters.verified_turns += 1
        case SessionEnded():
            _require_no_open_batch(state, ev.kind)
            state.ended = ev.status
            state.end_reason = ev.reason
        case _:
            assert_never(ev)


def _add_user_text(state: SessionState, text: str) -> None:
    """Text joins the next user message (after tool results, if the last message holds them)."""
    block = TextBlock(text=text)
    state.context_chars += block_chars(block)
    last = state.messages[-1] if state.messages else None
    if last is not None and last.role == "user":
        state.messages[-1] = Message(role="user", content=(*last.content, block))
    else:
        state.messages.append(Message(role="user", content=(block,)))


def _require_no_open_batch(state: SessionState, kind: str) -> None:
    if state.open_batch is not None:
        raise FoldError(f"{kind} while batch {state.open_batch.batch_id} is open")


def fold(events: Iterable[StoredEvent]) -> SessionState:
    """Restore a session's state from its log. Pure: a fresh state, nothing else touched."""
    state = SessionState()
    for stored in events:
        apply(state, stored)
    if not state.started:
        raise FoldError("empty log")
    return state
