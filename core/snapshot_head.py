"""The first line of a snapshot (core/snapshot.py): a `SessionState` without its conversation, as JSON, written and
read by hand instead of by a pydantic `TypeAdapter(SessionState)`.

Building that adapter generates pydantic schemas for the state's standard-library dataclasses in every process
that needs it, some 10 ms: a good part of `strata resume` of a long session, the only kind that has a snapshot to
load (bench/resume_flatness.py). Here each field of each dataclass the state holds has a writer and a reader in a
table (`FIELDS`):

- `encode_head` writes the very bytes the adapter's `dump_json` wrote (the same field order, the same compact JSON,
  `"messages":[]`), each pydantic model in the state by its own serializer, so stored snapshots and their version
  stay what they were (tests/core/test_snapshot_head.py compares the two over generated states and the golden
  logs);
- `decode_head` reads them back with `json.loads` and checks every value's exact type: a JSON object must have
  exactly the dataclass's fields, a `str` field a string, an `int` field an integer (not a bool, not a float), a
  `Literal` one of its words; each pydantic model in the state (a rule, a planned call, a call result, a parked
  call, a content block) is validated by its own class. Anything else raises HeadError (a ValueError), and the
  snapshot is ignored and the whole log folded, as for any snapshot that does not load.

It is stricter than the adapter was (a missing or extra field, a number in a string, a `\\uXXXX` escape of a
surrogate, are refused, not defaulted, ignored or converted): what it accepts is a state of exactly the declared
types, which `encode_head` writes again. Each table row names the field's
annotation too, so a field added to, removed from or retyped in the state fails a test until the table learns it
(and the state's schema digest, core/snapshot_version.py, changes with it)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, Literal, get_args

from pydantic import BaseModel

from core.events import CallResult, Mode, ParkedCall, PlannedCall
from core.id_digests import IdDigests
from core.json_text import encoder
from core.messages import ContentBlock, Message
from core.policy import PermissionRule
from core.record import record
from core.state import Approval, Counters, Grant, OpenBatch, SessionState
from core.vocabulary import EndStatus, OnAsk


class HeadError(ValueError):
    """The data is not a head `encode_head` writes."""


Write = Callable[[Any], bytes]
Read = Callable[[Any], Any]


@record(slots=True)
class Codec:
    write: Write
    """The value's JSON, as pydantic's `dump_json` writes it inside the state."""
    read: Read
    """The value from what `json.loads` gave for that JSON; HeadError (or pydantic's ValidationError) if it is not
    a value of the field's type."""


_plain = encoder(separators=(",", ":"), ensure_ascii=False)
"""Strings, ints, bools, None, and lists and str-keyed dicts of them, as pydantic writes them (compact, UTF-8, the
same escapes); no float is written this way (floats live only inside pydantic models, written by their own
serializers)."""


def _write_plain(value: Any) -> bytes:
    return _plain(value).encode("utf-8")  # a lone surrogate: UnicodeEncodeError, as pydantic refuses one


def _refuse(what: str, value: Any) -> HeadError:
    return HeadError(f"{what} expected, got {type(value).__name__}")


def _exact(kind: type) -> Codec:
    name = kind.__name__

    def read(value: Any) -> Any:
        if type(value) is not kind:  # exactly: an int field takes no bool, a str field no number
            raise _refuse(name, value)
        return value

    return Codec(_write_plain, read)


TEXT, INT, BOOL = _exact(str), _exact(int), _exact(bool)


def _literal(words: Any) -> Codec:
    allowed = frozenset(get_args(words))

    def read(value: Any) -> Any:
        if type(value) is not str or value not in allowed:
            raise HeadError(f"one of {sorted(allowed)} expected, got {value!r:.40}")
        return value

    return Codec(_write_plain, read)


def _optional(codec: Codec) -> Codec:
    write, read = codec.write, codec.read
    return Codec(lambda v: b"null" if v is None else write(v), lambda v: None if v is None else read(v))


def _list_of(codec: Codec, make: Callable[[list[Any]], Any] = list) -> Codec:
    write, read = codec.write, codec.read

    def read_all(value: Any) -> Any:
        if type(value) is not list:
            raise _refuse("list", value)
        return make([read(v) for v in value])

    return Codec(lambda vs: b"[" + b",".join([write(v) for v in vs]) + b"]", read_all)


def _dict_of(codec: Codec) -> Codec:
    write, read = codec.write, codec.read

    def write_all(values: dict[str, Any]) -> bytes:
        return b"{" + b",".join([_write_plain(k) + b":" + write(v) for k, v in values.items()]) + b"}"

    def read_all(value: Any) -> Any:
        if type(value) is not dict:
            raise _refuse("dict", value)
        return {k: read(v) for k, v in value.items()}  # json.loads gives str keys only

    return Codec(write_all, read_all)


def _write_model(value: BaseModel) -> bytes:
    return value.__pydantic_serializer__.to_json(value)


def _model(cls: type[BaseModel]) -> Codec:
    """A pydantic model, written by its own serializer and validated by its own validator (built at first use)."""

    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _refuse("object", value)
        return cls.model_validate(value)

    return Codec(_write_model, read)


def _content_block() -> Codec:
    """A `ContentBlock`: the class its `type` names (as the union's discriminator picks it), validated by that class."""
    union, *_ = get_args(ContentBlock)
    by_tag: dict[str, type[BaseModel]] = {cls.model_fields["type"].default: cls for cls in get_args(union)}

    def read(value: Any) -> Any:
        tag = value.get("type") if type(value) is dict else None
        cls = by_tag.get(tag) if type(tag) is str else None
        if cls is None:
            raise HeadError(f"a content block expected, got {value!r:.40}")
        return cls.model_validate(value)

    return Codec(_write_model, read)


def _id_digests() -> Codec:
    def read(value: Any) -> Any:
        if type(value) is not str:
            raise _refuse("str", value)
        return IdDigests.decode(value)  # binascii.Error / ValueError for data that is not packed digests

    return Codec(lambda v: _write_plain(v.encode()), read)


def _no_messages() -> Codec:
    """The head's `messages`: always empty (the conversation is the snapshot's second line)."""

    def read(value: Any) -> Any:
        if type(value) is not list or value:
            raise HeadError("the head holds messages")
        return []

    return Codec(lambda _: b"[]", read)


Row = tuple[str, Any, Codec]
"""A field: its name, its annotation in core/state.py (held equal to the class's by a test), its codec."""


def _dataclass(cls: type[Any], rows: tuple[Row, ...]) -> Codec:
    """A dataclass: a JSON object with exactly its fields (in field order when written)."""
    names = frozenset(name for name, _, _ in rows)
    keys = [_write_plain(name) + b":" for name, _, _ in rows]
    parts = [(name, key, codec.write) for (name, _, codec), key in zip(rows, keys, strict=True)]
    readers = [(name, codec.read) for name, _, codec in rows]
    title = cls.__name__

    def write(value: Any) -> bytes:
        return b"{" + b",".join([key + w(getattr(value, name)) for name, key, w in parts]) + b"}"

    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _refuse(f"{title} object", value)
        if value.keys() != names:
            missing, extra = sorted(names - value.keys()), sorted(value.keys() - names)
            raise HeadError(f"{title}: missing {missing}, unknown {extra}")
        try:
            return cls(**{name: r(value[name]) for name, r in readers})
        except HeadError as exc:
            raise HeadError(f"{title}: {exc}") from None

    return Codec(write, read)


_TEXT_LIST, _TEXT_DICT = _list_of(TEXT), _dict_of(TEXT)
_OPTIONAL_TEXT = _optional(TEXT)

OPEN_BATCH_FIELDS: tuple[Row, ...] = (
    ("batch_id", str, TEXT),
    ("content", tuple[ContentBlock, ...], _list_of(_content_block(), tuple)),
    ("calls", tuple[PlannedCall, ...], _list_of(_model(PlannedCall), tuple)),
    ("results", dict[str, CallResult], _dict_of(_model(CallResult))),
    ("proposed_seq", int, INT),
)
APPROVAL_FIELDS: tuple[Row, ...] = (
    ("decision", Literal["approved", "rejected"], _literal(Literal["approved", "rejected"])),
    ("args_sha256", str, TEXT),
    ("approver", str, TEXT),
    ("plan_digest", str, TEXT),
    ("reason", str, TEXT),
)
GRANT_FIELDS: tuple[Row, ...] = (
    ("tool", str, TEXT),
    ("asked_by", str, TEXT),
    ("approver", str, TEXT),
    ("pattern", str | None, _OPTIONAL_TEXT),
)
COUNTERS_FIELDS: tuple[Row, ...] = tuple((f.name, int, INT) for f in dataclasses.fields(Counters))
"""Every counter is an int (the pin test holds each annotation to `int`)."""
SESSION_FIELDS: tuple[Row, ...] = (
    ("session_id", str, TEXT),
    ("mode", Mode, _literal(Mode)),
    ("workspace", str, TEXT),
    ("model", str, TEXT),
    ("max_turns", int, INT),
    ("plan_digest", str, TEXT),
    ("parent_id", str | None, _OPTIONAL_TEXT),
    ("parent_call_id", str | None, _OPTIONAL_TEXT),
    ("depth", int, INT),
    ("tools_allowed", list[str] | None, _optional(_TEXT_LIST)),
    ("on_ask", OnAsk, _literal(OnAsk)),
    ("project_hooks_digest", str | None, _OPTIONAL_TEXT),
    ("knowledge_digest", str | None, _OPTIONAL_TEXT),
    ("knowledge_told", str | None, _OPTIONAL_TEXT),
    ("declared_tools", dict[str, str], _TEXT_DICT),
    ("declared_told", dict[str, str], _TEXT_DICT),
    ("rules", list[PermissionRule], _list_of(_model(PermissionRule))),
    ("messages", list[Message], _no_messages()),
    ("open_batch", OpenBatch | None, _optional(_dataclass(OpenBatch, OPEN_BATCH_FIELDS))),
    ("counters", Counters, _dataclass(Counters, COUNTERS_FIELDS)),
    ("unknown_receipts", dict[str, str], _TEXT_DICT),
    ("parked", dict[str, ParkedCall], _dict_of(_model(ParkedCall))),
    ("approvals", dict[str, Approval], _dict_of(_dataclass(Approval, APPROVAL_FIELDS))),
    ("grants", list[Grant], _list_of(_dataclass(Grant, GRANT_FIELDS))),
    ("repairs_used", int, INT),
    ("reported_unknown", set[str], Codec(lambda v: _write_plain(list(v)), _list_of(TEXT, set).read)),
    ("ended", EndStatus | None, _optional(_literal(EndStatus))),
    ("end_reason", str, TEXT),
    ("context_chars", int, INT),
    ("compactions", int, INT),
    ("call_ids", IdDigests, _id_digests()),
    ("last_seq", int, INT),
    ("started", bool, BOOL),
)
FIELDS: dict[type[Any], tuple[Row, ...]] = {SessionState: SESSION_FIELDS, OpenBatch: OPEN_BATCH_FIELDS,
                                            Approval: APPROVAL_FIELDS, Grant: GRANT_FIELDS, Counters: COUNTERS_FIELDS}
"""Each dataclass of the state, with its fields as the codec knows them."""

_SESSION = _dataclass(SessionState, SESSION_FIELDS)


def _no_constant(name: str) -> Any:
    raise HeadError(f"{name} is not JSON")


_BACKSLASH = ord("\\")
_SURROGATE_HEX = (frozenset(b"dD"), frozenset(b"89abcdefABCDEF"))


def _surrogate_escape(data: bytes) -> bool:
    """Whether `data` holds a `\\uD800`-`\\uDFFF` escape (a `\\u` whose backslash starts an escape: after an even
    run of backslashes). `json.loads` reads a lone one as a lone surrogate, which pydantic's parser refused and
    `encode_head` cannot write: a state holding one would fail its next snapshot. A pair is refused too:
    `encode_head` writes every character but the control ones as itself, never as escapes."""
    first, second = _SURROGATE_HEX
    at = data.find(b"\\u")
    while at >= 0:
        start = at
        while start and data[start - 1] == _BACKSLASH:
            start -= 1
        hex_digits = data[at + 2:at + 4]
        if (at - start) % 2 == 0 and len(hex_digits) == 2 and hex_digits[0] in first and hex_digits[1] in second:
            return True
        at = data.find(b"\\u", at + 2)
    return False


def encode_head(state: SessionState) -> bytes:
    """The state without its conversation: `TypeAdapter(SessionState).dump_json` of it with no messages, byte for
    byte. A string that UTF-8 cannot encode (a lone surrogate) raises a ValueError, as pydantic's did."""
    return _SESSION.write(state)


def decode_head(data: bytes) -> SessionState:
    """The state `encode_head` wrote (its `messages` empty). HeadError, or another ValueError (pydantic's
    ValidationError of a model inside, undecodable text), or RecursionError for JSON nested too deep, when `data`
    is not such a head."""
    if _surrogate_escape(data):
        raise HeadError("a UTF-16 surrogate escape")
    value = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    state: SessionState = _SESSION.read(value)
    return state
