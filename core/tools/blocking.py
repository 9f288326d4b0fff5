"""Blocking work a tool call can stop waiting for.

A call's deadline and Ctrl-C are anyio cancellations, and a thread cannot be cancelled: a handler that waits for
`anyio.to_thread.run_sync` keeps its caller (and the process's exit) waiting until the thread returns, however long
that is. `run_stoppable` waits for the thread only while nobody cancels: on cancellation it returns at once (the
thread is abandoned) and raises the `Stop` flag the work checks between steps, so the thread ends soon after.

The work itself must keep each step bounded (a read of at most a cap, one directory listing, never an open that
can block): a flag is only seen between steps. Work that cannot be bounded (a regular expression's backtracking)
belongs in a child process that can be killed (tool_executor/builtin/_grep.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


class Stopped(Exception):
    """The caller stopped waiting (deadline or interrupt); the work gives up at its next check."""


class Stop:
    """Raised by the waiting side when it stops waiting; checked by the work between steps."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def check(self) -> None:
        if self._event.is_set():
            raise Stopped


async def run_stoppable(work: Callable[[Stop], T]) -> T:
    """`work(stop)` in a worker thread; a cancellation (the call's deadline, Ctrl-C) ends the wait at once."""
    stop = Stop()
    try:
        return await anyio.to_thread.run_sync(work, stop, abandon_on_cancel=True)
    finally:
        stop.set()
