"""core/events.py `finished_result`: a handler's result built without validating values that are already exactly of
their fields' types is the event validation builds (the same `__dict__` with the same value types, the same fields
set), and any value not exactly of its type is validated as always: converted (an int duration becomes a float) or
refused (ValidationError) just as `CallResult(...)` does. It stores and reads back the same."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.events import CallResult, finished_result, parse_event_json, storable_json

VALID: dict[str, Any] = {"batch_id": "b", "call_id": "toolu_1", "tool": "read", "status": "ok", "content": "fine",
                         "is_error": False, "receipt_id": "rcpt_1", "duration_ms": 0.25}


class _Text(str):
    pass


ODD: dict[str, list[Any]] = {
    "batch_id": [_Text("b"), 1, None], "call_id": [_Text("c"), 2, b"c"], "tool": [_Text("t"), None, 0],
    "status": ["denied", "nope", _Text("ok"), None], "content": [_Text("x"), 3, None, b"x", "\ud800"],
    "is_error": [0, 1, "false", None, 1.0], "receipt_id": [_Text("r"), 5, b"r"],
    "duration_ms": [1, True, "0.5", None, float("nan"), -0.0],
}


def _built(make: Any) -> tuple[str, Any]:
    try:
        event = make()
    except ValidationError as exc:
        return "refused", [(e["loc"], e["type"]) for e in exc.errors()]
    return "built", (type(event), [(k, v, type(v)) for k, v in event.__dict__.items()], event.model_fields_set,
                     event.__pydantic_extra__, event.__pydantic_private__)


def _both(values: dict[str, Any]) -> None:
    fast = _built(lambda: finished_result(**values))
    assert fast == _built(lambda: CallResult(**values)), values


def test_each_value_not_exactly_of_its_type_is_validated_as_always() -> None:
    _both(VALID)
    _both({**VALID, "receipt_id": None, "status": "error", "is_error": True})
    for name, odd in ODD.items():
        for value in odd:
            _both({**VALID, name: value})


@settings(max_examples=500, deadline=None)
@given(content=st.text(), is_error=st.booleans(), receipt=st.none() | st.text(max_size=8),
       duration=st.floats(allow_nan=False, allow_infinity=False), ids=st.tuples(st.text(), st.text(), st.text()))
def test_a_result_is_the_event_validation_builds_and_stores_the_same(content: str, is_error: bool,
                                                                     receipt: str | None, duration: float,
                                                                     ids: tuple[str, str, str]) -> None:
    values: dict[str, Any] = {"batch_id": ids[0], "call_id": ids[1], "tool": ids[2],
                              "status": "error" if is_error else "ok", "content": content, "is_error": is_error,
                              "receipt_id": receipt, "duration_ms": duration}
    _both(values)
    fast, validated = finished_result(**values), CallResult(**values)
    try:
        stored = storable_json(validated)
    except Exception as exc:  # text JSON cannot hold (a lone surrogate): refused the same way
        try:
            storable_json(fast)
        except Exception as again:
            assert type(again) is type(exc) and str(again) == str(exc)
        else:
            raise AssertionError("stored what validation's event could not store") from exc
        return
    assert storable_json(fast) == stored
    assert parse_event_json(stored) == fast
