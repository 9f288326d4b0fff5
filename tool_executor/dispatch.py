"""Step 10: dispatch under a deadline. Every way a handler can end becomes the one result shape: ok, error (a
clean ToolError or a crash, without a traceback for the model), timeout (read-only) or unknown (an effectful
call whose deadline passed: the work may have happened).

The deadline is a cancel scope, so it holds exactly as far as the handler can be cancelled: a subprocess (bash,
grep's matching) is killed on cancellation, and blocking work run through `run_stoppable` (core/tools/blocking.py)
is abandoned at once and told to stop. A handler that waits for a plain worker thread is waited for until the
thread returns; the built-in tools never do that with work that can block (tool_executor/builtin)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import structlog

import tool_executor.result as results
from core.events import CallResult, PlannedCall
from core.scopes import cancel_scope, deadline_after
from core.tools import ToolContext, ToolError, ToolOutput, ToolSpec, ToolTimeout, ToolWaits

log = structlog.get_logger("strata.executor")


async def dispatch(batch_id: str, call: PlannedCall, spec: ToolSpec, args: Mapping[str, Any], ctx: ToolContext,
                   receipt_id: str | None) -> CallResult:
    effectful = spec.effect == "effectful"
    started = time.perf_counter()

    def elapsed() -> float:
        return (time.perf_counter() - started) * 1000

    output: ToolOutput | None = None
    try:
        # A bare cancel scope with a deadline (what `fail_after` wraps, without its generator): this runs per call,
        # so it is made without anyio's per-scope look-ups of the backend (core/scopes.py).
        with cancel_scope(deadline=deadline_after(spec.timeout_s)) as scope:
            output = await spec.handler(args, ctx)
        late = scope.cancelled_caught
    except TimeoutError:
        late = True
    except ToolTimeout as exc:
        return results.timed_out(batch_id, call, str(exc), effectful=effectful, receipt_id=receipt_id,
                                 duration_ms=elapsed())
    except ToolError as exc:
        return results.finished(batch_id, call, f"Error: {exc}", is_error=True, receipt_id=receipt_id,
                                duration_ms=elapsed())
    except ToolWaits as exc:
        if spec.resumes and receipt_id is not None:
            raise  # the call stays dispatched; its session parks (tool_executor/executor.py)
        return results.finished(batch_id, call, f"Error: {exc}", is_error=True, receipt_id=receipt_id,
                                duration_ms=elapsed())
    except Exception as exc:
        log.exception("tool handler crashed", tool=call.tool, call_id=call.call_id)
        return results.finished(batch_id, call, f"Error: the tool failed ({type(exc).__name__}: {exc})",
                                is_error=True, receipt_id=receipt_id, duration_ms=elapsed())
    if late:  # the deadline passed (or the handler itself gave up with a TimeoutError)
        return results.timed_out(batch_id, call, f"no answer within the {spec.timeout_s:g} s deadline",
                                 effectful=effectful, receipt_id=receipt_id, duration_ms=elapsed())
    if output is None:
        return results.finished(batch_id, call, "Error: the tool returned no output", is_error=True,
                                receipt_id=receipt_id, duration_ms=elapsed())
    return results.finished(batch_id, call, output.text, is_error=output.is_error, receipt_id=receipt_id,
                            duration_ms=elapsed())
