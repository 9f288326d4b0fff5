"""Blocking work a tool call can stop waiting for.

A call's deadline and Ctrl-C are anyio cancellations, and a thread cannot be cancelled: a handler that waits for
`anyio.to_thread.run_sync` keeps its caller (and the process's exit) waiting until the thread returns, however long
that is. `run_stoppable` waits for the thread only while nobody cancels: on cancellation it returns at once (the
thread is abandoned) and raises the `Stop` flag the work checks between steps, so the thread ends soon after.

The work itself must keep each step bounded (a read of at most a cap, one directory listing, never an open that
can block): a flag is only seen between steps. Work that cannot be bounded (a regular expression's backtracking)
belongs in a child process that can be killed (tool_executor/builtin/_grep.py)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from core.tools._workers import Workers

T = TypeVar("T")

_WORKERS = Workers("strata-stoppable")
_limiter: tuple[weakref.ref[asyncio.AbstractEventLoop], anyio.CapacityLimiter] | None = None
"""anyio's default thread limiter of the last event loop that asked (looked up in its run variables otherwise)."""


class Stopped(Exception):
    """The caller stopped waiting (deadline or interrupt); the work gives up at its next check."""


class Stop:
    """Raised by the waiting side when it stops waiting; checked by the work between steps. A plain flag (nobody
    waits on it, so no `threading.Event` with its condition and lock is made for every call): an attribute written
    in one thread is read as written in another."""

    __slots__ = ("_raised",)

    def __init__(self) -> None:
        self._raised = False

    def set(self) -> None:
        self._raised = True

    def check(self) -> None:
        if self._raised:
            raise Stopped


async def run_stoppable(work: Callable[[Stop], T]) -> T:
    """`work(stop)` in a worker thread; a cancellation (the call's deadline, Ctrl-C) ends the wait at once.

    As `anyio.to_thread.run_sync(work, stop, abandon_on_cancel=True)`: a cancelled scope raises before anything
    starts, the work holds a token of anyio's default thread limiter while it is waited for (so no more run at once
    than anyio lets), and the work runs in a copy of the caller's context; an abandoned thread holds no token. The
    threads are core/tools/_workers.py's, which cost no pass of the event loop to start a job (anyio's cost two)."""
    stop = Stop()
    loop = asyncio.get_running_loop()
    limiter = _default_limiter(loop)
    await anyio.lowlevel.checkpoint_if_cancelled()
    try:
        limiter.acquire_on_behalf_of_nowait(stop)
    except anyio.WouldBlock:
        await limiter.acquire_on_behalf_of(stop)
    try:
        done: asyncio.Future[T] = loop.create_future()
        _WORKERS.submit(done, loop, work, stop)
        return await done
    finally:
        stop.set()
        limiter.release_on_behalf_of(stop)


def _default_limiter(loop: asyncio.AbstractEventLoop) -> anyio.CapacityLimiter:
    """`anyio.to_thread.current_default_thread_limiter()` for `loop` (the running one)."""
    global _limiter
    known = _limiter
    if known is not None and known[0]() is loop:
        return known[1]
    limiter = anyio.to_thread.current_default_thread_limiter()
    _limiter = (weakref.ref(loop), limiter)
    return limiter
