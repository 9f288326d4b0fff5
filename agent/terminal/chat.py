"""`strata chat`: an interactive session in the terminal.

Input is prompt_toolkit (history, Esc-Enter for a new line); output is rich: model text streamed as it arrives,
tool calls with their decisions and results. Ctrl-C during a turn interrupts that turn safely (the loop closes
the open batch: finished results kept, started effects `unknown`, every tool_use answered) and the prompt comes
back; Ctrl-C or Ctrl-D at the prompt exits. The session id is shown at start and on exit with the command that
resumes it."""

from __future__ import annotations

import json
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from rich.console import Console
from rich.markup import escape

from agent.outcome import RunOutcome
from agent.session import LiveSession
from config.private_files import create_private
from core.events import (
    AssistantMessage,
    BatchProposed,
    CallResult,
    StoredEvent,
    UserMessage,
)
from core.model import ModelAttempt

HELP = """\
/help       this help
/timeline   what happened in this session (the timeline)
/receipts   effect receipts of this session
/exit       leave (Ctrl-D does too); the session can be resumed later
Esc then Enter inserts a new line. Ctrl-C interrupts a running turn."""

_MARK = {"ok": "[green]ok[/]", "error": "[red]error[/]", "denied": "[red]DENIED[/]", "timeout": "[red]TIMEOUT[/]",
         "unknown": "[magenta]UNKNOWN[/]"}


def _line(text: str, limit: int = 160) -> str:
    flat = " | ".join(p.strip() for p in text.strip().splitlines() if p.strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@dataclass
class ChatView:
    """Renders what the session commits, and the model's text as it streams."""

    console: Console
    streamed: bool = False
    _open_line: bool = field(default=False, repr=False)

    # ModelListener
    def on_text(self, delta: str) -> None:
        if not self._open_line:
            self.console.print("[bold cyan]assistant[/]: ", end="", highlight=False)
            self._open_line = True
        self.console.print(delta, end="", markup=False, highlight=False)
        self.streamed = True

    def on_attempt(self, attempt: ModelAttempt) -> None:
        self.end_line()
        if attempt.outcome == "retry":
            wait = f", retrying in {attempt.delay_s:.1f} s" if attempt.delay_s else ""
            if self.streamed:
                self.console.print("[dim](the text above came from a failed attempt and does not count)[/]",
                                   highlight=False)
                self.streamed = False
            self.console.print(f"[yellow]model attempt {attempt.number} failed: {escape(attempt.message)}{wait}[/]",
                               highlight=False)

    def end_line(self) -> None:
        if self._open_line:
            self.console.print()
            self._open_line = False

    # Observer
    def __call__(self, item: StoredEvent) -> None:
        ev = item.event
        match ev:
            case AssistantMessage() | BatchProposed():
                if not self.streamed:
                    for block in ev.content:
                        if block.type == "text" and block.text.strip():
                            self.console.print(f"[bold cyan]assistant[/]: {escape(block.text)}", highlight=False)
                self.end_line()
                self.streamed = False
                if isinstance(ev, BatchProposed):
                    for call in ev.calls:
                        args = json.dumps(call.input, ensure_ascii=False)
                        self.console.print(f"  [bold]->[/] {escape(call.tool)} {escape(_line(args, 120))}  "
                                           f"[dim]{call.call_id}[/]", highlight=False)
            case CallResult():
                mark = _MARK.get(ev.status, ev.status)
                detail = ev.reasons[0] if ev.status == "denied" and ev.reasons else ev.content
                check = f" by {ev.check}" if ev.status == "denied" and ev.check else ""
                self.console.print(f"  [bold]<-[/] {escape(ev.tool)} {mark}{check}: {escape(_line(detail))}",
                                   highlight=False)
            case UserMessage(source="runtime"):
                self.console.print(f"[yellow]strata[/]: {escape(ev.text)}", highlight=False)
            case _:
                pass


def make_prompt(history_path: str | None) -> PromptSession[str]:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: object) -> None:
        event.current_buffer.insert_text("\n")  # type: ignore[attr-defined]

    if history_path:  # what the person typed: private to them, like everything in the home
        create_private(Path(history_path))
    history = FileHistory(history_path) if history_path else InMemoryHistory()
    return PromptSession(history=history, key_bindings=bindings)


class Chat:
    def __init__(self, console: Console, prompt: PromptSession[str], view: ChatView,
                 commands: dict[str, Callable[[], Awaitable[None]]] | None = None) -> None:
        self.console = console
        self.prompt = prompt
        self.view = view
        self.commands = commands or {}
        self._turn: anyio.CancelScope | None = None

    async def ask_line(self, message: str) -> str:
        return await self.prompt.prompt_async(message, handle_sigint=False)

    def interrupt(self) -> None:
        """Cancel the running turn (Ctrl-C, or an interrupted approval prompt)."""
        if self._turn is not None:
            self._turn.cancel()

    async def _watch_sigint(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                self.interrupt()
                return

    async def turn(self, live: LiveSession, text: str | None) -> RunOutcome | None:
        """One prompt: run the loop until the model finishes, or until Ctrl-C (then None)."""
        outcome: RunOutcome | None = None
        with anyio.CancelScope() as scope:
            self._turn = scope
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_sigint)
                try:
                    outcome = await live.run(text)
                finally:
                    tg.cancel_scope.cancel()
        self._turn = None
        self.view.end_line()
        if scope.cancelled_caught:
            self.console.print("[yellow]interrupted[/]: running calls were stopped; started effects are recorded "
                               "as unknown, and every call has its result. The prompt is yours.", highlight=False)
            return None
        return outcome

    async def loop(self, live: LiveSession) -> None:
        self.console.print(f"session [bold]{live.id}[/] (interactive). /help for commands, Ctrl-D to leave.",
                           highlight=False)
        while True:
            try:
                text = await self.prompt.prompt_async("strata> ", handle_sigint=False)
            except (KeyboardInterrupt, EOFError):
                break
            text = text.strip()
            if not text:
                continue
            if text.startswith("/"):
                name = text.split()[0]
                if name in ("/exit", "/quit"):
                    break
                if name == "/help":
                    self.console.print(HELP, markup=False, highlight=False)
                elif name in self.commands:
                    await self.commands[name]()
                else:
                    self.console.print(f"unknown command {escape(name)}; /help lists them", highlight=False)
                continue
            outcome = await self.turn(live, text)
            if outcome is not None and outcome.status not in ("completed",):
                self.console.print(f"[yellow]{outcome.status}[/]: {escape(outcome.reason)}", highlight=False)
            if outcome is not None and outcome.unknown_receipts:
                self.console.print(f"{outcome.unknown_receipts} effect(s) with unknown outcome: "
                                   f"strata receipts {live.id} --status unknown", highlight=False)
        self.console.print(f"left session {live.id}. resume it: strata chat --resume {live.id}", highlight=False)
