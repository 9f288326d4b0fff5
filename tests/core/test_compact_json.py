"""core/events.py `compact_json`, the serializer asked directly, writes what `model_dump_json(exclude_none=True,
exclude=...)` writes, for every kind of event the stores keep and the exclusions `storable_json` uses; and fails
the same way for a value that cannot be serialised."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from core.events import (
    BatchCompleted,
    BatchProposed,
    CallResult,
    PlannedCall,
    SessionStarted,
    TokenUsage,
    UserMessage,
    _stored_exclude,
    compact_json,
)
from core.messages import TextBlock, ToolUseBlock

_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                   max_size=3), max_leaves=8)


def _same(event: Any, left_out: Any) -> None:
    assert compact_json(event, left_out) == event.model_dump_json(exclude_none=True, exclude=left_out)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), value=_values, is_error=st.booleans(), duration=st.none() | st.floats(),
       receipt=st.none() | st.text(max_size=5), refused=st.lists(st.text(max_size=5), max_size=2))
def test_each_kind_of_event_is_written_as_model_dump_json_writes_it(text: str, value: Any, is_error: bool,
                                                                     duration: float | None, receipt: str | None,
                                                                     refused: list[str]) -> None:
    use = ToolUseBlock(id="toolu_1", name="tool", input={"v": value})
    call = PlannedCall(call_id="toolu_1", tool="tool", input={"v": value}, input_sha256="h", refused=tuple(refused))
    events: list[Any] = [
        BatchCompleted(batch_id=text),
        BatchProposed(batch_id=text, content=(TextBlock(text=text), use), calls=(call,),
                      usage=TokenUsage(input_tokens=3) if is_error else None),
        BatchProposed(batch_id=text, content=(use,)),
        CallResult(batch_id="b", call_id="toolu_1", tool="tool", status="error" if is_error else "ok", content=text,
                   is_error=is_error, receipt_id=receipt, duration_ms=duration),
        UserMessage(text=text),
        SessionStarted(session_id=text, mode="headless", workspace="/w", model="m", max_turns=3, plan_digest="p"),
    ]
    for event in events:
        for left_out in (_stored_exclude(event), None, {"calls": {"__all__": {"input_sha256"}}}):
            _same(event, left_out)


def test_a_value_that_cannot_be_serialised_fails_the_same_way() -> None:
    odd = BatchCompleted.model_construct(batch_id=object())
    with pytest.raises(PydanticSerializationError) as direct:
        compact_json(odd, None)
    with pytest.raises(PydanticSerializationError) as dumped:
        odd.model_dump_json(exclude_none=True, exclude=None)
    assert str(direct.value) == str(dumped.value)


def test_a_value_of_an_unexpected_type_warns_the_same_way() -> None:
    odd = BatchCompleted.model_construct(batch_id=5)
    with pytest.warns(UserWarning) as direct:
        direct_text = compact_json(odd, None)
    with pytest.warns(UserWarning) as dumped:
        dumped_text = odd.model_dump_json(exclude_none=True, exclude=None)
    assert direct_text == dumped_text
    assert [str(w.message) for w in direct] == [str(w.message) for w in dumped]
