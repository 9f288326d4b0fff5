"""`@record`: a frozen dataclass whose `__eq__`, `__hash__` and `__repr__` are shared, not compiled per class.

Python 3.11 compiles every method a dataclass generates from source text (`exec`): six for a frozen one, about
0.35 ms per class. Strata defines over a hundred frozen dataclasses on `strata resume`'s import path, so they were
some 40 ms of a command's start (bench/cli_startup.py). A record compiles one function, its `__init__` (which
sets each field with `object.__setattr__`, as a frozen dataclass's does; through core/code_cache.py, so the CLI
compiles it once, not at every start), and shares the rest: `__setattr__` and
`__delattr__` that refuse, and `__eq__`, `__hash__` and `__repr__` that read the fields through a per-class
`operator.attrgetter`. They behave as the generated ones do: equal only to an instance of exactly the same class
with equal compared fields, the hash of the same fields, `Name(field=value, ...)` of the fields shown in the repr,
`FrozenInstanceError` on assignment or deletion. A class the shared `__init__` would not fit (a dataclass base, an
`InitVar`, a field with `init=False`) is made by `dataclass(frozen=True)` with only the last three shared.
Everything else (`dataclasses.fields`, `replace`, `asdict`, pattern matching, pydantic's reading of a dataclass)
sees an ordinary frozen dataclass.

    @record
    class Span:
        start: int
        end: int = 0

`@record(slots=True)` gives the class `__slots__`, as `dataclass(slots=True)` does."""

from __future__ import annotations

import copy
import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

from core import code_cache

T = TypeVar("T")

_Key = Callable[[Any], object]


def _getter(names: tuple[str, ...]) -> _Key:
    """The fields' values as one tuple (also for one field or none, as the generated methods compare tuples)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda _self: ()


def _eq(self: Any, other: Any) -> Any:  # a bool, or NotImplemented for another class
    if other.__class__ is self.__class__:
        key: _Key = self.__record_compare__
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(self.__record_hash__(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_repr__)
    return f"{self.__class__.__qualname__}({shown})"


_GIVEN_NO_VALUE = object()
"""The default of an `__init__` parameter whose field has a `default_factory`: call the factory."""


def _plain(cls: type) -> bool:
    """The class is one the shared `__init__` fits: no dataclass base, no InitVar, every field an `__init__` one."""
    if any("__dataclass_fields__" in vars(base) for base in cls.__mro__[1:]):
        return False
    for name, annotation in vars(cls).get("__annotations__", {}).items():
        if "InitVar" in str(annotation):
            return False
        value = vars(cls).get(name)
        if isinstance(value, dataclasses.Field) and not value.init:
            return False
    return True


def _init(cls: type) -> Callable[..., None]:
    """`__init__(self, a, b=default, *, c=...)` in field order, as `dataclass` writes it, setting each field with
    `object.__setattr__`; a field with a `default_factory` calls it when not given; `__post_init__` runs last."""
    scope: dict[str, Any] = {"__set": object.__setattr__, "__given_no_value": _GIVEN_NO_VALUE}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    defaulted = False
    for f in dataclasses.fields(cls):
        value = f.name
        if f.default is not dataclasses.MISSING:
            scope[f"__default_{f.name}"] = f.default
            param = f"{f.name}=__default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"__factory_{f.name}"] = f.default_factory
            param = f"{f.name}=__given_no_value"
            value = f"__factory_{f.name}() if {f.name} is __given_no_value else {f.name}"
        else:
            param = f.name
            if defaulted and not f.kw_only:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        if f.kw_only:
            keyword.append(param)
        else:
            positional.append(param)
            defaulted = defaulted or param != f.name
        body.append(f"    __set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    code_cache.run(f"def __init__({params}):\n" + ("\n".join(body) or "    pass"), scope)
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _refuse_set(self: Any, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_del(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _slots_state(self: Any) -> list[object]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _set_slots_state(self: Any, state: list[object]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)


def _freeze(cls: type[T], *, slots: bool) -> type[T]:
    """The shared `__init__` and refusals on a class `dataclass` made without them; its params then say what it is
    (frozen, with `__init__`, `__eq__` and `__repr__`), so `dataclass` treats it as frozen when it is a base."""
    own = vars(cls)
    if "__setattr__" in own or "__delattr__" in own:
        raise TypeError(f"a record cannot define __setattr__ or __delattr__ ({cls.__qualname__})")
    if "__init__" not in own:
        cls.__init__ = _init(cls)  # type: ignore[method-assign]
    cls.__setattr__ = _refuse_set  # type: ignore[method-assign]
    cls.__delattr__ = _refuse_del  # type: ignore[method-assign]
    if slots:  # pickle's default for slots would set them through the refusing __setattr__
        cls.__getstate__ = _slots_state  # type: ignore[method-assign]
        cls.__setstate__ = _set_slots_state  # type: ignore[attr-defined]
    params = copy.copy(cls.__dataclass_params__)  # type: ignore[attr-defined]
    params.init = params.repr = params.eq = params.frozen = True
    cls.__dataclass_params__ = params  # type: ignore[attr-defined]
    return cls


def _install(cls: type[T]) -> type[T]:
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    own = cls.__dict__
    cls.__record_compare__ = staticmethod(_getter(tuple(f.name for f in fields if f.compare)))  # type: ignore[attr-defined]
    cls.__record_hash__ = staticmethod(_getter(  # type: ignore[attr-defined]
        tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))))
    cls.__record_repr__ = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
    # a method the class body defines is its own, as with `dataclass`
    if "__eq__" not in own:
        cls.__eq__ = _eq  # type: ignore[method-assign]
    if own.get("__hash__") is None:
        cls.__hash__ = _hash  # type: ignore[method-assign]
    if "__repr__" not in own:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T] | None = None, /, *, slots: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    def make(c: type[T]) -> type[T]:
        if not _plain(c):  # a dataclass base, an InitVar, a field left out of __init__: dataclasses' own way
            return _install(dataclasses.dataclass(c, frozen=True, eq=False, repr=False, slots=slots))
        if not c.__doc__ and c.__init__ is object.__init__ and c.__new__ is object.__new__:
            # What `dataclass` would write (the name and the class's signature: `object`'s, as its `__init__` is
            # set below), without reading `object`'s text signature with the tokenizer (~2 ms of a start).
            c.__doc__ = f"{c.__name__}()"
        made = dataclasses.dataclass(c, init=False, eq=False, repr=False, slots=slots)
        return _install(_freeze(made, slots=slots))

    return make if cls is None else make(cls)
