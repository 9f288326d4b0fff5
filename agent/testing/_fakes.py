"""Strict fakes: a person who answers approvals from a script, a Python hook that answers a fixed verdict and
keeps what it saw, and a scripted model that fails on a call past the end of its script (the product's scripted
model answers such a call with a closing text; a test that did not expect the call wants to know)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.hooks import Hook, HookEvent
from core.messages import ContentBlock
from core.model import ModelListener, ModelRequest, ModelResponse
from core.model.scripted import ScriptedModel
from tool_executor import ApprovalAnswer, ApprovalRequest

Answer = Literal["yes", "no", "always"]


class UnexpectedCall(BaseException):
    """A fake was asked something its script has no answer for. A BaseException (as pytest's own `fail` is), so
    no `except Exception` in the code under test can turn it into a denial or an error result: the test fails."""


class StrictApprover:
    """Answers from a script, one answer per question, in order; being asked with no answer left raises
    `UnexpectedCall`. `asked` keeps every request, for the test to inspect."""

    def __init__(self, *answers: Answer, who: str = "person:tester", reason: str = "tester said so") -> None:
        self._answers = list(answers)
        self.who = who
        self.reason = reason
        self.asked: list[ApprovalRequest] = []

    @property
    def unused(self) -> tuple[Answer, ...]:
        """Answers nobody asked for (a test may require none)."""
        return tuple(self._answers)

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        if not self._answers:
            raise UnexpectedCall(f"the approver was asked about {request.tool} ({request.asked_by}) but should not be")
        return ApprovalAnswer(self._answers.pop(0), self.who, reason=self.reason)


@dataclass
class PyHook:
    """A Python hook that answers `verdict` (or `verdict(data)` when it is callable) and keeps every input."""

    verdict: Any
    name: str = "guard"
    event: HookEvent = "pre_tool_use"
    matcher: str = "*"
    timeout_s: float = 5.0
    seen: list[Any] = field(default_factory=list)

    async def __call__(self, data: Any) -> Any:
        self.seen.append(data)
        answer: Callable[[Any], Any] | Any = self.verdict
        return answer(data) if callable(answer) else answer

    @property
    def hook(self) -> Hook:
        return Hook(self.name, self.event, self.matcher, fn=self, timeout_s=self.timeout_s)


class StrictScriptedModel(ScriptedModel):
    """The scripted model, except that a call for a turn the script does not have raises `UnexpectedCall`.
    `calls` counts the requests it answered."""

    def __init__(self, turns: Sequence[tuple[ContentBlock, ...]], name: str = "script") -> None:
        super().__init__(turns, name=name)
        self._count = len(turns)
        self.calls = 0

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        if request.turn >= self._count:
            raise UnexpectedCall(f"the model was called for turn {request.turn}, but its script has {self._count}")
        self.calls += 1
        return await super().complete(request, listener)
