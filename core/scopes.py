"""Cancel scopes for the per-call path, made without looking the event loop's library up each time.

`anyio.CancelScope(...)` finds the running async library (sniffio) and its backend, asks the backend to make the
scope, and then runs the scope's `__init__` a second time (the backend's class is a subclass of the class called);
`anyio.current_time()` finds the backend again. The tool executor makes a deadline scope per call and the session
writer a shielded one per commit, so `cancel_scope` makes the backend's own class directly, found once from the
first scope made the ordinary way, and `deadline_after` reads the loop's clock directly. Same class, same
behaviour: only the look-ups are saved. Strata runs on asyncio (anyio's asyncio backend) only."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import anyio

_made: Callable[..., anyio.CancelScope] | None = None
"""The running backend's cancel scope class, once one scope was made through `anyio.CancelScope`."""


def cancel_scope(*, deadline: float = math.inf, shield: bool = False) -> anyio.CancelScope:
    """`anyio.CancelScope(deadline=deadline, shield=shield)`."""
    global _made
    make = _made
    if make is None:
        scope = anyio.CancelScope(deadline=deadline, shield=shield)
        _made = type(scope)
        return scope
    return make(deadline=deadline, shield=shield)


def deadline_after(seconds: float) -> float:
    """`anyio.current_time() + seconds` (the asyncio loop's clock, which is anyio's current time on asyncio)."""
    return asyncio.get_running_loop().time() + seconds
