"""An attachment: one client's place at one session, and the bounded queue of what the host sends it.

The host never waits for an attachment: it offers each message, and an attachment whose queue is full has not
kept up, so it is dropped (detached) rather than allowed to hold the session or the other attachments back. The
last message of a closed attachment is a notice saying why (one slot beyond the bound is kept for it), then
`receive` ends. Only the host's event loop touches an attachment.

An attachment may start with a replay: the session's committed events from a given seq, read from the store page
by page as the client takes them, before anything live. The attachment is subscribed (it gets every commit from
then on) before the first page is read, so every event is in the store's pages, or in the live queue, or both; the
replay stops once it reaches the first live event (or the store's end), and a live event the replay delivered
already is skipped. Nothing is skipped or repeated across that boundary. An attachment closed during its replay
gets only its closing notice after the events replayed so far (the live ones queued meanwhile would leave a gap).

A live event past the one after the last the attachment delivered (or, before its first, past the session's last
seq as the host knew it at the attach) means that events were committed the host never saw: another process ran
the session while the host held no lease (`strata resume ID` elsewhere, agent/daemon/_hosted.py). They are read
from the store first, as a replay is, so that an attachment still gets every committed event, in order.

Text deltas are offered, never pressed: one is kept only while the queue is less than half full (and not during a
replay), so that the committed events of a client that is behind still have room; a dropped delta never drops the
attachment."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Awaitable, Callable
from typing import Literal

import anyio

from agent.daemon._messages import Notice, Outbound, SessionEvent, TextDelta
from core.errors import StrataError
from core.events import StoredEvent

Role = Literal["drive", "watch"]

DEFAULT_QUEUE = 1024
"""Messages an attachment may leave unread before it is dropped: a turn commits a few events per call."""

REPLAY_PAGE = 128
"""Events read from the store at a time for a replay: the pump takes them as the client's outbox has room."""

EventReader = Callable[[int, int], Awaitable[list[StoredEvent]]]
"""`(after_seq, upto_seq)`: the session's committed events with `after_seq < seq <= upto_seq`, in seq order."""

_ids = itertools.count(1)


class Attachment:
    def __init__(self, session_id: str, role: Role, who: str, capacity: int = DEFAULT_QUEUE, *,
                 replay: tuple[EventReader, int] | None = None,
                 fill: tuple[EventReader, int] | None = None) -> None:
        """`replay`: how to read the session's committed events, and the first seq to deliver (see the module).
        `fill`: how to read them, and the session's last seq as the host knows it now: a hole after it in the live
        events is filled from the store (see the module)."""
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
        self._reader: EventReader | None = None
        self._page: collections.deque[SessionEvent] = collections.deque()
        self._replayed_upto = 0
        """The last seq the replay delivered (read): a live event up to it is not delivered again."""
        self._fill: EventReader | None = None
        self._delivered = 0
        """The seq of the last event delivered (or the one the attachment starts after); 0: not known."""
        if fill is not None:
            self._fill, self._delivered = fill
        if replay is not None:
            self._reader, since_seq = replay
            self._replayed_upto = self._delivered = max(0, since_seq - 1)

    @property
    def replaying(self) -> bool:
        """The replay is not over: the message `receive` returned last came from the store, not live."""
        return self._reader is not None

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

    def offer_delta(self, delta: TextDelta) -> bool:
        """Queue a text delta if there is room to spare (see the module); whether it was kept."""
        if self.closed_by is not None or self._reader is not None or len(self._queue) >= self._capacity // 2:
            return False
        self._queue.append(delta)
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
        if self._reader is not None and (replayed := await self._replayed()) is not None:
            self._delivered = replayed.item.seq
            return replayed
        while True:
            while not self._queue:
                if self.closed_by is not None:
                    raise anyio.EndOfStream
                self._wake = anyio.Event()
                await self._wake.wait()
            message = self._queue[0]
            if isinstance(message, SessionEvent):
                seq = message.item.seq
                if seq <= self._replayed_upto:
                    self._queue.popleft()
                    continue  # the replay delivered it
                if self._fill is not None and self._delivered and seq > self._delivered + 1:
                    # committed by another process while the host held no lease: read from the store first
                    self._reader, self._replayed_upto = self._fill, self._delivered
                    if (replayed := await self._replayed()) is not None:
                        self._delivered = replayed.item.seq
                        return replayed
                    if self.closed_by is None:
                        self._delivered = seq - 1  # the store had none of them: not looked for again
                    continue  # (closed while reading: only why comes next)
                self._delivered = seq
            self._queue.popleft()
            return message

    async def _replayed(self) -> SessionEvent | None:
        """The replay's next event; None once it is over (it is then over for good)."""
        while (reader := self._reader) is not None:
            if self.closed_by is not None:  # closed mid-replay: after the events so far, only why
                self._reader = None
                self._page.clear()
                self._queue = collections.deque([self.closed_by])
                return None
            if self._page:
                return self._page.popleft()
            first_live = next((m.item.seq for m in self._queue if isinstance(m, SessionEvent)), None)
            upto = self._replayed_upto + REPLAY_PAGE
            if first_live is not None:
                upto = min(upto, first_live - 1)
            if upto <= self._replayed_upto:
                self._reader = None  # caught up with the live events
                return None
            try:
                page = await reader(self._replayed_upto, upto)
            except StrataError as exc:
                self.close(Notice(session_id=self.session_id, kind="closed", text="the session's committed events "
                                  f"could not be read for the replay ({exc.message}); attach again"))
                continue
            if not page:
                self._reader = None  # the store's end: everything after it is live
                return None
            self._page.extend(SessionEvent(session_id=self.session_id, item=item) for item in page)
            self._replayed_upto = page[-1].seq
        return None

    def __aiter__(self) -> Attachment:
        return self

    async def __anext__(self) -> Outbound:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def __repr__(self) -> str:
        return f"<Attachment {self.id} {self.role} {self.session_id}>"
