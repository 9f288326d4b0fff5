"""Steps 8-12 for a call that was allowed: its receipt (effectful calls; durable before the handler starts), its
resource locks, the dispatch under its deadline, the receipt's outcome, and the PostToolUse hooks. Fills the call
record's receipt, lock, post-hook steps and result."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import anyio

import tool_executor.result as results
from core.events import CallResult
from core.faults import fault_point
from core.hashing import idempotency_key
from core.hooks import HookSet
from core.ids import IdFactory
from core.policy import PermissionRule
from core.processes import ProcessGroup
from core.tools import ToolContext, ToolSpec
from core.tools.context import SpawnListener
from memory.rows import NewReceipt, Receipt
from tool_executor._call_record import CallRecord
from tool_executor._receipts import Receipts
from tool_executor.checks.policy import path_filter
from tool_executor.dispatch import dispatch
from tool_executor.locks import Held, HeldCommand, LockTimeout, ResourceLocks
from tool_executor.post_hooks import run_post_hooks


class Effects:
    """Runs allowed calls: effectful ones one at a time (even if a rewrite put one among reads), each holding its
    resource keys, and remembers the process groups their handlers start (recorded on their receipts)."""

    def __init__(self, *, workspace: Path, ids: IdFactory, hooks: HookSet, locks: ResourceLocks | None,
                 config_rules: Sequence[PermissionRule]) -> None:
        self.workspace = workspace
        self._ids = ids
        self.hooks = hooks
        self.locks = locks
        self.config_rules = tuple(config_rules)
        self._one_at_a_time = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no extra loop pass
        self.processes: dict[str, ProcessGroup] = {}
        """Process groups started by the current batch's calls, by receipt id."""

    async def run(self, record: CallRecord, receipts: Receipts, *, alone: bool = False) -> None:
        """`alone`: the batch runs this call by itself (no other call of it runs meanwhile), so an effectful call
        has nothing to wait for in the one-at-a-time order and does not take its lock."""
        d, env, call = record.decision, record.env, record.call
        assert d is not None and d.spec is not None
        spec, args, writer = d.spec, d.input, receipts.writer
        for event in d.events:
            writer.stage(event, env.turn)
        key = idempotency_key(env.session_id, call.call_id, d.input_sha256)
        effectful = spec.effect == "effectful"
        held: list[Held] = []  # the call's locks, once taken (step 9): `on_spawn` records its process group there
        ctx = ToolContext(session_id=env.session_id, mode=env.mode, model=env.model, turn=env.turn,
                          call_id=call.call_id, workspace=self.workspace, idempotency_key=key,
                          deadline_s=spec.timeout_s,
                          path_filter=path_filter(spec, args, (*env.rules, *self.config_rules), self.workspace),
                          on_interrupt=record.tell_interrupt,
                          on_spawn=None if spec.effect == "read_only" else self._spawned(record, held))
        # Resource keys serve the receipt and the locks (step 9), which a read-only call has neither of: its keys
        # are not computed (read_file's resolved its path once more, a realpath, for nothing).
        keys = tuple(spec.resource_keys(args, ctx)) if spec.resource_keys and spec.effect != "read_only" else ()
        if effectful:  # step 8
            receipts.dispatched(record, NewReceipt(id=self._ids.receipt_id(), call_id=call.call_id, tool=d.tool,
                                                   idempotency_key=key, args_sha256=d.input_sha256,
                                                   resource_keys=keys))
        await writer.ensure_durable()  # the proposal (and this call's receipt) before the handler starts
        if effectful:
            fault_point("after_receipt")
        receipt_id = record.receipt_id
        started = time.perf_counter()
        try:
            if spec.effect == "read_only":  # step 10
                result = await dispatch(record.batch_id, call, spec, args, ctx, receipt_id)
            elif alone:
                result = await self._effect(record, spec, ctx, keys, held)
            else:
                async with self._one_at_a_time:
                    result = await self._effect(record, spec, ctx, keys, held)
        except LockTimeout as exc:
            record.lock = str(exc)
            record.result = results.busy(record.batch_id, call, str(exc), receipt_id=receipt_id,
                                         duration_ms=(time.perf_counter() - started) * 1000)
            if receipt_id is not None:
                receipts.never_started(record, "resource busy")
            return
        fault_point("after_dispatch")
        if receipt_id is not None:
            receipts.finished(record, result, self.processes.get(receipt_id))
        record.result, record.post_steps = await run_post_hooks(self.hooks, call, d.tool, d.input, env,
                                                                self.workspace, result)  # step 11

    async def _effect(self, record: CallRecord, spec: ToolSpec, ctx: ToolContext, keys: tuple[str, ...],
                      held: list[Held]) -> CallResult:
        """Steps 9-10 for an effectful call: its resource keys held (when it has any), then the dispatch."""
        d = record.decision
        assert d is not None
        if self.locks is not None and keys:  # step 9
            async with self.locks.hold(keys) as lock:
                held.append(lock)
                return await dispatch(record.batch_id, record.call, spec, d.input, ctx, record.receipt_id)
        return await dispatch(record.batch_id, record.call, spec, d.input, ctx, record.receipt_id)

    async def re_enter(self, record: CallRecord, receipts: Receipts, spec: ToolSpec, receipt: Receipt) -> None:
        """After a crash: enter the handler of a call of a tool that `resumes` again, with the context it had (its
        receipt's idempotency key, so the same work is found and finished, never started a second time), holding its
        resource keys, and finish its receipt. No check runs again: the call was decided and dispatched."""
        env, call = record.env, record.call
        args = call.input
        ctx = ToolContext(session_id=env.session_id, mode=env.mode, model=env.model, turn=env.turn,
                          call_id=call.call_id, workspace=self.workspace, idempotency_key=receipt.idempotency_key,
                          deadline_s=spec.timeout_s)
        async with self._one_at_a_time:
            if self.locks is not None and receipt.resource_keys:
                async with self.locks.hold(receipt.resource_keys):
                    result = await dispatch(record.batch_id, call, spec, args, ctx, receipt.id)
            else:
                result = await dispatch(record.batch_id, call, spec, args, ctx, receipt.id)
        fault_point("after_dispatch")
        receipts.finished(record, result, None)
        record.result = result

    def _spawned(self, record: CallRecord, held: list[Held]) -> SpawnListener:
        """What a handler calls with a process group it started, before the group runs anything: the group is
        remembered for the receipt and recorded in the call's lock files, where another process finds it if this
        one dies while it runs (tool_executor/locks.py)."""
        env = record.env

        async def spawned(group: ProcessGroup) -> None:
            receipt_id = record.receipt_id  # read when the group starts: the receipt is made after the context
            if receipt_id is not None:
                self.processes[receipt_id] = group
            if held:
                await held[0].adopt(HeldCommand(group=group, session_id=env.session_id, call_id=record.call.call_id,
                                             receipt_id=receipt_id))

        return spawned
