"""`strata chat`: an interactive session in the terminal.

Input is prompt_toolkit (history, Esc-Enter for a new line); output is rich: model text streamed as it arrives,
tool calls with their decisions and results. Ctrl-C during a turn interrupts that turn safely (the loop closes
the open batch: finished results kept, started effects `unknown`, every tool_use answered) and the prompt comes
back; at the prompt Ctrl-C clears the line and a second one within 2 s (or Ctrl-D on an empty line)
leaves. The session id is shown at start and on exit with the command that
resumes it."""

from __future__ import annotations

import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from rich.console import Console
from rich.markup import escape

from agent.outcome import RunOutcome
from agent.session import LiveSession, refuse_prompt_while_child_busy
from agent.terminal.live_area import LiveArea
from agent.terminal.markdown_stream import MarkdownStream
from agent.terminal.tool_views import main_argument, show_result
from config.private_files import create_private
from core.errors import UsageError
from core.events import (
    AssistantMessage,
    BatchProposed,
    CallResult,
    PlannedCall,
    StoredEvent,
    UserMessage,
)
from core.model import ModelAttempt
from tool_executor.result import interrupt_verdict

HELP = """\
/help       this help
/timeline   what happened in this session (the timeline)
/receipts   effect receipts of this session
/show ID    the whole result of call ID (a unique start of it will do), masked
/last       the whole result of the last call
/exit       leave (Ctrl-D does too); the session can be resumed later
Esc then Enter inserts a new line. Ctrl-C interrupts a running turn; at the prompt it clears the line, and a
second Ctrl-C within 2 s leaves."""

@dataclass
class ChatView:
    """Renders what the session commits, and the model's text as it streams: the text as Markdown (finished
    blocks printed once, the open one redrawn in the live area), calls and their results as short blocks, and a
    status line while something runs (agent/terminal/live_area.py)."""

    console: Console
    max_attempts: int | None = None
    live: bool = True
    """Whether the live area (the open block, the status line) is drawn during a turn (between `begin_turn` and
    `end_turn`, when no prompt shares the screen); without it finished blocks still show."""
    stream: MarkdownStream = field(init=False, repr=False)
    area: LiveArea = field(init=False, repr=False)
    batch: list[PlannedCall] = field(default_factory=list, repr=False)
    """The calls of the last batch proposed, and (`results`) what became of each."""
    results: dict[str, CallResult] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.stream = MarkdownStream(self.console)
        self.area = LiveArea(self.console, self.stream, enabled=False)

    @property
    def streamed(self) -> bool:
        """Some text of the message being answered reached the screen as it streamed."""
        return self.stream.shown

    @streamed.setter
    def streamed(self, value: bool) -> None:
        if not value:
            self.stream.discard()

    # ModelListener
    def on_text(self, delta: str) -> None:
        self.stream.feed(delta)
        self.area.refresh()

    def on_attempt(self, attempt: ModelAttempt) -> None:
        if attempt.outcome != "retry":
            return
        if self.stream.shown:
            self.stream.discard()
            self.area.refresh()
            self.console.print("[dim](the text above came from a failed attempt and does not count)[/]",
                               highlight=False)
        what = attempt.message.split("; retrying in")[0]
        self.console.print(f"[yellow]model attempt {attempt.number} failed: {escape(what)}[/]", highlight=False)
        if attempt.delay_s:
            of = f" of {self.max_attempts}" if self.max_attempts else ""
            self.area.status(f"{what}, retrying in {{s}} s (attempt {attempt.number + 1}{of})",
                             until=self.area.clock() + attempt.delay_s)
            if not (self.area.enabled and self.console.is_terminal):  # no live countdown: the wait is said once, here
                self.console.print(f"[yellow]retrying in {attempt.delay_s:.0f} s (attempt {attempt.number + 1}"
                                   f"{of})[/]", highlight=False)

    def end_line(self) -> None:
        """The message being streamed is complete: its open block is printed for good."""
        self.stream.finish()

    def begin_turn(self) -> None:
        self.batch, self.results = [], {}
        self.area.enabled = self.live
        self.area.status("thinking")

    def end_turn(self) -> None:
        self.stream.finish()
        self.area.stop()
        self.area.enabled = False

    def _next_status(self) -> None:
        pending = [c for c in self.batch if c.call_id not in self.results]
        if pending:
            self.area.status(f"running [{pending[0].tool}] {main_argument(pending[0].input)}")
        else:
            self.area.status("thinking")

    # Observer
    def __call__(self, item: StoredEvent) -> None:
        ev = item.event
        match ev:
            case AssistantMessage() | BatchProposed():
                if not isinstance(ev, BatchProposed):
                    self.area.status(None)  # the answer is final: no status line under it, not even for a moment
                if self.stream.shown:
                    self.stream.finish()
                else:
                    self.stream.print_whole("\n\n".join(b.text for b in ev.content if b.type == "text"))
                if isinstance(ev, BatchProposed):
                    for call in ev.calls:
                        what = escape(main_argument(call.input, 70))
                        self.console.print(f"  [bold]->[/] {escape(call.tool)} {what}  [dim]{call.call_id}[/]",
                                           highlight=False)
                    self.batch, self.results = list(ev.calls), {}
                    self._next_status()
                else:
                    self.area.status(None)
            case CallResult():
                self.results[ev.call_id] = ev
                show_result(self.console, ev)
                self._next_status()
            case UserMessage(source="runtime"):
                self.console.print(f"[yellow]strata[/]: {escape(ev.text)}", highlight=False)
            case _:
                pass

    def interrupted(self, session_id: str) -> None:
        """After Ctrl-C: what became of each call of the batch, and what to do about it."""
        self.console.print("[yellow]interrupted[/]: the turn stopped and every call has its result:",
                           highlight=False)
        for call in self.batch:
            result = self.results.get(call.call_id)
            what = f"{escape(call.tool)} {escape(main_argument(call.input, 40))} [dim]({call.call_id})[/]"
            if result is None or (result.status == "error" and result.check == "interrupt"):
                said = "[dim]not run[/]: nothing of it was kept; it runs only if the model asks again"
            elif result.status == "unknown":
                receipt = escape(result.receipt_id or "")
                verdict = interrupt_verdict(result.content)
                known = f" ({escape(verdict)})" if verdict else ""
                said = (f"[magenta]started, outcome unknown[/]{known}: look at what it did, then record it:\n"
                        f"      strata reconcile {escape(call.call_id)} --applied   [dim](or --not-applied)[/]\n"
                        f"      [dim](its receipt {receipt}: reconcile takes either id)[/]")
            elif result.status == "ok":
                said = "[green]finished[/] before the interrupt; its result stands"
            else:
                said = f"{escape(result.status)} before the interrupt"
            self.console.print(f"  {what}: {said}", highlight=False)
        self.console.print("  The prompt is yours: say what to do next; /show CALL_ID prints a result.",
                           highlight=False)
        if any(r.status == "unknown" for r in self.results.values()):
            self.console.print(f"  [dim]open effects: strata receipts {session_id} --status unknown[/]",
                               highlight=False)


class CtrlC:
    """Ctrl-C at the prompt: the first clears the line (and says how to leave), a second within `window` seconds
    leaves. Only at the main prompt (`main`); at an approval question Ctrl-C stays an interrupt."""

    def __init__(self, window: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self.main = False
        self._armed: float | None = None

    def press(self) -> bool:
        """True: leave."""
        now = self.clock()
        if self._armed is not None and now - self._armed <= self.window:
            return True
        self._armed = now
        return False

    def hint(self) -> str:
        if self._armed is not None and self.clock() - self._armed <= self.window:
            return "line cleared; Ctrl-C again to leave"
        return ""


def make_prompt(history_path: str | None, keys: CtrlC | None = None) -> PromptSession[str]:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: object) -> None:
        event.current_buffer.insert_text("\n")  # type: ignore[attr-defined]

    @bindings.add(Keys.Vt100MouseEvent)
    def _no_mouse(event: KeyPressEvent) -> None:
        """No prompt here asks the terminal for mouse reports, so what parses as one was typed or pasted: an SGR
        colour such as `ESC [ 3 1 m` reads as a mouse report without coordinates, on which prompt_toolkit's own
        handler raised (a traceback on the screen and "Press ENTER to continue"). Dropped, as a terminal drops a
        sequence it does not know."""

    if keys is not None:
        at_main = keys

        @bindings.add("c-c", filter=Condition(lambda: at_main.main))
        def _ctrl_c(event: KeyPressEvent) -> None:
            if at_main.press():
                event.app.exit(exception=EOFError())
            else:
                event.current_buffer.reset()

    if history_path:  # what the person typed: private to them, like everything in the home
        create_private(Path(history_path))
    history = FileHistory(history_path) if history_path else InMemoryHistory()
    return PromptSession(history=history, key_bindings=bindings)


Command = Callable[[str], Awaitable[None]]
"""A slash command; its argument is the rest of the line."""


class Chat:
    def __init__(self, console: Console, prompt: PromptSession[str], view: ChatView,
                 commands: dict[str, Command] | None = None, keys: CtrlC | None = None) -> None:
        self.console = console
        self.prompt = prompt
        self.view = view
        self.commands = commands or {}
        self.keys = keys or CtrlC()
        self.untitled = False
        """The session has no title yet: its first prompt names it (as `strata run` names a session)."""
        self._turn: anyio.CancelScope | None = None

    async def ask_line(self, message: str) -> str:
        with self.view.area.paused():
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
        self.view.begin_turn()
        try:
            with anyio.CancelScope() as scope:
                self._turn = scope
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch_sigint)
                    tg.start_soon(self.view.area.animate)
                    try:
                        outcome = await live.run(text)
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            self._turn = None
            self.view.end_turn()
        if scope.cancelled_caught:
            self.view.interrupted(live.id)
            return None
        return outcome

    async def _read(self) -> str:
        self.keys.main = True
        try:
            return await self.prompt.prompt_async("strata> ", handle_sigint=False, rprompt=self.keys.hint,
                                                  refresh_interval=0.5)
        finally:
            self.keys.main = False

    async def loop(self, live: LiveSession) -> None:
        self.console.print(f"session [bold]{live.id}[/] (interactive). /help for commands, Ctrl-D to leave.",
                           highlight=False)
        while True:
            try:
                text = await self._read()
            except (KeyboardInterrupt, EOFError):
                break
            text = text.strip()
            if not text:
                continue
            if text.startswith("/"):
                name, _, arg = text.partition(" ")
                if name in ("/exit", "/quit"):
                    break
                if name == "/help":
                    self.console.print(HELP, markup=False, highlight=False)
                elif name in self.commands:
                    await self.commands[name](arg.strip())
                else:
                    self.console.print(f"unknown command {escape(name)}; /help lists them", highlight=False)
                continue
            try:  # its open batch's delegate call would park again on a busy child, and the prompt go unheard
                await refuse_prompt_while_child_busy(live.runtime, live.loop.state)
            except UsageError as exc:
                self.console.print(f"[yellow]refused[/]: {escape(exc.message)}; {escape(exc.hint or '')}",
                                   highlight=False)
                continue
            if self.untitled:
                await live.name(text)
                self.untitled = False
            outcome = await self.turn(live, text)
            if outcome is not None and outcome.status not in ("completed",):
                self.console.print(f"[yellow]{outcome.status}[/]: {escape(outcome.reason)}", highlight=False)
            if outcome is not None and outcome.unknown_receipts:
                self.console.print(f"{outcome.unknown_receipts} effect(s) with unknown outcome: "
                                   f"strata receipts {live.id} --status unknown", highlight=False)
        self.console.print(f"left session {live.id}. resume it: strata chat --resume {live.id}", highlight=False)
