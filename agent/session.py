"""Session services: start a session, resume one by id under a lease, keep the lease alive, release it.
This is the composition root the surfaces (CLI, demo, tests) share."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from agent.evidence_ledger import LEDGER_DIR, Ledgers
from agent.loop import AgenticLoop, Observer
from agent.outcome import RunOutcome
from agent.project_hooks import ProjectHooks, resume_refusal
from agent.signals import StopSignal, stop_on_signals
from config import Settings
from config.seen_secrets import home_masker
from core.clock import Clock, SystemClock
from core.compaction import DEFAULT_CONTEXT_BUDGET
from core.errors import LeaseLost, ReceiptError, StoreError, UsageError
from core.events import Mode, RulesAdded, SessionResumed, SessionStarted, UserMessage
from core.hooks import HookSet
from core.ids import IdFactory
from core.masking import Masker, cut_head
from core.model import ModelAdapter, ModelListener
from core.policy import PermissionRule
from core.snapshot import DEFAULT_SNAPSHOT_EVERY
from core.state import SessionState, fold
from core.timeline import TimelineEntry
from core.tools import BoundToolPlan, ToolSpec
from core.utf8 import valid_text
from memory import SessionRecord, SqliteEventStore, Write
from memory.leases import LEASE_TTL, describe, make_liveness, new_holder, resting_status
from memory.records import LeaseHolder, SessionStatus
from memory.restore import restore_or_report
from memory.store import EventStore
from observability import attach_home
from tool_executor import Approver, OnAsk, Recorder, ResourceLocks, TimelineRecorder, ToolCallProcessor, builtin_tools

log = structlog.get_logger("strata.session")


@dataclass
class Runtime:
    """The injected parts every session uses."""

    store: EventStore
    clock: Clock
    ids: IdFactory
    tools: list[ToolSpec]
    hooks: HookSet = field(default_factory=HookSet)
    locks: ResourceLocks | None = None
    repair_budget: int = 2
    context_budget: int = DEFAULT_CONTEXT_BUDGET
    """Estimated tokens a model request may carry before older turns are compacted."""
    snapshot_every: int = DEFAULT_SNAPSHOT_EVERY
    """Events between snapshots of a session's state (0: none)."""
    masker: Masker = field(default_factory=Masker.throwaway)
    """The one masking module, keyed per Strata home (fingerprints correlate across runs of the same home)."""
    config_rules: tuple[PermissionRule, ...] = ()
    """Policy rules from config files: applied on every run as the config stands then, not recorded."""
    ledgers: Ledgers | None = None
    """Where sessions keep their evidence ledgers (`<home>/ledger`); None keeps none."""
    project_hooks: ProjectHooks = field(default_factory=ProjectHooks)
    """The workspace's trusted project hooks as the config stands (their digest is recorded by a session that
    starts with them, and checked when it resumes)."""
    stop: StopSignal = field(default_factory=StopSignal)
    """Which termination signal stopped the work, if one did (set by `runtime()`, agent/signals.py)."""
    read_only: bool = False
    """Opened for a command that only reads (see `runtime`)."""

    @classmethod
    async def open(cls, settings: Settings, clock: Clock | None = None, tools: list[ToolSpec] | None = None,
                   hooks: HookSet | None = None, lock_timeout_s: float = 30.0, *,
                   read_only: bool = False) -> Runtime:
        """`read_only`: for commands that only read; the database is opened read-only and nothing needs to be
        created in the home (see `runtime`)."""
        clock = clock or SystemClock()
        store = await SqliteEventStore.open(settings.db_path, durability=settings.durability, clock=clock,
                                            read_only=read_only)
        try:
            masker = home_masker(settings.home, os.environ, read_only=read_only)
        except BaseException:
            await store.close()
            raise
        return cls(store=store, clock=clock, ids=IdFactory(clock), tools=tools or builtin_tools(),
                   hooks=hooks or HookSet(), locks=ResourceLocks(settings.home / "locks", lock_timeout_s),
                   masker=masker, ledgers=Ledgers(settings.home / LEDGER_DIR, clock), read_only=read_only)

    async def close(self) -> None:
        if self.ledgers is not None:
            await self.ledgers.aclose()
        await self.store.close()

    def plan(self, mode: Mode) -> BoundToolPlan:
        return BoundToolPlan(self.tools, mode)


@dataclass
class LiveSession:
    runtime: Runtime
    state: SessionState
    holder: LeaseHolder
    loop: AgenticLoop
    _lost: bool = field(default=False, init=False)
    _owner: str | None = field(default=None, init=False)

    @property
    def id(self) -> str:
        return self.state.session_id

    async def run(self, prompt: str | None = None) -> RunOutcome:
        """Run the loop with the lease heartbeat beside it. Errors come out as themselves, not wrapped in an
        exception group, so the surfaces can report them as one line. If the lease stops being this process's
        (another process took it after it expired unrenewed), the run stops, and so does a commit that fails
        because of it: LeaseLost."""
        outcome: RunOutcome | None = None
        error: BaseException | None = None
        self._lost = False
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat, tg.cancel_scope)
            try:
                outcome = await self.loop.run(prompt)
            except Exception as exc:
                error = exc
            finally:
                tg.cancel_scope.cancel()
        if self._lost or (isinstance(error, StoreError | ReceiptError) and await self._taken_over()):
            raise LeaseLost(self.id, self._owner)
        if error is not None:
            raise error
        assert outcome is not None
        return outcome

    async def _taken_over(self) -> bool:
        with anyio.CancelScope(shield=True):
            try:
                lease = (await self.runtime.store.get_session(self.id)).lease
            except StoreError:
                return False
        if lease is not None and lease.token == self.holder.token:
            return False
        self._owner = describe(lease) if lease is not None else None
        return True

    async def _heartbeat(self, run: anyio.CancelScope) -> None:
        period = LEASE_TTL.total_seconds() / 3
        while True:
            await anyio.sleep(period)
            holder = self.holder.model_copy(update={"expires_at": self.runtime.clock.now() + LEASE_TTL})
            try:
                renewed = await self.runtime.store.renew_lease(self.id, holder)
            except StoreError as exc:  # busy for longer than the busy timeout: the lease is still good, try again
                log.warning("lease renewal failed; retrying at the next beat", reason=str(exc))
                continue
            if not renewed:  # another process holds it now: stop before anything else runs
                log.error("the session's lease was taken by another process; stopping")
                self._lost = await self._taken_over()
                run.cancel()
                return
            self.holder = holder

    async def release(self, status: SessionStatus | None) -> None:
        with anyio.CancelScope(shield=True):
            await self.runtime.store.release_lease(self.id, self.holder.token, status)


def _workspace(path: Path) -> Path:
    resolved = Path(os.path.realpath(path))
    if not resolved.is_dir():
        raise UsageError(f"workspace {path} is not a directory")
    return resolved


@dataclass(frozen=True)
class Asking:
    """Who decides an `ask`: a person through `approver` (interactive), or nobody, and then `on_ask` says
    whether the call is denied or parked for `strata approve`."""

    approver: Approver | None = None
    on_ask: OnAsk | None = None
    """None: the session's own setting (recorded when it started; "deny" by default)."""


def _loop(rt: Runtime, state: SessionState, model: ModelAdapter, plan: BoundToolPlan,
          observer: Observer | None, asking: Asking, listener: ModelListener | None = None,
          hooks: HookSet | None = None, kill_orphans: bool = False) -> AgenticLoop:
    structlog.contextvars.bind_contextvars(session_id=state.session_id)
    recorder: Recorder = TimelineRecorder(rt.masker)
    if rt.ledgers is not None:  # the ledger sees each call, model attempt (the loop's next turn) and commit
        sid = state.session_id
        ledger = rt.ledgers.open(sid, rt.masker, turn=lambda: state.turn + 1, head=lambda: rt.store.chain_head(sid))
        recorder, listener, observer = ledger.recorder(recorder), ledger.listener(listener), ledger.observer(observer)
    processor = ToolCallProcessor(plan, workspace=Path(state.workspace), ids=rt.ids,
                                  hooks=rt.hooks if hooks is None else hooks,
                                  approver=asking.approver, on_ask=asking.on_ask or state.on_ask, locks=rt.locks,
                                  config_rules=rt.config_rules, recorder=recorder, kill_orphans=kill_orphans)
    return AgenticLoop(store=rt.store, state=state, model=model, plan=plan, processor=processor, ids=rt.ids,
                       observer=observer, listener=listener, repair_budget=rt.repair_budget, masker=rt.masker,
                       context_budget=rt.context_budget, snapshot_every=rt.snapshot_every,
                       interruption=rt.stop.cause)


async def start_session(rt: Runtime, *, model: ModelAdapter, workspace: Path, mode: Mode,
                        rules: list[PermissionRule], prompt: str | None, max_turns: int,
                        observer: Observer | None = None, asking: Asking | None = None,
                        listener: ModelListener | None = None) -> LiveSession:
    if prompt is not None and not prompt.strip():
        raise UsageError("the prompt is empty", hint="say what the agent should do")
    if prompt is not None:
        prompt = valid_text(prompt)  # argv bytes that are not UTF-8 arrive as surrogates (core/utf8.py)
    ws = _workspace(workspace)
    plan = rt.plan(mode)
    session_id = rt.ids.session_id()
    holder = new_holder(rt.ids.uuid7(), rt.clock)
    now = rt.clock.now()
    # Masked before it is cut (half a secret would not look like one), since listings show it.
    title = cut_head(rt.masker.mask(prompt.strip().splitlines()[0]), 80) if prompt and prompt.strip() else ""
    record = SessionRecord(id=session_id, created_at=now, updated_at=now, mode=mode, workspace=str(ws),
                           model=model.name, title=title, status="active", lease=holder)
    started = SessionStarted(session_id=session_id, mode=mode, workspace=str(ws), model=model.name,
                             rules=tuple(rules), max_turns=max_turns, plan_digest=plan.digest,
                             on_ask=(asking.on_ask if asking else None) or "deny",
                             project_hooks_digest=rt.project_hooks.digest)
    # An interactive session may start before its first prompt (its id is shown at once); `run(prompt)` adds it.
    first = Write(events=[(started, 0)] + ([(UserMessage(text=prompt), 0)] if prompt is not None else []),
                  timeline=[TimelineEntry(kind="lifecycle", outcome="started",
                                          summary=rt.masker.mask(f"session started ({mode}, {model.name})"),
                                          data={"plan_digest": plan.digest, "workspace": str(ws),
                                                "project_hooks_digest": rt.project_hooks.digest})])
    stored = await rt.store.create_session(record, first)
    state = fold(stored)
    live = LiveSession(rt, state, holder, _loop(rt, state, model, plan, observer, asking or Asking(), listener))
    live.loop.rec.observed.append(("started", 0, rt.masker.mask(f"session started ({mode}, {model.name})"),
                                   {"plan_digest": plan.digest}))
    log.info("session started", mode=mode, model=model.name, workspace=str(ws))
    if observer is not None:
        for item in stored:
            observer(item)
    return live


async def resume_session(rt: Runtime, session_id: str, *, rules: list[PermissionRule],
                         model: ModelAdapter | None = None,
                         model_factory: Callable[[str], ModelAdapter] | None = None,
                         max_turns: int | None = None, observer: Observer | None = None,
                         asking: Asking | None = None, listener: ModelListener | None = None,
                         prompt: str | None = None, without_project_hooks: str | None = None,
                         kill_orphans: bool = False) -> LiveSession:
    """Take the lease (or fail with SessionActive), restore the state (the latest snapshot plus the tail of the
    log, see memory/restore.py), record the resume. The model is `model`, or `model_factory` applied to the model
    the session recorded. `prompt`, the one the caller will run with, is checked here, before anything is
    recorded. A session that started with trusted project hooks does not continue without them
    (ProjectHooksMissing, agent/project_hooks.py) unless `without_project_hooks` names the person who chose so
    (then the project's hooks do not run, and the choice is recorded). A resume refused before it is recorded
    leaves the session's status as it was. `kill_orphans`: a command of the open batch that outlived its Strata
    process is killed instead of waited for (tool_executor/orphans.py)."""
    if prompt is not None and not prompt.strip():
        raise UsageError("the prompt is empty", hint="say what the agent should do, or leave the prompt out")
    before = (await rt.store.get_session(session_id)).status
    holder = new_holder(rt.ids.uuid7(), rt.clock)
    await rt.store.acquire_lease(session_id, holder, make_liveness(rt.clock), rt.clock.now())
    state: SessionState | None = None
    try:
        restored = await restore_or_report(rt.store, session_id)
        state = restored.state
        if not await anyio.Path(state.workspace).is_dir():  # tools would fail (or recreate it); the batch be lost
            raise UsageError(f"the workspace {state.workspace} of session {session_id} is not a directory any more",
                             hint="put it back (or move the directory there) and resume again; the session is "
                                  "unchanged")
        undecided = [c for c in state.parked if c not in state.approvals]
        if prompt is not None and undecided:  # the batch would park again and the prompt go unheard
            raise UsageError(f"session {session_id} is waiting for approval of {', '.join(undecided)}; a new "
                             "prompt cannot be given until the open batch is finished",
                             hint=f"decide with `strata approve|deny {session_id} CALL`, then resume (with the "
                                  "prompt, if you still want it)")
        hooks, hooks_digest = rt.hooks, rt.project_hooks.digest
        if without_project_hooks is not None:
            hooks, hooks_digest = rt.project_hooks.without(rt.hooks), None
        elif (refusal := resume_refusal(session_id, state.project_hooks_digest, rt.project_hooks)) is not None:
            raise refusal
        if model is None:
            if model_factory is None:
                raise UsageError("no model to resume with")
            model = model_factory(state.model)
        plan = rt.plan(state.mode)
        live = LiveSession(rt, state, holder, _loop(rt, state, model, plan, observer, asking or Asking(), listener,
                                                    hooks, kill_orphans=kill_orphans))
        live.loop.writer.snapshot_seq = restored.snapshot_seq
        open_batch = state.open_batch.batch_id if state.open_batch else None
        on_ask = asking.on_ask if asking and asking.on_ask != state.on_ask else None
        live.loop.writer.stage(SessionResumed(plan_digest=plan.digest, open_batch_id=open_batch,
                                              max_turns=max_turns, on_ask=on_ask, project_hooks_digest=hooks_digest,
                                              project_hooks_waived_by=without_project_hooks), state.turn)
        changed = plan.digest != state.plan_digest
        hooks_note = ""
        if without_project_hooks is not None:
            hooks_note = f"; without the project's hooks, as {without_project_hooks} chose"
        elif hooks_digest != state.project_hooks_digest and state.project_hooks_digest is not None:
            hooks_note = "; the project's trusted hooks differ from the last run's (the project was trusted again)"
        live.loop.rec.lifecycle("resumed", state.turn, "session resumed" + (
            f", finishing open batch {open_batch}" if open_batch else "") + (
            "; the tool plan changed since the last run" if changed else "") + hooks_note,
            plan_digest=plan.digest, previous_plan_digest=state.plan_digest, project_hooks_digest=hooks_digest,
            previous_project_hooks_digest=state.project_hooks_digest, project_hooks_waived_by=without_project_hooks)
        if rules:
            live.loop.writer.stage(RulesAdded(rules=tuple(rules)), state.turn)
        # Applied to state now: an open batch is re-checked with the new rules, and the new limit holds.
        await live.loop.writer.flush()
        log.info("session resumed", turn=state.turn, open_batch=open_batch, plan_changed=changed)
        return live
    except BaseException:
        with anyio.CancelScope(shield=True):
            await rt.store.release_lease(session_id, holder.token, resting_status(state, before))
        raise


@asynccontextmanager
async def runtime(settings: Settings, clock: Clock | None = None, *, read_only: bool = False) -> AsyncIterator[Runtime]:
    """The parts a command needs. `read_only` (sessions, show, timeline, receipts, export): the database is opened
    read-only, and a home that cannot be written still serves: no masking key is created (a one-off key masks
    instead, whose fingerprints only correlate within this output), and the log stays on stderr, without a
    warning (a reading command has nothing to log that would be lost)."""
    rt = await Runtime.open(settings, clock, read_only=read_only)
    attach_home(settings.home, rt.masker, quiet=read_only)  # the log file, masked by this home's key
    try:
        async with stop_on_signals() as stop:  # SIGTERM and SIGHUP close what runs as Ctrl-C does
            rt.stop = stop
            yield rt
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()
