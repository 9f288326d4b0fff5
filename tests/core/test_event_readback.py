"""`storable_json` (core/events.py) tells from an event's values that its compact JSON reads back as the very event
(core/event_readback.py) instead of parsing it back inside every commit. What it stores, and every refusal, must be
what the parse-back check gave: these tests hold the two equal over the golden logs, odd hand-made events and
generated tool arguments, and hold that the loop's usual events are no longer parsed. The other shortcuts of the
commit path are held to what they replace here too: a stored event's envelope, an event's canonical row."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, field_validator

import core.chain as chain
import core.events as events
from core.chain import event_canonical
from core.errors import UnstorableEvent
from core.event_readback import plain, reads_back, same_plain
from core.events import (
    BatchCompleted,
    BatchProposed,
    CallResult,
    Event,
    KnowledgeChanged,
    PlannedCall,
    SessionEnded,
    SessionResumed,
    StoredEvent,
    TokenUsage,
    UserMessage,
    parse_event_json,
    storable_json,
    stored_event,
)
from core.hashing import sha256_json
from core.messages import TextBlock, ToolResultBlock, ToolUseBlock
from tests.core.test_fold import GOLDEN_CASES, read_log


def _parsed_back(event: Event) -> tuple[str, str]:
    """What `storable_json` gave before it told events apart by their values (its code then, word for word): the
    compact JSON when it parses back equal, else every field (checked to parse), else the refusal."""
    try:
        try:
            data = event.model_dump_json(exclude_none=True, exclude=events._stored_exclude(event))
            try:
                same = parse_event_json(data) == event
            except ValueError:
                same = False
            if not same:
                data = event.model_dump_json()
                parse_event_json(data)
        except (ValueError, RecursionError) as exc:
            raise UnstorableEvent(event.kind, events._first_line(exc)) from None
    except UnstorableEvent as exc:
        return "refused", str(exc)
    except Exception as exc:  # a value that makes deciding what to leave out fail: the same failure either way
        return "failed", repr(exc)
    return "stored", data


def _stored(event: Event) -> tuple[str, str]:
    try:
        return "stored", storable_json(event)
    except UnstorableEvent as exc:
        return "refused", str(exc)
    except Exception as exc:
        return "failed", repr(exc)


def _digest(value: Any) -> str:
    try:
        return sha256_json(value)
    except (TypeError, ValueError):
        return "no digest"


def _proposal(*inputs: Any, same_object: bool = True) -> BatchProposed:
    content = tuple(ToolUseBlock.model_construct(type="tool_use", id=f"c{i}", name="read", input=value)
                    for i, value in enumerate(inputs))
    calls = tuple(PlannedCall.model_construct(call_id=b.id, tool=b.name,
                                              input=b.input if same_object else dict(b.input),
                                              input_sha256=_digest(b.input), refused=())
                  for b in content)
    return BatchProposed.model_construct(kind="batch_proposed", batch_id="b1", content=content, calls=calls,
                                         usage=None)


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def _result(**fields: Any) -> CallResult:
    base: dict[str, Any] = {"kind": "call_result", "batch_id": "b1", "call_id": "c1", "tool": "read", "status": "ok",
                            "content": "x", "is_error": False, "check": None, "reasons": (), "receipt_id": None,
                            "duration_ms": None, "blob": None}
    return CallResult.model_construct(**(base | fields))


ODD_EVENTS: list[tuple[str, Any]] = [
    ("a usual proposal", lambda: _proposal({"path": "data.txt"})),
    ("a proposal whose calls hold a copy of the input", lambda: _proposal({"path": "a"}, same_object=False)),
    ("True where the call has 1", lambda: _proposal({"n": True}).model_copy(update={"calls": (
        PlannedCall.model_construct(call_id="c0", tool="read", input={"n": 1}, input_sha256=sha256_json({"n": True}),
                                    refused=()),)})),
    ("a tuple inside the arguments", lambda: _proposal({"t": (1, 2)})),
    ("NaN inside the arguments", lambda: _proposal({"f": math.nan})),
    ("an infinity inside the arguments", lambda: _proposal({"f": math.inf})),
    ("minus zero inside the arguments", lambda: _proposal({"f": -0.0})),
    ("a huge integer inside the arguments", lambda: _proposal({"n": 1 << 80})),
    ("a None inside the arguments", lambda: _proposal({"n": None, "l": [None, {"x": None}]})),
    ("a non-string key", lambda: _proposal({1: "one"})),
    ("arguments nested deep but readable", lambda: _proposal(_deep(60))),
    ("arguments that read back too deep", lambda: _proposal(_deep(220))),
    ("arguments that do not serialise", lambda: _proposal(_deep(300))),
    ("a lone surrogate in the arguments", lambda: _proposal({"s": "\ud800"})),
    ("a lone surrogate in a message", lambda: UserMessage(text="broken \udfff")),
    ("a refused call", lambda: _proposal({"p": 1}).model_copy(update={"calls": (
        PlannedCall(call_id="c0", tool="read", input={"p": 1}, refused=("limit",)),)})),
    ("refused as a list", lambda: _proposal({"p": 1}).model_copy(update={"calls": (
        PlannedCall.model_construct(call_id="c0", tool="read", input={"p": 1}, input_sha256=sha256_json({"p": 1}),
                                    refused=[]),)})),
    ("a call hash that is not the input's", lambda: _proposal({"p": 1}).model_copy(update={"calls": (
        PlannedCall(call_id="c0", tool="read", input={"p": 1}, input_sha256="other"),)})),
    ("calls given as none", lambda: BatchProposed(batch_id="b", content=(ToolUseBlock(id="c", name="t", input={}),),
                                                  calls=())),
    ("calls of None", lambda: _proposal({}).model_copy(update={"calls": None})),
    ("a text block and usage", lambda: BatchProposed(batch_id="b", content=(TextBlock(text="hi"),),
                                                     usage=TokenUsage(input_tokens=5))),
    ("a tool result block", lambda: BatchProposed.model_construct(
        kind="batch_proposed", batch_id="b", content=(ToolResultBlock(tool_use_id="x", content="y"),), calls=(),
        usage=None)),
    ("a usual result", lambda: _result()),
    ("an error result", lambda: _result(is_error=True, status="error", reasons=("no",))),
    ("is_error 0", lambda: _result(is_error=0)),
    ("is_error None", lambda: _result(is_error=None)),
    ("reasons as a list", lambda: _result(reasons=[])),
    ("a NaN duration", lambda: _result(duration_ms=math.nan)),
    ("an integer duration", lambda: _result(duration_ms=5)),
    ("a float duration", lambda: _result(duration_ms=1.25)),
    ("a status no result has", lambda: _result(status="lost")),
    ("a str subclass", lambda: _result(content=type("Sub", (str,), {})("x"))),
    ("a field that must be given even when None", lambda: KnowledgeChanged(previous_digest=None, digest="d",
                                                                           notice="n")),
    ("empty declared tools", lambda: SessionResumed(plan_digest="p", declared_tools={})),
    ("declared tools", lambda: SessionResumed(plan_digest="p", declared_tools={"a": "b"})),
    ("a usual batch end", lambda: BatchCompleted(batch_id="b1")),
    ("a batch id that is no text", lambda: BatchCompleted.model_construct(kind="batch_completed", batch_id=5)),
    ("an end", lambda: SessionEnded(status="completed")),
]


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic warns of the odd values given past validation
@pytest.mark.parametrize(("name", "make"), ODD_EVENTS, ids=[name for name, _ in ODD_EVENTS])
def test_an_odd_event_is_stored_or_refused_exactly_as_parsing_it_back_decided(name: str, make: Any) -> None:
    event = make()
    assert _stored(event) == _parsed_back(event)


def test_every_event_of_the_golden_logs_is_stored_as_parsing_it_back_decided() -> None:
    for case in GOLDEN_CASES:
        for stored in read_log(case):
            assert _stored(stored.event) == _parsed_back(stored.event)


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner) | st.dictionaries(st.text(max_size=3), inner,
                                                                                   max_size=3),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _PLAIN, max_size=4), st.booleans())
def test_generated_tool_arguments_are_stored_as_parsing_them_back_decided(value: dict[str, Any],
                                                                          same_object: bool) -> None:
    assert _stored(_proposal(value, same_object=same_object)) == _parsed_back(_proposal(value,
                                                                                        same_object=same_object))


def test_the_loops_usual_events_are_not_parsed_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn's proposal, its result and the batch's end are told apart by their values: the commit no longer
    parses them back (it did, three times a read-only turn, on the store's connection thread)."""
    usual = [BatchProposed(batch_id="b1", content=(TextBlock(text="reading"), ToolUseBlock(
                 id="c1", name="read_file", input={"path": "data.txt", "limit": 20, "deep": {"x": [1.5, None]}})),
                           calls=(PlannedCall(call_id="c1", tool="read_file",
                                              input={"path": "data.txt", "limit": 20, "deep": {"x": [1.5, None]}}),),
                           usage=TokenUsage(input_tokens=10, output_tokens=3)),
             CallResult(batch_id="b1", call_id="c1", tool="read_file", status="ok", content="a small file\n",
                        is_error=False, check="policy", receipt_id=None, duration_ms=0.25),
             CallResult(batch_id="b1", call_id="c1", tool="read_file", status="denied", content="no",
                        is_error=True, reasons=("rule",)),
             BatchCompleted(batch_id="b1"), UserMessage(text="go on")]
    expected = [storable_json(event) for event in usual]

    def refuse(data: str | bytes) -> Event:
        raise AssertionError("parsed back")

    monkeypatch.setattr(events, "parse_event_json", refuse)
    assert [storable_json(event) for event in usual] == expected


def test_a_stored_event_built_by_the_store_is_what_model_construct_builds() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    event = BatchCompleted(batch_id="b1")
    fast = stored_event("s1", 7, at, 3, event)
    slow = StoredEvent.model_construct(session_id="s1", seq=7, at=at, turn=3, event=event)
    assert (type(fast), fast.__dict__, fast.__pydantic_fields_set__, fast.__pydantic_extra__,
            fast.__pydantic_private__) == (type(slow), slow.__dict__, slow.__pydantic_fields_set__,
                                           slow.__pydantic_extra__, slow.__pydantic_private__)
    assert fast == slow and fast.model_dump() == slow.model_dump()
    assert not StoredEvent.__pydantic_post_init__ and not StoredEvent.__pydantic_root_model__
    assert tuple(StoredEvent.model_fields) == events._STORED_FIELDS


_ROW_TEXT = st.text() | st.sampled_from(["", "\u2028", "\x00", '"\\', "\ud800"])
_ROW_INT = st.integers() | st.sampled_from([0, -1, 1 << 80])


@settings(max_examples=200, deadline=None)
@given(st.one_of(_ROW_TEXT, _ROW_INT, st.booleans(), st.none()), _ROW_INT, _ROW_TEXT, _ROW_INT, _ROW_TEXT,
       _ROW_TEXT, st.one_of(_ROW_INT, st.booleans(), st.floats(allow_nan=False)))
def test_an_events_canonical_row_is_the_encoders_text(session_id: Any, seq: Any, at: Any, turn: Any, kind: Any,
                                                      payload: Any, version: Any) -> None:
    """core/chain.py `event_canonical` writes the store's values field by field: the very text the sorted-key
    encoder gives (of odd types too, as verify reads an edited row)."""
    assert event_canonical(session_id, seq, at, turn, kind, payload, version) == chain._encode(
        {"at": at, "kind": kind, "payload": payload, "schema_version": version, "seq": seq, "session_id": session_id,
         "turn": turn})


class _Bounded(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    n: int = Field(ge=0)


class _Stripped(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)
    text: str


class _Aliased(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    text: str = Field(alias="t")


class _Checked(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    text: str

    @field_validator("text")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


@pytest.mark.parametrize("model", [_Bounded.model_construct(n=-1), _Stripped.model_construct(text=" x "),
                                   _Aliased.model_construct(text="x"), _Checked.model_construct(text="x")],
                         ids=["a constraint", "a setting that changes text", "an alias", "a field validator"])
def test_a_model_whose_reading_may_change_or_refuse_its_values_is_never_told_apart(model: BaseModel) -> None:
    """What reading would check or change (a constraint, a setting, an alias, a validator) is not looked at, so such
    a model is left to the parse: a value given past validation that reading refuses or changes is not stored
    compact on the word of its types."""
    assert not reads_back(type(model), model)


@settings(max_examples=300, deadline=None)
@given(_PLAIN, _PLAIN)
def test_values_told_the_same_are_written_as_the_same_text(a: Any, b: Any) -> None:
    """core/event_readback.py `same_plain`, which spares a proposal's calls two json.dumps each: True only for
    values json.dumps writes as the same text (and always for a value and its copy)."""
    import copy
    import json

    if same_plain(a, b):
        assert json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)
    if plain(a):
        assert same_plain(a, copy.deepcopy(a))
