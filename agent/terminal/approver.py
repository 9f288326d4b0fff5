"""The terminal approver: shows the whole call (tool, every argument in full, safety level, why it is asked and
which rule or hook asked) and takes an explicit answer: y (yes, once), n (no), a (always for this session, for
this tool and the same asking rule). Enter alone is not an answer. The person's identity is recorded with the
decision; the model never reaches this prompt's input."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.markup import escape

from agent.reconcile import person
from agent.terminal.tool_views import show_arguments
from tool_executor import ApprovalAnswer, ApprovalRequest

AskLine = Callable[[str], Awaitable[str]]

_CHOICES = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}


class TerminalApprover:
    def __init__(self, console: Console, ask_line: AskLine, on_interrupt: Callable[[], None] | None = None) -> None:
        self._console = console
        self._ask_line = ask_line
        self._on_interrupt = on_interrupt
        self.identity = person("strata chat")

    def _show(self, request: ApprovalRequest) -> None:
        show_request(self._console, request)

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self._show(request)
        while True:
            try:
                raw = await self._ask_line("approve? [y/n/a] ")
            except (KeyboardInterrupt, EOFError):
                if self._on_interrupt is not None:
                    self._on_interrupt()
                return ApprovalAnswer("no", self.identity, "the person interrupted the approval prompt")
            choice = _CHOICES.get(raw.strip().lower())
            if choice is not None:
                break
            self._console.print("  answer y, n or a (Enter alone is not an answer)", highlight=False)
        reason = ""
        if choice == "no":
            try:
                reason = (await self._ask_line("reason for the model (optional): ")).strip()
            except (KeyboardInterrupt, EOFError):
                reason = ""
        answer = ApprovalAnswer(choice, self.identity, reason)  # type: ignore[arg-type]
        show_answer(self._console, answer, request.tool)
        return answer


def show_request(c: Console, request: ApprovalRequest) -> None:
    """The whole call as a person must see it to decide (`strata chat`, and `strata attach` over the daemon)."""
    c.print(f"[bold yellow]approval needed[/]: [bold]{escape(request.tool)}[/]  (safety {request.safety}, "
            f"effect {request.effect}, PII {request.pii})", highlight=False)
    c.print(f"  asked by: {escape(request.asked_by)}", highlight=False)
    for reason in request.reasons:
        c.print(f"  why: {escape(reason)}", highlight=False)
    c.print("  arguments (all of them, in full):", highlight=False)
    show_arguments(c, request.tool, request.input)
    c.print(f"  [dim]call {escape(request.call_id)}, arguments sha256 {request.input_sha256[:16]}[/]",
            highlight=False)
    c.print("  [bold]y[/] yes, this call once", highlight=False)
    c.print("  [bold]n[/] no (you may give the model a reason)", highlight=False)
    c.print(f"  [bold]a[/] always: {always_means(request)}", highlight=False)


def always_means(request: ApprovalRequest) -> str:
    """What `a` allows from now on, said exactly."""
    return (f"every {escape(request.tool)} call in this session that the same rule asks about "
            f"({escape(request.asked_by)}), without asking again")


def show_answer(c: Console, answer: ApprovalAnswer, tool: str) -> None:
    """The decision as it is recorded, on screen."""
    if answer.decision == "no":
        why = f": {escape(answer.reason)}" if answer.reason else " (no reason given)"
        c.print(f"  [red]you said no[/] to {escape(tool)}{why}", highlight=False)
    elif answer.decision == "always":
        c.print(f"  [green]allowed always[/]: every {escape(tool)} call this rule asks about, in this session",
                highlight=False)
