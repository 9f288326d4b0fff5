"""Hook inputs and verdicts. Each hook gets one input object (adding a field never breaks a hook) and answers
with a tagged verdict that carries its reason.

PreToolUse:  HookAllow | HookBlock(reason) | HookRewrite(input, tool?) | HookAsk(reason)
PostToolUse: HookAllow | HookAddContext(text) | HookWithhold(reason)
Stop:        HookAllow | HookRepair(instruction)
Observe:     (nothing: observation hooks get lifecycle events and cannot change the run)

A hook that crashes, times out or answers something malformed is read as HookBlock (fail closed); the runner
that calls it says which of those happened."""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import field
from typing import Any, Literal

from core.record import record

HookEvent = Literal["pre_tool_use", "post_tool_use", "stop", "observe"]


@record
class PreToolUseInput:
    """What a PreToolUse hook is told of a call before it runs (its arguments as the checks left them)."""

    session_id: str
    call_id: str
    turn: int
    mode: str
    workspace: str
    tool: str
    input: Mapping[str, Any]
    safety: str
    effect: str


@record
class PostToolUseInput:
    """What a PostToolUse hook is told of a call that ran: its arguments and its result."""

    session_id: str
    call_id: str
    turn: int
    mode: str
    workspace: str
    tool: str
    input: Mapping[str, Any]
    status: str
    content: str
    is_error: bool


@record
class StopInput:
    """What a Stop hook is told when the model gives its final answer (it may ask for a repair turn)."""

    session_id: str
    turn: int
    mode: str
    workspace: str
    final_text: str
    repairs_used: int
    repair_budget: int


@record
class ObserveInput:
    """A lifecycle event (started, resumed, parked, interrupted, ended, ...) for an observation hook, which
    records and never decides: whatever it answers is ignored."""

    session_id: str
    turn: int
    mode: str
    workspace: str
    event: str
    summary: str
    data: Mapping[str, Any]


@record
class HookAllow:
    """No objection. It does not waive an `ask` from policy or another hook."""

    reason: str = ""


@record
class HookBlock:
    """A hook's answer: the call is denied, for this reason."""

    reason: str


@record
class HookRewrite:
    """A hook's answer: run the call with these arguments (or this other tool) instead."""

    input: Mapping[str, Any]
    tool: str | None = None
    """A different tool to call instead; rejected if its safety level or PII class is lower."""
    reason: str = ""


@record
class HookAsk:
    """A hook's answer: a person decides the call (an approval, bound to its arguments)."""

    reason: str


@record
class HookAddContext:
    """A hook's answer: the call's result is given to the model with this text added."""

    text: str


@record
class HookWithhold:
    """A hook's answer: the model sees a notice, with this reason, instead of the call's output."""

    reason: str


@record
class HookRepair:
    """A Stop hook's answer: the model gets one more turn with this instruction (within the repair budget)."""

    instruction: str


PreToolUseVerdict = HookAllow | HookBlock | HookRewrite | HookAsk
PostToolUseVerdict = HookAllow | HookAddContext | HookWithhold
StopVerdict = HookAllow | HookRepair | HookBlock


@record
class Hook:
    """A hook registered in code (`fn`) or from config (a command run by a runner in tool_executor/hooks)."""

    name: str
    event: HookEvent
    matcher: str = "*"
    """Tool-name glob (ignored for `stop`)."""
    fn: Callable[[Any], Awaitable[Any]] | None = field(default=None, compare=False)
    command: str | None = None
    timeout_s: float = 10.0
    source: str = "code"
    env: tuple[str, ...] = ()
    """Environment variables a command hook gets although `bash` does not (config `env = [...]`)."""
    precheck: Callable[[], str | None] | None = field(default=None, compare=False)
    """Run (in a worker thread) before each run of the command: a returned reason means the command must not run,
    and the hook fails closed with it. A trusted project's hooks use it to check that the files they execute are
    still the ones the person trusted."""

    def describe(self) -> str:
        return f"hook {self.name} ({self.source})"


@record
class HookSet:
    """The hooks of a session, in the order they run."""

    hooks: tuple[Hook, ...] = ()

    def for_event(self, event: HookEvent, tool: str | None = None) -> list[Hook]:
        return [h for h in self.hooks
                if h.event == event and (tool is None or fnmatch.fnmatchcase(tool, h.matcher))]

    def __add__(self, other: HookSet) -> HookSet:
        return HookSet(self.hooks + other.hooks)
