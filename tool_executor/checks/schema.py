"""Step 5: JSON Schema (Draft 2020-12). Flags, never fixes: every validation error is listed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from core.tools import ToolSpec
from tool_executor.verdicts import Deny, Pass, Verdict

_PASS = Pass()


def make_validator(spec: ToolSpec) -> Draft202012Validator:
    """Built once per tool when the executor is assembled; a broken schema fails there, not per call."""
    Draft202012Validator.check_schema(dict(spec.input_schema))
    return Draft202012Validator(dict(spec.input_schema))


def check_schema(validator: Draft202012Validator, args: Mapping[str, Any]) -> Verdict:
    if validator.is_valid(args):
        return _PASS
    errors = sorted(validator.iter_errors(dict(args)), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if not errors:
        return Pass()
    reasons = tuple(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors)
    return Deny("schema", reasons)
