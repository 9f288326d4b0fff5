"""Reflect: a model's proposal to finish becomes completion only through `reflect`.

Built-in checks, then Stop hooks (Python or command, from code and trusted config), may ask for a repair: an
instruction injected as a user message from the runtime. Repairs are bounded by a budget per request of the
person (default 2, `repair_budget` in config); the count lives in the state log, so it survives crash and
resume. A Stop hook that fails (crashes, times out, answers nonsense) does not let the turn pass (no
`TurnVerified`, the stored event's name): the session ends incomplete and says why.

Built-in checks:
- an empty answer after tool errors: the model is asked to say what happened.
Calls with an unknown outcome need no repair: each one's tool_result already told the model that it was not
re-run and awaits reconciliation, and a reconciled outcome is reported on resume; they are noted on the outcome."""

from __future__ import annotations

from typing import Literal

from agent.phases.plan import EMPTY_ANSWER
from core.events import AssistantMessage, RepairRequested
from core.hooks import HookAllow, HookBlock, HookRepair, HookSet, StopInput
from core.messages import TextBlock, ToolResultBlock
from core.record import record
from core.state import SessionState
from tool_executor.hook_runner import run_stop


@record
class Reflection:
    """What reflecting on a proposal to finish decided: complete, ask for a repair (within the budget), or fail
    (the session ends incomplete, saying why)."""

    action: Literal["complete", "repair", "fail"]
    repair: RepairRequested | None = None
    reason: str = ""
    notes: tuple[str, ...] = ()


def _text(answer: AssistantMessage) -> str:
    text = "\n".join(b.text for b in answer.content if isinstance(b, TextBlock)).strip()
    return "" if text == EMPTY_ANSWER else text


def _last_results_failed(state: SessionState) -> bool:
    """Did the tool results the answer follows all fail? (`state` does not hold the answer yet.)"""
    last = state.messages[-1] if state.messages else None
    if last is None or last.role != "user":
        return False
    results = [b for b in last.content if isinstance(b, ToolResultBlock)]
    return bool(results) and all(b.is_error for b in results)


def _builtin(state: SessionState, answer: AssistantMessage) -> RepairRequested | None:
    if not _text(answer) and _last_results_failed(state):
        return RepairRequested(
            reason="empty answer after tool errors", by="builtin:empty_answer",
            instruction="Your answer was empty, and the last tool calls failed. Say what happened and what is left.")
    return None


async def reflect(state: SessionState, answer: AssistantMessage, hooks: HookSet, *, budget: int,
                  workspace: str) -> Reflection:
    """`state` is the session before `answer` (the model's proposal to finish) is applied."""
    notes = []
    if state.unknown_receipts:
        notes.append(f"{len(state.unknown_receipts)} call(s) with an unknown outcome await reconciliation")
    repair = _builtin(state, answer)
    if repair is None:
        data = StopInput(session_id=state.session_id, turn=state.turn, mode=state.mode, workspace=workspace,
                         final_text=_text(answer), repairs_used=state.repairs_used, repair_budget=budget)
        for hook in hooks.for_event("stop"):
            verdict = await run_stop(hook, data)
            match verdict:
                case HookRepair(instruction=instruction):
                    repair = RepairRequested(reason=f"{hook.describe()} asked for a repair", by=hook.name,
                                             instruction=instruction)
                    break
                case HookBlock(reason=reason):
                    return Reflection("fail", reason=f"verification failed: {reason}", notes=tuple(notes))
                case HookAllow():
                    pass
    if repair is None:
        return Reflection("complete", notes=tuple(notes))
    if state.repairs_used >= budget:
        return Reflection("fail", reason=f"the repair budget ({budget}) is used up; still: {repair.reason}",
                            notes=tuple(notes))
    return Reflection("repair", repair=repair, reason=repair.reason, notes=tuple(notes))
