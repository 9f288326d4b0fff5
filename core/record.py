"""`@record`: a frozen dataclass whose `__eq__`, `__hash__` and `__repr__` are shared, not compiled per class.

Python 3.11 compiles every method a dataclass generates from source text (`exec`): six for a frozen one, about
0.35 ms per class. Strata defines over a hundred frozen dataclasses on `strata resume`'s import path, so they were
some 40 ms of a command's start (bench/cli_startup.py). A record lets `dataclasses` generate what depends on the
fields' layout (`__init__`, and the frozen `__setattr__`/`__delattr__` that refuse assignment) and installs three
shared functions that read the fields through a per-class `operator.attrgetter`. They behave as the generated ones
do: equal only to an instance of exactly the same class with equal compared fields, the hash of the same fields,
and `Name(field=value, ...)` of the fields shown in the repr. Everything else (`dataclasses.fields`, `replace`,
`asdict`, pattern matching, pydantic's reading of a dataclass) sees an ordinary frozen dataclass.

    @record
    class Span:
        start: int
        end: int = 0

`@record(slots=True)` gives the class `__slots__`, as `dataclass(slots=True)` does."""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

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
        return _install(dataclasses.dataclass(c, frozen=True, eq=False, repr=False, slots=slots))

    return make if cls is None else make(cls)
