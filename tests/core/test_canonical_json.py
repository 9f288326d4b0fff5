"""Canonical JSON (core/hashing.py) and the call row's argument text (tool_executor/_recorder.py) are written by
encoders built once: the text is exactly what `json.dumps` with the same options gives, so every digest and
summary stored before stays the same."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.hashing import canonical_json, sha256_json, sha256_text
from tool_executor._recorder import _args_json

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_json_is_json_dumps_with_its_options(value: Any) -> None:
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sha256_json(value) == sha256_text(json.dumps(value, sort_keys=True, separators=(",", ":"),
                                                        ensure_ascii=False))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=4))
def test_the_call_rows_argument_text_is_json_dumps_with_its_options(args: dict[str, Any]) -> None:
    assert _args_json(args) == json.dumps(args, ensure_ascii=False, sort_keys=True)
