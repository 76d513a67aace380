"""``dataclasses.dataclass`` whose generated methods are made on the class's first use.

``dataclass()`` compiles ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` for every class
when its module is imported: about a millisecond a class, a third of what ``rmq admin`` spent
importing the wire bodies it mostly never builds (docs/design.md "Start-up time").
:func:`lazy_dataclass` does the rest of ``dataclass()`` at once (fields, ``__slots__``, frozen
``__setattr__``, ``__match_args__``, pickling of frozen slotted classes), and leaves stubs for
those four: the first use of any of them (building an instance, ``repr``, ``==``, ``hash``,
``inspect.signature``) runs the real ``dataclass()`` on a copy of the class body and moves its
methods onto the class, so they are exactly the standard library's. A class that writes any of
the four itself, or that has a base class, is decorated eagerly, as ``dataclass()`` would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["lazy_dataclass"]

_T = TypeVar("_T")

#: What dataclass() generates (with eq=True, the default) and this module defers.
_DEFERRED = ("__init__", "__repr__", "__eq__", "__hash__")


@overload
def lazy_dataclass(cls: type[_T], /) -> type[_T]: ...


@overload
def lazy_dataclass(
    *, frozen: bool = False, slots: bool = False, kw_only: bool = False
) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def lazy_dataclass(
    cls: type[_T] | None = None, /, *, frozen: bool = False, slots: bool = False, kw_only: bool = False
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``dataclasses.dataclass(frozen=..., slots=..., kw_only=...)`` (defaults False, as there)
    with ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` generated on first use."""

    def wrap(cls: type[_T]) -> type[_T]:
        body = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
        # Eagerly, as dataclass() would: a class writing one of the four itself (dataclass()
        # decides what to keep), and a subclass (making the copy would run its bases'
        # __init_subclass__ again).
        if cls.__bases__ != (object,) or any(m in body for m in _DEFERRED):
            return dataclasses.dataclass(frozen=frozen, slots=slots, kw_only=kw_only)(cls)
        undocumented = not cls.__doc__
        if undocumented:  # else dataclass() would ask inspect for the (not yet made) signature
            cls.__doc__ = cls.__name__
        dc = dataclasses.dataclass(init=False, repr=False, eq=False, frozen=frozen, slots=slots, kw_only=kw_only)(cls)

        def generate() -> None:
            # the standard library's methods, from the same body: a throwaway class
            shadow_body = {**body, "__qualname__": cls.__qualname__}
            if undocumented:
                shadow_body["__doc__"] = None
            # (slots as the class's: a slotted __init__ also sets init=False fields' defaults)
            shadow: type[Any] = dataclasses.dataclass(frozen=frozen, slots=slots, kw_only=kw_only)(
                type(cls.__name__, (), shadow_body)
            )
            for m in _DEFERRED:
                if isinstance(vars(dc).get(m), _Stub):
                    setattr(dc, m, vars(shadow)[m])
            dc.__dataclass_params__ = shadow.__dataclass_params__  # type: ignore[attr-defined]
            if undocumented:
                dc.__doc__ = shadow.__doc__

        for m in _DEFERRED:
            setattr(dc, m, _Stub(dc, m, generate))
        if undocumented:
            dc.__doc__ = _Doc(dc, generate)  # type: ignore[assignment]
        return dc

    return wrap if cls is None else wrap(cls)


class _Stub:
    """One deferred method: its first read generates all four, which replace the stubs."""

    __slots__ = ("cls", "generate", "name")

    def __init__(self, cls: type, name: str, generate: Callable[[], None]) -> None:
        self.cls = cls
        self.name = name
        self.generate = generate

    def _real(self) -> Any:
        if vars(self.cls).get(self.name) is self:
            self.generate()
        return vars(self.cls)[self.name]

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        real = self._real()
        return real if real is None else real.__get__(obj, owner)


class _Doc:
    """An undocumented class's docstring, ``Name(field: type, ...)`` as dataclass() writes it,
    made when read."""

    __slots__ = ("cls", "generate")

    def __init__(self, cls: type, generate: Callable[[], None]) -> None:
        self.cls = cls
        self.generate = generate

    def __get__(self, obj: object, owner: type | None = None) -> str | None:
        if isinstance(vars(self.cls).get("__doc__"), _Doc):
            self.generate()
        doc: str | None = vars(self.cls)["__doc__"]
        return doc
