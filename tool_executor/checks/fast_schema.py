"""A fast "certainly valid" test for the plain schemas tools use, so that the JSON-Schema step costs a few
microseconds per call instead of a full `jsonschema` pass.

`compile_fast(schema)` returns a predicate, or None when the schema uses anything outside a small subset
(type, properties, required, additionalProperties as a boolean, string lengths, numeric bounds, and the
annotations title / description / default / examples). The predicate answers True only when `jsonschema` would
find the instance valid; anything it is not sure about (a float where an integer is asked for, a tuple, a
number type other than int and float) answers False, and the full validator then decides and lists every error.
So the fast path can only skip work, never change a verdict (tests/tool_executor/test_fast_schema.py checks it
against `jsonschema` with generated schemas and instances)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "default", "examples"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "minLength", "maxLength",
                       "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) | _ANNOTATIONS


def _is_number(x: Any) -> bool:
    return type(x) is int or type(x) is float


_TYPES: dict[str, Predicate] = {
    "string": lambda x: type(x) is str,
    "integer": lambda x: type(x) is int,  # 1.0 is an integer to jsonschema too, but that is left to it
    "number": _is_number,
    "boolean": lambda x: type(x) is bool,
    "null": lambda x: x is None,
    "object": lambda x: type(x) is dict,
    "array": lambda x: type(x) is list,
}


_OTHER_JSON = frozenset({str, bool, type(None), dict, list})
"""Types jsonschema treats as JSON values other than numbers (bool is not a number to it)."""
_SCALARS_AND_LISTS = frozenset({str, int, float, bool, type(None), list})


class _Unsupported(Exception):
    pass


def _bound(schema: Mapping[str, Any], key: str) -> int | float | None:
    value = schema.get(key)
    if value is None:
        return None
    if not _is_number(value):
        raise _Unsupported(key)
    return value  # type: ignore[no-any-return]


def _length(schema: Mapping[str, Any], key: str) -> int | None:
    value = schema.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise _Unsupported(key)
    return value


def _compile(schema: Any) -> Predicate:
    if schema is True:
        return lambda x: True
    if not isinstance(schema, Mapping) or not set(schema) <= _KEYWORDS:
        raise _Unsupported("keyword")
    checks: list[Predicate] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not kinds or any(k not in _TYPES for k in kinds):
            raise _Unsupported("type")
        tests = tuple(_TYPES[k] for k in kinds)
        checks.append(tests[0] if len(tests) == 1 else (lambda x: any(t(x) for t in tests)))

    low, high = _length(schema, "minLength"), _length(schema, "maxLength")
    if low is not None or high is not None:
        lo, hi = low or 0, high

        def lengths(x: Any) -> bool:  # jsonschema ignores string keywords on other types
            return type(x) is not str or (len(x) >= lo and (hi is None or len(x) <= hi))

        checks.append(lengths)

    bounds = [(_bound(schema, k), k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
    if any(value is not None for value, _ in bounds):
        def numeric(x: Any) -> bool:
            if not _is_number(x):  # numeric keywords do not apply to other JSON types; any other type: unsure
                return type(x) in _OTHER_JSON
            for value, key in bounds:  # the same comparisons jsonschema makes, so NaN and inf agree too
                if value is None:
                    continue
                if ((key == "minimum" and x < value) or (key == "maximum" and x > value)
                        or (key == "exclusiveMinimum" and x <= value)
                        or (key == "exclusiveMaximum" and x >= value)):
                    return False
            return True

        checks.append(numeric)

    properties = schema.get("properties")
    required = schema.get("required")
    additional = schema.get("additionalProperties", True)
    if properties is not None or required is not None or additional is not True:
        if properties is not None and not isinstance(properties, Mapping):
            raise _Unsupported("properties")
        if required is not None and (not isinstance(required, list)
                                     or any(type(r) is not str for r in required)):
            raise _Unsupported("required")
        if additional is not True and additional is not False:
            raise _Unsupported("additionalProperties")
        subs = {name: _compile(sub) for name, sub in (properties or {}).items()}
        needed = tuple(required or ())
        closed = additional is False

        def members(x: Any) -> bool:
            if type(x) is not dict:  # object keywords do not apply to other JSON types; any other type: unsure
                return type(x) in _SCALARS_AND_LISTS
            for name in needed:
                if name not in x:
                    return False
            for name, value in x.items():
                test = subs.get(name)
                if test is None:
                    if closed:
                        return False
                elif not test(value):
                    return False
            return True

        checks.append(members)

    if not checks:
        return lambda x: True
    if len(checks) == 1:
        return checks[0]
    return lambda x: all(check(x) for check in checks)


def compile_fast(schema: Mapping[str, Any]) -> Predicate | None:
    """The predicate for `schema`, or None if the schema is outside the subset (the full validator always
    runs then)."""
    try:
        return _compile(schema)
    except _Unsupported:
        return None
