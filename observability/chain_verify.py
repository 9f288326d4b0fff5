"""`--verify`: everything that can be checked about a session's two logs, from the rows exactly as stored.

1. Both keyed chains (core/chain.py): every row's HMAC under the home's chain key, seqs 1..n without gaps, and (in
   the timeline) every prev_hash link. An edited, removed or reordered row is named.
2. The head in the session row, written in every commit's transaction: the last row of each log must be the one
   it names. A chain that ends before it was truncated; a head that is missing was removed.
3. The head the evidence ledger recorded (a file outside the database, written after commits, best effort): the
   row it names must exist with that hash. A chain that ends before it was truncated, even if the session row's
   head was moved back to match (someone with only the database can do that, not this).
4. The blobs (large outputs, kept beside the state log by their sha256): each one a verified event names must be
   stored, and hold exactly the bytes of that sha256 and size. A blob changed or removed is named.
5. The receipts table (mutable: a receipt's status changes) against the chained timeline, whose receipt rows
   are committed with every change: each receipt on the timeline, with the status its last row leaves; each
   receipt the timeline names in the table. A receipt changed, added or removed in the database is named. Both
   are read at one head: a session written to during the check has the rows committed since and its receipts
   read again (RECEIPT_READS times at most) until a read of both sees the head unmoved; past that, the report
   says in a note that they were not compared.
6. For a session chained under the key after it was written (an older database): whether its unkeyed chain
   verified when that happened (its receipts' findings are then notes: an older Strata wrote fewer rows).

Without the key the database was chained with, nothing can be checked, and the report says so (it is never
"verified"). What this proves, and against whom, is in the README ("Guarantees")."""

from __future__ import annotations

from typing import Literal

from core.blobs import blob_problem, chained_blob
from core.chain import GENESIS_HASH, ChainHead, EventChainVerifier, LinkVerifier, VerifyResult
from core.events import BlobRef
from core.record import record
from core.timeline import ChainVerifier
from memory.rows import ChainRecord, Receipt
from memory.store import EventStore

VERIFY_PAGE = 20_000
"""Timeline rows read per query while verifying, so a long timeline is checked in bounded memory."""
EVENT_PAGE = 2_000
"""State events read per query (they are larger: the payload is read whole)."""

RECEIPT_READS = 3
"""How many times the receipts table and the rows committed since are read again when the session's head moved
during the check, to find one read of both at the same head; past that, the report says they were not compared."""

Verdict = Literal["verified", "broken", "cannot_verify"]


@record
class ChainReport:
    session_id: str
    verdict: Verdict
    problems: tuple[str, ...] = ()
    """Each a sentence naming the session, the log and the row; the first is the one to act on."""
    notes: tuple[str, ...] = ()
    """What holds, but is worth knowing (a lagging ledger, a re-chained older session)."""
    timeline: VerifyResult | None = None
    events: VerifyResult | None = None
    session_head: ChainHead | None = None
    ledger_head: ChainHead | None = None
    key_id: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "verified"


@record
class _Log:
    name: str
    """"timeline" or "state log"."""
    noun: str
    verifier: LinkVerifier

    def at(self, seq: int) -> str | None:
        return GENESIS_HASH if seq == 0 else self.verifier.watched.get(seq)


async def verify_chains(store: EventStore, session_id: str, ledger_head: ChainHead | None, *,
                        page: int = VERIFY_PAGE, event_page: int = EVENT_PAGE) -> ChainReport:
    """Check session `session_id` (SessionNotFound for an unknown id). `ledger_head` is the head the evidence
    ledger recorded last (None: it has none)."""
    await store.get_session(session_id)
    key = store.chain_key
    if key is None:
        return ChainReport(session_id, "cannot_verify",
                           (f"cannot verify session {session_id}: {store.chain_problem}",), ledger_head=ledger_head)
    record = await store.chain_record(session_id)
    heads = [h for h in (record.head, ledger_head) if h is not None]
    rows_verifier = ChainVerifier(key, {h.timeline_seq for h in heads})
    events_verifier = EventChainVerifier(key, {h.events_seq for h in heads})
    transitions: dict[str, list[_Transition]] = {}
    await _feed_timeline(store, session_id, rows_verifier, transitions, page)
    blobs: dict[str, tuple[int, BlobRef]] = {}
    after = 0
    while True:
        chunk = await store.read_event_chain(session_id, after_seq=after, limit=event_page)
        fed = True
        for event in chunk:
            if not events_verifier.feed(event):
                fed = False
                break
            if (ref := chained_blob(event.kind, event.payload)) is not None:
                blobs.setdefault(ref.sha256, (event.seq, ref))
        if not fed or len(chunk) < event_page:
            break
        after = chunk[-1].seq
    timeline = _Log("timeline", "row", rows_verifier)
    events = _Log("state log", "event", events_verifier)

    # The receipts table, read before the head is read again: a head that has not moved by then means nothing was
    # committed since the first read, so these receipts are the ones the rows read account for. (Read after it, a
    # receipt committed meanwhile, its row unread, was reported as changed or added outside Strata.)
    receipts = await store.list_receipts(session_id)
    # A session being written while it is checked: its head moves on between the two reads (each read is its own
    # snapshot). The chain may then end anywhere between the two heads.
    later = (await store.chain_record(session_id)).head
    moved = later if later is not None and record.head is not None and later != record.head else None
    consistent = moved is None
    for _ in range(RECEIPT_READS if moved is not None and rows_verifier.result().ok else 0):
        # Read again from where the timeline was read to: the rows committed since, then the receipts, then the
        # head. A head that did not move over that read means every row up to it was read and the receipts are
        # the ones those rows account for (a short read: a busy session is caught between two of its commits).
        before = later
        await _feed_timeline(store, session_id, rows_verifier, transitions, page, since=rows_verifier.last_seq + 1)
        receipts = await store.list_receipts(session_id)
        later = (await store.chain_record(session_id)).head
        if later is None:  # the head was removed meanwhile: its own finding, nothing to compare against
            break
        moved = later
        if later == before:
            consistent = True
            break
    problems: list[str] = []
    notes: list[str] = []
    if moved is not None:
        notes.append("the session was written to while it was checked; rows past the head read first were checked "
                     "as far as they were read")
    if not consistent and rows_verifier.result().ok:  # said, never skipped silently
        why = ("the session row's head was removed while it was checked" if later is None else
               f"the session was written to during each of {RECEIPT_READS + 1} reads of both")
        notes.append(f"the receipts table was not compared with the timeline: {why}; check again once it is idle")
    for log in (timeline, events):
        found = log.verifier.result()
        if not found.ok:
            problems.append(f"{log.name} of session {session_id}: {found.reason}")
    _rechained(session_id, record, problems, notes)
    if record.head is None:
        problems.append(f"session {session_id}: the session row's head is missing (it was removed from the "
                        "database), so nothing inside the database shows where the logs ended")
    else:
        for log in (timeline, events):
            _compare(session_id, log, record.head, "the session row's head", problems, notes, moved)
    if ledger_head is None:
        notes.append("the evidence ledger has no head for this session to compare with (it is best effort: "
                     "missing when the ledger could not be written or was removed)")
    else:
        for log in (timeline, events):
            _compare(session_id, log, ledger_head, "the evidence ledger's last head", problems, notes)
    # What lies beside the chains comes after what the chains and heads say: a truncation also leaves receipts
    # the cut timeline no longer explains, and the truncation is the finding to act on.
    for seq, ref in blobs.values():  # the events verified as far as they were read: the outputs they name
        if (wrong := blob_problem(ref, await store.get_blob(ref.sha256))) is not None:
            problems.append(f"state log of session {session_id}: event {seq}'s {wrong}")
    if consistent and timeline.verifier.result().ok:  # else the timeline's own finding comes first
        found_receipts = _receipts(session_id, receipts, transitions)
        (notes if record.rechained is not None else problems).extend(found_receipts)
    return ChainReport(session_id, "broken" if problems else "verified", tuple(problems), tuple(notes),
                       timeline.verifier.result(), events.verifier.result(), record.head, ledger_head, key.id)


async def _feed_timeline(store: EventStore, session_id: str, verifier: ChainVerifier,
                         transitions: dict[str, list[_Transition]], page: int, *, since: int = 1) -> None:
    """Feed `verifier` the timeline's rows from `since` on, in pages, until its end or its first bad row; each
    receipt row's transition is added to `transitions`."""
    while True:
        rows = await store.read_timeline(session_id, since_seq=since, limit=page)
        for row in rows:
            if not verifier.feed(row):
                return
            if row.kind == "receipt" and row.check:
                transitions.setdefault(row.check, []).append(_Transition(row.seq, row.outcome, row.data.get("status"),
                                                                         row.call_id))
        if len(rows) < page:
            return
        since = rows[-1].seq + 1


@record
class _Transition:
    """A receipt row of the chained timeline: the receipt's transition there, and the status it leaves."""

    seq: int
    transition: str | None
    status: object
    call_id: str | None

    @property
    def leaves(self) -> object:
        """The status the receipts table must hold after this transition."""
        return self.status if self.transition == "reconciled" else self.transition


def _receipts(session_id: str, receipts: list[Receipt], transitions: dict[str, list[_Transition]]) -> list[str]:
    """The receipts table against the chained timeline: the table is mutable (a receipt's status changes), the
    timeline is not, and every change of a receipt is committed with its row. So each receipt must be named by
    the timeline, with the status its last row leaves and the same call; each receipt the timeline names must
    be in the table. What differs was changed, added or removed outside Strata."""
    found: list[str] = []
    where = f"receipts of session {session_id}"
    listed = {r.id for r in receipts}
    for r in receipts:
        rows = transitions.get(r.id)
        if not rows:
            found.append(f"{where}: receipt {r.id} (call {r.call_id}) is on no timeline row (it was added outside "
                         "Strata)")
            continue
        last = rows[-1]
        if last.leaves != r.status:
            found.append(f"{where}: receipt {r.id} is {r.status} in the receipts table, but its last timeline row "
                         f"(row {last.seq}, {last.transition}) leaves it {last.leaves} (the receipt row was "
                         "changed)")
        elif last.call_id is not None and last.call_id != r.call_id:
            found.append(f"{where}: receipt {r.id} names call {r.call_id}, but its timeline rows name call "
                         f"{last.call_id} (the receipt row was changed)")
    for receipt_id, rows in transitions.items():
        if receipt_id not in listed:
            found.append(f"{where}: receipt {receipt_id}, named by timeline row {rows[0].seq}, is missing from the "
                         "receipts table (it was removed)")
    return found


def _rechained(session_id: str, record: ChainRecord, problems: list[str], notes: list[str]) -> None:
    note = record.rechained
    if note is None:
        return
    if note.unkeyed_problem is not None:
        problems.append(f"timeline of session {session_id}: before the chain was keyed ({note.at}), its unkeyed "
                        f"chain was already broken: {note.unkeyed_problem}")
    else:
        notes.append(f"its {note.timeline_rows} timeline rows and {note.events} events were re-chained under the "
                     f"key on {note.at} (they predate the keyed chain); their unkeyed chain verified then")


def _compare(session_id: str, log: _Log, head: ChainHead, source: str, problems: list[str], notes: list[str],
             moved: ChainHead | None = None) -> None:
    """Compare one log with a recorded head (`moved`: where that head was by the end of the check, when the
    session was written meanwhile). A broken chain is reported already: past its first bad row nothing more can
    be said."""
    found = log.verifier.result()
    seq, digest = ((head.timeline_seq, head.timeline_hash) if log.name == "timeline"
                   else (head.events_seq, head.events_hash))
    where = f"{log.name} of session {session_id}"
    if type(seq) is not int or type(digest) is not str:
        problems.append(f"{where}: {source} is malformed (it was edited)")
        return
    if not found.ok:
        if found.first_bad_seq is not None and seq >= found.first_bad_seq:
            return
    elif seq > found.last_seq:
        gone = f"{log.noun} {found.last_seq + 1}" if seq == found.last_seq + 1 else \
            f"{log.noun}s {found.last_seq + 1}-{seq}"
        problems.append(f"{where}: truncated: {source} names {log.noun} {seq}, but the chain ends at {log.noun} "
                        f"{found.last_seq} ({gone} removed)")
        return
    if log.at(seq) != digest:
        problems.append(f"{where}: {source} names {log.noun} {seq} with another hash than the stored one (the "
                        "rows were replaced, or the head was edited)")
        return
    if moved is not None and found.last_seq <= (moved.timeline_seq if log.name == "timeline" else moved.events_seq):
        return  # written meanwhile: the rows past the first head were added while we read
    if found.ok and seq < found.last_seq:
        if source.startswith("the session row"):
            problems.append(f"{where}: the chain goes on past {source} ({log.noun} {seq}; it ends at {log.noun} "
                            f"{found.last_seq}): the head was moved back, or rows were added outside Strata")
        else:
            notes.append(f"{source} names {log.noun} {seq} of the {log.name} (it lags the chain, which ends at "
                         f"{log.noun} {found.last_seq}: the ledger is written after commits, best effort)")
