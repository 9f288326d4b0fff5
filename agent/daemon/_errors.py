"""What the host refuses, with a stable code a transport can pass on (the IPC layer's error codes use the same
words), the session it concerns, and one line that says why and what to do instead."""

from __future__ import annotations

from typing import Literal

from core.errors import UsageError

RefusalCode = Literal["not_attached", "not_driver", "session_busy", "no_such_call", "stale_approval",
                      "shutting_down", "too_many_sessions"]
"""Stable: clients branch on it, never on the message."""


class HostRefused(UsageError):
    """A request the host will not carry out; nothing changed. Errors of the session services themselves
    (SessionNotFound, SessionActive, ProjectHooksMissing, ...) come out as themselves."""

    def __init__(self, code: RefusalCode, message: str, *, session_id: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code: RefusalCode = code
        self.session_id = session_id
