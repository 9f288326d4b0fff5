"""Exceptions in event-loop callbacks that no task owns, on either side of the socket, go to the log as one record
each, never as a traceback on stderr. Seen: anyio's Unix socket stream sets a reader's future that a cancelled read
already finished (`InvalidStateError` in `Future.set_result`), when a connection ends while a read waits; harmless
to the connection, the daemon and the client, so it is a debug record; anything else is a warning."""

from __future__ import annotations

import asyncio

import structlog

log = structlog.get_logger("strata.ipc")


def log_loop_errors() -> None:
    """Send the running event loop's callback errors to the log (call from inside the loop)."""
    asyncio.get_running_loop().set_exception_handler(_loop_error)


def _loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    error = context.get("exception")
    known = isinstance(error, asyncio.InvalidStateError)
    (log.debug if known else log.warning)(
        "event loop callback failed", message=str(context.get("message", "")),
        error=f"{type(error).__name__}: {error}" if error is not None else None)
