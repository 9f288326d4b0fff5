"""The `delegate` tool's handler: a child session on a task, run in this process with the parent's plan narrowed
(core/tools/delegate.py declares the tool). One `Delegator` serves one session (the parent).

Exactly once: the child's id comes from the call's idempotency key and is on the call's receipt before the child
starts. Entering the handler again for the same call (a resume after a crash re-enters it, tool_executor) finds
that child: one that finished gives its recorded result and is not run again; one that did not is resumed; only
when none exists is it started. One that another process drives at that moment (`strata resume CHILD`, holding its
lease) is waited for a moment (CHILD_LEASE_WAIT_S), then this session parks (ToolWaits: the call stays
`dispatched`) until it is resumed once that process is done; the call neither fails nor runs the child beside it.
So too when another process takes the child over while this one drives it (its lease expired unrenewed, this
process stopped past it): the call takes the child's result if that process finished it within the wait, else
parks.

The child gets the parent's tools or fewer (`tools` may only remove; names the parent lacks are refused), the
parent's turn limit or a lower one (a `max_turns` above it is refused), no `delegate` once it is
`delegate_max_depth` deep, the parent's session rules (config rules apply to every session) but not its "always"
grants unless the setting `delegate_grants` passes them down, the parent's mode and its `on_ask`, and the parent's
approver, whose requests name the child.
Its final text, status and unknown-effect count (its own, and those of the sessions it delegated to in turn) are
the tool's result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import structlog

from agent.lineage import ChildLink, children_of
from agent.models import child_model_name, closed_on_failure, model_from_spec
from agent.outcome import RunOutcome
from core.delegate_keys import DELEGATE, child_of
from core.errors import LeaseLost, SessionActive, SessionNotFound, StrataError, UsageError
from core.events import Mode
from core.faults import fault_point
from core.messages import TextBlock
from core.model import ModelAdapter
from core.policy import PermissionRule
from core.record import record
from core.state import SessionState
from core.tools import BoundToolPlan, ToolContext, ToolError, ToolOutput, ToolWaits
from core.tools.delegate import child_session_id
from core.vocabulary import OnAsk, SessionStatus
from memory import SessionRecord
from memory.leases import describe
from memory.restore import restore
from memory.rows import LeaseHolder
from memory.short_lease import SHORT_LEASE_S
from memory.store import EventStore
from tool_executor import Approver
from tool_executor.approval import ApprovalAnswer, ApprovalRequest
from tool_executor.verdicts import Parked

log = structlog.get_logger("strata.delegation")

FINISHED = frozenset({"completed", "incomplete", "failed"})
CHILD_LEASE_WAIT_S = SHORT_LEASE_S
"""How long a delegate call waits for its child's lease while another live process holds it, before its session
parks: a decision (`strata approve|deny CHILD`) holds it for milliseconds, a process that drives the child for as
long as it runs (as the daemon's turns wait, memory/short_lease.py)."""
LEASE_POLL_S = 0.1
"""How often a wait for a child's lease reads it again."""
T = TypeVar("T")


@record
class ChildApprover:
    """The parent's approver, asked about a child's call: the request names the child and its parent."""

    inner: Approver
    child_id: str
    parent_id: str

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer | Parked:
        named = replace(request, reasons=(*request.reasons,
                                          f"in child session {self.child_id} delegated by {self.parent_id}"))
        return await self.inner.ask(named)


class LiveChild(Protocol):
    """A child session this process drives (agent/session.py's LiveSession)."""

    @property
    def state(self) -> SessionState: ...

    async def run(self, prompt: str | None = None) -> RunOutcome: ...

    async def release(self, status: SessionStatus | None) -> None: ...


@record
class NewChild:
    """What a child session starts with."""

    link: ChildLink
    model: ModelAdapter
    workspace: Path
    mode: Mode
    rules: tuple[PermissionRule, ...]
    prompt: str
    max_turns: int
    approver: Approver | None
    on_ask: OnAsk


class ChildSessions(Protocol):
    """How a child session is started or resumed (agent/session.py serves it, over the parent's runtime)."""

    async def start(self, child: NewChild) -> LiveChild: ...

    async def resume(self, child_id: str, approver: Approver | None, on_ask: OnAsk) -> LiveChild: ...


class Delegator:
    """The delegate handler of one parent session."""

    def __init__(self, store: EventStore, sessions: ChildSessions, *, max_depth: int, approver: Approver | None,
                 on_ask: OnAsk, alive: Callable[[LeaseHolder], bool], pass_grants: bool = False) -> None:
        self.store = store
        self.alive = alive
        """Whether a lease's holder still runs (memory/leases.py `make_liveness`)."""
        self.sessions = sessions
        self.max_depth = max_depth
        self.approver = approver
        self.on_ask = on_ask
        self.pass_grants = pass_grants
        """Whether a child starts with the parent's "always" grants (setting `delegate_grants`)."""
        self.state: SessionState | None = None
        """The parent's state (set once its loop exists)."""
        self.plan: BoundToolPlan | None = None
        """The parent's plan (set once it is bound)."""

    async def handle(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        assert self.state is not None and self.plan is not None
        child_id = child_session_id(ctx.idempotency_key)
        try:
            record = await self.store.get_session(child_id)
        except SessionNotFound:
            record = None
        try:
            if record is not None:
                record = await self._free(child_id, record)
            if record is not None and record.status in FINISHED:
                log.info("delegate: child finished before; its recorded result is used", child=child_id)
                return await self._recorded(child_id)
            live = await (self._resume(child_id) if record is not None else self._start(child_id, args, ctx))
            try:
                outcome = await _drive(live)
            except anyio.get_cancelled_exc_class():
                if ctx.on_interrupt is not None:  # what is certain: the child stopped with the parent
                    ctx.on_interrupt(f"child session {child_id} was stopped with this session, its own calls "
                                     f"settled in it (strata show {child_id}); it finishes only if resumed itself")
                raise
            except LeaseLost as exc:
                return await self._taken_over(child_id, exc)
        except StrataError as exc:
            raise ToolError(f"child session {child_id}: {exc}") from None
        if outcome.status == "awaiting_approval":  # the child parked: so does this session, until both are resumed
            assert self.state is not None
            # The session to decide holds the parked call: the child, or a descendant it waits on in turn.
            decide = await waiting_child(self.store, child_id) or child_id
            raise ToolWaits(f"child session {child_id} waits for approval ({outcome.reason}); decide with "
                            f"strata approve {decide} --all (or name the call, or strata deny), then "
                            f"strata resume {self.state.session_id}")
        fault_point("after_child")
        return _output(outcome.status, outcome.reason, outcome.unknown_receipts, _final_text(live.state), child_id,
                       await unknown_below(self.store, child_id))

    def _allowed(self, args: Mapping[str, Any]) -> tuple[str, ...]:
        """The child's tools: the ones asked for, or all of the parent's it may pass down (not a tool only this
        process has, as a channel's `reply`: `strata resume CHILD` elsewhere must build the same plan, to which the
        child's approvals are bound)."""
        assert self.plan is not None
        mine = sorted(name for name, spec in self.plan.items() if spec.passed_down)
        asked = args.get("tools")
        if asked is None:
            return tuple(mine)
        kept = sorted(set(asked) & set(self.plan) - set(mine))
        if kept:
            raise ToolError(f"a child cannot get {', '.join(kept)}: only this session can use it (a child gets "
                            f"{', '.join(mine)} or fewer)")
        missing = sorted(set(asked) - set(mine))
        if missing:
            raise ToolError(f"a child gets only tools this session has; it has no {', '.join(missing)} "
                            f"(it has {', '.join(mine)})")
        return tuple(sorted(set(asked)))

    def _max_turns(self, args: Mapping[str, Any]) -> int:
        """The child's turn limit: the one asked for, or the parent's; never more than the parent's (refused, as a
        tool the parent lacks is)."""
        assert self.state is not None
        mine = self.state.max_turns
        asked = args.get("max_turns")
        if asked is None:
            return mine
        if int(asked) > mine:
            raise ToolError(f"a child gets at most this session's turn limit: max_turns {int(asked)} is over its "
                            f"{mine}")
        return int(asked)

    async def _start(self, child_id: str, args: Mapping[str, Any], ctx: ToolContext) -> LiveChild:
        assert self.state is not None
        parent = self.state
        if parent.depth + 1 > self.max_depth:
            raise ToolError(f"delegation deeper than {self.max_depth} is refused "
                            "(setting delegate_max_depth)")
        allowed = self._allowed(args)
        max_turns = self._max_turns(args)
        index = len(await children_of(self.store, parent.session_id))
        link = ChildLink(session_id=child_id, parent_id=parent.session_id, parent_call_id=ctx.call_id,
                         depth=parent.depth + 1, tools_allowed=allowed,
                         grants=tuple(parent.grants) if self.pass_grants else ())
        log.info("delegate: starting child", child=child_id, depth=link.depth, tools=list(allowed))
        # the child's once it started: closed when it is released (`_drive`)
        async with closed_on_failure(model_from_spec(child_model_name(parent.model, index))) as model:
            return await self.sessions.start(NewChild(
                link=link, model=model, workspace=Path(parent.workspace), mode=parent.mode,
                rules=tuple(parent.rules), prompt=str(args["task"]), max_turns=max_turns,
                approver=self._approver(child_id), on_ask=self.on_ask))

    async def _free(self, child_id: str, record: SessionRecord) -> SessionRecord:
        """The child's record once no other live process holds its lease, waiting up to CHILD_LEASE_WAIT_S for
        it (`strata approve CHILD` holds it for milliseconds; a process that drives the child, for as long as it
        runs); past that, this session parks (ToolWaits, as `_resume`)."""
        def free(r: SessionRecord) -> bool:
            return r.lease is None or not self.alive(r.lease)

        record = await _polled(record, lambda: self.store.get_session(child_id), free, CHILD_LEASE_WAIT_S)
        if record.lease is not None and not free(record):
            assert self.state is not None
            owner = describe(record.lease)
            log.info("delegate: the child is driven by another process; this session parks", child=child_id,
                     owner=owner)
            raise ToolWaits(busy_reason(child_id, owner, self.state.session_id))
        return record

    async def _taken_over(self, child_id: str, lost: LeaseLost) -> ToolOutput:
        """The child this call drove was taken over by another process (its lease expired unrenewed while this
        process was stopped, and that process took it): the call neither fails nor runs the child beside it. The
        child's recorded result once that process finished it (waited for as `_free` waits); else this session
        parks (ToolWaits: the call stays `dispatched`) until it is resumed once that process is done."""
        assert self.state is not None
        log.info("delegate: the child was taken over by another process", child=child_id, owner=lost.owner)
        record = await self._free(child_id, await self.store.get_session(child_id))
        if record.status in FINISHED:
            return await self._recorded(child_id)
        raise ToolWaits(f"child session {child_id} was taken over by another process while this one drove it; "
                        f"once it is done, strata resume {self.state.session_id}")

    async def _resume(self, child_id: str) -> LiveChild:
        """The child this call started, resumed; one another process drives now (`strata resume CHILD`, holding
        its lease) is neither failed nor run beside it: this session parks, the call's receipt stays `dispatched`,
        and a resume once that process is done takes the child's result."""
        log.info("delegate: resuming the child this call started", child=child_id)
        try:
            return await self.sessions.resume(child_id, self._approver(child_id), self.on_ask)
        except SessionActive as exc:
            assert self.state is not None
            log.info("delegate: the child is driven by another process; this session parks", child=child_id,
                     owner=exc.owner)
            raise ToolWaits(busy_reason(child_id, exc.owner, self.state.session_id)) from None

    def _approver(self, child_id: str) -> Approver | None:
        assert self.state is not None
        inner = self.approver
        return ChildApprover(inner, child_id, self.state.session_id) if inner is not None else None

    async def _recorded(self, child_id: str) -> ToolOutput:
        restored = await restore(self.store, child_id)
        state = restored.state
        unknown = len(await self.store.list_receipts(child_id, status="unknown"))
        status = state.ended or (await self.store.get_session(child_id)).status
        return _output(status, "", unknown, _final_text(state), child_id, await unknown_below(self.store, child_id))


async def waiting_child(store: EventStore, session_id: str) -> str | None:
    """The child session whose parked call a delegate call of `session_id`'s open batch waits on (its receipt
    `dispatched`, the child `awaiting_approval`), followed down through a child that itself waits on its own child
    to the one that holds the parked call; None when no delegate call waits."""
    found: str | None = None
    current = session_id
    for _ in range(64):  # deeper than any delegate_max_depth; a bound, not a limit anyone meets
        receipts = await store.list_receipts(current, status="dispatched")
        child = next((c for r in receipts if r.tool == DELEGATE and (c := child_of(r.resource_keys)) is not None), None)
        if child is None:
            break
        try:
            record = await store.get_session(child)
        except SessionNotFound:
            break
        if record.status != "awaiting_approval":
            break
        found = current = child
    return found


async def busy_child(store: EventStore, session_id: str, alive: Callable[[LeaseHolder], bool]) -> Busy | None:
    """The session another process drives (its lease held by a live holder) that a delegate call of
    `session_id`'s open batch waits on: its child, or a descendant it waits on in turn (followed down as
    `waiting_child` does); None when no delegate call waits on a busy session."""
    current = session_id
    for _ in range(64):  # deeper than any delegate_max_depth; a bound, not a limit anyone meets
        receipts = await store.list_receipts(current, status="dispatched")
        child = next((c for r in receipts if r.tool == DELEGATE and (c := child_of(r.resource_keys)) is not None), None)
        if child is None:
            return None
        try:
            record = await store.get_session(child)
        except SessionNotFound:
            return None
        if record.lease is not None and alive(record.lease):
            return Busy(child, describe(record.lease))
        current = child
    return None


async def busy_child_after_wait(store: EventStore, session_id: str, alive: Callable[[LeaseHolder], bool],
                                wait_s: float = CHILD_LEASE_WAIT_S) -> Busy | None:
    """`busy_child`, waited for up to `wait_s` (CHILD_LEASE_WAIT_S), as a delegate call waits for its child's
    lease: a lease held for a moment (`strata approve CHILD` recording a decision) is not taken for a process that
    drives the child. The session still busy once the wait is over, or None as soon as none is."""
    return await _polled(await busy_child(store, session_id, alive), lambda: busy_child(store, session_id, alive),
                        lambda busy: busy is None, wait_s)


async def _polled(value: T, read: Callable[[], Awaitable[T]], done: Callable[[T], bool], wait_s: float) -> T:
    """`value`, read again with `read` every LEASE_POLL_S until `done` says so or `wait_s` passed: the last value
    read (the one `done` accepted, or the one read at the deadline). Each pause is an async sleep, so the wait holds
    no other task of the process (a daemon's other requests, tests/serve/test_busy_child_wait_blocks_no_one.py)."""
    deadline = anyio.current_time() + wait_s
    while not done(value) and anyio.current_time() < deadline:
        await anyio.sleep(LEASE_POLL_S)
        value = await read()
    return value


def busy_prompt_refusal(session_id: str, busy: Busy) -> UsageError:
    """What refuses a new prompt for `session_id` while the child its delegate call waits on is driven by another
    process: the open batch would park again on it, and the prompt go unheard."""
    return UsageError(f"session {session_id} is waiting for child session {busy.session_id}, which another process "
                      f"runs ({busy.owner}); a new prompt cannot be given until it is done",
                      hint=f"once that process is done, strata resume {session_id} (with the prompt, if you still "
                           "want it)")


@record
class Busy:
    """A session another process drives, and who (memory/leases.py `describe`)."""

    session_id: str
    owner: str


def busy_reason(child_id: str, owner: str, parent_id: str) -> str:
    """What a session whose child another process drives says: who drives it, and what to do."""
    return (f"child session {child_id} is being run by another process ({owner}); once it is done, "
            f"strata resume {parent_id}")


async def unknown_below(store: EventStore, session_id: str) -> dict[str, int]:
    """The sessions `session_id` delegated to, and theirs in turn, that hold receipts still `unknown`, with how
    many: effects of the child's own children, which count as the child's (and so as its parent's) too."""
    from observability.child_sessions import child_calls  # only once a delegate call ran: off resume's start

    found: dict[str, int] = {}
    seen = {session_id}
    below = list(await child_calls(store, session_id))
    while below:
        child = below.pop(0)
        if child in seen or len(seen) > 1024:  # a bound, not a limit anyone meets
            continue
        seen.add(child)
        if unknown := len(await store.list_receipts(child, status="unknown")):
            found[child] = unknown
        below += await child_calls(store, child)
    return found


async def _drive(live: LiveChild) -> RunOutcome:
    try:
        outcome = await live.run(None)
    except BaseException:
        await live.release(None)
        raise
    await live.release(None)
    return outcome


def _final_text(state: SessionState) -> str:
    for message in reversed(state.messages):
        if message.role == "assistant":
            return "".join(b.text for b in message.content if isinstance(b, TextBlock)).strip()
    return ""


def _output(status: str, reason: str, unknown: int, text: str, child_id: str,
            below: Mapping[str, int]) -> ToolOutput:
    head = f"child session {child_id} {status}"
    if reason:
        head += f" ({reason})"
    if unknown:
        head += f"; {unknown} effect(s) with unknown outcome await reconciliation: strata receipts {child_id}"
    if below:
        head += (f"; {sum(below.values())} effect(s) with unknown outcome in the sessions it delegated to await "
                 f"reconciliation: {', '.join(f'strata receipts {s}' for s in below)}")
    return ToolOutput(text=f"{head}\n{text}" if text else head, is_error=status == "failed")


__all__ = ["DELEGATE", "Busy", "ChildApprover", "ChildSessions", "Delegator", "LiveChild", "NewChild", "busy_child",
           "busy_child_after_wait", "busy_prompt_refusal", "busy_reason", "unknown_below", "waiting_child"]
