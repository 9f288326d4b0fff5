"""A log of what may happen in floods, bounded: the daemon's connections refused or closed one by one
(agent/ipc), its hosted sessions replaced at `max_sessions` (agent/daemon). A flood is one log line per interval
with counts, not a line per occurrence.

Per event: the first one after a quiet interval is logged at once, with its details (the connection, the peer's
pid, and uid for another user's); those that follow within `interval_s` are counted by code, and one line of the
same event says how many there were of each (and which uids were refused) at the end of the interval. While they
go on, that is one line per interval per event."""

from __future__ import annotations

import collections
import math
from typing import Literal

import anyio
import structlog

INTERVAL_S = 10.0
MAX_UIDS = 8
"""Distinct peer uids named in one summary line (the count covers the rest)."""


class _Counts:
    def __init__(self) -> None:
        self.quiet_until = -math.inf
        self.level = "info"
        self.codes: collections.Counter[str] = collections.Counter()
        self.uids: set[int] = set()


class CountedLog:
    def __init__(self, logger: str, interval_s: float = INTERVAL_S) -> None:
        """`logger`: the name the lines are logged under (`strata.ipc`)."""
        self._log = structlog.get_logger(logger)
        self._interval = interval_s
        self._events: dict[str, _Counts] = {}
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()

    def note(self, event: str, code: str, *, level: Literal["info", "warning"] = "info", peer_uid: int | None = None,
             peer_pid: int | None = None, **details: object) -> None:
        """One `event` (`ipc connection refused`), for `code` (`too_many_connections`), logged at `level`. Call
        from the event loop."""
        counts = self._events.setdefault(event, _Counts())
        counts.level = level
        now = anyio.current_time()
        if now >= counts.quiet_until and not counts.codes:
            peer = {k: v for k, v in (("peer_uid", peer_uid), ("peer_pid", peer_pid)) if v is not None}
            getattr(self._log, level)(event, code=code, **peer, **details)
            counts.quiet_until = now + self._interval
            return
        counts.codes[code] += 1
        if peer_uid is not None and len(counts.uids) < MAX_UIDS:
            counts.uids.add(peer_uid)
        if self._scope.cancel_called:  # stopped: nothing writes the counts later
            self.flush()
        self._wake.set()

    async def run(self) -> None:
        """Write the counts at the end of each interval, until `stop`."""
        with self._scope:
            while True:
                await self._wake.wait()
                self._wake = anyio.Event()
                due = [c.quiet_until for c in self._events.values() if c.codes]
                if due:
                    await anyio.sleep_until(min(due))
                    self._flush(due_only=True)
                    if any(c.codes for c in self._events.values()):
                        self._wake.set()

    def stop(self) -> None:
        """End `run` and write what is counted."""
        self._scope.cancel()
        self.flush()

    def flush(self) -> None:
        self._flush(due_only=False)

    def _flush(self, *, due_only: bool) -> None:
        now = anyio.current_time()
        for event, counts in self._events.items():
            if not counts.codes or (due_only and now < counts.quiet_until):
                continue
            fields: dict[str, object] = {"codes": dict(sorted(counts.codes.items()))}
            if counts.uids:
                fields["peer_uids"] = sorted(counts.uids)
            getattr(self._log, counts.level)(event, count=sum(counts.codes.values()), interval_s=self._interval,
                                             **fields)
            counts.codes.clear()
            counts.uids.clear()
            counts.quiet_until = now + self._interval
