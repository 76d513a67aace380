"""Allowed values of a configuration field, declared on the field itself.

A settings dataclass (``BrokerConfig``, ``NamesrvConfig``, the store's ``StoreConfig``) declares
each field's range once, where the field is::

    default_topic_queue_nums: int = setting(8, lo=1, hi=1024)
    flush_disk_type: str = setting("ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    delete_when: str = setting("04", check=check_hours_of_day)

:func:`setting` is ``dataclasses.field`` with the range kept in the field's metadata;
:func:`allowed_of` reads it back. A numeric field declared with a plain default (no
:func:`setting`) still works: it gets :data:`JAVA_LONG` (ints) or "a finite number" (floats), so
no value a Java broker could not hold ever reaches the daemon. ``rmq.config`` checks every field
of every settings object against these at start-up.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JAVA_INT",
    "JAVA_LONG",
    "METADATA_KEY",
    "Allowed",
    "allowed_of",
    "check_delay_levels",
    "check_hours_of_day",
    "multiple_of",
    "setting",
]

#: the key under which :func:`setting` stores an :class:`Allowed` in ``Field.metadata``.
METADATA_KEY = "rmq.allowed"


@dataclass(frozen=True, slots=True)
class Allowed:
    """What a field accepts: a closed numeric range, a set of choices, and/or a check.

    Attributes:
        lo: smallest allowed number (``None``: no lower bound).
        hi: largest allowed number (``None``: no upper bound).
        choices: the only values allowed (compared after conversion; strings upper-cased).
        check: ``check(value) -> reason or None`` for rules a range cannot say.
        unit: appended to the range in messages (``"ms"``, ``"bytes"``).
        text: the allowed values in words, when ``check`` decides them.
    """

    lo: int | float | None = None
    hi: int | float | None = None
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], str | None] | None = None
    unit: str = ""
    text: str = ""

    def describe(self) -> str:
        """The allowed values in words, for error messages (``"1..1024"``, ``"one of 2, 4, 6"``)."""
        parts = []
        if self.choices is not None:
            parts.append("one of " + ", ".join(str(c) for c in self.choices))
        if self.lo is not None or self.hi is not None:
            lo = "" if self.lo is None else _num(self.lo)
            hi = "" if self.hi is None else _num(self.hi)
            rng = (
                f"{lo}..{hi}"
                if self.lo is not None and self.hi is not None
                else (f"at least {lo}" if self.hi is None else f"at most {hi}")
            )
            parts.append(rng + (f" {self.unit}" if self.unit else ""))
        if self.text:
            parts.append(self.text)
        return " and ".join(parts) or "any value"

    def problem(self, value: Any) -> str | None:
        """``None`` when ``value`` is allowed, else why not (without the field's name)."""
        if self.choices is not None and value not in self.choices:
            return f"expected {self.describe()}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                return "expected a finite number" + (f", {self.describe()}" if self.lo is not None else "")
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                return f"expected {self.describe()}"
        if self.check is not None:
            return self.check(value)
        return None


def _num(n: float) -> str:
    if isinstance(n, int) and abs(n) >= 2**20 and n & (n - 1) == 0:
        return f"{n} (2^{n.bit_length() - 1})"
    if isinstance(n, int) and (n + 1) & n == 0 and n >= 2**20:
        return f"{n} (2^{n.bit_length()}-1)"
    return f"{n:g}" if isinstance(n, float) else str(n)


#: Java ``int`` and ``long``: the widest ranges a RocketMQ daemon could hold.
JAVA_INT = Allowed(-(2**31), 2**31 - 1)
JAVA_LONG = Allowed(-(2**63), 2**63 - 1)
_FINITE = Allowed()


def setting(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
    lo: float | None = None,
    hi: float | None = None,
    choices: Sequence[Any] | None = None,
    check: Callable[[Any], str | None] | None = None,
    unit: str = "",
    text: str = "",
) -> Any:
    """A dataclass field whose allowed values are declared with it (see the module docstring).

    Args:
        default / default_factory: as for ``dataclasses.field``.
        lo, hi: inclusive numeric bounds (either may be ``None``).
        choices: the only values allowed.
        check: ``check(value) -> reason or None``.
        unit: shown after the range in messages.
        text: the allowed values in words when ``check`` decides them.
    """
    allowed = Allowed(lo, hi, tuple(choices) if choices is not None else None, check, unit, text)
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={METADATA_KEY: allowed})
    return dataclasses.field(default=default, metadata={METADATA_KEY: allowed})


def allowed_of(f: dataclasses.Field[Any], tp: Any) -> Allowed | None:
    """The declared :class:`Allowed` of field ``f`` (type ``tp``), else the default for its type:
    :data:`JAVA_LONG` for ``int``, "finite" for ``float``, ``None`` (anything) otherwise."""
    declared = f.metadata.get(METADATA_KEY)
    if isinstance(declared, Allowed):
        return declared
    base = _base_type(tp)
    if base is int:
        return JAVA_LONG
    if base is float:
        return _FINITE
    return None


def _base_type(tp: Any) -> Any:
    """``int`` for ``int`` and ``int | None``; other types unchanged."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def check_hours_of_day(value: Any) -> str | None:
    """Java ``deleteWhen``: hours of the day 0..23 separated by ``;`` (``"04"``, ``"04;16"``)."""
    items = str(value).split(";")
    for item in items:
        item = item.strip()
        if not item.isdigit() or not 0 <= int(item) <= 23:
            return f"expected hours of the day 0..23 separated by ';' (like 04 or 04;16), got {item!r}"
    return None


def check_delay_levels(value: Any) -> str | None:
    """Java ``messageDelayLevel``: 1..64 blank-separated durations such as ``1s 5s 1m 2h``
    (a whole number followed by s, m, h or d)."""
    items = str(value).split()
    if not items or len(items) > 64:
        return "expected 1 to 64 delays like '1s 5s 10s 1m 2h'"
    for item in items:
        if not (len(item) <= 10 and item[:-1].isdigit() and item[:-1].isascii() and item[-1] in "smhd"):
            return f"delay {item!r} is not a whole number followed by s, m, h or d"
    return None


def multiple_of(n: int) -> Callable[[Any], str | None]:
    """A ``check`` allowing only multiples of ``n`` (ConsumeQueue files hold 20-byte units)."""

    def check(value: Any) -> str | None:
        return None if isinstance(value, int) and value % n == 0 else f"expected a multiple of {n}"

    return check
