"""The keyed hash chains of a session's two logs, and their heads.

Both the state log (`events`) and the timeline are chained per session: a row's hash is
`HMAC-SHA256(key, prev_hash || canonical JSON of the row)`, hex, where `prev_hash` is the previous row's hash as 64
lowercase hex characters (64 zeros for the first row) and the key is the home's `chain.key` (32 bytes, never in the
database). The timeline's canonical row is defined in core/timeline.py; a state event's is the canonical JSON (sorted
keys, no spaces, `ensure_ascii=False`) of `{"at", "kind", "payload", "schema_version", "seq", "session_id",
"turn"}`, with `at` and `payload` exactly the text the store holds (the payload is the event's JSON, as a string).

Without the key nobody can make a row that verifies, so a row edited in the database, or a chain recomputed with
some public rule, is named by `verify`. A chain alone cannot show that its newest rows were removed; the *head* (the
last seq and hash of both logs) is recorded where that shows: in the session row, in every commit, and in the
evidence ledger, a file outside the database (see observability/chain_verify.py)."""

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from core.json_text import encoder
from core.record import record
from core.vocabulary import GENESIS_HASH as GENESIS_HASH

KEY_ID_LABEL = b"strata chain key id v1"

_encode = encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ChainKey:
    """An HMAC-SHA256 key, prepared once: the inner and outer SHA-256 states of RFC 2104 are computed from the key
    at construction, so a digest costs two state copies and the hashing of the row (about what plain sha256 of
    the row cost), not a re-keying. `id` names the key (a digest of it, revealing nothing) so a database can record
    which key chained it."""

    __slots__ = ("_inner", "_outer", "id")

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a chain key needs at least 16 bytes")
        block = secret.ljust(64, b"\0") if len(secret) <= 64 else hashlib.sha256(secret).digest().ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self.id = hmac.new(secret, KEY_ID_LABEL, hashlib.sha256).hexdigest()[:16]

    @classmethod
    def throwaway(cls) -> "ChainKey":
        """A random key for a store that keeps nothing (tests, the in-memory store)."""
        return cls(secrets.token_bytes(32))

    def digest(self, prev_hash: str, canonical: str) -> str:
        """HMAC-SHA256(key, prev_hash || canonical), hex."""
        inner = self._inner.copy()
        inner.update((prev_hash + canonical).encode("utf-8"))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def __repr__(self) -> str:
        return f"ChainKey(id={self.id})"


class ChainHead(BaseModel):
    """Where a session's two logs end: the last seq and hash of each (0 and the genesis hash for an empty one)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    events_seq: int
    events_hash: str
    timeline_seq: int
    timeline_hash: str


EMPTY_HEAD = ChainHead(events_seq=0, events_hash=GENESIS_HASH, timeline_seq=0, timeline_hash=GENESIS_HASH)
_HEAD_FIELDS = frozenset(ChainHead.model_fields)
_set = object.__setattr__


def chain_head(events_seq: int, events_hash: str, timeline_seq: int, timeline_hash: str) -> ChainHead:
    """`ChainHead(events_seq=..., events_hash=..., timeline_seq=..., timeline_hash=...)`, as validating these values
    builds it (the same `__dict__`, every field set, no extra, no private values), without the validation when each
    is exactly an int or a str as its field wants (a store's head after each commit, which the evidence ledger asks
    for at every commit); anything else is validated, as always. tests/core/test_chain_head.py holds the two
    equal."""
    if (type(events_seq) is int and type(events_hash) is str and type(timeline_seq) is int
            and type(timeline_hash) is str):
        head = ChainHead.__new__(ChainHead)
        _set(head, "__dict__", {"events_seq": events_seq, "events_hash": events_hash, "timeline_seq": timeline_seq,
                                "timeline_hash": timeline_hash})
        _set(head, "__pydantic_fields_set__", set(_HEAD_FIELDS))
        _set(head, "__pydantic_extra__", None)
        _set(head, "__pydantic_private__", None)
        return head
    return ChainHead(events_seq=events_seq, events_hash=events_hash, timeline_seq=timeline_seq,
                     timeline_hash=timeline_hash)


def same_head(a: ChainHead, b: ChainHead | None) -> bool:
    """`a == b` for two heads (a ChainHead has no private or extra values: its fields are the whole of it), compared
    field by field instead of through pydantic's `__eq__`."""
    return b is not None and (a is b or (a.events_seq == b.events_seq and a.events_hash == b.events_hash
                                         and a.timeline_seq == b.timeline_seq
                                         and a.timeline_hash == b.timeline_hash))


class EventChainRow(BaseModel):
    """A state event exactly as the store holds it, for verification: nothing is parsed, so an edited payload is
    checked as the text it now is."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    session_id: str
    seq: int
    at: str
    turn: int
    kind: str
    payload: str
    schema_version: int
    hash: str


_encode_str = json.encoder.encode_basestring  # the string escaping of that encoder (ensure_ascii=False)


def event_canonical(session_id: str, seq: int, at: str, turn: int, kind: str, payload: str,
                    schema_version: int) -> str:
    """The canonical JSON of a state event's row (see the module's docstring). Values of the types the store
    writes are written field by field in sorted key order, with no dict built and nothing sorted (every commit
    hashes each of its events); anything else (a row edited into other types, read back for verify) goes through
    the encoder. tests/core/test_event_readback.py holds the two to the same text."""
    if (type(at) is str and type(kind) is str and type(payload) is str and type(session_id) is str
            and type(seq) is int and type(turn) is int and type(schema_version) is int):
        return (f'{{"at":{_encode_str(at)},"kind":{_encode_str(kind)},"payload":{_encode_str(payload)},'
                f'"schema_version":{int.__repr__(schema_version)},"seq":{int.__repr__(seq)},'
                f'"session_id":{_encode_str(session_id)},"turn":{int.__repr__(turn)}}}')
    return _encode({"at": at, "kind": kind, "payload": payload, "schema_version": schema_version, "seq": seq,
                    "session_id": session_id, "turn": turn})


def event_hash(key: ChainKey, prev_hash: str, row: EventChainRow) -> str:
    """Recompute a stored event's hash, chained after `prev_hash`; "" when its stored values cannot be part of
    any chain (edited into something that is not JSON text), which matches no hash."""
    try:
        return key.digest(prev_hash, event_canonical(row.session_id, row.seq, row.at, row.turn, row.kind,
                                                     row.payload, row.schema_version))
    except (TypeError, ValueError):
        return ""


# -- verification -------------------------------------------------------------------------------------------------


@record
class VerifyResult:
    """What verifying a chain found: whether every row holds, and if not the first that fails and why."""

    ok: bool
    first_bad_seq: int | None = None
    """The first row that fails (for a removed row: the seq that is missing)."""
    reason: str | None = None
    """A sentence naming that row: "row 17 was changed (hash mismatch)", "row 17 is missing", ..."""
    rows: int = 0
    """Rows checked (up to and including the first bad one)."""
    head: str = GENESIS_HASH
    """The hash of the last good row: an anchor to compare with a copy kept elsewhere."""
    last_seq: int = 0
    """The seq of the last good row."""


@dataclass
class LinkVerifier:
    """Checks one log's rows one at a time, in stored order (so a long log is verified in pages): seqs run 1..n
    without gaps or repeats, every hash is the HMAC of its row after the one before. Stops at the first bad row.
    The hashes at the seqs in `watch` are kept (the heads recorded elsewhere are compared with them)."""

    noun: str = "row"
    watch: frozenset[int] = frozenset()
    rows: int = 0
    head: str = GENESIS_HASH
    last_seq: int = 0
    failure: VerifyResult | None = None
    watched: dict[int, str] = field(default_factory=dict)

    def _order(self, seq: int) -> bool:
        """Seq order: False (and the failure set) for a repeated, out-of-order or missing row."""
        expected = self.last_seq + 1
        if seq < expected:
            what = "appears twice" if seq == self.last_seq else f"is out of order (after {self.noun} {self.last_seq})"
            return self._fail(seq, f"{self.noun} {seq} {what}")
        if seq > expected:
            missing = (f"{self.noun} {expected} is" if seq == expected + 1
                       else f"{self.noun}s {expected}-{seq - 1} are")
            return self._fail(expected, f"{missing} missing")
        return True

    def _accept(self, seq: int, digest: str) -> bool:
        self.last_seq = seq
        self.head = digest
        if seq in self.watch:
            self.watched[seq] = digest
        return True

    def _fail(self, seq: int, reason: str) -> bool:
        self.failure = VerifyResult(ok=False, first_bad_seq=seq, reason=reason, rows=self.rows, head=self.head,
                                    last_seq=self.last_seq)
        return False

    def result(self) -> VerifyResult:
        return self.failure or VerifyResult(ok=True, rows=self.rows, head=self.head, last_seq=self.last_seq)


class EventChainVerifier(LinkVerifier):
    def __init__(self, key: ChainKey, watch: Iterable[int] = ()) -> None:
        super().__init__(noun="event", watch=frozenset(watch))
        self.key = key

    def feed(self, row: EventChainRow) -> bool:
        """Check the next event; False once the chain is broken (later events are not checked)."""
        if self.failure is not None:
            return False
        self.rows += 1
        seq = row.seq
        if type(seq) is not int:  # edited into text behind the store's back
            return self._fail(self.last_seq + 1, f"event {self.last_seq + 1} was changed (its seq is not a number)")
        if not self._order(seq):
            return False
        if event_hash(self.key, self.head, row) != row.hash:
            return self._fail(seq, f"event {seq} was changed (hash mismatch)")
        return self._accept(seq, row.hash)
