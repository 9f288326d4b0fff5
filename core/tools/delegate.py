"""The `delegate` tool's declaration: a child session on a task, with the parent's plan narrowed (the handler is
the agent's, agent/delegation.py). Its receipt names the child (`session:<child id>`), chosen from the call's
idempotency key before the child starts, so a resume after a crash finds that same child and never starts a
second one (`resumes`: the executor re-enters the handler instead of calling the outcome unknown)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from core.delegate_keys import CHILD_KEY_PREFIX, DELEGATE
from core.tools.context import ToolContext
from core.tools.spec import Handler, ToolSpec

DEFAULT_MAX_DEPTH = 2
"""A session this many delegations deep has no `delegate` (top level: 0)."""

SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "description": "What the child session should do."},
        "tools": {"type": "array", "items": {"type": "string"}, "uniqueItems": True,
                  "description": "Only these of your tools (default: all of yours)."},
        "max_turns": {"type": "integer", "minimum": 1, "maximum": 1000,
                      "description": "The child's limit on model turns: at most yours (default: yours)."},
    },
    "required": ["task"],
    "additionalProperties": False,
}


def child_session_id(idempotency_key: str) -> str:
    """The child's id for one delegate call: the same for every entry of that call (its idempotency key covers the
    parent session, the call id and the arguments), in the UUID layout (version 8: derived)."""
    h = hashlib.sha256(f"delegate:{idempotency_key}".encode()).hexdigest()
    h = f"{h[:12]}8{h[13:16]}{(0b10 << 2 | int(h[16], 16) & 0b11):x}{h[17:32]}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _keys(args: Mapping[str, Any], ctx: ToolContext) -> list[str]:
    return [CHILD_KEY_PREFIX + child_session_id(ctx.idempotency_key)]


def delegate_spec(handler: Handler) -> ToolSpec:
    return ToolSpec(
        name=DELEGATE,
        description=("Delegate a task to a child session with your tools (or fewer) and return its final answer. "
                     "The child works in the same workspace; its effects count as yours."),
        input_schema=SCHEMA, handler=handler, safety="execute", effect="effectful", timeout_s=3600.0,
        primary_arg="task", resource_keys=_keys, resumes=True)
