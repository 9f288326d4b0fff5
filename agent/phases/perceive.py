"""Perceive: build the model request from folded state. Valid by construction: the conversation holds only
closed batches (each `tool_use` answered by one `tool_result`, together and first in the next user message),
because an open batch is never part of `state.messages`.

When the request would exceed the context budget, `compaction` plans a `Compacted` event (core/compaction.py).
The loop stages it to ride with the turn's next commit, and the request is built as the state will be once that
event is applied, so what the model saw and what the log restores are the same conversation."""

from __future__ import annotations

import json

from core.compaction import compacted_messages, plan_compaction
from core.events import Compacted
from core.model import ModelRequest
from core.state import SessionState
from core.tools import BoundToolPlan


def overhead_chars(plan: BoundToolPlan, system: str) -> int:
    """The part of every request that is not the conversation (computed once per loop: the plan is fixed)."""
    tools = json.dumps(plan.tool_definitions(), ensure_ascii=False, separators=(",", ":"), default=dict)
    return len(system) + len(tools)


def compaction(state: SessionState, *, overhead: int, budget_tokens: int) -> Compacted | None:
    if state.open_batch is not None:
        return None
    return plan_compaction(state.messages, state.context_chars, overhead_chars=overhead, budget_tokens=budget_tokens)


def perceive(state: SessionState, plan: BoundToolPlan, system: str,
             compacted: Compacted | None = None) -> ModelRequest:
    if state.open_batch is not None:
        raise RuntimeError("perceive with an open batch: finish the batch first")
    # A snapshot: the request must not change when the session moves on (one pointer copy per message).
    messages = tuple(state.messages) if compacted is None else tuple(
        compacted_messages(state.messages, compacted.upto_message, compacted.summary))
    return ModelRequest(system=system, messages=messages, tools=plan.tool_definitions(),
                        turn=state.counters.assistant_turns)
