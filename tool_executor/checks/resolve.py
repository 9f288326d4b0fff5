"""Step 1: the tool must exist in the session's BoundToolPlan."""

from __future__ import annotations

from core.tools import BoundToolPlan
from tool_executor.verdicts import Deny, Pass, Verdict


def check_resolve(plan: BoundToolPlan, tool: str) -> Verdict:
    if tool in plan:
        return Pass()
    known = ", ".join(sorted(plan)) or "none"
    return Deny("resolve", (f"unknown tool {tool!r}; the tools in this session are: {known}",))
