"""The fast schema predicate may only skip work: whenever it says valid, jsonschema must agree."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from core.tools import ToolSpec
from tool_executor.builtin import builtin_tools
from tool_executor.checks.fast_schema import compile_fast
from tool_executor.checks.schema import SchemaValidator, check_schema, make_validator
from tool_executor.verdicts import Deny, Pass

NAMES = st.sampled_from(["path", "n", "content", "x", "timeout_s"])
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.sampled_from([0.0, 1.0, -1.0, math.inf]))


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={
        "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
        "minLength": st.integers(0, 3), "maxLength": st.integers(0, 4),
        "minimum": NUMBERS, "maximum": NUMBERS, "exclusiveMinimum": NUMBERS, "exclusiveMaximum": NUMBERS,
        "description": st.just("annotation"),
    })


SCHEMAS = st.recursive(
    _leaf(),
    lambda inner: st.fixed_dictionaries({"type": st.sampled_from(["object", ["object", "null"]])}, optional={
        "properties": st.dictionaries(NAMES, inner, max_size=3),
        "required": st.lists(NAMES, max_size=3, unique=True),
        "additionalProperties": st.booleans(),
    }),
    max_leaves=6,
)

JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
              st.sampled_from([0.0, 1.0, 2.0, -1.0]), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=4),
                            st.tuples(inner)),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(SCHEMAS, JSON)
def test_fast_valid_implies_jsonschema_valid(schema: dict[str, Any], instance: Any) -> None:
    fast = compile_fast(schema)
    assert fast is not None, schema  # every generated schema is inside the subset
    if fast(instance):
        assert Draft202012Validator(schema).is_valid(instance), (schema, instance)


@settings(max_examples=200, deadline=None)
@given(SCHEMAS, JSON)
def test_the_verdict_is_always_jsonschemas(schema: dict[str, Any], instance: Any) -> None:
    if not isinstance(instance, dict):
        return
    full = Draft202012Validator(schema)
    verdict = check_schema(SchemaValidator(schema, compile_fast(schema), full), instance)
    finite = "nan" not in repr(instance) and "inf" not in repr(instance)  # NaN and infinities: always refused
    assert isinstance(verdict, Pass) == (full.is_valid(instance) and finite), (schema, instance)


def test_builtin_schemas_have_a_fast_path_that_accepts_good_calls() -> None:
    good = {"read_file": {"path": "a.txt"}, "write_file": {"path": "a", "content": ""},
            "edit_file": {"path": "a", "old": "x", "new": ""}, "list_dir": {"path": "."}, "glob": {"pattern": "*"},
            "grep": {"pattern": "x"}, "bash": {"command": "ls", "timeout_s": 5}}
    for spec in builtin_tools():
        fast = compile_fast(spec.input_schema)
        assert fast is not None, spec.name
        assert fast(good[spec.name]), spec.name


def test_the_fast_path_defers_what_it_is_not_sure_of() -> None:
    fast = compile_fast({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
                         "additionalProperties": False})
    assert fast is not None
    assert fast({"n": 1})
    assert not fast({"n": 1.0})  # an integer to jsonschema, but left to it
    assert not fast({"n": True})
    assert not fast({"n": 1, "extra": 2})
    assert not fast({})
    bash = compile_fast(next(s for s in builtin_tools() if s.name == "bash").input_schema)
    assert bash is not None
    assert not bash({"command": "ls", "timeout_s": 0})
    assert not bash({"command": "ls", "timeout_s": 601})
    assert not bash({"command": ""})


def test_schemas_outside_the_subset_get_no_fast_path() -> None:
    for schema in ({"type": "string", "pattern": "^a"}, {"$ref": "#/$defs/x"}, {"enum": [1, 2]},
                   {"type": "object", "additionalProperties": {"type": "string"}}, {"type": "decimal"},
                   {"oneOf": [{"type": "string"}]}, {"type": "array", "items": {"type": "string"}}):
        assert compile_fast(schema) is None, schema



async def _noop_handler(args: Any, ctx: Any) -> Any:
    raise AssertionError("never called")


def _spec(name: str, schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name, name, schema, _noop_handler, "read", "read_only")


def test_equal_schemas_share_one_validator_and_a_broken_one_fails_every_time() -> None:
    """Executors of many sessions (a daemon) reuse the validator built for an equal schema, whatever its key
    order; a schema the meta-schema refuses is refused at every assembly, never remembered as good."""
    a = _spec("t", {"type": "object", "properties": {"n": {"type": "integer"}}})
    b = _spec("u", {"properties": {"n": {"type": "integer"}}, "type": "object"})
    assert make_validator(a) is make_validator(b)
    assert isinstance(check_schema(make_validator(a), {"n": "x"}), Deny)
    broken = _spec("v", {"type": "object", "properties": {"n": {"type": 7}}})
    for _ in range(2):
        with pytest.raises(SchemaError):
            make_validator(broken)


def test_the_schemas_that_ship_with_strata_are_valid_and_not_rechecked_at_every_start() -> None:
    """The built-in tools' and `delegate`'s schemas are constants of this code: checked against the meta-schema
    here, so an executor assembled in a process does not import jsonschema for them (a tool call whose arguments
    the fast predicate cannot decide still gets the full validator)."""
    from core.tools.delegate import delegate_spec
    from tool_executor.checks import schema

    async def handler(args: Any, ctx: Any) -> Any:
        raise AssertionError("not called")

    shipped = [*builtin_tools(), delegate_spec(handler)]
    schema.trust_builtin(shipped)
    schema._cached.cache_clear()  # validators other tests of this process built (and used) are not looked at
    for spec in shipped:
        Draft202012Validator.check_schema(dict(spec.input_schema))
        validator = make_validator(spec)
        assert validator._full is None, spec.name  # not built until a call needs it
    read_file = make_validator(next(t for t in shipped if t.name == "read_file"))
    assert isinstance(check_schema(read_file, {"path": 3}), Deny)
