"""AgenticLoop: six phases per turn (ARCHITECTURE.md section 3).

    perceive  build the request from folded state (agent/phases/perceive.py)
    plan      one model call, typed into AssistantMessage or BatchProposed (agent/phases/plan.py) after a review
              of the answer as a whole (core/proposal.py): limits, ids, valid text; a plan row says what changed
    commit    stage the BatchProposed; the writer makes it durable before the first dispatch, and nothing runs
              if that commit fails
    act       ToolCallProcessor runs the calls (tool_executor/executor.py)
    observe   each CallResult staged as it finishes; BatchCompleted closes the round and is its checkpoint
    reflect   a proposal to finish becomes completion only through reflect (agent/phases/reflect.py): built-in
              checks and Stop hooks may ask for a repair

The live state is kept current by applying each committed event with `core.state.apply`, the function `fold`
uses, so a resumed session and a live one cannot differ.

Over 400 lines as one concept: the turn loop and its lifecycle (start, resume, interrupt, end); the phases that
are more than a step of it are in agent/phases/."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import field

import anyio
import structlog

from agent._checkpoint import cancellation_point
from agent.lineage import ChildLink
from agent.outcome import RunOutcome
from agent.phases.perceive import compaction, overhead_chars, perceive
from agent.phases.plan import propose
from agent.phases.reflect import reflect
from agent.prompts import SYSTEM_PROMPT
from agent.timeline_rows import AttemptTee, LoopRecorder
from core.compaction import DEFAULT_CONTEXT_BUDGET
from core.errors import ModelError, ReceiptError, UsageError
from core.events import (
    AssistantMessage,
    CallsParked,
    Compacted,
    Event,
    GrantAdded,
    KnowledgeChanged,
    RulesAdded,
    SessionEnded,
    SessionResumed,
    SessionStarted,
    StoredEvent,
    TurnVerified,
    UserMessage,
    batch_completed,
)
from core.faults import fault_point
from core.hooks import HookSet, ObserveInput
from core.ids import IdFactory
from core.masking import Masker
from core.model import ModelAdapter, ModelListener
from core.policy import PermissionRule
from core.record import record
from core.snapshot import DEFAULT_SNAPSHOT_EVERY
from core.state import SessionState, apply, fold
from core.timeline import TimelineEntry
from core.tools import BoundToolPlan
from core.tools.changes import tools_change
from core.utf8 import valid_text
from core.vocabulary import EndStatus, OnAsk, RunStatus
from memory import SessionRecord, Write
from memory.restore import Restored
from memory.rows import Receipt
from memory.session_writer import SessionWriter
from memory.store import EventStore
from tool_executor import BatchRun, CallEnv, ToolCallProcessor, WaitingCall
from tool_executor.hook_runner import run_observe

Observer = Callable[[StoredEvent], None]
log = structlog.get_logger("strata.loop")


@record
class LoopParts:
    """What a loop is built from, injected by the composition root (agent/session.py) or, when Strata is embedded,
    by hand. `hooks` are the loop's own (Stop hooks judge a proposal to finish, observation hooks hear lifecycle
    events); the executor is given the ones it runs on calls."""

    store: EventStore
    model: ModelAdapter
    plan: BoundToolPlan
    processor: ToolCallProcessor
    hooks: HookSet
    ids: IdFactory
    masker: Masker = field(default_factory=Masker.throwaway)
    """Every summary the loop writes passes through it (the home's, keyed, in a real runtime)."""
    system: str = SYSTEM_PROMPT
    observer: Observer | None = None
    """Sees each event once it is committed (after the session's first commit)."""
    listener: ModelListener | None = None
    repair_budget: int = 2
    context_budget: int = DEFAULT_CONTEXT_BUDGET
    """Estimated tokens a request may carry before older turns are compacted."""
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    interruption: Callable[[], str | None] | None = None
    """Why the run was cancelled, if not by the person (Ctrl-C): e.g. "SIGTERM stopped the run"."""


class AgenticLoop:
    """One session's loop. `start` (a new session) and `resume` (a restored one) build it and write its lifecycle
    events; the constructor only assembles, writes nothing and configures nothing process-wide (logging is the
    entry point's: observability.configure_logging)."""

    def __init__(self, parts: LoopParts, state: SessionState, *, snapshot_seq: int = 0) -> None:
        self.store = parts.store
        self.state = state
        self.model = parts.model
        self.plan = parts.plan
        self.processor = parts.processor
        self.hooks = parts.hooks
        self._ids = parts.ids
        self._system = parts.system
        self._observer = parts.observer
        self.repair_budget = parts.repair_budget
        self.context_budget = parts.context_budget
        self._overhead = overhead_chars(parts.plan, parts.system)
        self.writer = SessionWriter(parts.store, state.session_id, on_commit=self._applied, state=state,
                                    snapshot_every=parts.snapshot_every)
        self.writer.snapshot_seq = snapshot_seq
        self.rec = LoopRecorder(self.writer, parts.masker)
        self._listener = AttemptTee(self.rec.attempt, parts.listener)
        self._interruption = parts.interruption or (lambda: None)
        self._knowledge_changed: KnowledgeChanged | None = None

    @classmethod
    async def start(cls, parts: LoopParts, record: SessionRecord, *, rules: Sequence[PermissionRule],
                    max_turns: int, on_ask: OnAsk, project_hooks_digest: str | None, prompt: str | None,
                    announce: Observer | None = None, child: ChildLink | None = None) -> AgenticLoop:
        """Create the session in one commit: its row (`record`, holding the caller's lease), `SessionStarted`, the
        first prompt if there is one (an interactive session may start before it; `run(prompt)` adds it) and the
        "started" row. `announce` sees that commit's events (a surface showing them); `parts.observer` sees every
        later commit."""
        summary = parts.masker.mask(f"session started ({record.mode}, {record.model})")
        started = SessionStarted(session_id=record.id, mode=record.mode, workspace=record.workspace,
                                 model=record.model, rules=tuple(rules), max_turns=max_turns,
                                 plan_digest=parts.plan.digest, on_ask=on_ask,
                                 project_hooks_digest=project_hooks_digest,
                                 knowledge_digest=parts.plan.knowledge_digest,
                                 declared_tools=parts.plan.declared_digests() or None,
                                 parent_id=record.parent_id,
                                 parent_call_id=child.parent_call_id if child is not None else None,
                                 depth=child.depth if child is not None else 0,
                                 tools_allowed=child.tools_allowed if child is not None else None)
        events: list[tuple[Event, int]] = [(started, 0)]
        if child is not None:  # the parent's "always" grants it was given (setting delegate_grants), recorded here
            events += [(GrantAdded(tool=g.tool, asked_by=g.asked_by, call_id=child.parent_call_id,
                                   approver=f"{g.approver}, passed down from session {child.parent_id}",
                                   pattern=g.pattern), 0) for g in child.grants]
        if prompt is not None:
            events.append((UserMessage(text=prompt), 0))
        first = Write(events=events,
                      timeline=[TimelineEntry(kind="lifecycle", outcome="started", summary=summary,
                                              data={"plan_digest": parts.plan.digest, "workspace": record.workspace,
                                                    "project_hooks_digest": project_hooks_digest,
                                                    "knowledge_digest": parts.plan.knowledge_digest})])
        stored = await parts.store.create_session(record, first)
        loop = cls(parts, fold(stored))
        loop.rec.observed.append(("started", 0, summary, {"plan_digest": parts.plan.digest}))
        log.info("session started", session_id=record.id, mode=record.mode, model=record.model,
                 workspace=record.workspace)
        if announce is not None:
            for item in stored:
                announce(item)
        return loop

    @classmethod
    async def resume(cls, parts: LoopParts, restored: Restored, *, rules: Sequence[PermissionRule],
                     max_turns: int | None, on_ask: OnAsk | None, project_hooks_digest: str | None,
                     waived_by: str | None, knowledge_changed: KnowledgeChanged | None = None) -> AgenticLoop:
        """Continue a restored session: `SessionResumed` (the tool plan now in force, the open batch, a new turn
        limit or `on_ask`, the project's hooks), the "resumed" row and the rules added, in one commit applied to
        the state before anything runs, so an open batch is re-checked with the new rules and the new limit holds.
        `on_ask`: None keeps the session's own. `project_hooks_digest`: of the project hooks this run has (None
        without); `waived_by`: who chose to go on without them. The knowledge manifest this run reads is
        `parts.plan`'s; `knowledge_changed` tells the model it is not the one it last heard of, before its next turn
        (once no batch is open: the notice is conversation text)."""
        state = restored.state
        loop = cls(parts, state, snapshot_seq=restored.snapshot_seq)
        loop._knowledge_changed = knowledge_changed
        digest = parts.plan.digest
        knowledge = parts.plan.knowledge_digest
        open_batch = state.open_batch.batch_id if state.open_batch else None
        loop.writer.stage(SessionResumed(plan_digest=digest, open_batch_id=open_batch, max_turns=max_turns,
                                         on_ask=on_ask if on_ask != state.on_ask else None,
                                         project_hooks_digest=project_hooks_digest,
                                         project_hooks_waived_by=waived_by, knowledge_digest=knowledge,
                                         declared_tools=parts.plan.declared_digests() or None), state.turn)
        changed = digest != state.plan_digest
        hooks_note = ""
        if waived_by is not None:
            hooks_note = f"; without the project's hooks, as {waived_by} chose"
        elif project_hooks_digest != state.project_hooks_digest and state.project_hooks_digest is not None:
            hooks_note = "; the project's trusted hooks differ from the last run's (the project was trusted again)"
        if knowledge != state.knowledge_digest:
            hooks_note += (f"; the knowledge corpus changed ({state.knowledge_digest or 'none'} -> "
                           f"{knowledge or 'none'})")
        loop.rec.lifecycle("resumed", state.turn, "session resumed" + (
            f", finishing open batch {open_batch}" if open_batch else "") + (
            "; the tool plan changed since the last run" if changed else "") + hooks_note,
            plan_digest=digest, previous_plan_digest=state.plan_digest, project_hooks_digest=project_hooks_digest,
            previous_project_hooks_digest=state.project_hooks_digest, project_hooks_waived_by=waived_by,
            knowledge_digest=knowledge, previous_knowledge_digest=state.knowledge_digest)
        if rules:
            loop.writer.stage(RulesAdded(rules=tuple(rules)), state.turn)
        await loop.writer.flush()
        log.info("session resumed", session_id=state.session_id, turn=state.turn, open_batch=open_batch,
                 plan_changed=changed)
        return loop

    def _applied(self, stored: list[StoredEvent]) -> None:
        for item in stored:
            apply(self.state, item)
            if self._observer is not None:
                self._observer(item)

    async def run(self, prompt: str | None = None) -> RunOutcome:
        """Drive the session until the model finishes, a guard stops it, or the model path fails. If the run is
        cancelled (Ctrl-C in the terminal, SIGTERM or SIGHUP), the open batch is closed before the cancellation
        goes on: finished results are kept, started effects become `unknown` (a command's process group is gone
        first), calls not started are reported as not run."""
        if prompt is not None and not prompt.strip():
            raise UsageError("the prompt is empty", hint="say what the agent should do")
        if prompt is not None:
            prompt = valid_text(prompt)  # as the model's text is: argv that is not UTF-8 arrives as surrogates
        # Bound for this run only, in this task's context: many loops can share a process (and a task).
        with structlog.contextvars.bound_contextvars(session_id=self.state.session_id, turn=self.state.turn):
            try:
                return await self._run(prompt)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await self._close_interrupted()
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await self._notify_observers()

    async def _notify_observers(self) -> None:
        """Lifecycle events go to observation hooks after they are committed. They record; they cannot change the
        run: their answers are ignored and a failing one is only logged."""
        observed, self.rec.observed = self.rec.observed, []
        hooks = self.hooks.for_event("observe")
        if not hooks:
            return
        for what, turn, summary, data in observed:
            payload = ObserveInput(session_id=self.state.session_id, turn=turn, mode=self.state.mode,
                                   workspace=self.state.workspace, event=what, summary=summary, data=data)
            for hook in hooks:
                failure = await run_observe(hook, payload)
                if failure is not None:
                    log.warning("observation hook failed", hook=hook.name, reason=failure)

    async def _close_interrupted(self) -> None:
        """The run was cancelled: what finished is kept, and an open batch is settled and closed in one commit
        with every call's row (`settle_open_batch`, tool_executor/_receipts.py)."""
        await self.writer.flush()  # what finished before the interrupt is kept
        cause = self._interruption() or "the user interrupted the turn"
        batch = self.state.open_batch
        if batch is not None:
            await self.processor.settle_interrupted(batch, cause, env=CallEnv.from_state(self.state, self.state.turn),
                                                    writer=self.writer, receipts=await self._open_receipts())
        self.rec.lifecycle("interrupted", self.state.turn,
                           "the person interrupted the turn" if self._interruption() is None else cause)
        self.writer.stage_status("idle")
        await self.writer.flush()

    async def _open_receipts(self) -> dict[str, Receipt]:
        """The receipts of the open batch's calls that have no result yet."""
        batch = self.state.open_batch
        assert batch is not None
        pending = {c.call_id for c in batch.pending()}
        return {r.call_id: r for r in await self.store.list_receipts(self.state.session_id) if r.call_id in pending}

    async def _run(self, prompt: str | None) -> RunOutcome:
        state = self.state
        if state.open_batch is not None:
            parked = await self._finish_open_batch()
            if parked is not None:
                return parked if prompt is None else _unheard(parked)
        self._tell_knowledge_change()
        self._tell_tools_change()
        reported = await self._report_reconciliations()
        if state.ended == "completed" and prompt is None and not reported:
            # Nothing to do: no end event is written again, only the row's status is set back. (A reconciled
            # outcome to report is something to do: the model hears of it, as `strata reconcile` says.)
            self.writer.stage_status("completed")
            await self.writer.flush()
            return await self._outcome("completed", "already completed; nothing to do without a new prompt")
        if prompt is not None:
            self.writer.stage(UserMessage(text=prompt), state.turn)
        while True:
            if self.writer.dirty:
                await self.writer.flush()  # user input is durable before the model sees it
            # A cancelled turn (Ctrl-C at an approval prompt) asks the model nothing more, whether or not the
            # model itself would notice the cancellation (the scripted one answers without waiting). Without a
            # pass of the event loop when nothing is cancelled (agent/_checkpoint.py).
            await cancellation_point()
            if state.turn >= state.max_turns:
                return await self._end("incomplete", f"turn limit of {state.max_turns} reached")
            turn = state.turn + 1
            request = perceive(state, self.plan, self._system, self._compact(turn))
            self.rec.turn = turn
            structlog.contextvars.bind_contextvars(turn=turn)  # every log line of this turn names it
            self.rec.phase("perceive", turn, f"perceive: {len(request.messages)} messages, {len(request.tools)} tools")
            try:
                response = await self.model.complete(request, self._listener)
            except ModelError as exc:  # its message may quote the API's, which may quote a secret
                return await self._end("failed", f"model error: {self.rec.masker.mask(str(exc))}")
            planned = propose(response, batch_id=self._ids.uuid7(), used_ids=state.call_ids,
                              looks_secret=self._looks_secret)
            if planned.notes:
                self.rec.phase("plan", turn, _plan_summary(planned.notes), notes=list(planned.notes))
            proposal = planned.proposal
            if isinstance(proposal, AssistantMessage):
                outcome = await self._reflect(proposal, turn)
                if outcome is not None:
                    return outcome
                continue
            self.writer.stage(proposal, turn)  # commit: durable before any dispatch (writer barrier)
            self.rec.phase("commit", turn, f"commit: batch {proposal.batch_id} with {len(proposal.calls)} call(s)",
                           batch_id=proposal.batch_id, calls=[c.call_id for c in proposal.calls])
            self.rec.phase("act", turn, f"act: {', '.join(c.tool for c in proposal.calls)}")
            run = await self.processor.run_batch(proposal, env=CallEnv.from_state(state, turn), writer=self.writer)
            if run.waiting is not None:
                return await self._wait(run.waiting, turn)
            if run.parked:
                return await self._park(proposal.batch_id, run, turn)
            await self._close_batch(proposal.batch_id, turn)

    def _looks_secret(self, text: str) -> bool:
        return self.rec.masker.mask(text) != text

    def _compact(self, turn: int) -> Compacted | None:
        """Older turns summarized when the request would exceed the context budget. The event rides with the
        turn's next commit (no commit of its own); the request is built as if it were applied already."""
        event = compaction(self.state, overhead=self._overhead, budget_tokens=self.context_budget)
        if event is not None:
            self.writer.stage(event, self.state.turn)
            self.rec.lifecycle("compacted", turn, f"compacted {event.upto_message} earlier messages into a summary: "
                               f"~{event.tokens_before} -> ~{event.tokens_after} tokens",
                               upto_message=event.upto_message, tokens_before=event.tokens_before,
                               tokens_after=event.tokens_after)
        return event

    async def _close_batch(self, batch_id: str, turn: int) -> None:
        fault_point("before_batch_completed")
        self.rec.phase("observe", turn, f"observe: batch {batch_id} closed", batch_id=batch_id)
        self.writer.stage(batch_completed(batch_id), turn)
        await self.writer.flush()
        fault_point("after_batch_completed")

    async def _park(self, batch_id: str, run: BatchRun, turn: int) -> RunOutcome:
        """Calls wait for a person (`--on-ask park`): the batch stays open, the session is awaiting_approval."""
        self.writer.stage(CallsParked(batch_id=batch_id, calls=tuple(run.parked)), turn)
        self.rec.lifecycle("parked", turn, f"waiting for approval of {', '.join(p.call_id for p in run.parked)}",
                           calls=[p.call_id for p in run.parked])
        self.writer.stage_status("awaiting_approval")
        await self.writer.flush()
        names = ", ".join(f"{p.call_id} ({p.tool})" for p in run.parked)
        return await self._outcome("awaiting_approval", f"waiting for approval of {names}")

    async def _wait(self, waiting: WaitingCall, turn: int) -> RunOutcome:
        """A dispatched call's work waits for a person elsewhere (a delegated child parked for approval): the
        batch stays open with the call's receipt `dispatched`, the session is awaiting_approval, and `strata
        resume` enters the call's handler again (tool_executor: a tool that `resumes`)."""
        what = f"call {waiting.call_id} ({waiting.tool}) waits: {waiting.reason}"
        self.rec.lifecycle("parked", turn, what, calls=[waiting.call_id])
        self.writer.stage_status("awaiting_approval")
        await self.writer.flush()
        return await self._outcome("awaiting_approval", what)

    async def _finish_open_batch(self) -> RunOutcome | None:
        """Resume: calls with a result keep it; calls with a receipt are settled from it (never re-run);
        the rest go through the whole pipeline again (approval included). Returns an outcome if calls are still
        waiting for approval."""
        batch = self.state.open_batch
        assert batch is not None
        turn = self.state.turn
        run = await self.processor.finish_open_batch(batch, env=CallEnv.from_state(self.state, turn),
                                                     writer=self.writer, receipts=await self._open_receipts())
        if run.waiting is not None:
            return await self._wait(run.waiting, turn)
        if run.parked:
            return await self._park(batch.batch_id, run, turn)
        await self._close_batch(batch.batch_id, turn)
        return None

    def _tell_knowledge_change(self) -> None:
        """The model hears of a knowledge manifest it has not been told of, in the next user message (staged with
        the run's first commit). Pending until then in the state, so a run stopped before it is told on the next."""
        change = self._knowledge_changed
        if change is None or self.state.knowledge_told == self.state.knowledge_digest:
            return
        if change.digest != self.state.knowledge_digest:  # not this run's manifest: never tell of another
            return
        self._knowledge_changed = None
        self.writer.stage(change, self.state.turn)
        self.rec.lifecycle("knowledge_changed", self.state.turn, change.notice.splitlines()[0],
                           previous_digest=change.previous_digest, digest=change.digest, changed=list(change.changed),
                           added=list(change.added), removed=list(change.removed))

    def _tell_tools_change(self) -> None:
        """The model hears of declared (MCP) tools whose schema or policy changed, or that came or went, since it
        was last told of them: in the next user message, once no batch is open (agent/mcp)."""
        state = self.state
        if state.declared_tools == state.declared_told or state.open_batch is not None:
            return
        change = tools_change(state.declared_told, state.declared_tools)
        self.writer.stage(change, state.turn)
        self.rec.lifecycle("tools_changed", state.turn, change.notice.splitlines()[0], changed=list(change.changed),
                           added=list(change.added), removed=list(change.removed))

    async def _report_reconciliations(self) -> bool:
        """Tell the model the reconciled outcome of calls it was told were unknown. Whether there was any."""
        if not self.state.unknown_receipts:
            return False
        lines, ids = [], []
        for receipt_id, call_id in self.state.unknown_receipts.items():
            receipt = await self.store.get_receipt(receipt_id)
            if receipt.status in ("done", "failed"):
                verdict = "applied" if receipt.status == "done" else "NOT applied"
                by = f" by {receipt.reconciled_by}" if receipt.reconciled_by else ""
                note = f" ({receipt.note})" if receipt.note else ""
                lines.append(f"- call {call_id} ({receipt.tool}): reconciled as {verdict}{by}{note}")
                ids.append(receipt_id)
        if ids:
            text = "Reconciliation of earlier calls whose outcome was unknown:\n" + "\n".join(lines)
            self.writer.stage(UserMessage(text=text, source="runtime", reconciled_receipts=tuple(ids)),
                              self.state.turn)
            self.rec.lifecycle("reconciliation_reported", self.state.turn, text, receipts=ids)
        return bool(ids)

    async def _reflect(self, answer: AssistantMessage, turn: int) -> RunOutcome | None:
        """Completion only through the reflect phase: None means a repair was asked and the loop goes on. The
        answer is committed with what reflection decided (one commit)."""
        reflection = await reflect(self.state, answer, self.hooks, budget=self.repair_budget,
                                   workspace=self.state.workspace)
        self.writer.stage(answer, turn)
        self.rec.phase("reflect", turn, f"reflect: {reflection.action}"
                       + (f" ({reflection.reason})" if reflection.reason else ""))
        if reflection.action == "repair":
            assert reflection.repair is not None
            self.writer.stage(reflection.repair, turn)
            await self.writer.flush()
            fault_point("after_repair")
            return None
        if reflection.action == "fail":
            return await self._end("incomplete", reflection.reason, turn=turn)
        self.writer.stage(TurnVerified(), turn)
        return await self._end("completed", "; ".join(reflection.notes), turn=turn)

    async def _end(self, status: EndStatus, reason: str, turn: int | None = None) -> RunOutcome:
        self.writer.stage(SessionEnded(status=status, reason=reason), self.state.turn if turn is None else turn)
        self.rec.lifecycle("ended", self.state.turn if turn is None else turn, f"session {status}: {reason}"
                           if reason else f"session {status}", status=status)
        self.writer.stage_status(status)
        await self.writer.flush()
        return await self._outcome(status, reason)

    async def _outcome(self, status: RunStatus, reason: str) -> RunOutcome:
        """Unknown receipts: the session's own, and those of outcomes it inherited unknown (a fork's calls keep
        their parent's receipts) while they still are."""
        unknown = {r.id for r in await self.store.list_receipts(self.state.session_id, status="unknown")}
        for receipt_id in self.state.unknown_receipts:
            if receipt_id not in unknown:
                with contextlib.suppress(ReceiptError):
                    if (await self.store.get_receipt(receipt_id)).status == "unknown":
                        unknown.add(receipt_id)
        return RunOutcome(session_id=self.state.session_id, status=status, reason=reason,
                          unknown_receipts=len(unknown))


def _unheard(parked: RunOutcome) -> RunOutcome:
    """A run given a prompt whose open batch waits again: the prompt is neither recorded nor told to the model (it
    would follow a batch nobody decided), and the reason says so. The surfaces refuse such a prompt before the run
    (agent/session.py); this covers a state that changed between their check and the run."""
    return RunOutcome(session_id=parked.session_id, status=parked.status, unknown_receipts=parked.unknown_receipts,
                      reason=f"{parked.reason}; the prompt given with this run was not heard (the open batch must "
                             "be decided first): give it again once it is")


_PLAN_NOTES_SHOWN = 8


def _plan_summary(notes: tuple[str, ...]) -> str:
    """The plan row's summary: what the review of the answer repaired or refused (every note is in its data)."""
    shown = "; ".join(notes[:_PLAN_NOTES_SHOWN])
    more = len(notes) - _PLAN_NOTES_SHOWN
    return f"plan: {shown}" + (f"; and {more} more" if more > 0 else "")
