"""The one `tool_result` shape. Ok, error, denied, timeout and unknown outcomes all become a `CallResult` event
with the same fields; `is_error` is set for everything but ok. Denials say that no effect started.

Text from outside (a tool's output, an error naming a file whose name is not UTF-8) is made valid UTF-8 here
(core/utf8.py): a result that could not be stored would stop the run, and a read-only call is run again on
resume, so it would stop every resume too."""

from __future__ import annotations

from core.events import CallResult, CallStatus, PlannedCall, finished_result
from core.utf8 import valid_text
from memory.rows import Receipt
from tool_executor.verdicts import Deny

MAX_RESULT_CHARS = 16 * 1024 * 1024
"""A backstop against a runaway tool, not what the model sees: an output over the blob threshold is kept whole as
a blob and the model sees a bounded excerpt (core/blobs.py, done by the session writer)."""


def cap(text: str) -> str:
    """The text as valid UTF-8, cut at the backstop."""
    text = valid_text(text)
    if len(text) <= MAX_RESULT_CHARS:
        return text
    cut = len(text) - MAX_RESULT_CHARS
    return text[:MAX_RESULT_CHARS] + f"\n[result truncated: {cut} more characters not shown]"


def denied(batch_id: str, call: PlannedCall, deny: Deny) -> CallResult:
    reasons = tuple(valid_text(r) for r in deny.reasons)
    lines = [f"Denied by the {deny.check} check; the call was not run and no effect started."]
    lines += [f"- {r}" for r in reasons]
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="denied",
                      content="\n".join(lines), is_error=True, check=deny.check, reasons=reasons)


def finished(batch_id: str, call: PlannedCall, text: str, *, is_error: bool, receipt_id: str | None,
             duration_ms: float) -> CallResult:
    return finished_result(batch_id, call.call_id, call.tool, "error" if is_error else "ok", cap(text), is_error,
                           receipt_id, round(duration_ms, 3))


def timed_out(batch_id: str, call: PlannedCall, detail: str, *, effectful: bool, receipt_id: str | None,
              duration_ms: float) -> CallResult:
    status: CallStatus
    if effectful:
        text = (f"Outcome unknown: {detail}. The work may or may not have taken effect. It will not be re-run; "
                f"it awaits reconciliation (receipt {receipt_id}).")
        status = "unknown"
    else:
        text = f"Timed out: {detail}."
        status = "timeout"
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status=status, content=valid_text(text),
                      is_error=True, check="dispatch", receipt_id=receipt_id, duration_ms=round(duration_ms, 3))


def busy(batch_id: str, call: PlannedCall, detail: str, *, receipt_id: str | None, duration_ms: float) -> CallResult:
    """A lock timeout: the call never started."""
    text = f"Not run: {detail}. No effect started; propose it again later if it is still needed."
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="error", content=valid_text(text),
                      is_error=True, check="lock", receipt_id=receipt_id, duration_ms=round(duration_ms, 3))


VERDICT_MARK = "; what is known: "
"""Joins an interrupted call's receipt note and its handler's interrupt verdict (read by the hint after Ctrl-C)."""
KNOWN_MARK = " What is known: "
"""Starts the interrupt verdict in an interrupted call's result text, up to the next '. '."""


def interrupt_verdict(text: str) -> str | None:
    """The interrupt verdict an interrupted call's result text carries (`interrupted` wrote it), or None."""
    _, found, rest = text.partition(KNOWN_MARK)
    return rest.split(". ", 1)[0] if found else None


def interrupted(batch_id: str, call: PlannedCall, receipt_id: str | None,
                cause: str = "the user interrupted the turn", verdict: str | None = None) -> CallResult:
    """The turn was interrupted (Ctrl-C, or `cause`: a termination signal): a started effect is unknown (with what
    its handler could say for certain, its `verdict`); a call not started never ran."""
    if receipt_id is not None:
        known = f"{KNOWN_MARK}{verdict}." if verdict else ""
        text = (f"Outcome unknown: {cause} while this call ran, so it may or may not have taken "
                f"effect.{known} It will not be re-run; it awaits reconciliation (receipt {receipt_id}).")
        return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="unknown", content=text,
                          is_error=True, check="interrupt", receipt_id=receipt_id)
    text = f"Not run: {cause} before this call finished; no effect of it was kept."
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="error", content=text,
                      is_error=True, check="interrupt")


def after_crash(batch_id: str, call: PlannedCall, receipt: Receipt) -> CallResult:
    """The result of a call whose process stopped after its receipt was committed."""
    if receipt.status == "done":
        text = (f"The process stopped while this call ran; it was later reconciled as applied"
                f"{_by(receipt)}. It was not re-run.")
        return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="ok", content=text,
                          is_error=False, receipt_id=receipt.id)
    if receipt.status == "failed":
        text = (f"The process stopped while this call ran; it was later reconciled as not applied"
                f"{_by(receipt)}. It was not re-run; propose it again if it is still needed.")
        return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="error", content=text,
                          is_error=True, receipt_id=receipt.id)
    text = ("Outcome unknown: the process stopped after this call was dispatched, so it may or may not have "
            f"taken effect. It was not re-run; it awaits reconciliation (receipt {receipt.id}).")
    return CallResult(batch_id=batch_id, call_id=call.call_id, tool=call.tool, status="unknown", content=text,
                      is_error=True, check="receipt", receipt_id=receipt.id)


def _by(receipt: Receipt) -> str:
    parts = []
    if receipt.reconciled_by:
        parts.append(f" by {receipt.reconciled_by}")
    if receipt.note:
        parts.append(f" (note: {receipt.note})")
    return "".join(parts)
