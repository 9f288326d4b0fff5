"""Session services: start a session, resume one by id under a lease, keep the lease alive, release it.
This is the composition root the surfaces (CLI, demo, tests) share."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import structlog

from agent.delegation import Delegator, LiveChild, NewChild, busy_child_after_wait, busy_prompt_refusal, waiting_child
from agent.evidence_ledger import Ledgers
from agent.knowledge import KnowledgeSource, SessionKnowledge, knowledge_change
from agent.lineage import ChildLink
from agent.loop import AgenticLoop, LoopParts, Observer
from agent.models import close_model, model_from_spec
from agent.outcome import RunOutcome
from agent.project_hooks import ProjectHooks, resume_refusal
from agent.reading import configured_secrets
from agent.signals import StopSignal, stop_on_signals
from agent.tool_deadlines import with_deadlines
from config import LoadedConfig
from config.checked import Role, remember_checked
from config.ledger_files import LEDGER_DIR
from config.seen_secrets import home_masker
from core.clock import Clock, SystemClock
from core.compaction import DEFAULT_CONTEXT_BUDGET
from core.errors import LeaseLost, ReceiptError, StoreError, UsageError
from core.events import Mode, UserMessage
from core.hooks import HookSet
from core.ids import IdFactory
from core.masking import Masker, cut_head
from core.model import ModelAdapter, ModelListener
from core.policy import PermissionRule
from core.record import record
from core.snapshot import DEFAULT_SNAPSHOT_EVERY
from core.state import SessionState
from core.tools import BoundToolPlan, ToolSpec
from core.tools.delegate import DEFAULT_MAX_DEPTH, delegate_spec
from core.tools.modes import for_mode
from core.utf8 import valid_text
from core.vocabulary import OnAsk, SessionStatus
from memory import SessionRecord
from memory.leases import LEASE_TTL, describe, make_liveness, new_holder, release, resting_status
from memory.opening import open_store
from memory.restore import restore_or_report
from memory.rows import LeaseHolder
from memory.store import EventStore
from observability import attach_home
from tool_executor import Approver, Recorder, ResourceLocks, TimelineRecorder, ToolCallProcessor, builtin_tools
from tool_executor.checks.schema import trust_builtin

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
    knowledge: KnowledgeSource | None = None
    """The declared knowledge datasets (agent/knowledge.py); None: sessions get no knowledge tools."""
    mcp_allowed: tuple[str, ...] = ()
    """Tools the operator adds back to mode `mcp`'s plan (`[mcp.serve] allow_tools`, core/tools/modes.py)."""
    delegate_max_depth: int = DEFAULT_MAX_DEPTH
    """A session this many delegations deep gets no `delegate` (agent/delegation.py)."""
    delegate_in_daemon: bool = False
    """Whether mode `daemon`'s sessions get `delegate`."""
    delegate_grants: bool = False
    """Whether a child starts with its parent's "always" grants."""
    channel: str | None = None
    """The channel whose thread sessions this runtime drives (set by agent/channels' `daemon_runtime`): only such a
    runtime resumes a channel session (a top-level session of mode `daemon`); any other refuses to."""
    child_observer: Observer | None = None
    """Told every event a child session (delegation) commits, as it commits it: the daemon's host passes it on to
    the clients that watch that child (agent/daemon/_host.py); None: nobody is told."""

    @classmethod
    async def open(cls, config: LoadedConfig, clock: Clock | None = None, tools: list[ToolSpec] | None = None, *,
                   read_only: bool = False) -> Runtime:
        """The runtime built once from the loaded config, every setting applied here: the store's durability, the
        masker with the configured secrets, hooks, policy rules, the project's hooks, budgets, the lock timeout and
        the tools' deadlines. A setting that cannot apply (a deadline for a tool that does not exist) is a
        ConfigError before anything is opened. `read_only`: for commands that only read; the database is opened
        read-only and nothing needs to be created in the home (see `runtime`); no tool runs, so the tools' deadlines
        are neither applied nor checked."""
        settings = config.settings
        clock = clock or SystemClock()
        tools = tools or builtin_tools()
        if not read_only:  # a reading command runs no tool: it neither needs the deadlines nor refuses them
            tools = with_deadlines(tools, config)
        store = await open_store(settings, clock=clock, read_only=read_only)
        try:
            masker = home_masker(settings.home, os.environ, extra_secrets=configured_secrets(config),
                                 read_only=read_only)
            if not read_only:  # the files this load validated: a reading command may trust them (config/checked.py)
                checked: list[tuple[Role, str | None]] = [("user", config.user_sha256),
                                                          ("project", config.project_sha256)]
                await anyio.to_thread.run_sync(remember_checked, settings.home, checked)
        except BaseException:  # cancellation (Ctrl-C) included: the store's worker thread must not outlive it
            with anyio.CancelScope(shield=True):
                await store.close()
            raise
        return cls(store=store, clock=clock, ids=IdFactory(clock), tools=tools, hooks=config.hook_set(),
                   locks=ResourceLocks(settings.home / "locks", settings.lock_timeout_s, store.shared_locks()),
                   repair_budget=settings.repair_budget, context_budget=settings.context_budget_tokens,
                   snapshot_every=settings.snapshot_every, masker=masker, config_rules=config.rules,
                   ledgers=Ledgers(settings.home / LEDGER_DIR, clock),
                   project_hooks=ProjectHooks.from_config(config), read_only=read_only,
                   knowledge=KnowledgeSource(config.knowledge, settings.home, config.project_trusted),
                   mcp_allowed=config.mcp.serve.allow_tools, delegate_max_depth=settings.delegate_max_depth,
                   delegate_in_daemon=settings.delegate_in_daemon, delegate_grants=settings.delegate_grants)

    def for_config(self, config: LoadedConfig) -> Runtime:
        """This runtime as a session under `config` sees it (a daemon's runtime has no project layer; a session
        it hosts has its workspace's): that config's policy rules, hooks, project hooks, secrets, tool deadlines,
        budgets and knowledge, over the same store, clock, ids, locks, ledgers and stop signal. The store's
        durability stays the store's (one database, one setting). Reads the home's masking key when the config
        names secrets: call it off the event loop."""
        settings = config.settings
        secrets = configured_secrets(config)
        masker = home_masker(settings.home, os.environ, extra_secrets=secrets) if secrets else self.masker
        return dataclasses.replace(
            self, tools=with_deadlines(self.tools, config), hooks=config.hook_set(), config_rules=config.rules,
            project_hooks=ProjectHooks.from_config(config), masker=masker, repair_budget=settings.repair_budget,
            context_budget=settings.context_budget_tokens, snapshot_every=settings.snapshot_every,
            knowledge=KnowledgeSource(config.knowledge, settings.home, config.project_trusted),
            mcp_allowed=config.mcp.serve.allow_tools, delegate_max_depth=settings.delegate_max_depth,
            delegate_in_daemon=settings.delegate_in_daemon, delegate_grants=settings.delegate_grants)

    async def close(self) -> None:
        if self.ledgers is not None:
            await self.ledgers.aclose()
        await self.store.close()

    def plan(self, mode: Mode, knowledge: SessionKnowledge | None = None, *, depth: int = 0,
             tools_allowed: Sequence[str] | None = None, delegator: Delegator | None = None) -> BoundToolPlan:
        """The tools a session in `mode` may call: the runtime's, `delegate` (served by `delegator`) unless the
        session is `delegate_max_depth` deep or in mode `daemon` without `delegate_in_daemon`, and the knowledge
        tools over the session's manifest when it has one (whose digest the plan's covers); mode `mcp` leaves out
        its deny list; a child keeps only `tools_allowed` (its parent's, narrowed)."""
        tools = list(self.tools)
        if delegator is not None and self.delegates(mode, depth):
            delegate = delegate_spec(delegator.handle)
            trust_builtin([delegate])  # a schema of this code, checked by the tests (tool_executor/checks/schema.py)
            tools.append(delegate)
        tools = for_mode(tools, mode, self.mcp_allowed)
        extra = list(knowledge.tools) if knowledge is not None and knowledge.digest is not None else []
        if tools_allowed is not None:
            keep = set(tools_allowed)
            tools, extra = [t for t in tools if t.name in keep], [t for t in extra if t.name in keep]
        if knowledge is None or knowledge.digest is None:
            plan = BoundToolPlan(tools, mode)
        else:
            plan = BoundToolPlan([*tools, *extra], mode, knowledge_digest=knowledge.digest)
        if delegator is not None:
            delegator.plan = plan
        return plan

    def delegates(self, mode: Mode, depth: int) -> bool:
        """Whether a session in `mode`, `depth` delegations deep, is offered `delegate` (mode `mcp` leaves it out
        later, unless `[mcp.serve] allow_tools` names it)."""
        return depth < self.delegate_max_depth and (mode != "daemon" or self.delegate_in_daemon)

    async def session_knowledge(self, workspace: Path, mode: Mode) -> SessionKnowledge:
        """The knowledge a session in `workspace` and `mode` reads now (its manifest is built here)."""
        if self.knowledge is None:
            return SessionKnowledge()
        return await self.knowledge.open(workspace, mode)


TITLE_CHARS = 80


def session_title(masker: Masker, prompt: str) -> str:
    """A session's title, which listings show: the first line of its first prompt, masked before it is cut (half a
    secret would not look like one), cut at a word boundary and then ended with an ellipsis."""
    lines = prompt.strip().splitlines()
    if not lines:
        return ""
    whole = masker.mask(lines[0].strip())
    if len(whole) <= TITLE_CHARS:
        return whole
    cut = cut_head(whole, TITLE_CHARS - 1).rstrip() or whole[: TITLE_CHARS - 1]
    return cut + "…"


@dataclass
class LiveSession:
    """A session this process drives: its state, its lease and its loop."""

    runtime: Runtime
    state: SessionState
    holder: LeaseHolder
    loop: AgenticLoop
    _lost: bool = field(default=False, init=False)
    _owner: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        # Every commit of the loop is made only while this lease is still the session's (the token survives
        # renewals): a process stopped past its lease's expiry writes and dispatches nothing after a takeover.
        self.loop.writer.lease_token = self.holder.token

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
        # The heartbeat's lines name the session too; bound in this task's context for this run only.
        with structlog.contextvars.bound_contextvars(session_id=self.id):
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

    async def name(self, prompt: str) -> None:
        """Title a session that has none after `prompt` (`strata chat` starts without one), as `strata run` does."""
        title = session_title(self.runtime.masker, prompt)
        if title:
            await self.runtime.store.name_session(self.id, self.holder.token, title)

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
        """Let the session go: its ledger's writer ends, its lease is released with `status`, and its model is
        closed (the session's from the start or resume that returned it; agent/models.py `close_model`)."""
        with anyio.CancelScope(shield=True):
            try:
                if self.runtime.ledgers is not None:  # its writer ends with the run (before the lease: none drives it)
                    await self.runtime.ledgers.close(self.id)
                await release(self.runtime.store, self.id, self.holder.token, status)
            finally:
                await close_model(self.loop.model)


def _workspace(path: Path) -> Path:
    resolved = Path(os.path.realpath(path))
    try:
        is_dir = stat.S_ISDIR(os.stat(resolved).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        is_dir = False
    except OSError as exc:  # a name too long (ENAMETOOLONG), a loop, a permission: is_dir() raises these
        raise UsageError(f"workspace {path} cannot be used: {exc.strerror or exc}") from None
    if not is_dir:
        raise UsageError(f"workspace {path} is not a directory")
    return resolved


@record
class Asking:
    """Who decides an `ask`: a person through `approver` (interactive), or nobody, and then `on_ask` says
    whether the call is denied or parked for `strata approve`."""

    approver: Approver | None = None
    on_ask: OnAsk | None = None
    """None: the session's own setting (recorded when it started; "deny" by default)."""


class _NextTurn:
    """The turn a model attempt belongs to, for the evidence ledger: the loop's next one. The state is there only
    once the loop is (a new session's is folded from its first commit)."""

    def __init__(self, state: SessionState | None = None) -> None:
        self.state = state

    def __call__(self) -> int:
        return (self.state.turn if self.state is not None else 0) + 1


def _parts(rt: Runtime, session_id: str, *, workspace: str, on_ask: OnAsk, model: ModelAdapter,
           plan: BoundToolPlan, hooks: HookSet, observer: Observer | None, asking: Asking,
           listener: ModelListener | None, next_turn: _NextTurn, kill_orphans: bool = False) -> LoopParts:
    """A session's loop parts from the runtime: the executor and the loop get the same hooks."""
    recorder: Recorder = TimelineRecorder(rt.masker)
    if rt.ledgers is not None:  # the ledger sees each call, model attempt (the loop's next turn) and commit
        ledger = rt.ledgers.open(session_id, rt.masker, turn=next_turn, head=lambda: rt.store.chain_head(session_id))
        recorder, listener, observer = ledger.recorder(recorder), ledger.listener(listener), ledger.observer(observer)
    processor = ToolCallProcessor(plan, workspace=Path(workspace), ids=rt.ids, hooks=hooks,
                                  approver=asking.approver, on_ask=on_ask, locks=rt.locks,
                                  config_rules=rt.config_rules, recorder=recorder, kill_orphans=kill_orphans)
    return LoopParts(store=rt.store, model=model, plan=plan, processor=processor, hooks=hooks, ids=rt.ids,
                     masker=rt.masker, observer=observer, listener=listener, repair_budget=rt.repair_budget,
                     context_budget=rt.context_budget, snapshot_every=rt.snapshot_every,
                     interruption=rt.stop.cause)


def refuse_empty_prompt(prompt: str | None) -> None:
    """A new session's prompt, when there is one, says something (UsageError otherwise). The CLI checks it before
    it makes the model too: an API model's SDK import costs about a second of CPU."""
    if prompt is not None and not prompt.strip():
        raise UsageError("the prompt is empty", hint="say what the agent should do")


async def start_session(rt: Runtime, *, model: ModelAdapter, workspace: Path, mode: Mode,
                        rules: list[PermissionRule], prompt: str | None, max_turns: int,
                        observer: Observer | None = None, asking: Asking | None = None,
                        listener: ModelListener | None = None, child: ChildLink | None = None) -> LiveSession:
    """`child`: the session is a delegated child (agent/delegation.py): its id, parent, depth and narrowed plan.
    `model` is the returned session's, closed when it is released; a start that fails leaves it to the caller."""
    refuse_empty_prompt(prompt)
    if prompt is not None:
        prompt = valid_text(prompt)  # argv bytes that are not UTF-8 arrive as surrogates (core/utf8.py)
    ws = _workspace(workspace)
    asking = asking or Asking()
    on_ask = asking.on_ask or "deny"
    delegator = _delegator(rt, asking.approver, on_ask)
    plan = rt.plan(mode, await rt.session_knowledge(ws, mode), depth=child.depth if child else 0,
                   tools_allowed=child.tools_allowed if child else None, delegator=delegator)
    session_id = child.session_id if child is not None else rt.ids.session_id()
    holder = new_holder(rt.ids.uuid7(), rt.clock)
    now = rt.clock.now()
    title = session_title(rt.masker, prompt) if prompt else ""
    record = SessionRecord(id=session_id, created_at=now, updated_at=now, mode=mode, workspace=str(ws),
                           model=model.name, title=title, status="active", lease=holder,
                           parent_id=child.parent_id if child is not None else None)
    next_turn = _NextTurn()
    parts = _parts(rt, session_id, workspace=str(ws), on_ask=on_ask, model=model, plan=plan, hooks=rt.hooks,
                   observer=observer, asking=asking, listener=listener, next_turn=next_turn)
    loop = await AgenticLoop.start(parts, record, rules=rules, max_turns=max_turns, on_ask=on_ask,
                                   project_hooks_digest=rt.project_hooks.digest, prompt=prompt, announce=observer,
                                   child=child)
    next_turn.state = delegator.state = loop.state
    return LiveSession(rt, loop.state, holder, loop)


async def refuse_prompt_while_child_busy(rt: Runtime, state: SessionState) -> None:
    """A new prompt for a session whose open batch's delegate call waits on a child another process drives (its
    lease held by a live holder, waited for up to CHILD_LEASE_WAIT_S: a decision holds it for a moment) would park
    again on that child and go unheard: refused (UsageError naming the child and its process), nothing recorded."""
    if state.open_batch is None:
        return
    busy = await busy_child_after_wait(rt.store, state.session_id, make_liveness(rt.clock))
    if busy is not None:
        raise busy_prompt_refusal(state.session_id, busy)


async def _refuse_lost_receipts(store: EventStore, session_id: str, state: SessionState) -> None:
    """A call of the open batch without a result is run again on resume when it has no receipt: the receipt is
    what says it was dispatched. One whose receipt is gone from the receipts table while the chained timeline
    still has its receipt row was dispatched, and its receipt removed: running it again would repeat its effect.
    Refused (ReceiptError) before anything is recorded."""
    batch = state.open_batch
    if batch is None:
        return
    pending = {c.call_id for c in batch.pending()}
    if not pending:
        return
    missing = pending - {r.call_id for r in await store.list_receipts(session_id)}
    if not missing:
        return
    for row in await store.read_timeline(session_id, kinds=["receipt"]):
        if row.call_id in missing and row.check:
            raise ReceiptError(
                f"session {session_id}: call {row.call_id}'s receipt {row.check} is on the timeline (row {row.seq}) "
                "but gone from the receipts table; resuming would run its effect again, so nothing was resumed",
                receipt_id=row.check, hint=f"restore the database; `strata timeline {session_id} --verify` "
                                           "names what was changed")


async def resume_session(rt: Runtime, session_id: str, *, rules: list[PermissionRule],
                         model: ModelAdapter | None = None,
                         model_factory: Callable[[str], ModelAdapter] | None = None,
                         max_turns: int | None = None, observer: Observer | None = None,
                         asking: Asking | None = None, listener: ModelListener | None = None,
                         prompt: str | None = None, without_project_hooks: str | None = None,
                         kill_orphans: bool = False, leased: Callable[[], None] | None = None) -> LiveSession:
    """Take the lease (or fail with SessionActive), restore the state (the latest snapshot plus the tail of the
    log, see memory/restore.py), record the resume. The model is `model`, or `model_factory` applied to the model
    the session recorded; the returned session closes it when released, and a failed resume closes one the factory
    made (a `model` passed in stays the caller's until a session is returned). `prompt`, the one the caller will
    run with, is checked here, before anything is recorded. A session that started with trusted project hooks does
    not continue without them (ProjectHooksMissing, agent/project_hooks.py) unless `without_project_hooks` names
    the person who chose so (then the project's hooks do not run, and the choice is recorded). A resume refused
    before it is recorded leaves the session's status as it was. `kill_orphans`: a command of the open batch that
    outlived its Strata process is killed instead of waited for (tool_executor/orphans.py). `leased` is called once
    the lease is this process's (before that, an interrupt leaves the session as it was: `strata resume` says
    so)."""
    if prompt is not None and not prompt.strip():
        raise UsageError("the prompt is empty", hint="say what the agent should do, or leave the prompt out")
    session = await rt.store.get_session(session_id)
    if is_channel_session(session) and rt.channel is None:
        raise await _channel_session_refusal(rt.store, session_id)
    before = session.status
    holder = new_holder(rt.ids.uuid7(), rt.clock)
    await rt.store.acquire_lease(session_id, holder, make_liveness(rt.clock), rt.clock.now())
    if leased is not None:
        leased()
    state: SessionState | None = None
    made: ModelAdapter | None = None
    try:
        restored = await restore_or_report(rt.store, session_id)
        state = restored.state
        # Tools would fail (or recreate it); the batch be lost. pathlib's is_dir off the loop, as anyio.Path does
        # it, without importing anyio's file module (~1 ms of a resume's start).
        if not await anyio.to_thread.run_sync(Path(state.workspace).is_dir, abandon_on_cancel=True):
            raise UsageError(f"the workspace {state.workspace} of session {session_id} is not a directory any more",
                             hint="put it back (or move the directory there) and resume again; the session is "
                                  "unchanged")
        await _refuse_lost_receipts(rt.store, session_id, state)
        undecided = [c for c in state.parked if c not in state.approvals]
        if prompt is not None and undecided:  # the batch would park again and the prompt go unheard
            raise UsageError(f"session {session_id} is waiting for approval of {', '.join(undecided)}; a new "
                             "prompt cannot be given until the open batch is finished",
                             hint=f"decide with `strata approve|deny {session_id} CALL`, then resume (with the "
                                  "prompt, if you still want it)")
        if prompt is not None:  # its delegate call would park again on a busy child, and the prompt go unheard
            await refuse_prompt_while_child_busy(rt, state)
        if prompt is not None and before == "awaiting_approval" and state.open_batch is not None and \
                (child := await waiting_child(rt.store, session_id)) is not None:  # it would park again, unheard
            raise UsageError(f"session {session_id} is waiting for child session {child}'s approval; a new prompt "
                             "cannot be given until the open batch is finished",
                             hint=f"decide with `strata approve {child} --all` (or name the call, or strata deny), "
                                  f"then resume {session_id} (with the prompt, if you still want it)")
        hooks, hooks_digest = rt.hooks, rt.project_hooks.digest
        if without_project_hooks is not None:
            hooks, hooks_digest = rt.project_hooks.without(rt.hooks), None
        elif (refusal := resume_refusal(session_id, state.project_hooks_digest, rt.project_hooks)) is not None:
            raise refusal
        if model is None:
            if model_factory is None:
                raise UsageError("no model to resume with")
            model = made = model_factory(state.model)
        asking = asking or Asking()
        knowledge = await rt.session_knowledge(Path(state.workspace), state.mode)
        told = knowledge_change(rt.knowledge.home if rt.knowledge else None, state.knowledge_told, knowledge)
        on_ask = _resumed_on_ask(asking, state)
        delegator = _delegator(rt, asking.approver, on_ask)
        delegator.state = state
        plan = rt.plan(state.mode, knowledge, depth=state.depth, tools_allowed=state.tools_allowed,
                       delegator=delegator)
        parts = _parts(rt, session_id, workspace=state.workspace, on_ask=on_ask, model=model,
                       plan=plan, hooks=hooks, observer=observer, asking=asking,
                       listener=listener, next_turn=_NextTurn(state), kill_orphans=kill_orphans)
        loop = await AgenticLoop.resume(parts, restored, rules=rules, max_turns=max_turns, on_ask=asking.on_ask,
                                        project_hooks_digest=hooks_digest, waived_by=without_project_hooks,
                                        knowledge_changed=told)
        return LiveSession(rt, loop.state, holder, loop)
    except BaseException:
        with anyio.CancelScope(shield=True):
            try:
                await release(rt.store, session_id, holder.token, resting_status(state, before))
            finally:
                if made is not None:  # the caller never sees it; a model it passed stays its own (it may retry)
                    await close_model(made)
        raise


def is_channel_session(session: SessionRecord) -> bool:
    """Whether `session` is a channel's thread session: top level in mode `daemon` (only agent/channels starts such
    sessions; a child of one, or a fork, has a parent). The daemon running its channel alone continues it."""
    return session.mode == "daemon" and session.parent_id is None


_CHANNEL_MARKER = re.compile(  # the header line agent/channels/_turns.py `marker` writes
    r"^\[channel (\S+) · thread (\S+) · message ")
_MARKER_SEARCH = 16
"""Events at the start of a channel session's log where its first message's header line is looked for."""


async def _channel_session_refusal(store: EventStore, session_id: str) -> UsageError:
    """Why a channel session (its thread's, driven by a serve daemon) is not resumed here, in one line. The daemon
    owns its thread (the book's claim) and its replies, and its plan (the channel's `reply`, execute and admin tools
    only as `daemon.enable` names them, no MCP servers' tools) is the one the session's approvals are bound to:
    resumed elsewhere, with another plan, an approved call would be asked again or park again, tools the operator
    left out of the channel would be offered, and no answer could reach the thread. Named by the header line of its
    first message, when it has one."""
    where = "a channel's thread"
    for item in await store.read_events(session_id, 0, _MARKER_SEARCH):
        if isinstance(item.event, UserMessage) and (found := _CHANNEL_MARKER.match(item.event.text)):
            where = f"thread {found.group(2)} of channel {found.group(1)}"
            break
    return UsageError(f"session {session_id} is {where}: only the `strata serve` daemon running that channel "
                      "continues it (it owns the thread, its replies and the tool plan its approvals are bound "
                      "to); with the daemon running, the thread's next message continues it, decided calls first. "
                      "Nothing was resumed")


def _resumed_on_ask(asking: Asking, state: SessionState) -> OnAsk:
    """What a resumed session does with an ask nobody can answer: what the resume says, else the session's setting;
    but a session the daemon hosted (mode `ipc`) resumed with nobody to ask parks it, as the daemon parks a call no
    client is there to decide (README: "the call parks exactly as with --on-ask park"). Its recorded setting is
    "deny" and never applied in the daemon, where a client's approver always answers or parks."""
    if asking.on_ask is not None:
        return asking.on_ask
    if state.mode == "ipc" and asking.approver is None:
        return "park"
    return state.on_ask


def _delegator(rt: Runtime, approver: Approver | None, on_ask: OnAsk) -> Delegator:
    """The delegate handler of a session started or resumed over `rt`: one builder, so both get every setting."""
    return Delegator(rt.store, _ChildSessions(rt), max_depth=rt.delegate_max_depth, approver=approver,
                     on_ask=on_ask, alive=make_liveness(rt.clock), pass_grants=rt.delegate_grants)


@record
class _ChildSessions:
    """Child sessions of delegation (agent/delegation.py), over the parent's runtime."""

    rt: Runtime

    async def start(self, child: NewChild) -> LiveChild:
        return await start_session(self.rt, model=child.model, workspace=child.workspace, mode=child.mode,
                                   rules=list(child.rules), prompt=child.prompt, max_turns=child.max_turns,
                                   asking=Asking(approver=child.approver, on_ask=child.on_ask), child=child.link,
                                   observer=self.rt.child_observer)

    async def resume(self, child_id: str, approver: Approver | None, on_ask: OnAsk) -> LiveChild:
        return await resume_session(self.rt, child_id, rules=[], model_factory=model_from_spec,
                                    asking=Asking(approver=approver, on_ask=on_ask), observer=self.rt.child_observer)


@asynccontextmanager
async def runtime(config: LoadedConfig, clock: Clock | None = None, *,
                  read_only: bool = False) -> AsyncIterator[Runtime]:
    """The parts a command needs, built once from its config (`Runtime.open`). `read_only` (sessions, show,
    timeline, receipts, export): the database is opened read-only, and a home that cannot be written still serves:
    no masking key is created (a one-off key masks instead, whose fingerprints only correlate within this output),
    and the log stays on stderr, without a warning (a reading command has nothing to log that would be lost)."""
    rt = await Runtime.open(config, clock, read_only=read_only)
    attach_home(config.settings.home, rt.masker, quiet=read_only)  # the log file, masked by this home's key
    try:
        async with stop_on_signals() as stop:  # SIGTERM and SIGHUP close what runs as Ctrl-C does
            rt.stop = stop
            yield rt
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()
