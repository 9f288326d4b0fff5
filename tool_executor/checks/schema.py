"""Step 5: JSON Schema (Draft 2020-12). Flags, never fixes: every validation error is listed.

Plain schemas also get a fast "certainly valid" predicate (tool_executor/checks/fast_schema.py); when it is not
sure, the full validator decides, so the verdict is always jsonschema's."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from core.hashing import canonical_json
from core.tools import ToolSpec
from tool_executor.checks.fast_schema import Predicate, compile_fast
from tool_executor.verdicts import Deny, Pass, Verdict

_PASS = Pass()


@dataclass(frozen=True)
class SchemaValidator:
    full: Draft202012Validator
    fast: Predicate | None
    """True only for instances `full` accepts; None when the schema is outside the fast subset."""


def make_validator(spec: ToolSpec) -> SchemaValidator:
    """Built when the executor is assembled; a broken schema fails there, not per call. Shared by every executor
    of the process with the same schema (a daemon assembles one per session: checking a schema against the
    meta-schema costs milliseconds, validating a call microseconds)."""
    schema = dict(spec.input_schema)
    try:
        text = canonical_json(schema)
    except (TypeError, ValueError):  # not JSON: checked (and refused) as it is, never cached
        return _build(schema)
    return _cached(text)


@functools.lru_cache(maxsize=1024)
def _cached(schema_json: str) -> SchemaValidator:
    """A validator is never changed after it is built, so one serves every executor (exceptions are not cached:
    a broken schema fails each time it is used)."""
    return _build(json.loads(schema_json))


def _build(schema: dict[str, Any]) -> SchemaValidator:
    Draft202012Validator.check_schema(schema)
    return SchemaValidator(Draft202012Validator(schema), compile_fast(schema))


def _not_numbers(args: Mapping[str, Any]) -> list[str]:
    """Where NaN or an infinity stands: JSON has no such numbers, and every bound compares false with NaN.
    Iterative: arguments may nest deeper than Python's recursion allows."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in args.items()]
    while stack:
        path, value = stack.pop()
        kind = type(value)
        if kind is float:
            if not math.isfinite(value):
                found.append(f"{path}: {value!r} is not a JSON number")
        elif kind is dict:
            stack.extend((f"{path}/{k}", v) for k, v in value.items())
        elif kind is list or kind is tuple:
            stack.extend((f"{path}/{i}", v) for i, v in enumerate(value))
    return sorted(found)


def check_schema(validator: SchemaValidator, args: Mapping[str, Any]) -> Verdict:
    bad = _not_numbers(args)
    fast = validator.fast
    if not bad and ((fast is not None and fast(args)) or validator.full.is_valid(args)):
        return _PASS
    errors = sorted(validator.full.iter_errors(dict(args)),
                    key=lambda e: (list(map(str, e.absolute_path)), e.message))
    reasons = tuple(bad) + tuple(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors)
    return Deny("schema", reasons) if reasons else _PASS
