"""The terminal approver: shows the whole call (tool, every argument in full, safety level, why it is asked and
which rule or hook asked) and takes an explicit answer: y (yes, once), n (no), a (always for this session, for
this tool and the same asking rule; where the call is a command read with certainty, `a` is the narrower "always
for commands with this first word" and `e` the whole tool). Enter alone is not an answer. The person's identity
is recorded with the decision; the model never reaches this prompt's input."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext

from rich.console import Console
from rich.markup import escape

from agent.reconcile import person
from agent.terminal.tool_views import show_arguments
from core.grant_scope import always_means
from tool_executor import ApprovalAnswer, ApprovalRequest

AskLine = Callable[[str], Awaitable[str]]

_CHOICES = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}
_WIDE = {"e": "every", "every": "every"}
"""Where a narrower "always" is offered as `a`, `e` is "always, for every call of the tool"."""


def question(request: ApprovalRequest) -> str:
    return "approve? [y/n/a/e] " if request.narrower else "approve? [y/n/a] "


def answer_of(raw: str, request: ApprovalRequest, identity: str) -> ApprovalAnswer | None:
    """The typed choice (y/n, or without a reason yet) as an answer; None: not an answer."""
    typed = raw.strip().lower()
    if request.narrower and typed in _WIDE:
        return ApprovalAnswer("always", identity)
    choice = _CHOICES.get(typed)
    if choice == "always" and request.narrower:
        return ApprovalAnswer("always", identity, pattern=request.narrower)
    return ApprovalAnswer(choice, identity) if choice is not None else None  # type: ignore[arg-type]


class TerminalApprover:
    def __init__(self, console: Console, ask_line: AskLine, on_interrupt: Callable[[], None] | None = None,
                 quiet: Callable[[], AbstractContextManager[object]] = nullcontext) -> None:
        """`quiet`: what keeps the screen still while the request is printed (chat's live area paused: with it
        drawn, each printed line redrew the area, and a write_file of 300,000 lines took minutes to show)."""
        self._console = console
        self._ask_line = ask_line
        self._on_interrupt = on_interrupt
        self._quiet = quiet
        self.identity = person("strata chat")

    def _show(self, request: ApprovalRequest) -> None:
        with self._quiet():
            show_request(self._console, request)

    async def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self._show(request)
        while True:
            try:
                raw = await self._ask_line(question(request))
            except (KeyboardInterrupt, EOFError):
                if self._on_interrupt is not None:
                    self._on_interrupt()
                return ApprovalAnswer("no", self.identity, "the person interrupted the approval prompt")
            answer = answer_of(raw, request, self.identity)
            if answer is not None:
                break
            keys = "y, n, a or e" if request.narrower else "y, n or a"
            self._console.print(f"  answer {keys} (Enter alone is not an answer)", highlight=False)
        if answer.decision == "no":
            try:
                reason = (await self._ask_line("reason for the model (optional): ")).strip()
            except (KeyboardInterrupt, EOFError):  # the "no" stands, without a reason; Ctrl-C stops the turn
                reason = ""
                if self._on_interrupt is not None:
                    self._on_interrupt()
            answer = ApprovalAnswer("no", self.identity, reason)
        show_answer(self._console, answer, request)
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
    if request.narrower:  # the narrower "always" first
        c.print(f"  [bold]a[/] always: {escape(always_means(request.tool, request.narrower))}",
                highlight=False)
        c.print(f"  [bold]e[/] always: {escape(always_means(request.tool))}", highlight=False)
    else:
        c.print(f"  [bold]a[/] always: {escape(always_means(request.tool))}", highlight=False)


def show_answer(c: Console, answer: ApprovalAnswer, request: ApprovalRequest) -> None:
    """The decision as it is recorded, on screen."""
    if answer.decision == "no":
        why = f": {escape(answer.reason)}" if answer.reason else " (no reason given)"
        c.print(f"  [red]you said no[/] to {escape(request.tool)}{why}", highlight=False)
    elif answer.decision == "always":
        what = always_means(request.tool, answer.pattern)
        c.print(f"  [green]allowed from now on[/]: {escape(what)}", highlight=False)
