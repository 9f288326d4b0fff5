"""Perceive: build the model request from folded state. Valid by construction: the conversation holds only
closed batches (each `tool_use` answered by one `tool_result`, together and first in the next user message),
because an open batch is never part of `state.messages`."""

from __future__ import annotations

from core.model import ModelRequest
from core.state import SessionState
from core.tools import BoundToolPlan


def perceive(state: SessionState, plan: BoundToolPlan, system: str) -> ModelRequest:
    if state.open_batch is not None:
        raise RuntimeError("perceive with an open batch: finish the batch first")
    # A snapshot: the request must not change when the session moves on (one pointer copy per message).
    return ModelRequest(system=system, messages=tuple(state.messages), tools=plan.tool_definitions(),
                        turn=state.counters.assistant_turns)
