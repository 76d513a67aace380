"""rmq.common.lazy_dataclass: the same class as dataclasses.dataclass, its methods made on first use."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from typing import ClassVar

import pytest

from rmq.common.lazy_dataclass import _Stub, lazy_dataclass


@lazy_dataclass(frozen=True, slots=True)
class Point:
    """A frozen slotted point."""

    x: int
    y: int = 0
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    KIND: ClassVar[str] = "point"
    _cache: int = dataclasses.field(default=-1, init=False, repr=False, compare=False)

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


@dataclasses.dataclass(frozen=True, slots=True)
class RefPoint:
    """A frozen slotted point."""

    x: int
    y: int = 0
    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    KIND: ClassVar[str] = "point"
    _cache: int = dataclasses.field(default=-1, init=False, repr=False, compare=False)


@lazy_dataclass
class Box:
    size: int
    items: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.items.append(self.size)


@dataclasses.dataclass
class RefBox:
    size: int
    items: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.items.append(self.size)


def _fresh() -> type:
    @lazy_dataclass(frozen=True, slots=True)
    class Fresh:
        a: int

    return Fresh


def test_stubs_until_first_use():
    fresh = _fresh()
    assert all(isinstance(vars(fresh)[m], _Stub) for m in ("__init__", "__repr__", "__eq__", "__hash__"))
    assert [f.name for f in dataclasses.fields(fresh)] == ["a"]  # fields need no generation
    assert fresh(a=1) == fresh(1) and hash(fresh(1)) == hash((1,))
    assert not any(isinstance(vars(fresh)[m], _Stub) for m in ("__init__", "__repr__", "__eq__", "__hash__"))


def test_frozen_slotted_class_behaves_as_the_standard_one():
    p, r = Point(1, 2), RefPoint(1, 2)
    assert repr(p).replace("Point", "") == repr(r).replace("RefPoint", "")
    assert p == Point(1, 2) and p != Point(2, 1) and p.__eq__(r) is NotImplemented
    for obj in (p, r):  # hashed over its fields, a dict among them
        with pytest.raises(TypeError, match="unhashable type: 'dict'"):
            hash(obj)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    for obj in (p, r):  # Python 3.11's frozen slotted __setattr__ fails so for a non-field, alike
        with pytest.raises((AttributeError, TypeError)):
            obj.other = 1  # type: ignore[attr-defined]
    assert not hasattr(p, "__dict__") and Point.__slots__ == RefPoint.__slots__
    assert Point(1).tags == {} and Point(1).tags is not Point(1).tags
    assert p._cache == r._cache == -1  # a slotted __init__ sets an init=False field's default
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p
    assert dataclasses.replace(p, y=5) == Point(1, 5)
    assert dataclasses.asdict(p) == dataclasses.asdict(r)
    assert Point.__match_args__ == RefPoint.__match_args__
    assert str(inspect.signature(Point)) == str(inspect.signature(RefPoint))
    assert Point.__init__.__qualname__ == "Point.__init__"
    assert Point.__doc__ == "A frozen slotted point." and p.norm1() == 3 and Point.KIND == "point"
    assert Point.__dataclass_params__.frozen and Point.__dataclass_params__.eq
    for bad in ((), (1, 2, {}, 4)):
        with pytest.raises(TypeError) as mine:
            Point(*bad)
        with pytest.raises(TypeError) as theirs:
            RefPoint(*bad)
        assert str(mine.value).split("(", 1)[1] == str(theirs.value).split("(", 1)[1]


def test_plain_class_with_post_init():
    b, r = Box(3), RefBox(3)
    assert b.items == r.items == [3]
    assert repr(b).replace("Box", "") == repr(r).replace("RefBox", "")
    with pytest.raises(TypeError, match="unhashable"):
        hash(b)
    b.size = 4  # not frozen
    assert b.size == 4 and b != Box(3) and Box(4, [1]).items == [1, 4]
    assert Box.__doc__ == RefBox.__doc__.replace("RefBox", "Box")


def test_subclasses():
    @lazy_dataclass(frozen=True, slots=True)
    class Base:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Child(Base):
        b: int = 2

    @lazy_dataclass(frozen=True, slots=True)
    class LazyChild(Base):
        b: int = 3

    assert Child(1) == Child(1, 2) and repr(Child(1)).endswith("Child(a=1, b=2)")
    assert LazyChild(1).b == 3 and repr(LazyChild(1)).endswith("LazyChild(a=1, b=3)")
    assert not isinstance(vars(LazyChild)["__init__"], _Stub)  # a subclass: decorated at once
    assert Base(1) != LazyChild(1)
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass
        class Thawed(Base):
            c: int = 0


def test_a_class_writing_its_own_methods_is_decorated_at_once():
    @lazy_dataclass
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

    assert repr(Own(1)) == "own" and not isinstance(vars(Own)["__init__"], _Stub)
