"""A full signal wakeup fd is not an error worth a traceback on the terminal screen.

asyncio wakes its loop for a signal by writing a byte to a socket (signal.set_wakeup_fd). A resize storm (hundreds
of SIGWINCH while the loop draws) fills that socket; Python then prints 'Exception ignored when trying to write to
the signal wakeup fd' and a BlockingIOError traceback for each byte it could not write, over the chat. Nothing is
lost: a full socket wakes the loop anyway, and the handlers run for every signal that came (the flags are set
before the write). Python's own switch for this is set_wakeup_fd's warn_on_full_buffer=False; asyncio sets the fd
again, with the warning on, each time a handler is added (prompt_toolkit adds SIGWINCH's at every prompt), so the
running loop's add_signal_handler sets it off again after each. `strata chat` and `strata attach` call this first
thing in their loop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

__all__ = ["quiet_full_wakeup_fd"]


def _quiet() -> None:
    fd = signal.set_wakeup_fd(-1)
    if fd != -1:
        signal.set_wakeup_fd(fd, warn_on_full_buffer=False)


def quiet_full_wakeup_fd() -> None:
    """In the running loop (main thread): no report of a full wakeup fd, now and after every signal handler the
    loop adds. Idempotent."""
    loop = asyncio.get_running_loop()
    if getattr(loop, "_strata_quiet_wakeup", False):
        return
    add = loop.add_signal_handler

    def add_quietly(sig: int, callback: Callable[..., object], *args: Any) -> None:
        add(sig, callback, *args)
        _quiet()

    loop.add_signal_handler = add_quietly  # type: ignore[method-assign,assignment]
    loop._strata_quiet_wakeup = True  # type: ignore[attr-defined]
    _quiet()
