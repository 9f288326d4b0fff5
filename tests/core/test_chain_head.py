"""A store's head is built without validation when its values are exactly of their fields' types
(core/chain.py `chain_head`), as validating them builds it; and two heads are compared field by field
(`same_head`), as pydantic's `==` compares them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.chain import ChainHead, chain_head, same_head

_seqs = st.integers(min_value=-(2**70), max_value=2**70)
_hashes = st.text(max_size=70)


def _as_built(head: ChainHead) -> tuple[Any, ...]:
    return (type(head), head.__dict__, head.model_fields_set, head.__pydantic_extra__, head.__pydantic_private__,
            head.model_dump_json(), head.model_dump())


@given(_seqs, _hashes, _seqs, _hashes)
def test_a_head_of_exact_types_is_the_validated_one(es: int, eh: str, ts: int, th: str) -> None:
    fast = chain_head(es, eh, ts, th)
    validated = ChainHead(events_seq=es, events_hash=eh, timeline_seq=ts, timeline_hash=th)
    assert _as_built(fast) == _as_built(validated)
    assert fast == validated and hash(fast) == hash(validated)
    with pytest.raises(ValueError, match="frozen"):
        fast.events_seq = 1  # type: ignore[misc]


@pytest.mark.parametrize("values", [(True, "h", 1, "h"), (1.0, "h", 1, "h"), ("1", "h", 1, "h"), (1, b"h", 1, "h"),
                                    (1, "h", 1, None), (1, 2, 1, "h")])
def test_other_values_are_validated_as_always(values: tuple[Any, ...]) -> None:
    fields = dict(zip(("events_seq", "events_hash", "timeline_seq", "timeline_hash"), values, strict=True))
    try:
        expected = ChainHead(**fields)
    except ValueError as exc:
        with pytest.raises(type(exc)):
            chain_head(*values)
        return
    assert _as_built(chain_head(*values)) == _as_built(expected)


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]), st.integers(0, 3),
                          st.sampled_from(["a", "b"])), min_size=2, max_size=2))
def test_two_heads_are_the_same_exactly_when_pydantic_says_they_are_equal(pair: list[tuple[int, str, int, str]]
                                                                          ) -> None:
    a, b = (chain_head(*values) for values in pair)
    assert same_head(a, b) == (a == b)
    assert same_head(a, a) and not same_head(a, None)
