"""Step 11: PostToolUse hooks. Each may add context to a finished call's result or withhold it (the model then
sees a notice instead of the output). A failing hook withholds (fail closed). Denials, timeouts and unknown
outcomes are not shown to these hooks: there is no output to judge."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tool_executor.result as results
from core.events import CallResult, PlannedCall
from core.hooks import HookAddContext, HookAllow, HookSet, HookWithhold, PostToolUseInput
from tool_executor._types import CallEnv, Step
from tool_executor.hook_runner import run_post


async def run_post_hooks(hooks: HookSet, call: PlannedCall, tool: str, args: Mapping[str, Any], env: CallEnv,
                         workspace: Path, result: CallResult) -> tuple[CallResult, tuple[Step, ...]]:
    matching = hooks.for_event("post_tool_use", tool)
    if not matching or result.status not in ("ok", "error"):
        return result, ()
    steps: list[Step] = []
    content = result.content
    for hook in matching:
        data = PostToolUseInput(session_id=env.session_id, call_id=call.call_id, turn=env.turn, mode=env.mode,
                                workspace=str(workspace), tool=tool, input=args, status=result.status,
                                content=content, is_error=result.is_error)
        verdict = await run_post(hook, data)
        match verdict:
            case HookWithhold(reason=reason):
                steps.append(Step("post_hook", "withhold", f"{hook.name}: {reason}", by=hook.name))
                content = (f"The call ran (status {result.status}), but its output is withheld by "
                           f"{hook.describe()}: {reason}")
                break
            case HookAddContext(text=text):
                steps.append(Step("post_hook", "add_context", hook.name, by=hook.name))
                content = f"{content}\n\n[context from {hook.describe()}]\n{text}"
            case HookAllow():
                steps.append(Step("post_hook", "allow", hook.name, by=hook.name))
    if content == result.content:
        return result, tuple(steps)
    return result.model_copy(update={"content": results.cap(content)}), tuple(steps)
