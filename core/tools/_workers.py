"""The worker threads `run_stoppable` hands its blocking work to (core/tools/blocking.py).

What `anyio.to_thread.run_sync` does for one call, less what a call of a tool pays for and does not need: anyio
first yields a whole pass of the event loop (a checkpoint), takes its thread limiter's token with another pass,
and hands the work over through a `queue.Queue` (a lock and a condition each way). Here a job goes on one
`SimpleQueue` that idle workers wait on, and its outcome comes back on the job's event loop through
`call_soon_threadsafe`, as anyio's does. What stays the same: the work runs in a copy of the caller's context, a
job whose waiter is gone by the time a worker takes it is not started, an exception (any, as anyio's) is raised in
the waiter, and a worker idle for `IDLE_S` ends, so a burst of parallel calls leaves no threads behind. The waiter
side (the limiter's token, cancellation) is `run_stoppable`'s."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

IDLE_S = 10.0
"""How long a worker waits for a job before it ends (anyio's idle workers end after the same)."""

_Job = tuple[contextvars.Context, Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]",
             asyncio.AbstractEventLoop]


class Workers:
    """Threads that run jobs from one queue; a new one is started whenever no worker is idle."""

    def __init__(self, name: str, idle_s: float = IDLE_S) -> None:
        self._name = name
        self._idle_s = idle_s
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Workers waiting for a job that no job put on the queue has claimed yet."""
        self.started = 0
        """Threads started so far (for tests)."""

    def submit(self, fut: asyncio.Future[Any], loop: asyncio.AbstractEventLoop, func: Callable[..., Any],
               *args: Any) -> None:
        """Run `func(*args)` in a worker, in a copy of the current context; its return value or exception is set
        on `fut` in `loop` (unless `fut` is cancelled by then)."""
        with self._lock:
            claimed = self._idle > 0
            if claimed:
                self._idle -= 1
            else:
                self.started += 1
        if not claimed:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        self._jobs.put((contextvars.copy_context(), func, args, fut, loop))

    def _work(self) -> None:
        while True:
            try:
                context, func, args, fut, loop = self._jobs.get(timeout=self._idle_s)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # unclaimed: this worker may end (else a job is on its way to one)
                        self._idle -= 1
                        return
                continue
            if not fut.cancelled():  # the waiter has not given up before the work started
                result: Any = None
                error: BaseException | None = None
                try:
                    result = context.run(func, *args)
                except BaseException as exc:  # given to the waiter, as anyio's worker does
                    error = exc
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                    loop.call_soon_threadsafe(_report, fut, result, error)
                del result, error, context, func, args, fut, loop
            with self._lock:
                self._idle += 1


def _report(fut: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if fut.cancelled():
        return
    if error is None:
        fut.set_result(result)
    elif isinstance(error, StopIteration):  # a future cannot hold one (as anyio converts it)
        converted = RuntimeError("coroutine raised StopIteration")
        converted.__cause__ = error
        fut.set_exception(converted)
    else:
        fut.set_exception(error)
