"""Connections whose request has not arrived yet, at most so many at once: a new one beyond them closes the one
that has waited longest. A client that opens connections and sends nothing (a slow-headers flood) then holds
no place for long, and never keeps out a client with a request: its connection is the newest, and its request
arrives within milliseconds, long before the flood could push it out."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class WaitingRoom:
    def __init__(self, places: int) -> None:
        if places < 1:
            raise ValueError("a waiting room needs at least one place")
        self._places = places
        self._waiting: dict[int, anyio.CancelScope] = {}  # in arrival order (dicts keep insertion order)
        self._next = 0
        self.closed_early = 0
        """Connections closed to make room for newer ones (for the log and the tests)."""

    @contextmanager
    def place(self) -> Iterator[anyio.CancelScope]:
        """A place for the block's duration: the block is cancelled (quietly, as a cancel scope ends) when a newer
        connection needs the place. The scope given says so afterwards (`cancel_called`)."""
        with anyio.CancelScope() as scope:
            if len(self._waiting) >= self._places:
                oldest = next(iter(self._waiting))
                self._waiting.pop(oldest).cancel()
                self.closed_early += 1
            key, self._next = self._next, self._next + 1
            self._waiting[key] = scope
            try:
                yield scope
            finally:
                self._waiting.pop(key, None)
