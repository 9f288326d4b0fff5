"""Step 5: JSON Schema (Draft 2020-12). Flags, never fixes: every validation error is listed.

Plain schemas also get a fast "certainly valid" predicate (tool_executor/checks/fast_schema.py); when it is not
sure, the full validator decides, so the verdict is always jsonschema's."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from core.hashing import canonical_json
from core.tools import ToolSpec
from tool_executor.checks._patterns import PatternUnusable, pattern_budget
from tool_executor.checks.fast_schema import Predicate, compile_fast
from tool_executor.verdicts import Deny, Pass, Verdict

if TYPE_CHECKING:  # jsonschema is imported when a schema is first checked or a call needs the full validator
    from jsonschema import Draft202012Validator

_PASS = Pass()


class SchemaValidator:
    """A schema's full validator (built when first needed: most calls are decided by `fast`) and its fast
    predicate."""

    __slots__ = ("_full", "fast", "schema")

    def __init__(self, schema: dict[str, Any], fast: Predicate | None,
                 full: Draft202012Validator | None = None) -> None:
        self.schema = schema
        self.fast = fast
        """True only for instances `full` accepts; None when the schema is outside the fast subset."""
        self._full = full

    @property
    def full(self) -> Draft202012Validator:
        if self._full is None:
            self._full = _bounded_validator()(self.schema)
        return self._full


@functools.cache
def _bounded_validator() -> type[Draft202012Validator]:
    """Draft 2020-12 with its regular expressions matched within a time budget (tool_executor/checks/_patterns.py)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    from tool_executor.checks import _patterns

    bounded: type[Draft202012Validator] = extend(  # type: ignore[no-untyped-call]  # the stub leaves it untyped
        Draft202012Validator, {"pattern": _patterns.pattern, "patternProperties": _patterns.pattern_properties,
                               "additionalProperties": _patterns.additional_properties})
    return bounded


_CHECKED: set[str] = set()
"""Schemas (canonical JSON) that need no check against the meta-schema when an executor is assembled: the
built-in tools' constant schemas (`trust_builtin`), which tests/tool_executor/test_fast_schema.py checks."""


def trust_builtin(specs: list[ToolSpec]) -> None:
    """The built-in tools' schemas are part of this code: checked by the test suite, not at every start."""
    _CHECKED.update(canonical_json(dict(spec.input_schema)) for spec in specs)


def meta_schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why `schema` is not a valid JSON Schema (Draft 2020-12), or None; checked once per process for each schema
    (about a millisecond per subschema), and a schema found valid is not checked again when an executor is
    assembled with it (`make_validator`)."""
    try:
        text = canonical_json(dict(schema))
    except (TypeError, ValueError, RecursionError):
        return "not JSON"
    if text in _CHECKED:
        return None
    problem = _meta_problem(text)
    if problem is None:
        _CHECKED.add(text)
    return problem


@functools.lru_cache(maxsize=256)
def _meta_problem(schema_json: str) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as exc:
        return f"not a valid JSON Schema ({exc.message[:200]})"
    return None


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
    return _build(json.loads(schema_json), checked=schema_json in _CHECKED)


def _build(schema: dict[str, Any], *, checked: bool = False) -> SchemaValidator:
    if not checked:
        from jsonschema import Draft202012Validator

        Draft202012Validator.check_schema(schema)
    return SchemaValidator(schema, compile_fast(schema))


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
    """A schema that passes the meta-schema can still fail to evaluate (a `$ref` to a remote document, which is
    never fetched, a cycle of references that never descends into the arguments, or a `pattern` that takes longer
    than its budget to match, as an MCP server may send):
    the call is denied with the reason, never run unchecked, and the session goes on."""
    try:
        return _check(validator, args)
    except RecursionError:
        return _unevaluable("a reference cycle")
    except PatternUnusable as exc:
        return _unevaluable(str(exc))
    except Exception as exc:
        from referencing.exceptions import Unresolvable  # jsonschema's: imported once it has raised

        if not isinstance(exc, Unresolvable):
            raise
        return _unevaluable(f"an unresolvable reference: {exc}")


def _unevaluable(detail: str) -> Deny:
    return Deny("schema", (f"(arguments): the tool's input schema cannot be evaluated ({detail[:200]})",))


def _check(validator: SchemaValidator, args: Mapping[str, Any]) -> Verdict:
    bad = _not_numbers(args)
    fast = validator.fast
    if not bad and fast is not None and fast(args):
        return _PASS
    with pattern_budget():  # the patterns the full validator matches, all of this call's together
        if not bad and validator.full.is_valid(args):
            return _PASS
        errors = sorted(validator.full.iter_errors(dict(args)),
                        key=lambda e: (list(map(str, e.absolute_path)), e.message))
    reasons = tuple(bad) + tuple(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors)
    return Deny("schema", reasons) if reasons else _PASS
