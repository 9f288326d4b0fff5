"""The session timeline's row shape and its keyed hash chain: one definition shared by both stores, the read side
and the CLI.

A row's hash is `HMAC-SHA256(chain key, prev_hash || canonical JSON of the row without "hash")`, hex, where
`prev_hash` is the previous row's hash as its 64 lowercase hex characters (ASCII), the genesis value is 64 zeros,
the key is the home's `chain.key` (see core/chain.py), and the canonical JSON has sorted keys, no spaces,
`ensure_ascii=False`, and the time as UTC ISO-8601 with microseconds (`2026-01-01T00:00:00.000000+00:00`). The
hashed object holds: at, call_id, check, data, decision, duration_ms, kind, outcome, prev_hash, seq, session_id,
summary, tool, turn: exactly a `timeline --json` line without "hash". So anyone holding the key can re-check a chain
with a few lines of any language, and nobody without it can make a row that verifies.

The chain proves that rows were not edited, removed or reordered after they were written; it proves an
observation, not that an effect happened. Removing the newest rows cannot be seen from the chain alone: the heads
recorded in the session row and the evidence ledger show it (observability/chain_verify.py).

Databases made before the chain was keyed (schema 4 and older) hashed with plain sha256 over the same text;
`legacy_row_hash` keeps that rule for the one check made when such a database is re-chained under a key."""

import hashlib
import math
from collections.abc import Callable, Iterable
from datetime import datetime
from json import encoder
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from core.chain import GENESIS_HASH, ChainKey, LinkVerifier, VerifyResult
from core.clock import canonical_time as canonical_time
from core.errors import DamagedRow
from core.json_text import encoder as json_encoder
from core.vocabulary import TIMELINE_DECISIONS, TimelineDecision

__all__ = ["GENESIS_HASH", "TIMELINE_DECISIONS", "ChainVerifier", "DamagedTimelineRow", "TimelineDecision",
           "TimelineEntry", "TimelineRow", "VerifyResult", "canonical_time", "legacy_row_hash", "marked_damaged",
           "row_hash", "seal", "shown_rows", "verify_chain"]


_TEXT_FIELDS = ("kind", "call_id", "tool", "check", "outcome", "summary")

_encode = json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""`core.hashing.canonical_json` with its encoder built once, not per call: the chain hashes every row inside the
commit. tests/observability/test_timeline_chain.py pins the two to the same output."""
_encode_stored = json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
"""The same, refusing NaN and the infinities (JSON has none), for what `seal` stores: such a number is stored as its
text, so a stored row that holds one was edited, or written by a Strata before this rule (memory/_encoding.py
`stored_data`). Rows already stored are
hashed as they are (`_encode`), so verify checks an older row that holds one as it was written."""
_encode_str = encoder.encode_basestring  # that encoder's string escaping (ensure_ascii=False)


class TimelineEntry(BaseModel):
    """One observation, as an emitter stages it. `summary` and `data` arrive already masked; `data` should be
    plain JSON (a value that is not is stored as text rather than failing the commit it rides with). The store
    assigns session, seq, time and the chain."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: str
    """What was observed: phase, model_attempt, call, hook, approval, receipt, lifecycle, ..."""
    turn: int = 0
    call_id: str | None = None
    tool: str | None = None
    decision: TimelineDecision | None = None
    check: str | None = None
    """The deciding check, rule, hook or approver."""
    outcome: str | None = None
    duration_ms: float | None = None
    summary: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


_DECISIONS = frozenset(TIMELINE_DECISIONS)
_set = object.__setattr__


def entry_of(given: frozenset[str], kind: str, turn: int, summary: str, data: dict[str, Any], *,
             call_id: str | None = None, tool: str | None = None, decision: TimelineDecision | None = None,
             check: str | None = None, outcome: str | None = None,
             duration_ms: float | None = None) -> TimelineEntry:
    """`TimelineEntry(**fields)` of the fields named in `given` (the others are their defaults), as validating them
    builds it (the same `__dict__`, `data` a copy, the same fields set, no extra, no private values), without the
    validation where every value is already exactly of its field's type: a str, an int, a float, a dict with str
    keys, a decision of the list. Anything else is validated, as always (and refused, or converted, as always).
    The loop's row builders (core/timeline_rows.py) make four or five rows a call. tests/core/test_entry_of.py holds
    the two equal."""
    if (type(kind) is str and type(turn) is int and type(summary) is str and type(data) is dict
            and (call_id is None or type(call_id) is str) and (tool is None or type(tool) is str)
            and (check is None or type(check) is str) and (outcome is None or type(outcome) is str)
            and (decision is None or (type(decision) is str and decision in _DECISIONS))
            and (duration_ms is None or type(duration_ms) is float) and all(type(k) is str for k in data)):
        entry = TimelineEntry.__new__(TimelineEntry)
        _set(entry, "__dict__", {"kind": kind, "turn": turn, "call_id": call_id, "tool": tool, "decision": decision,
                                 "check": check, "outcome": outcome, "duration_ms": duration_ms, "summary": summary,
                                 "data": dict(data)})
        _set(entry, "__pydantic_fields_set__", set(given))
        _set(entry, "__pydantic_extra__", None)
        _set(entry, "__pydantic_private__", None)
        return entry
    values: dict[str, Any] = {"kind": kind, "turn": turn, "call_id": call_id, "tool": tool, "decision": decision,
                              "check": check, "outcome": outcome, "duration_ms": duration_ms, "summary": summary,
                              "data": data}
    return TimelineEntry(**{name: values[name] for name in given})


class TimelineRow(TimelineEntry):
    """A stored timeline row: the entry's fields plus the envelope and chain the store assigned."""

    session_id: str
    seq: int
    """1-based per session, gap-free."""
    at: datetime
    prev_hash: str
    hash: str


class DamagedTimelineRow(TimelineRow):
    """A stored row read back as stored although its fields are not what a row allows (edited outside Strata):
    the stores return it as this type (`marked_damaged`) so that a surface reports it (`shown_rows`) rather than
    draw it, while `--verify` still checks it as it is. A sound row is a plain TimelineRow and pays nothing."""

    _damage: str = PrivateAttr(default="")

    @property
    def damage(self) -> str:
        """What is wrong with the row, as one clause."""
        return self._damage


def marked_damaged(fields: dict[str, Any], reason: str) -> DamagedTimelineRow:
    """A row of `fields` as they are (unvalidated), marked with what is wrong (see `DamagedTimelineRow`)."""
    damaged = DamagedTimelineRow.model_construct(**fields)
    damaged._damage = reason
    return damaged


def shown_rows(rows: list[TimelineRow]) -> list[TimelineRow]:
    """`rows`, unless one of them is damaged: then DamagedRow naming its session, its seq and what is wrong (one
    line for the user, not a row that fails the table, the JSON or an export half-way)."""
    for row in rows:
        if isinstance(row, DamagedTimelineRow):
            raise DamagedRow(str(row.session_id), row.seq, row.damage)
    return rows


def _value(x: object) -> str:
    """One JSON value as `canonical_json` writes it, without building an encoder for the common types."""
    if type(x) is str:
        return _encode_str(x)
    if x is None:
        return "null"
    if type(x) is int:
        return int.__repr__(x)
    if type(x) is float and math.isfinite(x):
        return float.__repr__(x)
    try:
        return _encode(x)
    except (TypeError, ValueError):  # a value edited into what JSON cannot hold (a BLOB): hashed as its text
        return _encode(_plain(x))


def _canonical(session_id: str, seq: int, at: str, prev_hash: str, row: TimelineEntry | TimelineRow,
               data_json: str) -> str:
    """`canonical_json` of the row without its hash, written field by field in sorted key order, with `data`
    spliced in as already-canonical text: the hash is computed for every row inside the commit, so this builds
    no dict and sorts nothing. tests/observability/test_timeline_chain.py pins it to `canonical_json` of the
    whole object."""
    call_id, check, decision, kind, outcome = row.call_id, row.check, row.decision, row.kind, row.outcome
    summary, tool, turn = row.summary, row.tool, row.turn
    duration: object = row.duration_ms  # typed float | None, but read back from a row anything may have edited
    if (duration is None or (type(duration) is float and math.isfinite(duration))) and type(turn) is int \
            and type(seq) is int:
        try:
            # Validated rows: text fields are str or None (encode_basestring raises TypeError otherwise).
            return (f'{{"at":{_encode_str(at)},"call_id":{"null" if call_id is None else _encode_str(call_id)},'
                    f'"check":{"null" if check is None else _encode_str(check)},"data":{data_json},'
                    f'"decision":{"null" if decision is None else _encode_str(decision)},'
                    f'"duration_ms":{"null" if duration is None else float.__repr__(duration)},'
                    f'"kind":{_encode_str(kind)},"outcome":{"null" if outcome is None else _encode_str(outcome)},'
                    f'"prev_hash":{_encode_str(prev_hash)},"seq":{int.__repr__(seq)},'
                    f'"session_id":{_encode_str(session_id)},"summary":{_encode_str(summary)},'
                    f'"tool":{"null" if tool is None else _encode_str(tool)},"turn":{int.__repr__(turn)}}}')
        except TypeError:
            pass
    # Anything else (a row edited into other types behind the store's back): value by value.
    if type(duration) is int:
        duration = float(duration)
    return (f'{{"at":{_value(at)},"call_id":{_value(call_id)},"check":{_value(check)},"data":{data_json},'
            f'"decision":{_value(decision)},"duration_ms":{_value(duration)},"kind":{_value(kind)},'
            f'"outcome":{_value(outcome)},"prev_hash":{_value(prev_hash)},"seq":{_value(seq)},'
            f'"session_id":{_value(session_id)},"summary":{_value(summary)},"tool":{_value(tool)},'
            f'"turn":{_value(turn)}}}')


def _unkeyed(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode("utf-8")).hexdigest()


def seal(key: ChainKey, session_id: str, seq: int, at: str, prev_hash: str,
         entry: TimelineEntry) -> tuple[TimelineEntry, str, str]:
    """Chain `entry` under `key` as row `seq` of `session_id`, written at `at` (a `canonical_time`) after a row
    whose hash is `prev_hash`. Returns (the entry as it is stored, its `data` as canonical JSON, its hash); the
    stores call it inside the append transaction and store exactly that. `data` is serialised once, for both the
    column and the hash. An entry that cannot be stored as it is (data that is not JSON, NaN or an infinity, text
    with lone surrogates from bytes decoded with surrogateescape) is stored in a plain form instead: an observation
    must never be what makes a commit fail."""
    try:
        data_json = _encode_stored(entry.data) if entry.data else "{}"
        return entry, data_json, key.digest(prev_hash, _canonical(session_id, seq, at, prev_hash, entry, data_json))
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        entry = _storable(entry)
        data_json = _encode_stored(entry.data)
        return entry, data_json, key.digest(prev_hash, _canonical(session_id, seq, at, prev_hash, entry, data_json))


def _text(value: str) -> str:
    return value.encode("utf-8", "replace").decode("utf-8")


def _plain(value: Any) -> Any:
    """`value` as JSON can hold it: string keys, lists, valid UTF-8, finite numbers; anything else becomes its
    text."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, float) and not math.isfinite(value):  # `Retry-After: inf`: JSON has no such number
        return repr(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {_text(str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return _text(str(value))


def _storable(entry: TimelineEntry) -> TimelineEntry:
    update: dict[str, Any] = {name: _text(getattr(entry, name)) for name in _TEXT_FIELDS
                              if getattr(entry, name) is not None}
    update["data"] = _plain(entry.data)
    return entry.model_copy(update=update)


def _data_json(row: TimelineRow) -> str:
    try:
        return _encode(row.data)
    except (TypeError, ValueError):  # not JSON: hash it the way `seal` would have stored it
        return _encode(_plain(row.data))


def row_hash(key: ChainKey, prev_hash: str, row: TimelineRow) -> str:
    """Recompute a stored row's hash from its fields, chained under `key` after `prev_hash`."""
    return _row_digest(key.digest, prev_hash, row)


def legacy_row_hash(prev_hash: str, row: TimelineRow) -> str:
    """The unkeyed rule of schema 4 and older (plain sha256): only to check an old chain before it is re-chained
    under a key. It proves nothing against anyone who can write the database."""
    return _row_digest(_unkeyed, prev_hash, row)


def _row_digest(digest: Callable[[str, str], str], prev_hash: str, row: TimelineRow) -> str:
    canonical = _canonical(row.session_id, row.seq, canonical_time(row.at), prev_hash, row, _data_json(row))
    try:
        return digest(prev_hash, canonical)
    except UnicodeEncodeError:  # text no store could have written: it cannot match
        return ""


# -- verification -------------------------------------------------------------------------------------------------


class ChainVerifier(LinkVerifier):
    """Checks one session's timeline rows one at a time, in the order the store keeps them, so a long timeline
    can be verified in pages. Stops at the first bad row. The hashes at the seqs in `watch` are kept."""

    def __init__(self, key: ChainKey, watch: Iterable[int] = ()) -> None:
        super().__init__(noun="row", watch=frozenset(watch))
        self._hash: Callable[[str, TimelineRow], str] = lambda prev, row: row_hash(key, prev, row)

    @classmethod
    def legacy(cls) -> "ChainVerifier":
        """A verifier of the unkeyed rule (see `legacy_row_hash`)."""
        verifier = cls(ChainKey.throwaway())
        verifier._hash = legacy_row_hash
        return verifier

    def feed(self, row: TimelineRow) -> bool:
        """Check the next row; False once the chain is broken (later rows are not checked)."""
        if self.failure is not None:
            return False
        self.rows += 1
        expected = self.last_seq + 1
        if row.seq < expected or (row.seq > expected and not row.prev_hash):
            # The SQLite store derives a row's prev_hash from the row before it (memory/_encoding.py): the row
            # after a removed one links to nothing (""), and the gap is what to name.
            return self._order(row.seq)
        if self._hash(row.prev_hash, row) != row.hash:
            return self._fail(row.seq, f"row {row.seq} was changed (hash mismatch)")
        if row.seq > expected:
            return self._order(row.seq)
        if row.prev_hash != self.head:
            before = "the start of the chain" if expected == 1 else f"row {expected - 1}"
            return self._fail(row.seq, f"row {row.seq} does not follow {before} (prev_hash mismatch: "
                                       f"a row before it was replaced or removed)")
        return self._accept(row.seq, row.hash)


def verify_chain(rows: Iterable[TimelineRow], key: ChainKey) -> VerifyResult:
    """Check one session's rows in stored order under `key`: every hash matches its row, seqs run 1..n without
    a gap, and each row links to the one before. Pure."""
    verifier = ChainVerifier(key)
    for row in rows:
        if not verifier.feed(row):
            break
    return verifier.result()
