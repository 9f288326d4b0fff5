"""Copying sessions between stores, rows exactly as stored: a home moved from SQLite to PostgreSQL (or back) keeps
every event, timeline row and hash, so both chains still verify under the home's key afterwards.

`dump_session` reads a session through the `EventStore` protocol only (the state log and the timeline as stored,
receipts, the blobs its events name, its latest snapshot, the heads its row records). A store that can take such
a dump implements `SessionLoader.load_session`: one transaction that writes the rows as they are (no seq, time or
hash assigned anew). `copy_sessions` copies every session of a store, each checked before any is written (a
refused copy writes nothing); a session the target already holds is compared, and skipped when identical, so a
copy that was interrupted half-way can be run again and ends the same.
Copy a home at rest: a session some process is writing meanwhile is copied as it was when it was read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from core.blobs import blob_problem, chained_blob
from core.chain import EventChainRow, EventChainVerifier
from core.errors import PersistError, SessionNotFound
from core.events import CallResult
from core.record import record
from core.timeline import TimelineRow, verify_chain
from memory.rows import ChainRecord, Receipt, SessionRecord, Snapshot
from memory.store import EventStore


@record
class SessionDump:
    """One session's rows exactly as stored, to load into another store (`strata copy`)."""

    record: SessionRecord
    """The session row, without a lease (a copy is nobody's to drive yet)."""
    events: list[EventChainRow]
    timeline: list[TimelineRow]
    receipts: list[Receipt]
    blobs: dict[str, bytes]
    snapshot: Snapshot | None
    chain: ChainRecord


class SessionLoader(Protocol):
    path: str

    async def load_session(self, dump: SessionDump) -> None:
        """Write the dumped session in one transaction, rows exactly as dumped. PersistError if it cannot (a
        session of that id exists; the home's chain key is not this store's)."""
        ...


class CopyTarget(EventStore, SessionLoader, Protocol):
    """A store that can be copied into."""


async def dump_session(store: EventStore, session_id: str) -> SessionDump:
    record = (await store.get_session(session_id)).model_copy(update={"lease": None})
    events = await store.read_event_chain(session_id)
    blobs: dict[str, bytes] = {}
    for stored in await store.read_events(session_id):
        ref = stored.event.blob if isinstance(stored.event, CallResult) else None
        if ref is not None and ref.sha256 not in blobs:
            data = await store.get_blob(ref.sha256)
            if data is not None:
                blobs[ref.sha256] = data
    return SessionDump(record=record, events=events, timeline=await store.read_timeline(session_id),
                       receipts=await store.list_receipts(session_id),
                       blobs=blobs, snapshot=await store.read_latest_snapshot(session_id),
                       chain=await store.chain_record(session_id))


@dataclass
class CopyReport:
    """The sessions a copy wrote, and those the target held already."""

    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    """Sessions the target held already, identical: left as they were."""


async def copy_sessions(source: EventStore, target: CopyTarget,
                        on_session: Callable[[str, bool], None] | None = None) -> CopyReport:
    """Copy every session of `source` into `target`, oldest first. Every session is checked before any is
    written: a session the target holds already must be identical (then it is skipped), one that differs, or whose
    chains or blobs do not verify under the target's key, stops the copy with a PersistError naming it, and
    nothing at all is written then."""
    report = CopyReport()
    _check_keys(source, target)
    plan: list[tuple[str, bool]] = []
    for listed in await source.list_sessions():
        dump = await dump_session(source, listed.id)
        try:
            existing = await dump_session(target, listed.id)
        except SessionNotFound:
            existing = None
        if existing is None:
            _check_chains(dump, target)
        elif _comparable(existing) != _comparable(dump):
            raise PersistError(f"session {listed.id} exists in {target.path} and differs from the one in "
                               f"{source.path}; nothing was copied", session_id=listed.id,
                               path=target.path, hint="copy into an empty database")
        plan.append((listed.id, existing is None))
    for session_id, new in plan:
        if new:
            dump = await dump_session(source, session_id)
            _check_chains(dump, target)  # as read now: a home at rest reads the same twice
            await target.load_session(dump)
            report.copied.append(session_id)
        else:
            report.already.append(session_id)
        if on_session is not None:
            on_session(session_id, new)
    return report


def _comparable(dump: SessionDump) -> tuple[object, ...]:
    """What must match for a session to count as copied: every row, by value (a time read back from another
    engine compares as the same instant)."""
    return (dump.record, [r.model_dump() for r in dump.events], [r.model_dump() for r in dump.timeline],
            dump.receipts, dump.blobs, dump.snapshot, dump.chain)


def _check_keys(source: EventStore, target: CopyTarget) -> None:
    """Both stores chain under the same key, or nothing is copied: rows chained under one key never verify under
    another, which must not read as a history that was changed."""
    if target.chain_key is None:
        raise PersistError(f"cannot copy into {target.path}: {target.chain_problem}; nothing was copied",
                           path=target.path, hint="copy into a new database, or one of a home without a chain.key "
                                                  "(it is given this home's)")
    mine, theirs = source.chain_key, target.chain_key
    if mine is not None and mine.id != theirs.id:
        raise PersistError(f"cannot copy into {target.path}: its chain key (key {theirs.id}) is not this home's "
                           f"(key {mine.id}), so no session of this home would verify there; nothing was copied",
                           path=target.path, hint="copy into a new database, or one of a home without a chain.key "
                                                  "(it is given this home's)")


def _check_chains(dump: SessionDump, target: CopyTarget) -> None:
    """The dumped rows verify under the target's key (the home's), or nothing of the session is copied: a copy
    must never turn a damaged or foreign history into one that looks fresh."""
    key, sid = target.chain_key, dump.record.id
    if key is None:
        raise PersistError(f"cannot copy into {target.path}: {target.chain_problem}", session_id=sid,
                           path=target.path)
    verifier = EventChainVerifier(key)
    for row in dump.events:
        if not verifier.feed(row):
            break
    for name, found in (("state log", verifier.result()), ("timeline", verify_chain(dump.timeline, key))):
        if not found.ok:
            raise PersistError(f"session {sid} was not copied: its {name} does not verify under this home's chain "
                               f"key ({found.reason})", session_id=sid, path=target.path,
                               hint=f"`strata timeline {sid} --verify` in the source home says more")
    for row in dump.events:
        ref = chained_blob(row.kind, row.payload)
        if ref is not None and (wrong := blob_problem(ref, dump.blobs.get(ref.sha256))) is not None:
            raise PersistError(f"session {sid} was not copied: event {row.seq}'s {wrong}", session_id=sid,
                               path=target.path, hint=f"`strata timeline {sid} --verify` in the source home says more")
