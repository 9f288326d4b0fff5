"""The schema check matches JSON Schema's patterns with a time limit (tool_executor/checks/_patterns.py) instead
of jsonschema's `re`: its verdicts and messages must be jsonschema's own, and a pattern that backtracks without end
is cut at the budget, the call denied as unevaluable."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from core.tools import ToolSpec
from tool_executor.checks.schema import check_schema, make_validator
from tool_executor.verdicts import Deny, Pass

PATTERNS = st.sampled_from(["^a", "b$", "^[a-c]+$", "x|y", r"^\d{2}$", "(ab)+", "[^a]", ""])
KEYS = st.text(alphabet="abxy12", max_size=4)


async def _noop(args: Any, ctx: Any) -> None:
    return None


def _verdict(schema: dict[str, Any], args: dict[str, Any]) -> Pass | Deny:
    return check_schema(make_validator(ToolSpec("t", "", schema, _noop, safety="read", effect="read_only")), args)


def _jsonschemas(schema: dict[str, Any], args: dict[str, Any]) -> Pass | Deny:
    errors = sorted(Draft202012Validator(schema).iter_errors(args),
                    key=lambda e: (list(map(str, e.absolute_path)), e.message))
    reasons = tuple(f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors)
    return Deny("schema", reasons) if reasons else Pass()


@settings(max_examples=300, deadline=None)
@given(value=PATTERNS, keyed=st.dictionaries(PATTERNS, st.just({"type": "string"}), max_size=2),
       extra=st.booleans(), args=st.dictionaries(KEYS, st.one_of(KEYS, st.integers(0, 3)), max_size=4))
def test_pattern_keywords_decide_and_word_their_errors_as_jsonschema_does(
        value: str, keyed: dict[str, Any], extra: bool, args: dict[str, Any]) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string", "pattern": value}},
                              "patternProperties": keyed, "additionalProperties": extra,
                              "propertyNames": {"pattern": value or "."}}
    assert _verdict(schema, args) == _jsonschemas(schema, args)


def test_a_pattern_that_backtracks_without_end_is_cut_at_the_budget_and_the_call_denied() -> None:
    schema = {"type": "object", "properties": {"w": {"type": "string", "pattern": "^(a|aa)+$"}}}
    started = time.monotonic()
    verdict = _verdict(schema, {"w": "a" * 60 + "b"})
    assert time.monotonic() - started < 10  # the budget is 1 s (Python's `re` takes hours)
    assert isinstance(verdict, Deny) and verdict.check == "schema"
    assert "cannot be evaluated" in verdict.reasons[0] and "^(a|aa)+$" in verdict.reasons[0], verdict
