"""SIGTERM and SIGHUP stop a command the way Ctrl-C does. A terminal that closes sends SIGHUP, a service manager
or `kill` sends SIGTERM; left to their default, they end the process on the spot and leave a running `bash`
command (in its own session, so it gets neither) going with its receipt `dispatched`.

`stop_on_signals` turns the first of them into a cancellation of the work inside it, so the same shielded close
path as Ctrl-C runs (the loop kills the command's process group, settles its receipt, closes the batch and
releases the lease), and then raises `Stopped` (exit 128 + the signal's number). After the first signal the
handlers are removed again: a second one ends the process at once, as a second Ctrl-C does."""

from __future__ import annotations

import signal
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from core.errors import Stopped

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopSignal:
    """Which signal stopped the work, once one did."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self.reason: str | None = None
        """A stop asked for without a signal (a daemon told to shut down, agent/daemon/): how batches name it."""

    def cause(self) -> str | None:
        """How a closed batch names the interruption: None while no signal came and no stop was asked for (then
        it was Ctrl-C, or an interrupt that stands for it)."""
        if self.received is not None:
            return f"{self.received.name} stopped the run"
        return self.reason


@asynccontextmanager
async def stop_on_signals() -> AsyncIterator[StopSignal]:
    """Run the body; on SIGTERM or SIGHUP cancel it and raise Stopped. Errors of the body come out as themselves.
    Signals can be received only in the main thread: elsewhere the body just runs."""
    stop = StopSignal()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    error: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
                async for signum in received:
                    stop.received = signal.Signals(signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        try:
            yield stop
        except Exception as exc:  # raised after the task group, not wrapped in an exception group
            error = exc
        finally:
            tg.cancel_scope.cancel()  # the watcher too, once the body is done
    if error is not None:
        raise error
    if stop.received is not None:
        raise Stopped(stop.received.name, stop.received.value)
