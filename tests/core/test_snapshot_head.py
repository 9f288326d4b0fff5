"""The hand-written snapshot head (core/snapshot_head.py) against the pydantic adapter it replaces: the same bytes
written and the same state read back, for generated states, generated logs and the golden logs; every kind of
damage refused as a SnapshotError; and a field of the state the codec does not know fails here."""

from __future__ import annotations

import dataclasses
import json
import math
import types
from typing import Any, Union, get_args, get_origin

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from core.events import BlobRef, CallResult, CallStatus, Mode, ParkedCall, PlannedCall, StoredEvent
from core.id_digests import IdDigests
from core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from core.policy import RULE_ACTIONS, PermissionRule
from core.snapshot import SNAPSHOT_VERSION, SnapshotError, _adapter, _message, dump_state, load_state
from core.snapshot_head import FIELDS, decode_head, encode_head
from core.state import Approval, Counters, Grant, OpenBatch, SessionState, fold
from core.vocabulary import CheckName, EndStatus, OnAsk
from tests.core.test_fold import GOLDEN_CASES, PROPERTY, read_log, valid_logs

# -- the reference: what the adapter wrote and read -----------------------------------------------------------


def adapter_dump(state: SessionState) -> bytes:
    """A snapshot as `StateEncoder.dump` wrote it before the head was hand-written."""
    head = _adapter().dump_json(dataclasses.replace(state, messages=[]))
    return head + b"\n[" + b",".join(_message().dump_json(m) for m in state.messages) + b"]"


def adapter_head(head: bytes) -> SessionState:
    return _adapter().validate_json(head)


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Equal, and of exactly the same types all the way down (a tuple is not a list, an int not a bool)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} is not {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, BaseModel):
        assert a == b, where
        for name in type(a).model_fields:
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys"
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), f"{where}: length"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


def assert_head_matches_the_adapter(state: SessionState) -> None:
    """Written: the adapter's very bytes. Read back: the adapter's very state, which writes the same bytes again."""
    data = dump_state(state)
    assert data == adapter_dump(state)
    head = data.partition(b"\n")[0]
    assert encode_head(state) == head
    mine, theirs = decode_head(head), adapter_head(head)
    assert_same(mine, theirs)
    assert encode_head(mine) == _adapter().dump_json(theirs)


# -- generated states --------------------------------------------------------------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)  # quotes, controls, any plane: all escapes
WORDS = st.sampled_from(["", "a", "read_file", 'q"uote', "back\\slash", "tab\tnew\nline", "\x00\x1f\x7f", "é",
                         "\u2028", "😀"])
SOME_TEXT = st.one_of(WORDS, TEXT)
INTS = st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70))
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1e-7, 1e16, 0.1, 2.5])
JSON_VALUES = st.recursive(st.none() | st.booleans() | INTS | FLOATS | SOME_TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SOME_TEXT, inner, max_size=3),
                           max_leaves=8)
INPUTS = st.dictionaries(SOME_TEXT, JSON_VALUES, max_size=3)


def literal(words: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(get_args(words))


def check_names() -> list[str]:
    out: list[str] = []
    for part in get_args(CheckName):
        out += get_args(part) if get_args(part) else [part]
    return out


BLOCKS: st.SearchStrategy[Any] = st.one_of(
    st.builds(TextBlock, text=SOME_TEXT),
    st.builds(ToolUseBlock, id=SOME_TEXT, name=SOME_TEXT, input=INPUTS),
    st.builds(ToolResultBlock, tool_use_id=SOME_TEXT, content=SOME_TEXT, is_error=st.booleans()))
MESSAGES = st.builds(Message, role=st.sampled_from(["user", "assistant"]),
                     content=st.lists(BLOCKS, max_size=3).map(tuple))
RULES = st.builds(PermissionRule, action=st.sampled_from(RULE_ACTIONS), tool=SOME_TEXT,
                  pattern=st.none() | SOME_TEXT, args=st.dictionaries(SOME_TEXT, SOME_TEXT, max_size=2),
                  source=SOME_TEXT)
PLANNED = st.builds(PlannedCall, call_id=SOME_TEXT, tool=SOME_TEXT, input=INPUTS, input_sha256=SOME_TEXT,
                    refused=st.lists(SOME_TEXT, max_size=2).map(tuple))
RESULTS = st.builds(CallResult, batch_id=SOME_TEXT, call_id=SOME_TEXT, tool=SOME_TEXT,
                    status=literal(CallStatus), content=SOME_TEXT, is_error=st.booleans(),
                    check=st.none() | st.sampled_from(check_names()),
                    reasons=st.lists(SOME_TEXT, max_size=2).map(tuple), receipt_id=st.none() | SOME_TEXT,
                    duration_ms=st.none() | FLOATS,
                    blob=st.none() | st.builds(BlobRef, sha256=SOME_TEXT, size=INTS))
PARKED = st.builds(ParkedCall, call_id=SOME_TEXT, tool=SOME_TEXT, input=INPUTS, input_sha256=SOME_TEXT,
                   plan_digest=SOME_TEXT, reasons=st.lists(SOME_TEXT, max_size=2).map(tuple), asked_by=SOME_TEXT)


STATES = st.builds(
    SessionState,
    session_id=SOME_TEXT, mode=literal(Mode), workspace=SOME_TEXT, model=SOME_TEXT, max_turns=INTS,
    plan_digest=SOME_TEXT, parent_id=st.none() | SOME_TEXT, parent_call_id=st.none() | SOME_TEXT, depth=INTS,
    tools_allowed=st.none() | st.lists(SOME_TEXT, max_size=3), on_ask=literal(OnAsk),
    project_hooks_digest=st.none() | SOME_TEXT, knowledge_digest=st.none() | SOME_TEXT,
    knowledge_told=st.none() | SOME_TEXT, declared_tools=st.dictionaries(SOME_TEXT, SOME_TEXT, max_size=3),
    declared_told=st.dictionaries(SOME_TEXT, SOME_TEXT, max_size=3), rules=st.lists(RULES, max_size=2),
    messages=st.lists(MESSAGES, max_size=3),
    open_batch=st.none() | st.builds(OpenBatch, batch_id=SOME_TEXT, content=st.lists(BLOCKS, max_size=3).map(tuple),
                                        calls=st.lists(PLANNED, max_size=2).map(tuple),
                                        results=st.dictionaries(SOME_TEXT, RESULTS, max_size=2), proposed_seq=INTS),
    counters=st.builds(Counters, **{f.name: INTS for f in dataclasses.fields(Counters)}),
    unknown_receipts=st.dictionaries(SOME_TEXT, SOME_TEXT, max_size=2),
    parked=st.dictionaries(SOME_TEXT, PARKED, max_size=2),
    approvals=st.dictionaries(SOME_TEXT, st.builds(Approval, decision=st.sampled_from(["approved", "rejected"]),
                                                      args_sha256=SOME_TEXT, approver=SOME_TEXT,
                                                      plan_digest=SOME_TEXT, reason=SOME_TEXT), max_size=2),
    grants=st.lists(st.builds(Grant, tool=SOME_TEXT, asked_by=SOME_TEXT, approver=SOME_TEXT,
                                 pattern=st.none() | SOME_TEXT), max_size=2),
    repairs_used=INTS, reported_unknown=st.sets(SOME_TEXT, max_size=3), ended=st.none() | literal(EndStatus),
    end_reason=SOME_TEXT, context_chars=INTS, compactions=INTS,
    call_ids=st.sets(st.integers(0, 2**32 - 1), max_size=20).map(IdDigests), last_seq=INTS,
    started=st.booleans())


@PROPERTY
@given(STATES)
def test_generated_states_are_written_and_read_as_the_adapter_did(state: SessionState) -> None:
    """Any state, every field and every model in it drawn (escapes, big integers, floats of every kind inside the
    models, sets, tuples): the hand-written head is the adapter's bytes, and reads back as the adapter's state."""
    assert_head_matches_the_adapter(state)


@PROPERTY
@given(valid_logs())
def test_states_of_generated_logs_are_written_and_read_as_the_adapter_did(log: list[StoredEvent]) -> None:
    """The state after every event of a generated log: the adapter's bytes, the adapter's state."""
    for i in range(1, len(log) + 1):
        assert_head_matches_the_adapter(fold(log[:i]))


@pytest.mark.parametrize("name", GOLDEN_CASES)
def test_golden_log_states_are_written_and_read_as_the_adapter_did(name: str) -> None:
    """Every golden log, cut after each event: the adapter's bytes, the adapter's state."""
    log = read_log(name)
    for i in range(1, len(log) + 1):
        assert_head_matches_the_adapter(fold(log[:i]))


def test_a_string_utf8_cannot_write_is_refused_as_the_adapter_refused_it() -> None:
    """A lone surrogate anywhere in the head: a ValueError from both, never a snapshot with other bytes."""
    state = SessionState(workspace="\ud800")
    with pytest.raises(ValueError):
        _adapter().dump_json(state)
    with pytest.raises(ValueError):
        encode_head(state)


# -- the field list pin -----------------------------------------------------------------------------------------


def dataclasses_inside(annotation: Any) -> set[type[Any]]:
    """The dataclasses an annotation names, however nested (in a union, a list, a dict's values)."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        found = {annotation}
        for f in dataclasses.fields(annotation):
            found |= dataclasses_inside(f.type)
        return found
    if get_origin(annotation) in (Union, types.UnionType) or get_args(annotation):
        return set().union(*(dataclasses_inside(a) for a in get_args(annotation)))
    return set()


def test_the_codec_knows_every_field_of_every_dataclass_in_the_state() -> None:
    """A field added to, removed from, renamed or retyped in SessionState (or a dataclass it holds), or a new
    dataclass held by the state, fails here until core/snapshot_head.py is taught it."""
    assert set(FIELDS) == dataclasses_inside(SessionState)
    for cls, rows in FIELDS.items():
        assert [(f.name, f.type) for f in dataclasses.fields(cls)] == [(name, ann) for name, ann, _ in rows], cls


# -- damage -------------------------------------------------------------------------------------------------------


def rich_state() -> SessionState:
    """A state with something in every part the damage below reaches."""
    call = PlannedCall(call_id="c1", tool="read_file", input={"path": "a"}, input_sha256="h")
    result = CallResult(batch_id="b1", call_id="c1", tool="read_file", status="ok", content="x", is_error=False,
                        duration_ms=1.5)
    parked = ParkedCall(call_id="c2", tool="bash", input={"command": "ls"}, input_sha256="h2", plan_digest="p",
                        reasons=("ask",), asked_by="rule")
    state = SessionState(session_id="s1", workspace="/ws", model="m", max_turns=9, plan_digest="p", started=True,
                         last_seq=12, rules=[PermissionRule(action="allow", tool="read_file")],
                         messages=[Message(role="user", content=(TextBlock(text="hi"),))],
                         open_batch=OpenBatch("b1", (TextBlock(text="plan"), ToolUseBlock(id="c1", name="read_file",
                                                                                          input={"path": "a"})),
                                              (call,), {"c1": result}, proposed_seq=11),
                         parked={"c2": parked}, approvals={"c2": Approval("approved", "h2", "person:me", "p")},
                         grants=[Grant("bash", "rule", "person:me", "ls*")], reported_unknown={"r1"})
    state.call_ids.update(["c1", "c2"])
    return state


def damaged(change: Any) -> bytes:
    """`rich_state`'s snapshot with `change` applied to its head (a JSON object) or its conversation (a list)."""
    head, _, conversation = dump_state(rich_state()).partition(b"\n")
    value, messages = json.loads(head), json.loads(conversation)
    change(value, messages)
    return json.dumps(value, ensure_ascii=False).encode() + b"\n" + json.dumps(messages).encode()


def _at(value: Any, key: str) -> Any:
    return value[int(key)] if isinstance(value, list) else value[key]


def _set(path: str, new: Any) -> Any:
    """Set the value at a dotted path of the head (list items by index)."""
    def change(value: Any, _: list[Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            value = _at(value, key)
        value[int(last) if isinstance(value, list) else last] = new
    return change


def _drop(path: str) -> Any:
    """Remove the key at a dotted path of the head."""
    def change(value: Any, _: list[Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            value = _at(value, key)
        del value[last]
    return change


def _first_message(new: Any) -> Any:
    def change(_: dict[str, Any], messages: list[Any]) -> None:
        messages[0] = new
    return change


DAMAGE = {
    "wrong type: an int as a string": _set("max_turns", "9"),
    "wrong type: a bool for an int": _set("depth", True),
    "wrong type: a float for an int": _set("last_seq", 12.0),
    "wrong type: a number for a string": _set("workspace", 3),
    "wrong type: null for a string": _set("session_id", None),
    "wrong type: null for an int": _set("depth", None),
    "wrong type: null for a list": _set("grants", None),
    "wrong type: null for a nested dataclass": _set("counters", None),
    "wrong type: a word outside the literal": _set("mode", "batch"),
    "wrong type: a list for a dict": _set("declared_tools", []),
    "wrong type: a number inside a list of strings": _set("reported_unknown", [1]),
    "wrong type: a nested counter": _set("counters.tool_calls", "1"),
    "wrong type: a nested approval's decision": _set("approvals.c2.decision", "maybe"),
    "wrong type: call ids that are not base64": _set("call_ids", "not base64!"),
    "wrong type: call ids of a broken length": _set("call_ids", "AAAAAAA="),
    "missing field": _drop("depth"),
    "missing nested field": _drop("counters.denials"),
    "missing field of an open batch": _drop("open_batch.proposed_seq"),
    "missing field of a grant": lambda v, m: v["grants"][0].pop("pattern"),
    "extra field": _set("surprise", 1),
    "extra nested field": _set("counters.surprise", 1),
    "extra field of an approval": _set("approvals.c2.surprise", ""),
    "messages inside the head": _set("messages", [{"role": "user", "content": []}]),
    "bad nested message: unknown role": _first_message({"role": "robot", "content": []}),
    "bad nested message: unknown block": _first_message({"role": "user", "content": [{"type": "image"}]}),
    "bad nested message: extra key": _first_message({"role": "user", "content": [], "x": 1}),
    "bad nested model: a call result's status": _set("open_batch.results.c1.status", "fine"),
    "bad nested model: a call result that is a list": _set("open_batch.results.c1", []),
    "bad nested model: a planned call's input": _set("open_batch.calls.0.input", "rm -rf"),
    "bad nested model: a content block without a type": _set("open_batch.content.0", {"text": "plan"}),
    "bad nested model: a content block of a list type": _set("open_batch.content.0", {"type": [], "text": "x"}),
    "bad nested model: a parked call without reasons": lambda v, m: v["parked"]["c2"].pop("reasons"),
    "bad nested model: a rule's action": _set("rules.0.action", "maybe"),
    "not an object": lambda v, m: v.clear(),
}
SURROGATE_ESCAPES = {  # (what the head holds, what it is replaced with)
    "a lone surrogate escape": (b'"workspace":"/ws"', rb'"workspace":"\ud800"'),
    "a lone surrogate escape after an escaped backslash": (b'"workspace":"/ws"', rb'"workspace":"\\\udfff"'),
    "a surrogate pair escape": (b'"workspace":"/ws"', rb'"workspace":"\ud83d\ude00"'),
    "a lone surrogate escape inside a model": (b'"command":"ls"', rb'"command":"\uDC00"'),
}


def test_the_undamaged_snapshot_loads() -> None:
    """The control for the damage below: `rich_state`'s snapshot, rewritten by `damaged` unchanged, loads."""
    state = load_state(damaged(lambda v, m: None), SNAPSHOT_VERSION, 12)
    assert_same(state, rich_state())


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_snapshot_is_refused(kind: str) -> None:
    """Each kind of damage to the head or the conversation is a SnapshotError (so resume folds the log)."""
    with pytest.raises(SnapshotError, match="does not load"):
        load_state(damaged(DAMAGE[kind]), SNAPSHOT_VERSION, 12)


@pytest.mark.parametrize("kind", SURROGATE_ESCAPES)
def test_surrogate_escape_is_refused(kind: str) -> None:
    """A `\\uD800`-`\\uDFFF` escape anywhere in the head (pydantic's parser refused a lone one; the head's writer
    writes none) is a SnapshotError, never a state whose next snapshot cannot be written."""
    data, (old, new) = dump_state(rich_state()), SURROGATE_ESCAPES[kind]
    assert data.count(old) == 1
    with pytest.raises(SnapshotError, match="surrogate"):
        load_state(data.replace(old, new), SNAPSHOT_VERSION, 12)


def test_backslash_u_text_is_not_taken_for_an_escape() -> None:
    """Text holding a backslash followed by `ud800` (a Windows path, say) is written as `\\\\ud800` and loads."""
    state = dataclasses.replace(rich_state(), workspace="C:\\ud800\\\\udc00 \x01", model="\\\\\\udfff")
    assert_same(load_state(dump_state(state), SNAPSHOT_VERSION, 12), state)


@pytest.mark.parametrize("head", [b"NaN", b'{"session_id": Infinity}', b"[" * 100_000, b"\xff{}", b'"text"', b"null"])
def test_head_that_is_not_a_state_object_is_refused(head: bytes) -> None:
    """JSON's non-standard constants, nesting past the parser's depth, bytes that are not UTF-8, and JSON that is
    not an object: refused, never a crash of another kind."""
    with pytest.raises(SnapshotError, match="does not load"):
        load_state(head + b"\n[]", SNAPSHOT_VERSION, 1)
