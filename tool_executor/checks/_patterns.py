"""The regular expressions of a JSON Schema (`pattern`, `patternProperties`, and `additionalProperties` beside
`patternProperties`), matched within a time budget.

jsonschema matches them with Python's `re`, a backtracking engine without a time limit: a schema an MCP server sends
(`^(a+)+$`) against an argument the model writes (`aaaa...!`) took exponential time, before dispatch and so before
any deadline, holding the process (every session of a daemon) for hours. These keywords are matched here with the
`regex` engine instead (the same syntax; it stops backtracking of that kind early) under a budget for the whole
check of one call's arguments: a pattern that runs past it makes the call's schema check fail (the call is denied
as unevaluable, with the pattern named), never a hang. The error messages are jsonschema's own."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

BUDGET_S = 1.0
"""How long matching the patterns of one call's schema check may take in all."""

_deadline: ContextVar[float | None] = ContextVar("schema_pattern_deadline", default=None)


class PatternUnusable(Exception):
    """A pattern that could not be matched: over the budget, or not a regular expression the engine reads."""

    def __init__(self, pattern: str, why: str) -> None:
        super().__init__(f"its pattern {pattern[:80]!r} {why}")


@contextlib.contextmanager
def pattern_budget(seconds: float = BUDGET_S) -> Iterator[None]:
    """Every pattern matched within the block shares `seconds` (a match outside any block has `seconds` alone)."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (as `re.search`), within what is left of the budget."""
    import regex  # type: ignore[import-untyped]  # the package ships no type information

    deadline = _deadline.get()
    left = BUDGET_S if deadline is None else deadline - time.monotonic()
    try:
        return regex.search(pattern, text, timeout=max(left, 0.001)) is not None
    except TimeoutError:
        raise PatternUnusable(pattern, f"took longer than {BUDGET_S:g} s to match the arguments") from None
    except regex.error as exc:
        raise PatternUnusable(pattern, f"is not a regular expression Strata can match ({exc})") from None


def pattern(validator: Any, patrn: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def pattern_properties(validator: Any, patterns: Mapping[str, Any], instance: Any,
                       schema: Mapping[str, Any]) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for patrn, subschema in patterns.items():
        for key, value in instance.items():
            if search(patrn, key):
                yield from validator.descend(value, subschema, path=key, schema_path=patrn)


def additional_properties(validator: Any, extra_schema: Any, instance: Any,
                          schema: Mapping[str, Any]) -> Iterator[Any]:
    from jsonschema._utils import extras_msg
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(extra_schema, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], extra_schema, path=extra)
    elif not extra_schema and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(extras, key=str)))


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> Iterator[str]:
    properties = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    for key in instance:
        if key not in properties and not (patterns and search(patterns, key)):
            yield key
