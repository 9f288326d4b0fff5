"""The serve daemon's core, independent of any transport: `SessionHost` hosts many sessions in one process, each
a task holding its session's lease as `strata run` does, with attachments that drive or watch them, approvals that
travel to the driving attachment (mode `ipc`; parked when no driver is there), and a drain that leaves every
session resumable. The IPC layer (`strata serve`, `strata attach`) is a thin layer on top."""

from agent.daemon._attachment import DEFAULT_QUEUE, Attachment, Role
from agent.daemon._errors import HostRefused, RefusalCode
from agent.daemon._host import SessionHost
from agent.daemon._messages import (
    ApprovalAsk,
    Notice,
    NoticeKind,
    Outbound,
    ParkedView,
    Phase,
    SessionEvent,
    SessionInfo,
    TextDelta,
    TurnResult,
    WaitingCall,
)
from agent.outcome import TurnStatus

__all__ = [
    "DEFAULT_QUEUE",
    "ApprovalAsk",
    "Attachment",
    "HostRefused",
    "Notice",
    "NoticeKind",
    "Outbound",
    "ParkedView",
    "Phase",
    "RefusalCode",
    "Role",
    "SessionEvent",
    "SessionHost",
    "SessionInfo",
    "TextDelta",
    "TurnResult",
    "TurnStatus",
    "WaitingCall",
]
