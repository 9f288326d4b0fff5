"""memory/_encoding.py `packed_data_json`: a timeline row's `data` text as the table keeps it, made from the text the
hash covers (a call row's allowing steps, a model attempt's usage replaced in place), is the very text that
encoding `pack_data`'s value gives, for the rows the loop writes and for odd ones built to fool a text replacement
(a step detail or another value that spells the replaced text, a check holding `]` or quotes, nested look-alikes,
usages that are not four integers)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.hashing import canonical_json
from memory._encoding import pack_data, packed_data_json

CHECK = "allow rule 'noop_write' (flag)"
USAGE = {"input_tokens": 1200, "output_tokens": 85, "cache_read_tokens": 0, "cache_write_tokens": 7}


def _old(kind: str, check: str | None, data: dict[str, Any]) -> str:
    """What the store wrote before: the data encoded for the hash, then `pack_data`'s value encoded again."""
    packed = pack_data(kind, check, data)
    return canonical_json(data if packed is None else packed)


def _same(kind: str, check: str | None, data: dict[str, Any]) -> None:
    assert packed_data_json(kind, check, data, canonical_json(data), canonical_json) == _old(kind, check, data)


def test_the_rows_the_loop_writes_are_packed_as_before() -> None:
    _same("call", CHECK, {"plan_digest": "plan_ab", "receipt_id": "rcpt_1", "steps": [["policy", "allow", CHECK]]})
    _same("call", CHECK, {"steps": [["schema", "allow", "ok"], ["policy", "allow", CHECK], ["hook", "allow", CHECK]]})
    _same("call", CHECK, {"steps": [["policy", "deny", CHECK]]})
    _same("call", None, {"steps": [["policy", "allow", CHECK]]})
    _same("call", "", {"steps": [["policy", "allow", ""]]})
    _same("model_attempt", None, {"number": 1, "usage": USAGE})
    _same("model_attempt", "overloaded", {"number": 2, "error_kind": "overloaded", "status_code": 529})
    _same("phase", None, {"batch_id": "b", "calls": ["toolu_1"]})


def test_text_that_spells_the_replaced_values_is_left_as_it_is() -> None:
    tail = f'"allow","{CHECK}"]'
    _same("call", CHECK, {"lock": ["allow", CHECK], "steps": [["policy", "allow", CHECK]]})
    _same("call", CHECK, {"note": tail, "steps": [["policy", "allow", CHECK]]})
    _same("call", CHECK, {"steps": [["policy", "allow", CHECK], ["x", ["allow", CHECK]], ["allow", CHECK]]})
    _same("call", 'a"]b', {"steps": [["policy", "allow", 'a"]b'], ["p", "allow", "a"]]})
    _same("call", "a]", {"steps": [["policy", "allow", "a]"], ["p", "allow", "a]"]]})
    _same("call", CHECK, {"steps": [["policy", "allow", CHECK, 1], ["policy", "allow"], ("p", "allow", CHECK)]})
    whole = {"number": 1, "usage": USAGE}
    _same("model_attempt", None, {**whole, "other": {"usage": USAGE}})
    _same("model_attempt", None, {**whole, "request_id": canonical_json({"usage": USAGE})})
    _same("model_attempt", None, {"number": 1, "usage": {**USAGE, "input_tokens": True}})
    _same("model_attempt", None, {"number": 1, "usage": [0, 0, 1, 2]})
    _same("model_attempt", None, {"number": 1, "usage": [[0, 0, 1, 2]]})
    _same("model_attempt", None, {"number": 1, "usage": {**USAGE, "more": 1}})


_text = st.sampled_from(["allow", CHECK, "a]", 'q"', "é", "0", "policy", "\\", ""]) | st.text(max_size=6)
_leaf = st.none() | st.booleans() | st.integers(-3, 3) | _text
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=3),
                      max_leaves=12)
_step = st.tuples(_text, st.sampled_from(["allow", "deny", "ask"]) | _text, _text | _value).map(list) | _value
_count = st.integers(0, 5) | st.booleans() | _text


@settings(max_examples=700, deadline=None)
@given(check=st.none() | _text, steps=st.lists(_step, max_size=5) | _value,
       rest=st.dictionaries(_text, _value | st.lists(_step, max_size=2), max_size=3))
def test_call_rows_are_packed_as_before(check: str | None, steps: Any, rest: dict[str, Any]) -> None:
    _same("call", check, {**rest, "steps": steps})


@settings(max_examples=700, deadline=None)
@given(counts=st.dictionaries(st.sampled_from(sorted(USAGE)) | _text, _count, max_size=5)
       | st.lists(_count, max_size=5) | _value,
       rest=st.dictionaries(_text, _value | st.just(USAGE) | st.just({"usage": USAGE}), max_size=3))
def test_model_attempts_are_packed_as_before(counts: Any, rest: dict[str, Any]) -> None:
    _same("model_attempt", None, {**rest, "usage": counts})
