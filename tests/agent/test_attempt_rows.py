"""A model attempt's timeline row (agent/timeline_rows.py): staged without the typed rows when the attempt's
fields already have the types those rows keep, and then the very entry the typed row gives; an attempt with
other types (an int duration, a float token count) still goes through the typed row, which converts them."""

from __future__ import annotations

import json

import pytest

from agent.evidence_ledger import _attempt_row
from agent.timeline_rows import _plain_attempt_entry, attempt_row, plain_attempt
from core.masking import Masker
from core.model import ModelAttempt, Usage

MASKER = Masker(b"k" * 32)

USUAL = [
    ModelAttempt(number=1, outcome="ok", duration_ms=12.34567, message="scripted turn 1", usage=Usage()),
    ModelAttempt(number=1, outcome="ok", duration_ms=3.0, message="", request_id="req_1",
                 usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2, cache_write_tokens=1)),
    ModelAttempt(number=2, outcome="retry", duration_ms=80.5, message="overloaded (529)", error_kind="overloaded",
                 status_code=529, retry_after_s=1.5, delay_s=0.75),
    ModelAttempt(number=3, outcome="error", duration_ms=0.25, message="api key sk-ant-api03-" + "x" * 40,
                 error_kind="auth", status_code=401),
]


@pytest.mark.parametrize("attempt", USUAL, ids=range(len(USUAL)))
def test_an_attempt_with_the_usual_types_is_staged_as_its_typed_rows_entry(attempt: ModelAttempt) -> None:
    plain = _plain_attempt_entry(attempt, 4, MASKER)
    assert plain is not None and plain == attempt_row(attempt, 4, MASKER).entry()


@pytest.mark.parametrize("attempt", [
    ModelAttempt(number=1, outcome="ok", duration_ms=7, message="an int duration"),  # type: ignore[arg-type]
    ModelAttempt(number=1, outcome="ok", duration_ms=1.0, message="m",
                 usage=Usage(input_tokens=3.0)),  # type: ignore[arg-type]
    ModelAttempt(number=1, outcome="ok", duration_ms=1.0, message="m", status_code=True),  # type: ignore[arg-type]
])
def test_other_types_go_through_the_typed_row(attempt: ModelAttempt) -> None:
    assert _plain_attempt_entry(attempt, 1, MASKER) is None
    assert attempt_row(attempt, 1, MASKER).entry().kind == "model_attempt"


_OTHER = [
    ModelAttempt(number=1, outcome="ok", duration_ms=7, message="an int duration"),  # type: ignore[arg-type]
    ModelAttempt(number=1, outcome="ok", duration_ms=1.0, message="m",
                 usage=Usage(input_tokens=3.0)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("attempt", [*USUAL, *_OTHER], ids=range(len(USUAL) + len(_OTHER)))
def test_the_ledgers_attempt_row_keeps_the_typed_rows_duration_and_usage(attempt: ModelAttempt) -> None:
    """The evidence ledger's row takes the duration and usage without the typed row when `plain_attempt` can: the
    same values, of the same types, as the typed row keeps (and the typed row's when it cannot)."""
    typed = attempt_row(attempt, 4, MASKER)
    row = _attempt_row(attempt, 4, MASKER)
    expected = (typed.duration_ms, None if typed.usage is None else typed.usage.model_dump())
    assert (row["duration_ms"], row["usage"]) == expected
    assert type(row["duration_ms"]) is type(expected[0])
    assert json.dumps(row) == json.dumps({**row, "duration_ms": expected[0], "usage": expected[1]})
    plain = plain_attempt(attempt, 4)
    assert plain is None or plain == expected
