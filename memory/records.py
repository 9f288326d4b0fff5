"""Rows the store keeps besides events: sessions, effect receipts, and the unit of work a commit carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.blobs import Blob
from core.events import Event, Mode
from core.timeline import TimelineEntry

SessionStatus = Literal["active", "idle", "awaiting_approval", "completed", "incomplete", "failed"]
ReceiptStatus = Literal["dispatched", "done", "failed", "unknown"]
RECEIPT_STATUSES: tuple[ReceiptStatus, ...] = ("dispatched", "done", "failed", "unknown")


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LeaseHolder(_Row):
    token: str
    pid: int
    host: str
    proc_start: str = ""
    expires_at: datetime


class SessionRecord(_Row):
    id: str
    created_at: datetime
    updated_at: datetime
    mode: Mode
    workspace: str
    model: str
    title: str = ""
    parent_id: str | None = None
    fork_seq: int | None = None
    status: SessionStatus
    lease: LeaseHolder | None = None


class Receipt(_Row):
    id: str
    session_id: str
    call_id: str
    tool: str
    status: ReceiptStatus
    idempotency_key: str
    args_sha256: str
    resource_keys: tuple[str, ...] = ()
    created_at: datetime
    updated_at: datetime
    outcome_sha256: str | None = None
    note: str | None = None
    reconciled_by: str | None = None


@dataclass(frozen=True)
class NewReceipt:
    """A `dispatched` receipt to insert; the store stamps its times. Its idempotency key starts with its session
    id and a colon (`core.hashing.idempotency_key`), which the stores enforce: a session's receipts are listed by
    that prefix."""

    id: str
    call_id: str
    tool: str
    idempotency_key: str
    args_sha256: str
    resource_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReceiptUpdate:
    """A status change. `expect` guards against a lost race: the update applies only from that status."""

    id: str
    status: ReceiptStatus
    expect: tuple[ReceiptStatus, ...] = ("dispatched",)
    outcome_sha256: str | None = None
    note: str | None = None
    reconciled_by: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """A session's folded state at `seq`, serialized by `core.snapshot` (`version` says which shape)."""

    seq: int
    version: str
    data: bytes


@dataclass
class Write:
    """One durable commit: events (with the turn they belong to), receipt rows, timeline rows (observations,
    never replayed as state), an optional status change, the blobs the events reference (stored once by sha256)
    and an optional snapshot (it replaces the session's earlier one)."""

    events: list[tuple[Event, int]] = field(default_factory=list)
    new_receipts: list[NewReceipt] = field(default_factory=list)
    receipt_updates: list[ReceiptUpdate] = field(default_factory=list)
    status: SessionStatus | None = None
    timeline: list[TimelineEntry] = field(default_factory=list)
    blobs: list[Blob] = field(default_factory=list)
    snapshot: Snapshot | None = None

    def __bool__(self) -> bool:
        return bool(self.events or self.new_receipts or self.receipt_updates or self.status or self.timeline
                    or self.blobs or self.snapshot)
