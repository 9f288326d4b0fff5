"""The log of refused connections, bounded: a flood of connections the daemon refuses (too many, another user's,
during shutdown) is one log line per interval with a count, not one line per connection.

The first refusal after a quiet interval is logged at once, with its details (the peer's uid and pid for another
user's); those that follow within `interval_s` are counted, and one line says how many there were of each code
(and which uids were refused) at the end of the interval. While refusals go on, that is one line per interval."""

from __future__ import annotations

import collections
import math

import anyio
import structlog

_log = structlog.get_logger("strata.ipc")

INTERVAL_S = 10.0
MAX_UIDS = 8
"""Distinct refused uids named in one summary line (the count covers the rest)."""


class RefusalLog:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self._interval = interval_s
        self._quiet_until = -math.inf
        self._counts: collections.Counter[str] = collections.Counter()
        self._uids: set[int] = set()
        self._wake = anyio.Event()
        self._scope = anyio.CancelScope()

    def refused(self, code: str, *, peer_uid: int | None = None, peer_pid: int | None = None) -> None:
        """One refused connection. Call from the event loop."""
        now = anyio.current_time()
        if now >= self._quiet_until and not self._counts:
            fields = {} if peer_uid is None and peer_pid is None else {"peer_uid": peer_uid, "peer_pid": peer_pid}
            _log.info("ipc connection refused", code=code, **fields)
            self._quiet_until = now + self._interval
            return
        self._counts[code] += 1
        if peer_uid is not None and len(self._uids) < MAX_UIDS:
            self._uids.add(peer_uid)
        if self._scope.cancel_called:  # stopped: nothing writes the counts later
            self.flush()
        self._wake.set()

    async def run(self) -> None:
        """Write the counts at the end of each interval, until `stop`."""
        with self._scope:
            while True:
                await self._wake.wait()
                await anyio.sleep_until(self._quiet_until)
                self.flush()
                self._quiet_until = anyio.current_time() + self._interval

    def stop(self) -> None:
        """End `run` and write what is counted."""
        self._scope.cancel()
        self.flush()

    def flush(self) -> None:
        self._wake = anyio.Event()
        if not self._counts:
            return
        fields: dict[str, object] = {"codes": dict(sorted(self._counts.items()))}
        if self._uids:
            fields["peer_uids"] = sorted(self._uids)
        _log.info("ipc connections refused", count=sum(self._counts.values()), interval_s=self._interval, **fields)
        self._counts.clear()
        self._uids.clear()
