"""`@record` (core/record.py) behaves as `@dataclass(frozen=True)` does, with its comparison, hash and repr
shared by every record class instead of compiled for each."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable

import pytest

from core.record import record


@record
class Span:
    start: int
    end: int = 0
    note: str = dataclasses.field(default="", compare=False)
    secret: str = dataclasses.field(default="", repr=False)


@dataclasses.dataclass(frozen=True)
class SpanDataclass:
    start: int
    end: int = 0
    note: str = dataclasses.field(default="", compare=False)
    secret: str = dataclasses.field(default="", repr=False)


@record
class Other:
    start: int
    end: int = 0


@record
class Wider(Span):
    extra: tuple[int, ...] = ()


@record(slots=True)
class Slotted:
    name: str
    items: list[object] = dataclasses.field(default_factory=list)


@record
class Empty:
    pass


@record
class One:
    value: int


@record
class OwnRepr:
    value: int

    def __repr__(self) -> str:
        return "mine"


@pytest.mark.parametrize("make", [Span, SpanDataclass])
def test_a_record_compares_hashes_and_shows_itself_as_a_frozen_dataclass_does(make: Callable[..., object]) -> None:
    a, b = make(1, 2, note="x", secret="s"), make(1, 2, note="y", secret="s")
    assert a == b  # `note` is not compared (`secret` is, below)
    assert not a != b  # noqa: SIM202 (the shared __eq__ answers != too)
    assert hash(make(1, 2, note="x")) == hash(make(1, 2, note="y"))
    assert a != make(1, 3) and make(1, 2, secret="s") != make(1, 2, secret="t")
    assert repr(a) == f"{type(a).__qualname__}(start=1, end=2, note='x')"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.start = 5  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.start  # type: ignore[attr-defined]
    assert {a, b, make(1, 2, secret="s")} == {a} != {make(1, 2)}


def test_a_record_equals_only_an_instance_of_exactly_its_class() -> None:
    assert Span(1, 2) != Other(1, 2) and Other(1, 2) != Span(1, 2)
    assert Span(1, 2) != Wider(1, 2) and Wider(1, 2) != Span(1, 2)
    assert Span(1, 2) != (1, 2) and Span(1, 2).__eq__((1, 2)) is NotImplemented
    assert Wider(1, 2, extra=(3,)) == Wider(1, 2, extra=(3,)) != Wider(1, 2, extra=(4,))
    assert repr(Wider(1, extra=(3,))) == "Wider(start=1, end=0, note='', extra=(3,))"


def test_records_share_their_comparison_hash_and_repr_rather_than_compiling_their_own() -> None:
    for cls in (Span, Other, Wider, Slotted, Empty, One):
        assert cls.__eq__ is Span.__eq__ and cls.__hash__ is Span.__hash__, cls
        assert cls.__repr__ is Span.__repr__, cls
    assert SpanDataclass.__eq__ is not Span.__eq__  # what a dataclass compiles for itself
    assert repr(OwnRepr(1)) == "mine"  # a method of the class body stays its own


def test_a_record_of_one_field_or_none_compares_as_a_tuple_of_its_fields() -> None:
    assert One(1) == One(1) != One(2) and hash(One(1)) == hash((1,))
    assert Empty() == Empty() and hash(Empty()) == hash(()) and repr(Empty()) == "Empty()"


def test_a_slotted_record_has_slots_and_its_repr_survives_a_cycle() -> None:
    s = Slotted("a")
    assert not hasattr(s, "__dict__") and Slotted.__slots__ == ("name", "items")
    s.items.append(s)
    assert repr(s) == "Slotted(name='a', items=[...])"
    with pytest.raises(TypeError):
        hash(s)  # a list field is unhashable, as in a frozen dataclass


def test_a_record_works_with_the_dataclass_functions_and_pickle() -> None:
    a = Wider(1, 2, note="n", extra=(1,))
    assert [f.name for f in dataclasses.fields(a)] == ["start", "end", "note", "secret", "extra"]
    assert dataclasses.replace(a, end=9) == Wider(1, 9, extra=(1,))
    assert dataclasses.asdict(a) == {"start": 1, "end": 2, "note": "n", "secret": "", "extra": (1,)}
    assert dataclasses.is_dataclass(a) and type(a).__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(a)) == a
    match a:
        case Wider(start, end):
            assert (start, end) == (1, 2)


@record
class Made:
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)
    size: int = 3
    by: str = dataclasses.field(default="", kw_only=True)
    seen: list[str] = dataclasses.field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        self.seen.append(f"{self.name}/{self.size}")


def test_a_record_is_initialised_as_a_frozen_dataclass_would_be() -> None:
    a, b = Made("a"), Made("a")
    assert a.tags == [] and a.tags is not b.tags  # a factory per instance
    assert (a.size, a.by, a.seen) == (3, "", ["a/3"])  # __post_init__ ran once, after the fields were set
    c = Made("c", ["t"], 5, by="me")
    assert (c.name, c.tags, c.size, c.by) == ("c", ["t"], 5, "me")
    assert Made(name="k", size=1).seen == ["k/1"]
    with pytest.raises(TypeError):
        Made("a", ["t"], 5, [], "me")  # type: ignore[call-arg]  # `by` is keyword-only
    with pytest.raises(TypeError):
        Made()  # type: ignore[call-arg]
    assert vars(Made)["__init__"] is not vars(Span)["__init__"] and Made.__setattr__ is Span.__setattr__
    assert dataclasses.replace(c, size=9) == Made("c", ["t"], 9, by="me")
    params = Made.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and params.init and params.eq and params.repr


def test_a_record_with_a_required_field_after_a_defaulted_one_is_refused_as_by_dataclass() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class Wrong:
            a: int = 0
            b: int  # type: ignore[misc]


@record
class Partly:
    a: int
    cache: dict[str, int] = dataclasses.field(default_factory=dict, init=False)


@dataclasses.dataclass(frozen=True)
class PlainChild(Span):
    more: int = 0


def test_a_record_the_shared_init_does_not_fit_is_made_by_dataclass_and_still_frozen() -> None:
    p = Partly(1)
    assert p.cache == {} and p == Partly(1) and repr(p) == "Partly(a=1, cache={})"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.a = 2  # type: ignore[misc]
    child = PlainChild(1, 2, more=3)  # a frozen dataclass may extend a record, as it may a frozen dataclass
    assert (child.start, child.more) == (1, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.more = 4  # type: ignore[misc]


def test_a_slotted_record_round_trips_through_pickle_and_copy() -> None:
    import copy

    s = Slotted("a", [1, 2])
    assert pickle.loads(pickle.dumps(s)) == s and copy.deepcopy(s) == s and copy.copy(s) == s
    m = Made("m", ["x"])
    assert pickle.loads(pickle.dumps(m)) == m and copy.deepcopy(m) == m


def test_a_record_without_a_docstring_gets_the_one_dataclass_writes() -> None:
    """`dataclass` writes a missing docstring from the class's signature; a record, whose `__init__` is set after,
    gets what it wrote before (`Name()`, or the signature of a base's `__init__`), without `dataclass` reading
    `object`'s text signature (core/record.py)."""

    class Base:
        def __init__(self, q: int) -> None:
            self.q = q

    def plain() -> type:
        class NoDoc:
            x: int
        return NoDoc

    def based() -> type:
        class Derived(Base):
            x: int
        return Derived

    for make, slots in ((plain, False), (plain, True), (based, False)):
        ours = record(make()) if not slots else record(slots=True)(make())
        theirs = dataclasses.dataclass(make(), init=False, eq=False, repr=False, slots=slots)
        assert ours.__doc__ == theirs.__doc__, (ours.__doc__, theirs.__doc__)
    assert record(plain()).__doc__ == "NoDoc()"
