"""The live area at the bottom of the chat screen: the assistant's open Markdown block while it streams, and a
status line with a spinner and the elapsed time while the model thinks, while a tool runs (its name and main
argument) or while a retry waits (a countdown). Everything above it is printed once; the area itself is redrawn in
place (rich Live, transient) and leaves nothing behind when it stops. Without a terminal there is no live area.

Only the event loop's thread draws the area: each print draws it below itself (rich's render hook), and `animate`,
a task of the turn, draws a frame 8 times a second. Rich's auto-refresh thread is not used: a frame it drew could
begin while a print on the loop's thread was drawing the area too (rich places the cursor by the area's last drawn
shape, and both read it before either was written) and be written after or before the print, on the same row,
erasing nothing of it; a status line then stayed on the screen. Under load it did (a retry's countdown drawn on
the row of "thinking")"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from agent.terminal.markdown_stream import MarkdownStream

Clock = Callable[[], float]
FRAMES_PER_SECOND = 8


def elapsed(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class LiveArea:
    def __init__(self, console: Console, stream: MarkdownStream, clock: Clock = time.monotonic,
                 enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.stream = stream
        self.clock = clock
        self._live: Live | None = None
        self._spinner = Spinner("dots", style="cyan")
        self._status: str | None = None
        self._since = 0.0
        self._until: float | None = None
        self._paused = 0

    @property
    def status_text(self) -> str | None:
        return self._status

    def status(self, text: str | None, until: float | None = None) -> None:
        """Show `text` with the time since it was first shown (a new text restarts the clock), or, with `until`
        (a clock time), with a countdown; `{s}` in `text` is replaced by the seconds left. None: no status."""
        if text != self._status:
            self._since = self.clock()
        self._status, self._until = text, until
        if text is None and self.stream.open_block() is None:
            self._halt()
        else:
            self._ensure()

    def refresh(self) -> None:
        """The open block changed."""
        self._ensure()
        if self._live is not None:
            self._live.refresh()

    def _ensure(self) -> None:
        if self._live is None and self.enabled and not self._paused and self.console.is_terminal:
            self._live = Live(self, console=self.console, transient=True, auto_refresh=False,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()

    def tick(self) -> None:
        """One frame: the spinner turns, the elapsed time and the countdown move."""
        if self._live is not None:
            self._live.refresh()

    async def animate(self) -> None:
        """Draw a frame `FRAMES_PER_SECOND` times a second until cancelled. Run it in the task group of the turn:
        frames are then drawn by the event loop's thread, between prints, never during one."""
        while True:
            await anyio.sleep(1 / FRAMES_PER_SECOND)
            self.tick()

    def stop(self) -> None:
        """The turn is over (or a prompt takes the screen): the area goes away; the status is forgotten."""
        self._halt()
        self._status = None

    def _halt(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.stop()

    @contextmanager
    def paused(self) -> Any:
        """While a question is asked: the area goes away and comes back afterwards as it was."""
        self._halt()
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            if self._status is not None:
                self._since = self.clock()
                self._ensure()

    def _frame(self, now: float) -> Text:
        frame = self._spinner.render(now)
        return frame if isinstance(frame, Text) else Text(str(frame))

    def status_line(self) -> Text | None:
        if self._status is None:
            return None
        now = self.clock()
        if self._until is not None:
            left = max(0, round(self._until - now))
            words = Text(self._status.replace("{s}", str(left)), style="yellow")
            return Text.assemble(self._frame(now), " ", words)
        return Text.assemble(self._frame(now), " ", Text(self._status),
                             (f"  {elapsed(now - self._since)}", "dim"), ("  (Ctrl-C interrupts)", "dim"))

    def __rich__(self) -> RenderableType:
        parts: list[RenderableType] = []
        block = self.stream.open_block()
        if block is not None:
            parts.append(block)
        line = self.status_line()
        if line is not None:
            parts.append(line)
        return Group(*parts)
