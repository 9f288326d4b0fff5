"""ToolCallProcessor: every proposed call takes the same path, in this order (ARCHITECTURE.md section 4):

    0 plan        a call the plan phase refused (over a limit; core/proposal.py) is denied before anything else
    1 resolve     the tool must be in the session's BoundToolPlan
    2 scope       path arguments stay in the workspace (symlinks followed)
    3 middleware  trusted rewrites (path normalisation); never to a lower safety level or PII class
    4 policy      rules over per-mode defaults; deny beats ask beats allow
    5 schema      JSON Schema, every error listed, nothing repaired
    6 hooks       PreToolUse: allow / block / rewrite / ask; after a rewrite steps 1-5 run again; fail closed
    7 approval    when asked: a grant, a recorded decision, a person, or deny / park when there is none
    8 receipt     an effectful call's `dispatched` receipt is durable before its handler starts
    9 locks       the call's resource keys, sorted, with a timeout, across processes
   10 dispatch    under a deadline; subprocesses in their own process group (tool_executor/dispatch.py)
   11 post hooks  PostToolUse: add context / withhold (tool_executor/post_hooks.py)
   12 result      one CallResult shape for ok / error / denied / timeout / unknown
   13 record      the call's decision path goes to the timeline (tool_executor/record.py)

Steps 1-5 are `check` (pure); 0 and 6-7 are `decide`. In a batch, consecutive read-only calls run side by side;
effectful calls run one at a time in proposal order; results are staged in proposal order."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import structlog

from core.errors import OrphanRunning
from core.events import (
    ApprovalGranted,
    ApprovalRejected,
    BatchProposed,
    CallResult,
    Event,
    GrantAdded,
    Mode,
    ParkedCall,
    PlannedCall,
)
from core.faults import fault_point
from core.hashing import idempotency_key, sha256_json, sha256_text
from core.hooks import (
    Hook,
    HookAllow,
    HookAsk,
    HookBlock,
    HookRewrite,
    HookSet,
    PreToolUseInput,
)
from core.ids import IdFactory
from core.policy import PermissionRule
from core.processes import ProcessGroup
from core.state import Approval, Grant, SessionState
from core.tools import BoundToolPlan, ToolContext, ToolSpec
from core.tools.context import SpawnListener
from memory.records import NewReceipt, Receipt, ReceiptUpdate
from memory.session_writer import SessionWriter
from tool_executor import result as results
from tool_executor.approval import (
    ApprovalOutcome,
    ApprovalRequest,
    Approved,
    Approver,
    OnAsk,
    Parked,
    Rejected,
    from_record,
)
from tool_executor.checks.policy import check_policy, path_filter
from tool_executor.checks.resolve import check_resolve
from tool_executor.checks.schema import check_schema, make_validator
from tool_executor.checks.scope import check_scope
from tool_executor.dispatch import dispatch
from tool_executor.hooks import run_pre
from tool_executor.locks import Held, HeldCommand, LockTimeout, ResourceLocks
from tool_executor.middleware import DEFAULT_MIDDLEWARE, Middleware, downgrade
from tool_executor.orphans import end_group, settle_orphan
from tool_executor.post_hooks import run_post_hooks
from tool_executor.record import CallTrace, Recorder, Step
from tool_executor.verdicts import Ask, Deny, Pass

log = structlog.get_logger("strata.executor")

NO_HUMAN_MODES: frozenset[str] = frozenset({"headless", "daemon", "mcp"})


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Checked:
    """Where steps 1-5 ended: the deciding Deny, an Ask, or Pass, for the (possibly rewritten) call."""

    verdict: Pass | Ask | Deny
    spec: ToolSpec | None
    tool: str
    input: Mapping[str, Any]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
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


def _sha(call: PlannedCall, args: Mapping[str, Any]) -> str:
    """The effective arguments' digest: the proposal's own when nothing rewrote them (no second hashing)."""
    return call.input_sha256 if args is call.input else sha256_json(args)


def _merge(first: Ask | None, second: Ask) -> Ask:
    if first is None:
        return second
    asked_by = first.asked_by if second.asked_by == first.asked_by else f"{first.asked_by} + {second.asked_by}"
    return Ask(first.check, asked_by, first.reasons + second.reasons)


class ToolCallProcessor:
    def __init__(self, plan: BoundToolPlan, *, workspace: Path, ids: IdFactory, hooks: HookSet | None = None,
                 middleware: Sequence[Middleware] = DEFAULT_MIDDLEWARE, approver: Approver | None = None,
                 on_ask: OnAsk = "deny", locks: ResourceLocks | None = None,
                 recorder: Recorder | None = None, config_rules: Sequence[PermissionRule] = (),
                 kill_orphans: bool = False) -> None:
        self.plan = plan
        self.workspace = workspace
        self._ids = ids
        self.hooks = hooks or HookSet()
        self.middleware = tuple(middleware)
        self.approver = approver
        self.on_ask = on_ask
        self.locks = locks
        self.recorder = recorder or Recorder()
        self.config_rules = tuple(config_rules)
        """Rules from config files, checked beside the session's own (flag and resume) rules."""
        self._validators = {name: make_validator(spec) for name, spec in plan.items()}
        self._asking = anyio.Lock()
        self._batch_grants: list[Grant] = []
        self._effects = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no extra loop pass
        self.kill_orphans = kill_orphans
        """On resume, a command that outlived its Strata process is killed (instead of waited for)."""
        self._processes: dict[str, ProcessGroup] = {}
        """Process groups started by this batch's calls, by receipt id (recorded on their receipts)."""

    # ---- steps 1-5 -------------------------------------------------------------------------------------------

    def check(self, tool: str, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: Mode, *,
              call_id: str = "", env: CallEnv | None = None) -> Checked:
        """Steps 1-5: pure checks, no effects. The order is fixed here and nowhere else. With no person to ask
        and no parking, an `ask` is a policy denial right here, unless a grant or a decision recorded for this
        very call (`env`) answers it."""
        steps: list[Step] = []
        verdict = check_resolve(self.plan, tool)
        if isinstance(verdict, Deny):
            steps.append(Step("resolve", "deny", "; ".join(verdict.reasons)))
            return Checked(verdict, None, tool, args, tuple(steps))
        spec = self.plan[tool]
        scope = check_scope(spec, args, self.workspace)
        if isinstance(scope, Deny):
            steps.append(Step("scope", "deny", "; ".join(scope.reasons)))
            return Checked(scope, spec, tool, args, tuple(steps))
        for middleware in self.middleware:
            rewrite = middleware(spec, args, self.workspace)
            if rewrite is None:
                continue
            steps.append(Step("middleware", "rewrite", f"{rewrite.by}: {rewrite.reason}"))
            if rewrite.tool not in self.plan:
                deny = Deny("middleware", (f"{rewrite.by} routed the call to unknown tool {rewrite.tool!r}",))
                return Checked(deny, spec, tool, args, tuple(steps))
            target = self.plan[rewrite.tool]
            problem = downgrade(spec, target)
            if problem is not None:
                steps.append(Step("middleware", "deny", problem))
                return Checked(Deny("middleware", (f"{rewrite.by}: {problem}",)), spec, tool, args, tuple(steps))
            spec, tool, args = target, rewrite.tool, dict(rewrite.input)
            scope = check_scope(spec, args, self.workspace)
            if isinstance(scope, Deny):
                steps.append(Step("scope", "deny", "; ".join(scope.reasons)))
                return Checked(scope, spec, tool, args, tuple(steps))
        policy = check_policy(spec, args, (*rules, *self.config_rules), mode, self.workspace)
        if isinstance(policy, Ask) and self._nobody_to_ask and not self._answered(policy, call_id, tool, args, env):
            policy = self._no_human(policy, tool, mode)
        if isinstance(policy, Deny):
            steps.append(Step("policy", "deny", "; ".join(policy.reasons)))
            return Checked(policy, spec, tool, args, tuple(steps))
        steps.append(Step("policy", "ask" if isinstance(policy, Ask) else "allow",
                          policy.asked_by if isinstance(policy, Ask) else (policy.rule or "")))
        schema = check_schema(self._validators[tool], args)
        if isinstance(schema, Deny):
            steps.append(Step("schema", "deny", "; ".join(schema.reasons)))
            return Checked(schema, spec, tool, args, tuple(steps))
        return Checked(policy, spec, tool, args, tuple(steps))

    @property
    def _nobody_to_ask(self) -> bool:
        return self.approver is None and self.on_ask == "deny"

    @staticmethod
    def _answered(ask: Ask, call_id: str, tool: str, args: Mapping[str, Any], env: CallEnv | None) -> bool:
        if env is None:
            return False
        request = ApprovalRequest(session_id=env.session_id, call_id=call_id, tool=tool, input=args,
                                  input_sha256=sha256_json(args), safety="", effect="", pii="", reasons=ask.reasons,
                                  asked_by=ask.asked_by, plan_digest=env.plan_digest)
        outcome, _ = from_record(request, env.grants, env.approvals.get(call_id))
        return outcome is not None

    @staticmethod
    def _no_human(ask: Ask, tool: str, mode: str) -> Deny:
        """`ask` with no person to ask and no parking is a denial that says how to get the call through."""
        if ask.check == "hook":  # an allow rule cannot answer a hook's question
            how = "run with --on-ask park and approve it with `strata approve`, or in `strata chat`"
        else:
            how = (f"allow it with --allow {tool} or a policy rule, or run with --on-ask park and approve it with "
                   "`strata approve`")
        return Deny(ask.check, (*ask.reasons, f"there is no person to approve it in {mode} mode: {how}"))

    # ---- steps 6-7 -------------------------------------------------------------------------------------------

    async def decide(self, call: PlannedCall, env: CallEnv) -> Decision:
        if call.refused:  # recorded with the proposal, so a resume denies it again, for the same reasons
            return Decision(Deny("plan", call.refused), self.plan.get(call.tool), call.tool, call.input,
                            call.input_sha256, (Step("plan", "deny", "; ".join(call.refused)),))
        checked = self.check(call.tool, call.input, env.rules, env.mode, call_id=call.call_id, env=env)
        steps = list(checked.steps)
        tool, args, spec = checked.tool, checked.input, checked.spec

        def done(verdict: Pass | Deny | Parked, **kw: Any) -> Decision:
            return Decision(verdict, spec, tool, args, _sha(call, args), tuple(steps), **kw)

        if isinstance(checked.verdict, Deny):
            return done(checked.verdict)
        assert spec is not None
        ask: Ask | None = checked.verdict if isinstance(checked.verdict, Ask) else None
        allowed: Pass = checked.verdict if isinstance(checked.verdict, Pass) else Pass()
        hook_ask: Ask | None = None
        ran: list[tuple[Hook, str]] = []  # each hook judges each tool the call becomes, once (so this ends)
        queue = self.hooks.for_event("pre_tool_use", tool)
        while queue:
            hook = queue.pop(0)
            ran.append((hook, tool))
            data = PreToolUseInput(session_id=env.session_id, call_id=call.call_id, turn=env.turn, mode=env.mode,
                                   workspace=str(self.workspace), tool=tool, input=args, safety=spec.safety,
                                   effect=spec.effect)
            verdict = await run_pre(hook, data)
            match verdict:
                case HookBlock(reason=reason):
                    steps.append(Step("hook", "block", f"{hook.name}: {reason}"))
                    return done(Deny("hook", (f"blocked by {hook.describe()}: {reason}",)))
                case HookAsk(reason=reason):
                    steps.append(Step("hook", "ask", f"{hook.name}: {reason}"))
                    hook_ask = _merge(hook_ask, Ask("hook", hook.describe(), (f"{hook.describe()}: {reason}",)))
                case HookRewrite():
                    new_tool = verdict.tool or tool
                    steps.append(Step("hook", "rewrite", f"{hook.name}: {verdict.reason or 'arguments rewritten'}"
                                      + (f" (tool {tool} -> {new_tool})" if new_tool != tool else "")))
                    if new_tool != tool and new_tool in self.plan:
                        problem = downgrade(spec, self.plan[new_tool])
                        if problem is not None:
                            steps.append(Step("hook", "deny", problem))
                            return done(Deny("hook", (f"{hook.describe()}: {problem}",)))
                    again = self.check(new_tool, verdict.input, env.rules, env.mode, call_id=call.call_id, env=env)
                    steps.extend(Step(s.check, s.outcome, f"after rewrite by {hook.name}: {s.detail}")
                                 for s in again.steps)
                    changed_tool = again.tool != tool
                    tool, args, spec = again.tool, again.input, again.spec
                    if isinstance(again.verdict, Deny):
                        return done(Deny(again.verdict.check, tuple(
                            f"after the rewrite by {hook.describe()}: {r}" for r in again.verdict.reasons)))
                    assert spec is not None
                    # The re-check replaces the policy verdict on the old arguments.
                    ask = again.verdict if isinstance(again.verdict, Ask) else None
                    allowed = again.verdict if isinstance(again.verdict, Pass) else Pass()
                    if changed_tool:  # the new tool's guards judge it, also those that judged the old tool
                        queue = [h for h in self.hooks.for_event("pre_tool_use", tool) if (h, tool) not in ran]
                case HookAllow():
                    steps.append(Step("hook", "allow", hook.name))
        if hook_ask is not None:
            if self._nobody_to_ask and not self._answered(hook_ask, call.call_id, tool, args, env):
                steps.append(Step("approval", "deny", f"no person to ask in {env.mode} mode"))
                return done(self._no_human(hook_ask, tool, env.mode))
            ask = _merge(ask, hook_ask)
        if ask is None:
            rejected = env.approvals.get(call.call_id)
            if rejected is not None and rejected.decision == "rejected":
                # A person said no to this very call (`strata deny`): a rule added since does not overrule them.
                steps.append(Step("approval", "rejected", f"{rejected.approver} (recorded)"))
                why = f": {rejected.reason}" if rejected.reason else ""
                return Decision(Deny("approval", (f"rejected by {rejected.approver}{why}",)), spec, tool, args,
                                _sha(call, args), tuple(steps), approver=rejected.approver)
            return done(allowed)
        return await self._approve(call, env, spec, tool, args, ask, steps)

    async def _approve(self, call: PlannedCall, env: CallEnv, spec: ToolSpec, tool: str,
                       args: Mapping[str, Any], ask: Ask, steps: list[Step]) -> Decision:
        sha = _sha(call, args)
        request = ApprovalRequest(session_id=env.session_id, call_id=call.call_id, tool=tool, input=args,
                                  input_sha256=sha, safety=spec.safety, effect=spec.effect, pii=spec.pii,
                                  reasons=ask.reasons, asked_by=ask.asked_by, plan_digest=env.plan_digest)
        outcome: ApprovalOutcome | None
        outcome, note = from_record(request, (*env.grants, *self._batch_grants), env.approvals.get(call.call_id))
        events: list[Event] = []
        if outcome is None and self.approver is None:
            if self.on_ask == "deny":  # a record answered it earlier in the path but not for these arguments
                steps.append(Step("approval", "deny", note or f"no person to ask in {env.mode} mode"))
                deny = self._no_human(Ask(ask.check, ask.asked_by, (*ask.reasons, *((note,) if note else ()))),
                                      tool, env.mode)
                return Decision(deny, spec, tool, args, sha, tuple(steps), ask=ask)
            outcome = Parked(note)
        if outcome is None:
            assert self.approver is not None
            async with self._asking:  # one question at a time, even for calls running side by side
                answer = await self.approver.ask(request)
            if isinstance(answer, Parked):  # the person to ask is gone: the call waits for a recorded decision
                outcome = answer
            elif answer.decision == "no":
                outcome = Rejected(answer.approver, answer.reason, "asked", answer)
                events.append(ApprovalRejected(call_id=call.call_id, tool=tool, args_sha256=sha,
                                               approver=answer.approver, reason=answer.reason))
            else:
                outcome = Approved(answer.approver, "asked", answer)
                events.append(ApprovalGranted(call_id=call.call_id, tool=tool, args_sha256=sha,
                                              plan_digest=env.plan_digest, approver=answer.approver,
                                              scope="session" if answer.decision == "always" else "once",
                                              asked_by=ask.asked_by))
                if answer.decision == "always":
                    events.append(GrantAdded(tool=tool, asked_by=ask.asked_by, approver=answer.approver,
                                             call_id=call.call_id))
                    self._batch_grants.append(Grant(tool, ask.asked_by, answer.approver))
        match outcome:
            case Approved():
                steps.append(Step("approval", "approved", f"{outcome.approver} ({outcome.via})"))
                return Decision(Pass(rule=f"approved by {outcome.approver}"), spec, tool, args, sha, tuple(steps),
                                tuple(events), approver=outcome.approver, ask=ask)
            case Rejected():
                steps.append(Step("approval", "rejected", f"{outcome.approver} ({outcome.via})"))
                why = f": {outcome.reason}" if outcome.reason else ""
                deny = Deny("approval", (*ask.reasons, f"rejected by {outcome.approver}{why}"))
                return Decision(deny, spec, tool, args, sha, tuple(steps), tuple(events), approver=outcome.approver,
                                ask=ask)
            case Parked():
                steps.append(Step("approval", "parked", outcome.note or note or "waiting for `strata approve`"))
                return Decision(outcome, spec, tool, args, sha, tuple(steps), ask=ask)

    # ---- the batch -------------------------------------------------------------------------------------------

    async def run_batch(self, batch: BatchProposed, *, env: CallEnv, writer: SessionWriter,
                        done: Mapping[str, CallResult] | None = None,
                        receipts: Mapping[str, Receipt] | None = None) -> BatchRun:
        """Run the calls of `batch` that have no result yet and stage their results in proposal order.

        `done` holds results kept from before a crash; `receipts` the receipts found for this batch's calls on
        resume: a call with a receipt is never dispatched again. Consecutive read-only calls run side by side.
        Once a call is parked, later calls are only decided (asks are parked too), never run."""
        done = done or {}
        receipts = receipts or {}
        run = BatchRun()
        self._batch_grants = []  # "always" answers given during this batch, for its later calls
        self._processes = {}
        group: list[PlannedCall] = []

        async def flush_group() -> None:
            if not group:
                return
            outcomes: list[Decision | CallResult | None] = [None] * len(group)

            async def one(i: int, call: PlannedCall) -> None:
                outcomes[i] = await self._process(batch, call, env, writer)

            if len(group) == 1:
                await one(0, group[0])
            else:
                async with anyio.create_task_group() as tg:
                    for i, call in enumerate(group):
                        tg.start_soon(one, i, call)
            for call, outcome in zip(group, outcomes, strict=True):
                self._settle(batch, call, outcome, env, writer, run)
            group.clear()

        for call in batch.calls:
            if call.call_id in done:
                continue
            receipt = receipts.get(call.call_id)
            if receipt is not None:
                await flush_group()
                await self._settle_after_crash(batch, call, receipt, writer, env)
                continue
            if run.parked:
                await flush_group()
                decision = await self.decide(call, env)
                if isinstance(decision.verdict, Deny):
                    writer.stage(self._stage_denial(batch, call, decision, env, writer), env.turn)
                elif isinstance(decision.verdict, Parked):
                    run.parked.append(self._parked(call, decision, env, writer))
                else:
                    run.deferred.append(call.call_id)
                continue
            spec = self.plan.get(call.tool)
            if spec is not None and spec.effect == "read_only":
                group.append(call)
                continue
            await flush_group()
            outcome = await self._process(batch, call, env, writer)
            self._settle(batch, call, outcome, env, writer, run)
        await flush_group()
        return run

    def _spawn_listener(self, env: CallEnv, call: PlannedCall, receipt_id: str | None,
                        held: Held | None) -> SpawnListener:
        """What a handler calls with a process group it started, before the group runs anything: the group is
        remembered for the receipt and recorded in the call's lock files, where another process finds it if this
        one dies while it runs (tool_executor/locks.py)."""

        async def spawned(group: ProcessGroup) -> None:
            if receipt_id is not None:
                self._processes[receipt_id] = group
            if held is not None:
                await held.adopt(HeldCommand(group=group, session_id=env.session_id, call_id=call.call_id,
                                             receipt_id=receipt_id))

        return spawned

    def _settle(self, batch: BatchProposed, call: PlannedCall, outcome: Decision | CallResult | None,
                env: CallEnv, writer: SessionWriter, run: BatchRun) -> None:
        if isinstance(outcome, CallResult):
            writer.stage(outcome, env.turn)
        elif isinstance(outcome, Decision):
            run.parked.append(self._parked(call, outcome, env, writer))

    def _parked(self, call: PlannedCall, decision: Decision, env: CallEnv, writer: SessionWriter) -> ParkedCall:
        assert decision.ask is not None
        self.recorder.record(CallTrace(env=env, call=call, decision=decision, result=None), writer)
        return ParkedCall(call_id=call.call_id, tool=decision.tool, input=dict(decision.input),
                          input_sha256=decision.input_sha256, plan_digest=env.plan_digest,
                          reasons=decision.ask.reasons, asked_by=decision.ask.asked_by)

    def _stage_denial(self, batch: BatchProposed, call: PlannedCall, decision: Decision, env: CallEnv,
                      writer: SessionWriter) -> CallResult:
        assert isinstance(decision.verdict, Deny)
        for event in decision.events:
            writer.stage(event, env.turn)
        result = results.denied(batch.batch_id, call, decision.verdict)
        self.recorder.record(CallTrace(env=env, call=call, decision=decision, result=result), writer)
        log.info("call denied", call_id=call.call_id, tool=call.tool, check=decision.verdict.check)
        return result

    async def _settle_after_crash(self, batch: BatchProposed, call: PlannedCall, receipt: Receipt,
                                  writer: SessionWriter, env: CallEnv) -> None:
        """A call whose receipt a stopped process left: never re-run. A `dispatched` one becomes `unknown`, but
        only once the command it started (if any, see `orphans.py`) no longer runs: it is waited for, or killed
        with `kill_orphans`; one still running stops the resume (OrphanRunning) before anything runs beside it."""
        if receipt.status == "dispatched":
            note = "process stopped after dispatch; not re-run"
            process: ProcessGroup | None = None
            if self.locks is not None:
                orphan = await settle_orphan(self.locks, receipt, kill=self.kill_orphans)
                if orphan.still_running:
                    raise OrphanRunning(env.session_id, call.call_id, receipt.tool, orphan.describe(),
                                        self.locks.timeout_s)
                process, note = orphan.process, f"{note}; {orphan.note}" if orphan.note else note
            writer.stage_receipt_update(ReceiptUpdate(id=receipt.id, status="unknown", note=note, process=process))
            receipt = receipt.model_copy(update={"status": "unknown", "process": process})
        result = results.after_crash(batch.batch_id, call, receipt)
        writer.stage(result, env.turn)
        self.recorder.settled(call, result, env.turn, writer)

    async def end_process(self, receipt_id: str) -> ProcessGroup | None:
        """The process group a call of this batch started, ended if it still runs (an interrupted call's handler
        ends its own; this is the backstop). Returns it, to be recorded on the receipt."""
        process = self._processes.get(receipt_id)
        if process is not None:
            await end_group(process)
        return process

    async def _process(self, batch: BatchProposed, call: PlannedCall, env: CallEnv,
                       writer: SessionWriter) -> CallResult | Decision:
        # On every log line. Bound and reset by token: `bound_contextvars` would first copy the whole context.
        tokens = structlog.contextvars.bind_contextvars(turn=env.turn, call_id=call.call_id)
        try:
            return await self._process_call(batch, call, env, writer)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)

    async def _process_call(self, batch: BatchProposed, call: PlannedCall, env: CallEnv,
                            writer: SessionWriter) -> CallResult | Decision:
        """Steps 1-12 for one call. Returns its result (staged by the caller, in proposal order), or the
        Decision of a call that was parked."""
        decision = await self.decide(call, env)
        if isinstance(decision.verdict, Parked):
            return decision
        if isinstance(decision.verdict, Deny):
            return self._stage_denial(batch, call, decision, env, writer)
        spec = decision.spec
        assert spec is not None
        for event in decision.events:
            writer.stage(event, env.turn)
        args = decision.input
        key = idempotency_key(env.session_id, call.call_id, decision.input_sha256)
        ctx = ToolContext(session_id=env.session_id, mode=env.mode, model=env.model, turn=env.turn,
                          call_id=call.call_id, workspace=self.workspace, idempotency_key=key,
                          deadline_s=spec.timeout_s,
                          path_filter=path_filter(spec, args, (*env.rules, *self.config_rules), self.workspace))
        effectful = spec.effect == "effectful"
        receipt_id = None
        keys = tuple(spec.resource_keys(args, ctx)) if spec.resource_keys else ()
        if effectful:
            receipt_id = self._ids.receipt_id()
            writer.stage_receipt(NewReceipt(id=receipt_id, call_id=call.call_id, tool=decision.tool,
                                            idempotency_key=key, args_sha256=decision.input_sha256,
                                            resource_keys=keys))
        await writer.ensure_durable()  # the proposal (and this call's receipt) before the handler starts
        if effectful:
            fault_point("after_receipt")
        started = time.perf_counter()
        try:
            if spec.effect == "read_only":
                result = await dispatch(batch.batch_id, call, spec, args, ctx, receipt_id)
            else:
                async with self._effects:  # effects one at a time, even if a rewrite put one among reads
                    if self.locks is not None and keys:
                        async with self.locks.hold(keys) as held:
                            ctx = replace(ctx, on_spawn=self._spawn_listener(env, call, receipt_id, held))
                            result = await dispatch(batch.batch_id, call, spec, args, ctx, receipt_id)
                    else:
                        ctx = replace(ctx, on_spawn=self._spawn_listener(env, call, receipt_id, None))
                        result = await dispatch(batch.batch_id, call, spec, args, ctx, receipt_id)
        except LockTimeout as exc:
            result = results.busy(batch.batch_id, call, str(exc), receipt_id=receipt_id,
                                  duration_ms=(time.perf_counter() - started) * 1000)
            if receipt_id is not None:
                writer.stage_receipt_update(ReceiptUpdate(id=receipt_id, status="failed",
                                                          note="never started: resource busy"))
            self.recorder.record(CallTrace(env=env, call=call, decision=decision, result=result,
                                           receipt_id=receipt_id, lock=str(exc)), writer)
            return result
        fault_point("after_dispatch")
        if receipt_id is not None:
            status = {"ok": "done", "error": "failed"}.get(result.status, "unknown")
            writer.stage_receipt_update(ReceiptUpdate(id=receipt_id, status=status,  # type: ignore[arg-type]
                                                      outcome_sha256=sha256_text(result.content),
                                                      process=self._processes.get(receipt_id)))
        result, post_steps = await run_post_hooks(self.hooks, call, decision.tool, decision.input, env,
                                                  self.workspace, result)
        self.recorder.record(CallTrace(env=env, call=call, decision=decision, result=result, receipt_id=receipt_id,
                                       post_steps=post_steps), writer)
        return result
