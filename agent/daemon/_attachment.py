"""An attachment: one client's place at one session, and the bounded queue of what the host sends it.

The host never waits for an attachment: it offers each message, and an attachment whose queue is full has not
kept up, so it is dropped (detached) rather than allowed to hold the session or the other attachments back. The
last message of a closed attachment is a notice saying why (one slot beyond the bound is kept for it), then
`receive` ends. Only the host's event loop touches an attachment."""

from __future__ import annotations

import collections
import itertools
from typing import Literal

import anyio

from agent.daemon._messages import Notice, Outbound

Role = Literal["drive", "watch"]

DEFAULT_QUEUE = 1024
"""Messages an attachment may leave unread before it is dropped: a turn commits a few events per call."""

_ids = itertools.count(1)


class Attachment:
    def __init__(self, session_id: str, role: Role, who: str, capacity: int = DEFAULT_QUEUE) -> None:
        self.id = next(_ids)
        self.session_id = session_id
        self.role: Role = role
        self.who = who
        """Who answers through it (`person:alice@host (...) via strata attach`): recorded with its decisions."""
        self._capacity = capacity
        self._queue: collections.deque[Outbound] = collections.deque()
        self._wake = anyio.Event()
        self.closed_by: Notice | None = None
        """Why it was closed (also its last message); None while it is attached."""

    @property
    def attached(self) -> bool:
        return self.closed_by is None

    def offer(self, message: Outbound) -> bool:
        """Queue without waiting. False if it is closed, or its queue is full (the host then drops it)."""
        if self.closed_by is not None or len(self._queue) >= self._capacity:
            return False
        self._queue.append(message)
        self._wake.set()
        return True

    def close(self, notice: Notice) -> None:
        """No more messages after `notice`; what is queued is still delivered. A second close changes nothing."""
        if self.closed_by is not None:
            return
        self.closed_by = notice
        self._queue.append(notice)
        self._wake.set()

    async def receive(self) -> Outbound:
        """The next message; anyio.EndOfStream once it is closed and everything was delivered."""
        while not self._queue:
            if self.closed_by is not None:
                raise anyio.EndOfStream
            self._wake = anyio.Event()
            await self._wake.wait()
        return self._queue.popleft()

    def __aiter__(self) -> Attachment:
        return self

    async def __anext__(self) -> Outbound:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def __repr__(self) -> str:
        return f"<Attachment {self.id} {self.role} {self.session_id}>"
