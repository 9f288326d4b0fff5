"""Step 5: JSON Schema (Draft 2020-12). Flags, never fixes: every validation error is listed.

Plain schemas also get a fast "certainly valid" predicate (tool_executor/checks/fast_schema.py); when it is not
sure, the full validator decides, so the verdict is always jsonschema's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

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
    """Built once per tool when the executor is assembled; a broken schema fails there, not per call."""
    schema = dict(spec.input_schema)
    Draft202012Validator.check_schema(schema)
    return SchemaValidator(Draft202012Validator(schema), compile_fast(schema))


def check_schema(validator: SchemaValidator, args: Mapping[str, Any]) -> Verdict:
    fast = validator.fast
    if (fast is not None and fast(args)) or validator.full.is_valid(args):
        return _PASS
    errors = sorted(validator.full.iter_errors(dict(args)),
                    key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return _PASS
    reasons = tuple(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors)
    return Deny("schema", reasons)
