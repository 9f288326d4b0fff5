"""ToolCallProcessor: every proposed call takes the same path, in this order (ARCHITECTURE.md section 4), and each
call's path fills one call record (tool_executor/_call_record.py), which the recorders turn into its rows:

    0 plan        a call the plan phase refused (over a limit; core/proposal.py) is denied before anything else
    1 resolve     the tool must be in the session's BoundToolPlan                 } tool_executor/checks/_pipeline.py
    2 scope       path arguments stay in the workspace (symlinks followed)        } one signature, one ordered
    3 middleware  trusted rewrites; never to a lower safety level or PII class    } tuple, pure
    4 policy      rules over per-mode defaults; deny beats ask beats allow        }
    5 schema      JSON Schema, every error listed, nothing repaired               }
    6 hooks       PreToolUse: allow / block / rewrite / ask; after a rewrite 1-5 again  tool_executor/_pre_hooks.py
    7 approval    when asked: a grant, a recorded decision, a person, or deny / park    tool_executor/approval.py
    8 receipt     an effectful call's `dispatched` receipt is durable before its handler starts  } _effects.py and
    9 locks       the call's resource keys, sorted, with a timeout, across processes             } _receipts.py (the
   10 dispatch    under a deadline; subprocesses in their own process group (dispatch.py)         } receipt's owner)
   11 post hooks  PostToolUse: add context / withhold (tool_executor/post_hooks.py)               }
   12 result      one CallResult shape for ok / error / denied / timeout / unknown (result.py)
   13 record      the call record's rows: timeline (tool_executor/_recorder.py), evidence ledger

In a batch, consecutive read-only calls run side by side; effectful calls run one at a time in proposal order;
results are staged in proposal order. An open batch is settled in one place (`settle_open_batch`, _receipts.py):
on an interrupt, and on resume, where calls with a receipt are settled from it before the rest run again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog

import tool_executor.result as results
from core.events import BatchProposed, Mode, PlannedCall
from core.grant_scope import command_pattern
from core.hooks import HookSet
from core.ids import IdFactory
from core.policy import PermissionRule
from core.processes import ProcessGroup
from core.state import OpenBatch
from core.tools import BoundToolPlan, ToolWaits
from core.vocabulary import OnAsk
from memory.rows import Receipt
from memory.session_writer import SessionWriter
from tool_executor._call_record import CallRecord, Recorder
from tool_executor._effects import Effects
from tool_executor._pre_hooks import run_pre_hooks
from tool_executor._receipts import Receipts, SettleCause, settle_open_batch
from tool_executor._types import BatchRun, CallEnv, Checked, Decision, Step, WaitingCall, effective_sha256
from tool_executor.approval import ApprovalStep, Approver, parked_call
from tool_executor.checks._pipeline import CheckContext, run_checks
from tool_executor.checks.policy import rule_matches
from tool_executor.checks.schema import make_validator
from tool_executor.locks import ResourceLocks
from tool_executor.middleware import DEFAULT_MIDDLEWARE, Middleware
from tool_executor.orphans import end_group
from tool_executor.verdicts import Ask, Deny, Parked

log = structlog.get_logger("strata.executor")


class ToolCallProcessor:
    def __init__(self, plan: BoundToolPlan, *, workspace: Path, ids: IdFactory, hooks: HookSet | None = None,
                 middleware: Sequence[Middleware] = DEFAULT_MIDDLEWARE, approver: Approver | None = None,
                 on_ask: OnAsk = "deny", locks: ResourceLocks | None = None,
                 recorder: Recorder | None = None, config_rules: Sequence[PermissionRule] = (),
                 kill_orphans: bool = False) -> None:
        self.plan = plan
        self.workspace = workspace
        self.hooks = hooks or HookSet()
        self.middleware = tuple(middleware)
        self.approval = ApprovalStep(approver, on_ask, matches=self._matches, narrower=self._narrower)
        self.locks = locks
        self.recorder = recorder or Recorder()
        self.config_rules = tuple(config_rules)
        """Rules from config files, checked beside the session's own (flag and resume) rules."""
        self._validators = {name: make_validator(spec) for name, spec in plan.items()}
        self._effects = Effects(workspace=workspace, ids=ids, hooks=self.hooks, locks=locks,
                                config_rules=self.config_rules)
        self.kill_orphans = kill_orphans
        """On resume, a command that outlived its Strata process is killed (instead of waited for)."""
        self._in_flight: dict[str, CallRecord] = {}
        """The records of the current batch's calls that have no result staged yet, by call id."""
        self._results_staged = 0
        """Results the current batch staged so far (see `_run_calls`)."""

    def _matches(self, tool: str, args: Mapping[str, Any], pattern: str) -> bool:
        """A pattern grant covers a call as an allow rule with that pattern would (a compound command never)."""
        spec = self.plan.get(tool)
        rule = PermissionRule(action="allow", tool=tool, pattern=pattern, source="grant")
        return spec is not None and rule_matches(rule, spec, args, self.workspace)

    def _narrower(self, tool: str, args: Mapping[str, Any]) -> str | None:
        """For a command read with certainty: "always" for commands with its first word (core/grant_scope.py),
        offered only if this very call matches it."""
        spec = self.plan.get(tool)
        if spec is None or spec.primary_kind != "command" or not isinstance(args.get(spec.primary_arg or ""), str):
            return None
        from tool_executor.shell import read_command  # a bash call's: a session without one never needs it

        pattern = command_pattern(read_command(args[spec.primary_arg or ""]).allow_text)
        return pattern if pattern is not None and self._matches(tool, args, pattern) else None

    @property
    def approver(self) -> Approver | None:
        return self.approval.approver

    @property
    def on_ask(self) -> OnAsk:
        return self.approval.on_ask

    # ---- steps 0-7: the decision ---------------------------------------------------------------------------

    def check(self, tool: str, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: Mode, *,
              call_id: str = "", env: CallEnv | None = None) -> Checked:
        """Steps 1-5: pure checks, no effects. With no person to ask and no parking, an `ask` is a policy denial
        right here, unless a grant or a decision recorded for this very call (`env`) answers it."""

        def unanswered(ask: Ask, tool: str, args: Mapping[str, Any]) -> Deny | None:
            return self.approval.unanswered(ask, call_id, tool, args, env, mode)

        ctx = CheckContext(plan=self.plan, workspace=self.workspace, middleware=self.middleware,
                           validators=self._validators, rules=(*rules, *self.config_rules), mode=mode,
                           unanswered=unanswered)
        return run_checks(tool, args, ctx)

    async def decide(self, call: PlannedCall, env: CallEnv) -> Decision:
        """Steps 0-7 for one call."""
        if call.refused:  # recorded with the proposal, so a resume denies it again, for the same reasons
            return Decision(Deny("plan", call.refused), self.plan.get(call.tool), call.tool, call.input,
                            call.input_sha256, (Step("plan", "deny", "; ".join(call.refused), by="plan"),))
        checked = self.check(call.tool, call.input, env.rules, env.mode, call_id=call.call_id, env=env)
        steps = list(checked.steps)
        if isinstance(checked.verdict, Deny):
            return Decision(checked.verdict, checked.spec, checked.tool, checked.input,
                            effective_sha256(call, checked.input), tuple(steps))

        def recheck(tool: str, args: Mapping[str, Any]) -> Checked:
            return self.check(tool, args, env.rules, env.mode, call_id=call.call_id, env=env)

        hooked = await run_pre_hooks(self.hooks, self.plan, self.workspace, call, env, checked, recheck, steps)
        if isinstance(hooked.verdict, Deny):
            return Decision(hooked.verdict, hooked.spec, hooked.tool, hooked.input,
                            effective_sha256(call, hooked.input), tuple(steps))
        return await self.approval.decide(call, env, hooked, steps)

    # ---- the batch -------------------------------------------------------------------------------------------

    async def run_batch(self, batch: BatchProposed, *, env: CallEnv, writer: SessionWriter) -> BatchRun:
        """Run the calls of a batch just proposed, and stage their results in proposal order."""
        return await self._run_calls(batch.batch_id, batch.calls, env, writer)

    async def finish_open_batch(self, batch: OpenBatch, *, env: CallEnv, writer: SessionWriter,
                                receipts: Mapping[str, Receipt]) -> BatchRun:
        """Resume: calls with a result keep it; calls with a receipt are settled from it first (never re-run:
        `settle_open_batch`); the rest go through the whole pipeline again, approval included."""
        owner = Receipts(writer, self.recorder)

        def resumes(tool: str) -> bool:
            spec = self.plan.get(tool)
            return spec is not None and spec.resumes

        waiting: list[WaitingCall] = []

        async def re_enter(record: CallRecord, receipt: Receipt) -> None:
            try:
                await self._effects.re_enter(record, owner, self.plan[receipt.tool], receipt)
            except ToolWaits as exc:  # its work still waits: the batch stays open, the session parks again
                waiting.append(WaitingCall(record.call.call_id, receipt.tool, exc.reason))
                raise

        try:
            left = await settle_open_batch(batch, SettleCause("crash", "the process stopped"), env=env,
                                           receipts=receipts, owner=owner, in_flight={},
                                           locks=self.locks, kill_orphans=self.kill_orphans, resumes=resumes,
                                           re_enter=re_enter)
        except ToolWaits:
            return BatchRun(waiting=waiting[0])
        return await self._run_calls(batch.batch_id, tuple(left.to_run), env, writer)

    async def settle_interrupted(self, batch: OpenBatch, cause: str, *, env: CallEnv, writer: SessionWriter,
                                 receipts: Mapping[str, Receipt]) -> None:
        """The run was interrupted with `batch` open: settle and close it (`settle_open_batch`)."""
        await settle_open_batch(batch, SettleCause("interrupt", cause), env=env, receipts=receipts,
                                owner=Receipts(writer, self.recorder), in_flight=self._in_flight,
                                end_process=self.end_process)
        self._in_flight = {}

    async def _run_calls(self, batch_id: str, calls: Sequence[PlannedCall], env: CallEnv,
                         writer: SessionWriter) -> BatchRun:
        """Before a person is asked about a call, what the batch's earlier calls left staged (their results,
        receipts and rows) is committed: the answer may take hours, and a crash meanwhile must not turn a call that
        finished into an unknown one, nor lose the person's earlier answers; a client sees those results first.
        Before the batch's first result nothing is committed for a question (the proposal stays staged, as ever)."""

        async def commit_what_ran() -> None:
            if self._results_staged and writer.dirty:  # the batch's first question leaves its proposal staged
                await writer.flush()

        self.approval.before_asking = commit_what_ran
        try:
            return await self._run_batch_calls(batch_id, calls, env, writer)
        finally:
            self.approval.before_asking = None

    async def _run_batch_calls(self, batch_id: str, calls: Sequence[PlannedCall], env: CallEnv,
                               writer: SessionWriter) -> BatchRun:
        """Consecutive read-only calls run side by side. Once a call is parked, later calls are only decided
        (asks are parked too), never run."""
        run = BatchRun()
        self._results_staged = 0
        self.approval.batch_grants = []  # "always" answers given during this batch, for its later calls
        self._effects.processes = {}
        self._in_flight = {}
        receipts = Receipts(writer, self.recorder)
        group: list[CallRecord] = []

        async def flush_group() -> None:
            if len(group) == 1:  # a group of one needs no task group
                await self._process(group[0], receipts, alone=True)
            elif group:
                async with anyio.create_task_group() as tg:
                    for record in group:
                        tg.start_soon(self._process, record, receipts)
            for record in group:
                self._finish(record, writer, run)
            group.clear()

        for call in calls:
            record = self._in_flight[call.call_id] = CallRecord(env=env, call=call, batch_id=batch_id)
            if run.parked:
                await flush_group()
                record.decision = await self.decide(call, env)
                if isinstance(record.decision.verdict, Deny):
                    self._denied(record, writer)
                elif not isinstance(record.decision.verdict, Parked):
                    run.deferred.append(call.call_id)
                    del self._in_flight[call.call_id]
                    continue
                self._finish(record, writer, run)
                continue
            spec = self.plan.get(call.tool)
            if spec is not None and spec.effect == "read_only":
                group.append(record)
                continue
            await flush_group()
            try:
                await self._process(record, receipts, alone=True)
            except ToolWaits as exc:  # dispatched, its work waits for a person elsewhere: the batch stops here
                del self._in_flight[call.call_id]
                run.waiting = WaitingCall(call.call_id, record.tool, exc.reason)
                return run
            self._finish(record, writer, run)
        await flush_group()
        return run

    def _finish(self, record: CallRecord, writer: SessionWriter, run: BatchRun) -> None:
        """The call's path is over: its result is staged (in proposal order) with its rows, or it is parked."""
        del self._in_flight[record.call.call_id]
        assert record.decision is not None
        if isinstance(record.decision.verdict, Parked):
            run.parked.append(parked_call(record.call, record.decision, record.env))
        else:
            assert record.result is not None
            writer.stage(record.result, record.env.turn)
            self._results_staged += 1
        self.recorder.call(record, writer)

    def _denied(self, record: CallRecord, writer: SessionWriter) -> None:
        """A denied call's result; the approval records of its decision (a person's "no") are staged now."""
        assert record.decision is not None and isinstance(record.decision.verdict, Deny)
        for event in record.decision.events:
            writer.stage(event, record.env.turn)
        record.result = results.denied(record.batch_id, record.call, record.decision.verdict)
        log.info("call denied", call_id=record.call.call_id, tool=record.call.tool,
                 check=record.decision.verdict.check)

    async def _process(self, record: CallRecord, receipts: Receipts, *, alone: bool = False) -> None:
        """Steps 0-12 for one call, filling its record. `alone`: no other call of the batch runs meanwhile."""
        # On every log line. Bound and reset by token: `bound_contextvars` would first copy the whole context.
        tokens = structlog.contextvars.bind_contextvars(turn=record.env.turn, call_id=record.call.call_id)
        try:
            record.decision = await self.decide(record.call, record.env)
            if isinstance(record.decision.verdict, Deny):
                self._denied(record, receipts.writer)
            elif not isinstance(record.decision.verdict, Parked):
                await self._effects.run(record, receipts, alone=alone)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)

    async def end_process(self, receipt_id: str) -> ProcessGroup | None:
        """The process group a call of this batch started, ended if it still runs (an interrupted call's handler
        ends its own; this is the backstop). Returns it, to be recorded on the receipt."""
        process = self._effects.processes.get(receipt_id)
        if process is not None:
            await end_group(process)
        return process

