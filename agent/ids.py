"""Ids as people type them: a session by a unique prefix of its id (at least `MIN_PREFIX` characters) or `last`
(the most recently updated session); a receipt by its id or its call's id, either by a unique prefix. An exact id
always names itself. A prefix that is too short or names several is a usage error; an ambiguous one lists the
candidates (id, title, updated) so the next attempt can be exact."""

from __future__ import annotations

from collections.abc import Sequence

from agent.awaiting_receipts import awaiting_decision, awaiting_hint
from agent.receipt_reads import receipt_reads
from agent.refs import LAST, MIN_PREFIX
from core.clock import SystemClock
from core.errors import DamagedSession, ReceiptError, SessionNotFound, UsageError
from memory.liveness import make_liveness
from memory.rows import Receipt, SessionRecord
from memory.store import EventStore

_SHOWN = 10
"""Candidates listed in an ambiguity error at most."""


def _too_short(what: str, ref: str, hint: str) -> UsageError:
    return UsageError(f"{what} id {ref!r} is too short: give at least {MIN_PREFIX} characters of it", hint=hint)


def _session_line(rec: SessionRecord) -> str:
    title = f"  {rec.title[:40]}" if rec.title else ""
    return f"{rec.id}  updated {rec.updated_at:%Y-%m-%d %H:%M:%S}{title}"


def match_session(records: Sequence[SessionRecord], ref: str) -> SessionRecord:
    """The session `ref` names among `records`: its exact id, `last`, or a unique prefix of its id."""
    ref = ref.strip()
    if ref == LAST:
        if not records:
            raise UsageError("there is no session yet, so `last` names none",
                             hint="`strata run PROMPT` or `strata chat` starts one")
        return max(records, key=lambda r: (r.updated_at, r.id))
    for rec in records:
        if rec.id == ref:
            return rec
    if len(ref) < MIN_PREFIX:
        raise _too_short("session", ref, "`strata sessions` lists them; `last` names the most recently updated session")
    found = [r for r in records if r.id.startswith(ref)]
    if not found:
        raise SessionNotFound(ref)
    if len(found) > 1:
        found.sort(key=lambda r: r.updated_at, reverse=True)
        raise _many(f"session id prefix {ref!r} names {len(found)} sessions", [_session_line(r) for r in found],
                    "give more characters of the id")
    return found[0]


def _many(head: str, lines: list[str], hint: str) -> UsageError:
    """A reference that names several: the first `_SHOWN` of them listed, and how many more."""
    more = [f"... and {len(lines) - _SHOWN} more"] if len(lines) > _SHOWN else []
    return UsageError(f"{head}:", hint=hint, listing=[*lines[:_SHOWN], *more])


async def resolve_session(store: EventStore, ref: str) -> str:
    """The full id of the session `ref` names (see `match_session`). A damaged session row (edited outside Strata)
    leaves the others nameable by id or prefix: it is DamagedSession when `ref` names it, and when `ref` is `last`
    (the damaged row might be the newest: no older session is taken for it), and it counts among the sessions an
    ambiguous prefix names."""
    damaged: list[DamagedSession] = []
    records = await store.list_sessions(damaged=damaged)
    key = ref.strip()
    if damaged and key == LAST:
        raise damaged[0]
    if not damaged or any(r.id == key for r in records):
        return match_session(records, ref).id
    named = [d for d in damaged if d.session_id == key or (len(key) >= MIN_PREFIX and d.session_id.startswith(key))]
    if not named:
        return match_session(records, ref).id
    exact = [d for d in named if d.session_id == key]
    if exact:
        raise exact[0]
    others = [r for r in records if r.id.startswith(key)]
    if len(named) + len(others) == 1:
        raise named[0]
    lines = [f"{d.session_id}  (damaged session row)" for d in named] + [_session_line(r) for r in others]
    raise _many(f"session id prefix {ref.strip()!r} names {len(lines)} sessions", lines,
                "give more characters of the id")


def _receipt_line(r: Receipt) -> str:
    return f"{r.id}  call {r.call_id}  {r.tool}  {receipt_reads(r)}  session {r.session_id}"


def match_receipt(receipts: Sequence[Receipt], ref: str, awaiting: Sequence[Receipt] | None = None) -> Receipt:
    """The receipt `ref` names: its id or its call's id, exactly or by a unique prefix (at least MIN_PREFIX). Of
    several, the only one awaiting a decision (the one a reconciliation is for), if exactly one is. `awaiting`:
    the receipts that await a decision (agent/awaiting_receipts.py); the `unknown` ones when not given."""
    if awaiting is None:
        awaiting = [r for r in receipts if r.status == "unknown"]
    ref = ref.strip()
    exact = [r for r in receipts if r.id == ref] or [r for r in receipts if r.call_id == ref]
    found = exact
    if not found:
        if len(ref) < MIN_PREFIX:
            raise _too_short("receipt or call", ref, "`strata receipts` lists them with their call ids")
        found = [r for r in receipts if r.id.startswith(ref) or r.call_id.startswith(ref)]
    if not found:
        raise ReceiptError(f"no receipt with id or call id {ref!r}", receipt_id=ref, hint=awaiting_hint(awaiting))
    open_ids = {r.id for r in awaiting}
    candidates = [r for r in found if r.id in open_ids]
    if len(found) > 1 and len(candidates) == 1:  # a call id reused by another session: the one awaiting a decision
        return candidates[0]
    if len(found) > 1:
        raise _many(f"{ref!r} names {len(found)} receipts", [_receipt_line(r) for r in found],
                    "give the receipt id (or more characters of it)")
    return found[0]


async def resolve_receipt(store: EventStore, ref: str) -> Receipt:
    receipts = await store.list_receipts()
    return match_receipt(receipts, ref, await awaiting_decision(store, make_liveness(SystemClock()), receipts))


def match_call(call_ids: Sequence[str], ref: str, *, session_id: str) -> str | None:
    """The call among `call_ids` that `ref` names: exactly, or by a unique prefix of at least MIN_PREFIX
    characters. None when none matches (the caller says what is waiting)."""
    if ref in call_ids:
        return ref
    found = [c for c in call_ids if c.startswith(ref)]
    if len(ref) < MIN_PREFIX:
        if found:  # the start of a waiting call's id, only too short to name one: not "not waiting"
            raise UsageError(f"call id prefix {ref!r} of session {session_id} is too short: give at least "
                             f"{MIN_PREFIX} characters of it, or the whole id",
                             hint=f"calls it starts: {', '.join(found[:_SHOWN])}")
        return None
    if len(found) > 1:
        raise UsageError(f"call id prefix {ref!r} names {len(found)} calls of session {session_id}: "
                         f"{', '.join(found)}", hint="give more characters of the call id")
    return found[0] if found else None
