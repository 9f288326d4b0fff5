"""core/timeline.py `entry_of`: the timeline entry the loop's row builders make without validating values that are
already of their fields' types is the entry validation builds (the same `__dict__` with the same value types, the
same fields set, `data` a copy), and values that are not exactly of their types are validated as always: converted
(an int duration becomes a float) or refused (ValidationError) just as `TimelineEntry(**fields)` does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.timeline import TimelineEntry, entry_of
from core.timeline_rows import attempt_entry, call_entry, phase_entry, receipt_entry

NAMES = ("kind", "turn", "call_id", "tool", "decision", "check", "outcome", "duration_ms", "summary", "data")


class _Text(str):
    pass


class _Number(int):
    pass


def _built(make: Any) -> tuple[str, Any]:
    try:
        entry = make()
    except ValidationError as exc:
        return "refused", [(e["loc"], e["type"]) for e in exc.errors()]
    return "built", (type(entry), [(k, v, type(v)) for k, v in entry.__dict__.items()], entry.model_fields_set,
                     entry.__pydantic_extra__, entry.__pydantic_private__)


_text = st.none() | st.text(max_size=4) | st.just(_Text("x")) | st.integers(0, 2) | st.booleans()
_given = st.sets(st.sampled_from(NAMES[2:8])).map(lambda more: frozenset({"kind", "turn", "summary", "data", *more}))


@settings(max_examples=600, deadline=None)
@given(given_=_given, kind=st.text(max_size=3) | st.just(_Text("call")) | st.integers(0, 1),
       turn=st.integers(-2, 2) | st.booleans() | st.just(_Number(3)) | st.floats(0, 2) | st.text(max_size=1),
       call_id=_text, tool=_text, check=_text, outcome=_text,
       decision=st.none() | st.sampled_from(["allowed", "denied", "parked", "nope", ""]) | st.just(_Text("allowed")),
       duration=st.none() | st.floats(allow_nan=True) | st.integers(-1, 1) | st.booleans() | st.text(max_size=1),
       summary=st.text(max_size=4) | st.just(_Text("s")) | st.none() | st.integers(0, 1),
       data=st.dictionaries(st.text(max_size=3) | st.integers(0, 1), st.integers() | st.text(max_size=2), max_size=3)
       | st.lists(st.integers(), max_size=1) | st.none())
def test_an_entry_is_what_validation_builds(given_: frozenset[str], kind: Any, turn: Any, call_id: Any, tool: Any,
                                            check: Any, outcome: Any, decision: Any, duration: Any, summary: Any,
                                            data: Any) -> None:
    values = {"kind": kind, "turn": turn, "call_id": call_id, "tool": tool, "decision": decision, "check": check,
              "outcome": outcome, "duration_ms": duration, "summary": summary, "data": data}
    defaults = {"call_id": None, "tool": None, "decision": None, "check": None, "outcome": None, "duration_ms": None}
    passed = {**defaults, **{k: v for k, v in values.items() if k in given_}}
    fast = _built(lambda: entry_of(given_, kind, turn, summary, data, call_id=passed["call_id"], tool=passed["tool"],
                                   decision=passed["decision"], check=passed["check"], outcome=passed["outcome"],
                                   duration_ms=passed["duration_ms"]))
    assert fast == _built(lambda: TimelineEntry(**{k: v for k, v in values.items() if k in given_}))


ODD: dict[str, list[Any]] = {
    "kind": [_Text("call"), 1, None, b"k"],
    "turn": [True, _Number(3), 2.0, 2.5, "2", None],
    "call_id": [_Text("c"), 1, True, b"c"], "tool": [_Text("t"), 1, False], "check": [_Text("p"), 0, 1.5],
    "outcome": [_Text("ok"), 2, b"ok"], "decision": ["maybe", "", _Text("allowed"), 1],
    "duration_ms": [1, True, _Number(2), "0.5", float("nan"), float("inf"), -0.0],
    "summary": [_Text("s"), None, 3, b"s"],
    "data": [{1: "a"}, {True: 1}, {_Text("k"): 1}, [], None, {"a": {"b": [1]}}],
}
VALID: dict[str, Any] = {"kind": "call", "turn": 2, "call_id": "c", "tool": "t", "decision": "allowed",
                         "check": "policy", "outcome": "ok", "duration_ms": 0.5, "summary": "s", "data": {"a": 1}}


def test_each_value_not_exactly_of_its_type_is_validated_as_always() -> None:
    everything = frozenset(NAMES)
    for name, odd in ODD.items():
        for value in odd:
            values = {**VALID, name: value}
            fast = _built(lambda v=values: entry_of(
                everything, v["kind"], v["turn"], v["summary"], v["data"], call_id=v["call_id"], tool=v["tool"],
                decision=v["decision"], check=v["check"], outcome=v["outcome"], duration_ms=v["duration_ms"]))
            assert fast == _built(lambda v=values: TimelineEntry(**v)), (name, value)


def test_the_data_is_a_copy_as_validation_makes_it() -> None:
    data: dict[str, Any] = {"a": 1}
    entry = entry_of(frozenset({"kind", "turn", "summary", "data"}), "phase", 1, "s", data)
    data["b"] = 2
    assert entry.data == {"a": 1}


def test_the_row_builders_make_the_entries_they_made_by_validation() -> None:
    rows = [
        (phase_entry(3, "commit", "commit: batch b with 1 call(s)", batch_id="b", calls=("c",)),
         TimelineEntry(kind="phase", turn=3, outcome="commit", summary="commit: batch b with 1 call(s)",
                       data={"batch_id": "b", "calls": ["c"]})),
        (attempt_entry(2, 1, "ok", "scripted turn 0", duration_ms=0.25, usage={"input_tokens": 1}),
         TimelineEntry(kind="model_attempt", turn=2, outcome="ok", check=None, duration_ms=0.25,
                       summary="scripted turn 0", data={"number": 1, "usage": {"input_tokens": 1}})),
        (call_entry(turn=1, call_id="c", tool="t", decision="allowed", by="policy", outcome="ok", duration_ms=0.1,
                    summary="t {} -> ok", steps=(("policy", "allow", "policy"),), plan_digest="p"),
         TimelineEntry(kind="call", turn=1, call_id="c", tool="t", decision="allowed", check="policy", outcome="ok",
                       duration_ms=0.1, summary="t {} -> ok",
                       data={"steps": [["policy", "allow", "policy"]], "plan_digest": "p"})),
        (receipt_entry(turn=1, call_id="c", tool="t", receipt_id="rcpt_1", transition="done", status="done",
                       summary="receipt rcpt_1 done"),
         TimelineEntry(kind="receipt", turn=1, call_id="c", tool="t", check="rcpt_1", outcome="done",
                       summary="receipt rcpt_1 done", data={"status": "done"})),
    ]
    for made, validated in rows:
        assert _built(lambda m=made: m) == _built(lambda v=validated: v)
    with pytest.raises(ValidationError):
        call_entry(turn=1, call_id="c", tool="t", decision="maybe", summary="s")  # type: ignore[arg-type]
