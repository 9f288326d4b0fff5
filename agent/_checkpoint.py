"""A cancellation point that costs no pass of the event loop when nothing is cancelled.

`anyio.lowlevel.checkpoint()` always yields to the event loop: a whole `_run_once` (an epoll call, the ready
queue) only to find, in the usual case, that nothing was cancelled. The loop asks once a turn, before it asks the
model, so that a cancelled turn asks the model nothing more (a scripted model answers without ever yielding).
Two kinds of cancellation can be pending at that moment, and either still raises here:

- a cancelled anyio scope around the task (Ctrl-C in the chat screen, SIGTERM or SIGHUP, a daemon's stop):
  `checkpoint_if_cancelled` walks the task's scopes and yields (raising) when one was cancelled;
- a native `Task.cancel()` not yet delivered (asyncio's own Ctrl-C handling in `anyio.run` cancels the main task
  that way): `Task.cancelling()` counts it, and the full checkpoint delivers it.

Strata runs anyio on its asyncio backend only (the serve daemon relies on it too)."""

from __future__ import annotations

import asyncio

import anyio.lowlevel


async def cancellation_point() -> None:
    """Raise the pending cancellation of the current task, if there is one; otherwise return without yielding."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        await anyio.lowlevel.checkpoint()
    else:
        await anyio.lowlevel.checkpoint_if_cancelled()
