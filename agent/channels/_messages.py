"""The channel protocol's shapes: a message taken in, the reply sent back, and the idempotency key that binds
them (one reply per message, whatever crashes in between)."""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from typing import Annotated, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from core.hashing import sha256_text

Id = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+=-]+$")]
"""Thread and message ids: printable and short, so they can name files and rows without escaping."""


def _one_line(value: str) -> str:
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise ValueError("must be one line: a line break or control character here could forge the prompt's "
                         "header lines")
    if "[" in value or "]" in value:
        raise ValueError("must not hold '[' or ']': a bracket here could close the prompt's header line and open "
                         "one of its own")
    return value


HeaderText = Annotated[str, AfterValidator(_one_line)]
"""Text that goes into the prompt's header lines (`[channel … · from SENDER]`, `[attachment NAME … at PATH]`),
where a line break would let it add a line of its own (a `[task …]` line the gate never wrote), and a bracket would
let it end the daemon's line early and add a bracketed header on the same line (`from x] [task 7: …]`). Such text
is refused, not escaped: a sender, a file name or a path changed on its way to the model would name something
else."""


class AttachmentRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[HeaderText, Field(min_length=1, max_length=255)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    path: HeaderText | None = None
    """Where the bytes are, when the channel keeps them as a file."""


class InboundMessage(BaseModel):
    """One message a channel delivers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str
    thread: Id
    id: Id
    sender: Annotated[HeaderText, Field(max_length=320)] = ""
    text: Annotated[str, Field(max_length=200_000)] = ""
    attachments: tuple[AttachmentRef, ...] = ()

    @property
    def reply_key(self) -> str:
        return reply_key(self.channel, self.id)


class Reply(BaseModel):
    """What goes back on the thread: at most one per message, named by its key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    channel: str
    thread: str
    in_reply_to: str
    session_id: str
    status: str
    """How the message's turn ended: `completed`, `denied`, `parked`, `over_budget`, `failed`, ..."""
    text: str
    task_id: int | None = None


def reply_key(channel: str, message_id: str) -> str:
    """The idempotency key of the reply to a message: the same on every attempt, different for every message."""
    return "reply-" + sha256_text(f"{channel}\x00{message_id}")[:32]


class Channel(Protocol):
    """A source of messages and a sink of replies. `poll` lists what waits (oldest first) with a handle to
    acknowledge it by (the handles in `skip`, queued already, left out unread); `reject` sets a message aside
    unhandled, with the reason (a spool moves it to `rejected/` beside a `.error`); `send` is idempotent on the
    reply's key; `sent` probes whether a reply with that key was delivered (an unknown outcome is reconciled by
    it)."""

    name: str

    def poll(self, skip: Collection[str] = ()) -> list[tuple[InboundMessage, str]]: ...

    def ack(self, handle: str) -> None: ...

    def reject(self, handle: str, why: str) -> None: ...

    def send(self, reply: Reply) -> None: ...

    def sent(self, key: str) -> bool: ...

    def backlog(self) -> int: ...
