"""Whether an event's compact stored JSON reads back as the very event, told from the event's own values without
parsing the JSON (core/events.py `storable_json`).

`storable_json` keeps the compact JSON (no None fields, nothing reading gives back) only when reading it gives an
event equal to the one given, and it used to learn that by parsing the JSON back: on the store's connection thread,
inside every commit, three times a read-only turn. Most events answer the question by their types alone: a field
of type `str` that holds a `str` reads back as that `str`, a `dict[str, Any]` of plain JSON values (str, int,
finite float, bool, None, list, dict with str keys, not too deep) reads back equal, a field left out reads back as
its default. `reads_back` says True only in such cases, where the parse would have found the very same event; for
anything else (a type it does not know, a validator it was not told about, a value that is not plain JSON, NaN, a
tuple inside a tool's arguments, nesting past `_MAX_DEPTH`) it says False, and `storable_json` parses as before,
so what is stored, and every refusal, stays what it was (tests/core/test_event_readback.py holds the two equal)."""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

Check = Callable[[Any], bool]

_MAX_DEPTH = 48
"""How deep plain values may nest and still be told apart without parsing; well under the decoder's limit (~200,
counting the event's own levels), which the parse meets for deeper values."""
_INT_LIMIT = 1 << 63


def plain(value: Any, depth: int = 0) -> bool:
    """Whether `value` is JSON that reads back equal and of the same types: str, int (64-bit), finite float, bool,
    None, and lists and str-keyed dicts of them."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_INT_LIMIT <= value < _INT_LIMIT)
    if kind is float:
        return math.isfinite(value)
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        for k, v in value.items():  # noqa: SIM110  # loops, not all() of a generator: cheaper, run for every call
            if type(k) is not str or not plain(v, depth + 1):
                return False
        return True
    if kind is list:
        for v in value:  # noqa: SIM110
            if not plain(v, depth + 1):
                return False
        return True
    return False


def same_plain(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether `a` and `b` are plain JSON values (as `plain` says, but of any size of integer) that `json.dumps`
    writes as the very same text: the same types all the way down, the same keys in the same order, the same
    numbers (a float by its repr: 0.0 is not -0.0). False also where it cannot tell (then compare the text)."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is str or kind is bool or kind is int:
        return bool(a == b)
    if a is None:
        return True
    if kind is float:
        return math.isfinite(a) and float.__repr__(a) == float.__repr__(b)
    if depth >= _MAX_DEPTH:
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            if type(ka) is not str or type(kb) is not str or ka != kb or not same_plain(va, vb, depth + 1):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        for va, vb in zip(a, b, strict=True):  # noqa: SIM110
            if not same_plain(va, vb, depth + 1):
                return False
        return True
    return False


def _never(_: Any) -> bool:
    return False


def _is_str(value: Any) -> bool:
    return type(value) is str


def _is_int(value: Any) -> bool:
    return type(value) is int and -_INT_LIMIT <= value < _INT_LIMIT


def _is_float(value: Any) -> bool:
    return type(value) is float and math.isfinite(value)


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _is_plain_dict(value: Any) -> bool:
    return type(value) is dict and plain(value, 1)


def _is_text_dict(value: Any) -> bool:
    if type(value) is not dict:
        return False
    for k, v in value.items():  # noqa: SIM110
        if type(k) is not str or type(v) is not str:
            return False
    return True


def _tuple_of(item: Check) -> Check:
    def check(value: Any) -> bool:
        if type(value) is not tuple:
            return False
        for v in value:  # noqa: SIM110
            if not item(v):
                return False
        return True

    return check


_SCALARS: dict[Any, Check] = {str: _is_str, int: _is_int, float: _is_float, bool: _is_bool, Any: plain}


def value_check(annotation: Any) -> Check:
    """A check of a value of a field typed `annotation`: True only when its JSON (in a stored event: None fields
    of models left out) reads back as an equal value. `_never` for a type it does not know."""
    found = _SCALARS.get(annotation)
    if found is not None:
        return found
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return model_check(annotation)
    if origin is Literal:
        if not all(type(a) is str for a in args):
            return _never
        allowed = frozenset(args)
        return lambda value: type(value) is str and value in allowed
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_of(value_check(args[0]))
    if origin is dict and args and args[0] is str:
        if args[1] is Any:
            return _is_plain_dict
        if args[1] is str:
            return _is_text_dict
        return _never
    if origin is Annotated:
        return _annotated_union(args)
    if origin is Union or origin is types.UnionType:
        rest = [a for a in args if a is not type(None)]
        if len(rest) == len(args):  # no None: only words of several Literals (`CheckName`)
            return _words(rest)
        inner = value_check(rest[0]) if len(rest) == 1 else _words(rest)
        return lambda value: value is None or inner(value)
    return _never


def _words(members: list[Any]) -> Check:
    """Several Literals of text, as one."""
    return value_check(_one_literal(members))


def _annotated_union(args: tuple[Any, ...]) -> Check:
    """A union of models told apart by a discriminator (a content block): the model of the value's own class, when
    its tag is that class's (the tag picks the class on reading)."""
    union, metadata = args[0], args[1:]
    if (get_origin(union) not in (Union, types.UnionType) or len(metadata) != 1
            or not isinstance(metadata[0], FieldInfo) or type(metadata[0].discriminator) is not str
            or metadata[0].metadata):
        return _never
    members = get_args(union)
    if not all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        return _never
    by_class: dict[type, Check] = {m: model_check(m) for m in members}
    return lambda value: (check := by_class.get(type(value))) is not None and check(value)


# -- models ------------------------------------------------------------------------------------------------------

LeftOut = Callable[[Any, Any], bool]
"""Whether reading a model whose JSON leaves a field out gives `value` back for it: (the model, value) -> bool."""

_NO_DEFAULT: Any = object()
_Field = tuple[str, type | None, frozenset[str] | None, Check, Any, LeftOut | None, Callable[[Any], Any] | None]
"""A field: its name; the exact type a value written must have (then also one of `words`, when given), or else
the check of a value written; its default, or what a validator fills in, when it is left out (`_NO_DEFAULT` and
None: reading fails or gives something else); its `exclude_if`. Plain tuples, the type tested inline: this runs for
every field of every event a commit stores."""

_VALIDATED: dict[type, tuple[frozenset[str], dict[str, LeftOut]]] = {}
"""Models whose validators this module was told about: the validators' names (a model with others, or more, is
not told apart here) and the fields they fill in on reading. Registered by core/events.py."""

_FIELDS: dict[type, list[_Field] | None] = {}
_PLAIN_CONFIG = frozenset({"frozen", "extra", "defer_build"})
"""The model settings that change nothing about how a value is written or read (any other, a string stripped or
a strict mode, and the model is not told apart here)."""


def register(cls: type[BaseModel], validators: frozenset[str], filled: dict[str, LeftOut]) -> None:
    """Say that `cls`'s model validators are exactly `validators`, that they change nothing but the fields in
    `filled` when the JSON leaves those out, and how to tell that what they fill in is the model's value."""
    _VALIDATED[cls] = (validators, filled)
    _FIELDS.pop(cls, None)


def model_check(cls: type[BaseModel]) -> Check:
    """A check of a model value of class `cls` (None fields left out of its JSON, as in a stored event)."""
    return lambda model: reads_back(cls, model)


def reads_back(cls: type[BaseModel], model: Any, left_out: frozenset[str] = frozenset()) -> bool:
    """Whether `model`, written as JSON without its None fields, its `exclude_if` fields and those in `left_out`,
    reads back (as `cls`) as a model equal to it. False also where it cannot tell."""
    if cls in _FIELDS:
        fields = _FIELDS[cls]
    else:
        _FIELDS[cls] = None  # a model that holds itself is not told apart here
        fields = _FIELDS[cls] = _fields(cls)
    if fields is None or type(model) is not cls or model.__pydantic_extra__ or model.__pydantic_private__ is not None:
        return False
    values = model.__dict__
    if len(values) != len(fields):
        return False
    try:
        for name, exact, words, check, default, filled, exclude_if in fields:
            value = values[name]
            if value is None or name in left_out or (exclude_if is not None and exclude_if(value)):
                if filled is not None:
                    if not filled(model, value):
                        return False
                elif default is _NO_DEFAULT or not value == default:  # noqa: SIM201  # `==`, as the comparison
                    return False
            elif exact is not None:
                if type(value) is not exact or (words is not None and value not in words):
                    return False
            elif not check(value):
                return False
    except Exception:  # an odd value's own __eq__ (or the like): cannot tell
        return False
    return True


def _fields(cls: type[BaseModel]) -> list[_Field] | None:
    validators, filled = _VALIDATED.get(cls, (frozenset(), {}))
    decorators = cls.__pydantic_decorators__
    if (decorators.validators or decorators.field_validators or decorators.root_validators
            or decorators.field_serializers or decorators.model_serializers or decorators.computed_fields
            or frozenset(decorators.model_validators) != validators
            or not _PLAIN_CONFIG.issuperset(cls.model_config) or cls.model_config.get("extra") == "allow"):
        return None
    fields: list[_Field] = []
    for name, info in cls.model_fields.items():
        if (info.alias is not None or info.serialization_alias is not None or info.exclude or info.metadata
                or info.validation_alias is not None):
            return None  # constraints, serializers, aliases: not told apart here
        default: Any = _NO_DEFAULT
        fill: LeftOut | None = None
        if name in filled:
            fill = filled[name]
        elif info.default is not PydanticUndefined:
            default = info.default
        elif info.default_factory is not None and not info.default_factory_takes_validated_data:
            fill = _made_by(info.default_factory)  # type: ignore[arg-type]
        exact, words, check = _written(info.annotation)
        fields.append((name, exact, words, check, default, fill, info.exclude_if))
    return fields


def _written(annotation: Any) -> tuple[type | None, frozenset[str] | None, Check]:
    """How a field's value that is not None is checked: by its exact type (and words), or by a check. A None value
    never reaches it: the stored JSON leaves None fields out."""
    if get_origin(annotation) in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else _one_literal(rest)
    if annotation is str or annotation is bool:
        return annotation, None, _never
    if get_origin(annotation) is Literal and all(type(a) is str for a in get_args(annotation)):
        return str, frozenset(get_args(annotation)), _never
    return None, None, value_check(annotation)


def _one_literal(members: list[Any]) -> Any:
    """Several Literals of text as one Literal (anything else as an annotation no check knows)."""
    if not all(get_origin(m) is Literal for m in members):
        return object
    return Literal[tuple(w for m in members for w in get_args(m))]


def _made_by(factory: Callable[[], Any]) -> LeftOut:
    return lambda _model, value: bool(value == factory())


def same(value: Any, given: Any) -> bool:
    """`value == given`, as the comparison of the event read back with the event makes it."""
    try:
        return bool(value == given)
    except Exception:  # an odd value's own __eq__: not told apart here
        return False
