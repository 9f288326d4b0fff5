"""Step 6: PreToolUse hooks. Each may allow, block, rewrite or ask. After a rewrite steps 1-5 run again on the
new call (their verdict replaces the policy verdict on the old arguments), and a rewrite to another tool brings
that tool's own hooks in, also those that judged the old tool; each hook judges each tool the call becomes once,
so this ends. A hook that fails blocks (fail closed, tool_executor/hook_runner.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.events import PlannedCall
from core.hooks import Hook, HookAllow, HookAsk, HookBlock, HookRewrite, HookSet, PreToolUseInput
from core.record import record
from core.tools import BoundToolPlan, ToolSpec
from tool_executor._types import CallEnv, Checked, Step
from tool_executor.hook_runner import run_pre
from tool_executor.middleware import downgrade
from tool_executor.verdicts import Ask, Deny, Pass


@record
class Hooked:
    """Where the hooks left the call: its tool, spec and arguments, the policy verdict (an Ask, or Pass), and
    the hooks' own question (merged when several asked); or the Deny that ended it."""

    tool: str
    spec: ToolSpec | None
    input: Mapping[str, Any]
    verdict: Pass | Ask | Deny
    hook_ask: Ask | None = None


def merge_asks(first: Ask | None, second: Ask) -> Ask:
    """Two questions asked of one call: one question naming both askers, with every reason."""
    if first is None:
        return second
    asked_by = first.asked_by if second.asked_by == first.asked_by else f"{first.asked_by} + {second.asked_by}"
    return Ask(first.check, asked_by, first.reasons + second.reasons)


async def run_pre_hooks(hooks: HookSet, plan: BoundToolPlan, workspace: Path, call: PlannedCall, env: CallEnv,
                        checked: Checked, recheck: Callable[[str, Mapping[str, Any]], Checked],
                        steps: list[Step]) -> Hooked:
    """Step 6 for a call that passed steps 1-5 (`checked`). Appends each verdict to `steps`."""
    tool, args, spec = checked.tool, checked.input, checked.spec
    assert spec is not None and not isinstance(checked.verdict, Deny)
    verdict: Pass | Ask = checked.verdict
    hook_ask: Ask | None = None
    ran: list[tuple[Hook, str]] = []
    queue = hooks.for_event("pre_tool_use", tool)
    while queue:
        hook = queue.pop(0)
        ran.append((hook, tool))
        data = PreToolUseInput(session_id=env.session_id, call_id=call.call_id, turn=env.turn, mode=env.mode,
                               workspace=str(workspace), tool=tool, input=args, safety=spec.safety,
                               effect=spec.effect)
        answer = await run_pre(hook, data)
        match answer:
            case HookBlock(reason=reason):
                steps.append(Step("hook", "block", f"{hook.name}: {reason}", by=hook.name))
                return Hooked(tool, spec, args, Deny("hook", (f"blocked by {hook.describe()}: {reason}",)))
            case HookAsk(reason=reason):
                steps.append(Step("hook", "ask", f"{hook.name}: {reason}", by=hook.name))
                hook_ask = merge_asks(hook_ask, Ask("hook", hook.describe(), (f"{hook.describe()}: {reason}",)))
            case HookRewrite():
                new_tool = answer.tool or tool
                steps.append(Step("hook", "rewrite", f"{hook.name}: {answer.reason or 'arguments rewritten'}"
                                  + (f" (tool {tool} -> {new_tool})" if new_tool != tool else ""), by=hook.name))
                if new_tool != tool and new_tool in plan:
                    problem = downgrade(spec, plan[new_tool])
                    if problem is not None:
                        steps.append(Step("hook", "deny", problem, by=hook.name))
                        return Hooked(tool, spec, args, Deny("hook", (f"{hook.describe()}: {problem}",)))
                again = recheck(new_tool, answer.input)
                steps.extend(Step(s.check, s.outcome, f"after rewrite by {hook.name}: {s.detail}", by=s.by)
                             for s in again.steps)
                changed_tool = again.tool != tool
                if isinstance(again.verdict, Deny):
                    deny = Deny(again.verdict.check, tuple(f"after the rewrite by {hook.describe()}: {r}"
                                                           for r in again.verdict.reasons))
                    return Hooked(again.tool, again.spec, again.input, deny)
                assert again.spec is not None
                tool, args, spec, verdict = again.tool, again.input, again.spec, again.verdict
                if changed_tool:  # the new tool's guards judge it, also those that judged the old tool
                    queue = [h for h in hooks.for_event("pre_tool_use", tool) if (h, tool) not in ran]
            case HookAllow():
                steps.append(Step("hook", "allow", hook.name, by=hook.name))
    return Hooked(tool, spec, args, verdict, hook_ask)
