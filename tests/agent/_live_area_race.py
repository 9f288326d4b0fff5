"""Run in a real terminal by tests/agent/test_live_area.py: the chat screen's retry, with the interleaving that
once left a status line behind under load made sure of.

The live area shows "thinking"; the failed attempt is printed above it and the status becomes a countdown. The
first time that print draws the area, the clock the area reads waits 0.3 s (more than two frames at 8 a second).
If anything other than the printing thread draws the area meanwhile (rich's auto-refresh thread did), that
drawing places the cursor from what the area looked like before the print's drawing (nothing yet) and writes
after or before it on the same row: a status line stays on the screen. Where only the printing thread draws, the
wait changes nothing.

At the end the area is gone and the screen shows what stays; the test reads it."""

from __future__ import annotations

import time

import anyio
from rich.console import Console

from agent.terminal.chat import ChatView
from core.model import ModelAttempt

MESSAGE = ("Anthropic API is overloaded (529 overloaded_error, request req_test0000000000000001); retrying in 4 s "
           "(attempt 2 of 4)")


class SlowClock:
    def __init__(self) -> None:
        self.armed = False

    def __call__(self) -> float:
        if self.armed:
            self.armed = False
            time.sleep(0.3)
        return time.monotonic()


async def main() -> None:
    console = Console(highlight=False)
    clock = SlowClock()
    view = ChatView(console, max_attempts=4)
    view.area.clock = clock
    view.begin_turn()  # "thinking"
    async with anyio.create_task_group() as tg:  # as a turn of `strata chat` runs (agent/terminal/chat.py)
        tg.start_soon(view.area.animate)
        clock.armed = True
        view.on_attempt(ModelAttempt(number=1, outcome="retry", duration_ms=5.0, message=MESSAGE, delay_s=4.0))
        await anyio.sleep(0.5)  # the countdown runs for a few frames
        tg.cancel_scope.cancel()
    view.end_turn()
    console.print("DONE")


if __name__ == "__main__":
    anyio.run(main)
