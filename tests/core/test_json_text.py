"""core/json_text.py: the JSON text of a value with the C encoder built once is the very text
`json.JSONEncoder(...).encode` writes, for every option set Strata uses, and a value it cannot write fails with
the same error (a value that contains itself, NaN where refused, a type JSON has no form for, keys that cannot be
sorted together, a value nested past the recursion limit)."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.json_text import encoder

OPTIONS: list[dict[str, Any]] = [
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": False},
    {"ensure_ascii": False},
    {"ensure_ascii": False, "sort_keys": True},
    {},
]


class _Text(str):
    pass


class _Number(int):
    pass


_key = st.text(max_size=5) | st.sampled_from(["é", "\ud800", "\x00", '"', "\\", "\u2028"])
_leaf = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | _key
         | st.text().map(_Text) | st.integers(-5, 5).map(_Number))
_value = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(_key | st.integers(-3, 3) | st.booleans() | st.none(), inner, max_size=4), max_leaves=20)


def _outcome(encode: Any, value: Any) -> tuple[str, str]:
    try:
        return "text", encode(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(value=_value)
def test_the_text_and_the_errors_are_json_s_own(value: Any) -> None:
    for options in OPTIONS:
        assert _outcome(encoder(**options), value) == _outcome(json.JSONEncoder(**options).encode, value)


def test_a_value_that_contains_itself_is_refused_as_json_refuses_it() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    table: dict[str, Any] = {"a": [1, 2]}
    table["b"] = {"c": table}
    for value in (looped, table):
        for options in OPTIONS:
            with pytest.raises(ValueError, match="Circular reference detected"):
                encoder(**options)(value)
    # and the same encoder writes the next value as before
    assert encoder()({"n": 1}) == '{"n": 1}'


def test_odd_values_fail_with_json_s_errors() -> None:
    for value in ({"x": object()}, {1: 1, "a": 2}, [math.nan], {"k": math.inf}, {(1, 2): 3}):
        for options in OPTIONS:
            assert _outcome(encoder(**options), value) == _outcome(json.JSONEncoder(**options).encode, value)


def test_a_value_nested_past_the_recursion_limit_fails_as_it_did() -> None:
    deep: Any = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    assert _outcome(encoder(), deep) == _outcome(json.JSONEncoder().encode, deep)
    assert _outcome(encoder(), deep)[0] == "RecursionError"
