"""Rows the store keeps besides events: sessions, effect receipts, and the unit of work a commit carries."""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from core.blobs import Blob
from core.chain import ChainHead
from core.errors import DamagedSession
from core.events import Event, Mode
from core.processes import ProcessGroup
from core.record import record
from core.timeline import TimelineEntry
from core.vocabulary import RECEIPT_STATUSES as RECEIPT_STATUSES
from core.vocabulary import ReceiptStatus as ReceiptStatus
from core.vocabulary import SessionStatus


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class LeaseHolder(_Row):
    token: str
    pid: int
    host: str
    proc_start: str = ""
    boot_id: str = ""
    pid_ns: str = ""
    """The holder's boot and PID namespace (core/processes.py): its pid is checked only where it means the same
    process. '' in rows written before they were recorded."""
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
    process: ProcessGroup | None = None
    """The process group the handler started (a `bash` command), recorded when the receipt is settled."""


class RechainNote(_Row):
    """A session of an older database, chained under the key after it was written: when, how many rows, and
    whether its earlier, unkeyed timeline chain verified then (`unkeyed_problem` names the row it did not)."""

    at: str
    timeline_rows: int
    events: int
    unkeyed_problem: str | None = None


class ChainRecord(_Row):
    """What the session row records about the session's chains: the head written with its last commit (None
    when it is missing from the row), and the note of a re-chaining, if there was one."""

    head: ChainHead | None
    rechained: RechainNote | None = None


@record
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


@record
class ReceiptUpdate:
    """A status change. `expect` guards against a lost race: the update applies only from that status."""

    id: str
    status: ReceiptStatus
    expect: tuple[ReceiptStatus, ...] = ("dispatched",)
    outcome_sha256: str | None = None
    note: str | None = None
    reconciled_by: str | None = None
    process: ProcessGroup | None = None


@record
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
    lease_token: str | None = field(default=None, compare=False)
    """The lease the writer drives the session under: when set, the store commits only while that token still
    holds the session's lease (checked in the same transaction), and otherwise refuses the whole write (LeaseGone,
    nothing written). A process that was stopped past its lease's expiry, and whose session another process took
    over meanwhile, so writes nothing more when it continues (its next dispatch waits on that commit)."""

    def __bool__(self) -> bool:
        return bool(self.events or self.new_receipts or self.receipt_updates or self.status or self.timeline
                    or self.blobs or self.snapshot)


def session_from_row(row: Any) -> SessionRecord:
    """A session row as both SQL stores select it (id, created_at, updated_at, mode, workspace, model, title,
    parent_id, fork_seq, status, then the lease: token, pid, host, proc_start, expires, boot, pid_ns).
    DamagedSession when the row does not read back as a session (edited outside Strata)."""
    (sid, created, updated, mode, workspace, model, title, parent, fork_seq, status,
     token, pid, host, proc_start, expires, boot, pid_ns) = row

    def when(name: str, value: Any) -> datetime:
        try:
            return datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise DamagedSession(str(sid), f"{name}: not an ISO time, it holds {shown_value(value)}") from None

    try:
        lease = None
        if token:
            lease = LeaseHolder(token=token, pid=pid, host=host, proc_start=proc_start or "", boot_id=boot or "",
                                pid_ns=pid_ns or "", expires_at=when("lease_expires", expires))
        return SessionRecord(id=sid, created_at=when("created_at", created), updated_at=when("updated_at", updated),
                             mode=mode, workspace=workspace, model=model, title=title, parent_id=parent,
                             fork_seq=fork_seq, status=status, lease=lease)
    except ValidationError as err:
        raise DamagedSession(str(sid), validation_problem(err, lease=err.title == "LeaseHolder")) from None


def sessions_from_rows(rows: Iterable[Any], damaged: list[DamagedSession] | None) -> list[SessionRecord]:
    """The session rows read back (`session_from_row`). The first that does not read back is DamagedSession; or,
    given a `damaged` list, is left out and added to it, so that a listing goes on with the other sessions."""
    records = []
    for row in rows:
        try:
            records.append(session_from_row(row))
        except DamagedSession as err:
            if damaged is None:
                raise
            damaged.append(err)
    return records


def validation_problem(err: ValidationError, *, lease: bool = False, path: bool = False) -> str:
    """The first thing pydantic found wrong with a stored row, as one short clause: where (the field; `path`: its
    whole location; `lease`: a field of the session's lease), the reason, and the value it holds."""
    first = err.errors(include_url=False)[0]
    if path:
        where = ".".join(str(part) for part in first["loc"]) or "the row"
    else:  # the field, not the union member that failed
        where = str(first["loc"][0]) if first["loc"] else "the row"
        where = f"lease_{where}" if lease else where
    return f"{where}: {first['msg'].lower()}, it holds {shown_value(first.get('input'))}"


def shown_value(value: Any) -> str:
    """A stored value as an error line quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "\u2026"


def receipt_from_row(row: Any) -> Receipt:
    """A receipt row as both SQL stores select it (their `_RECEIPT_COLS`)."""
    (rid, sid, call_id, tool, status, key, args_sha, keys, created, updated, outcome, note, by, process) = row
    return Receipt(id=rid, session_id=sid, call_id=call_id, tool=tool, status=status, idempotency_key=key,
                   args_sha256=args_sha, resource_keys=tuple(json.loads(keys)),
                   created_at=datetime.fromisoformat(created), updated_at=datetime.fromisoformat(updated),
                   outcome_sha256=outcome, note=note, reconciled_by=by,
                   process=None if process is None else ProcessGroup.model_validate_json(process))
