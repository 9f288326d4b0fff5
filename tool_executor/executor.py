"""ToolCallProcessor: every proposed call takes the same path, in this order (ARCHITECTURE.md section 4):

    1 resolve    the tool must be in the session's BoundToolPlan
    2 scope      path arguments stay in the workspace (symlinks followed)
    4 policy     session rules over per-mode defaults; deny beats allow
    5 schema     JSON Schema, every error listed, nothing repaired
    8 receipt    an effectful call's `dispatched` receipt is durable before its handler starts
   10 dispatch   under a deadline; subprocesses in their own process group
   12 result     one CallResult shape for ok / error / denied / timeout / unknown

Steps 3 (middleware), 6 (PreToolUse hooks), 7 (approval), 9 (locks) and 11 (PostToolUse hooks) land with the
pipeline issue; their places are kept here. The batch's proposal is durable before the first dispatch: every
dispatch is preceded by `writer.ensure_durable()`."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from core.events import BatchProposed, CallResult, Mode, PlannedCall
from core.faults import fault_point
from core.hashing import idempotency_key, sha256_text
from core.ids import IdFactory
from core.policy import PermissionRule
from core.tools import BoundToolPlan, ToolContext, ToolError, ToolOutput, ToolSpec, ToolTimeout
from memory.records import NewReceipt, Receipt, ReceiptUpdate
from memory.session_writer import SessionWriter
from tool_executor import result as results
from tool_executor.checks.policy import check_policy
from tool_executor.checks.resolve import check_resolve
from tool_executor.checks.schema import check_schema, make_validator
from tool_executor.checks.scope import check_scope
from tool_executor.verdicts import Deny, Pass, Verdict

log = structlog.get_logger("strata.executor")


@dataclass(frozen=True)
class Decision:
    """Where a call's checks ended: `verdict` is the deciding Deny, or the final Pass."""

    verdict: Verdict
    spec: ToolSpec | None


class ToolCallProcessor:
    def __init__(self, plan: BoundToolPlan, *, workspace: Path, ids: IdFactory) -> None:
        self.plan = plan
        self.workspace = workspace
        self._ids = ids
        self._validators = {name: make_validator(spec) for name, spec in plan.items()}

    def decide(self, tool: str, args: Mapping[str, Any], rules: Sequence[PermissionRule], mode: Mode) -> Decision:
        """Steps 1-5: pure checks, no effects. The order is fixed here and nowhere else."""
        verdict = check_resolve(self.plan, tool)
        if isinstance(verdict, Deny):
            return Decision(verdict, None)
        spec = self.plan[tool]
        for step in (
            lambda: check_scope(spec, args, self.workspace),
            lambda: check_policy(spec, args, rules, mode, self.workspace),
            lambda: check_schema(self._validators[tool], args),
        ):
            outcome = step()
            if isinstance(outcome, Deny):
                return Decision(outcome, spec)
            if outcome.rule is not None:
                verdict = outcome
        return Decision(verdict, spec)

    async def run_batch(self, batch: BatchProposed, *, session_id: str, mode: Mode, model: str, turn: int,
                        rules: Sequence[PermissionRule], writer: SessionWriter,
                        done: Mapping[str, CallResult] | None = None,
                        receipts: Mapping[str, Receipt] | None = None) -> None:
        """Run the calls of `batch` that have no result yet, in proposal order, staging each result.

        `done` holds results kept from before a crash; `receipts` the receipts found for this batch's calls on
        resume: a call with a receipt is never dispatched again."""
        done = done or {}
        receipts = receipts or {}
        for call in batch.calls:
            if call.call_id in done:
                continue
            receipt = receipts.get(call.call_id)
            if receipt is not None:
                self._settle_after_crash(batch, call, receipt, writer, turn)
                continue
            await self._process(batch, call, session_id=session_id, mode=mode, model=model, turn=turn,
                                rules=rules, writer=writer)

    def _settle_after_crash(self, batch: BatchProposed, call: PlannedCall, receipt: Receipt,
                            writer: SessionWriter, turn: int) -> None:
        if receipt.status == "dispatched":
            writer.stage_receipt_update(ReceiptUpdate(
                id=receipt.id, status="unknown", note="process stopped after dispatch; not re-run"))
            receipt = receipt.model_copy(update={"status": "unknown"})
        writer.stage(results.after_crash(batch.batch_id, call, receipt), turn)

    async def _process(self, batch: BatchProposed, call: PlannedCall, *, session_id: str, mode: Mode,
                       model: str, turn: int, rules: Sequence[PermissionRule], writer: SessionWriter) -> None:
        decision = self.decide(call.tool, call.input, rules, mode)
        if isinstance(decision.verdict, Deny):
            writer.stage(results.denied(batch.batch_id, call, decision.verdict), turn)
            log.info("call denied", call_id=call.call_id, tool=call.tool, check=decision.verdict.check)
            return
        spec = decision.spec
        assert spec is not None and isinstance(decision.verdict, Pass)
        key = idempotency_key(session_id, call.call_id, call.input_sha256)
        ctx = ToolContext(session_id=session_id, mode=mode, model=model, turn=turn, call_id=call.call_id,
                          workspace=self.workspace, idempotency_key=key, deadline_s=spec.timeout_s)
        effectful = spec.effect == "effectful"
        receipt_id = None
        if effectful:
            receipt_id = self._ids.receipt_id()
            keys = tuple(spec.resource_keys(call.input, ctx)) if spec.resource_keys else ()
            writer.stage_receipt(NewReceipt(id=receipt_id, call_id=call.call_id, tool=call.tool,
                                            idempotency_key=key, args_sha256=call.input_sha256,
                                            resource_keys=keys))
        await writer.ensure_durable()  # the proposal (and this call's receipt) before the handler starts
        if effectful:
            fault_point("after_receipt")
        result = await self._dispatch(batch, call, spec, ctx, receipt_id)
        fault_point("after_dispatch")
        writer.stage(result, turn)
        if receipt_id is not None:
            status = {"ok": "done", "error": "failed"}.get(result.status, "unknown")
            writer.stage_receipt_update(ReceiptUpdate(id=receipt_id, status=status,  # type: ignore[arg-type]
                                                      outcome_sha256=sha256_text(result.content)))

    async def _dispatch(self, batch: BatchProposed, call: PlannedCall, spec: ToolSpec, ctx: ToolContext,
                        receipt_id: str | None) -> CallResult:
        effectful = spec.effect == "effectful"
        started = time.perf_counter()

        def elapsed() -> float:
            return (time.perf_counter() - started) * 1000

        try:
            with anyio.fail_after(spec.timeout_s):
                output: ToolOutput = await spec.handler(call.input, ctx)
        except TimeoutError:
            return results.timed_out(batch.batch_id, call, f"no answer within the {spec.timeout_s:g} s deadline",
                                     effectful=effectful, receipt_id=receipt_id, duration_ms=elapsed())
        except ToolTimeout as exc:
            return results.timed_out(batch.batch_id, call, str(exc), effectful=effectful, receipt_id=receipt_id,
                                     duration_ms=elapsed())
        except ToolError as exc:
            return results.finished(batch.batch_id, call, f"Error: {exc}", is_error=True, receipt_id=receipt_id,
                                    duration_ms=elapsed())
        except Exception as exc:
            log.exception("tool handler crashed", tool=call.tool, call_id=call.call_id)
            return results.finished(batch.batch_id, call, f"Error: the tool failed ({type(exc).__name__}: {exc})",
                                    is_error=True, receipt_id=receipt_id, duration_ms=elapsed())
        return results.finished(batch.batch_id, call, output.text, is_error=output.is_error,
                                receipt_id=receipt_id, duration_ms=elapsed())
