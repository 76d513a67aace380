"""Typed custom headers ↔ ``extFields`` (Java's ``*RequestHeader`` / ``*ResponseHeader``).

Each header is a slotted, keyword-only dataclass with snake_case attributes; the camelCase
wire name of every field is declared once, with ``w("wireName")`` (required) or
``w("wireName", default=...)`` (optional). The ``@header`` decorator then *generates* two plain
functions per class (on the class's first use, with its ``__init__``, ``__repr__`` and
``__eq__``: see :class:`_Lazy`), so parsing costs no reflection per call (this is on the send
and pull hot paths):

* ``Header.from_ext_fields(ext)`` reads leniently, as real clients send mixed JSON types
  (Java's fastjson and the C++ client's JsonCpp differ): integers from JSON numbers or
  decimal strings; booleans from ``true/false``, ``"true"/"false"`` (any case), ``"0"/"1"``
  and ``0/1``; strings from
  strings or numbers. Unknown keys are ignored, JSON ``null`` counts as absent. A missing
  required field or an unparsable value raises ``RemotingCommandError`` naming the class
  and the wire field.
* ``header.to_ext_fields()`` returns ``dict[str, str]``: every value as a string (the C++
  client reads reply fields only when they are strings), absent (None) fields omitted.

Ranges, as Java's parsers enforce them: an int field is a Java ``Integer`` (int32) unless
declared ``w(..., int64=True)`` (a Java ``Long``), and a field may narrow that with ``lo``/``hi``
(``perm`` is 0..15). A value outside its range, or a string that cannot be encoded as UTF-8
(a lone surrogate from a ``\ud800`` JSON escape), raises ``RemotingCommandError`` when the
header is read, so no such value ever reaches a table that is persisted. Both readers check:
the generated Python one inline, the Cython ``HeaderReader`` as it converts (it hands a value
it refuses to the generated reader, which words the error).

Field names follow the Java classes of apache/rocketmq 4.9.8 exactly
(``common/.../protocol/header/**``). ``SendMessageRequestHeader`` also reads and writes the
one-letter names of ``SendMessageRequestHeaderV2`` (``a``…``n``); which naming a request uses
is decided by its request code alone (:func:`send_wire_names`, :func:`read_send_header`).

This package holds the machinery; the header classes live in one module per area
(``rmq.protocol.headers.<area>``: namesrv, topic, message, consumer, client, broker, acl), as Java
keeps them in ``common/protocol/header``.
"""

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, dataclass_transform, overload

from rmq.common import native
from rmq.errors import RemotingCommandError

if TYPE_CHECKING:
    from rmq.protocol._codec import HeaderReader

__all__ = [
    "Header",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "header",
    "w",
]


_REQUIRED = dataclasses.MISSING


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def w(wire: str, *, default: Any = _REQUIRED, int64: bool = False, lo: int | None = None, hi: int | None = None) -> Any:
    """Declare a header field: its camelCase wire name and, if optional, its ``default``.

    ``default`` is keyword-only: it is how type checkers (``dataclass_transform``) tell an
    optional field from a required one.

    For an int field: ``int64=True`` when Java declares it ``Long`` (else it is an ``Integer``,
    int32); ``lo``/``hi`` narrow the range further. A value outside is refused on reading.
    """
    lo_t, hi_t = (INT64_MIN, INT64_MAX) if int64 else (INT32_MIN, INT32_MAX)
    rng = (lo_t if lo is None else max(lo, lo_t), hi_t if hi is None else min(hi, hi_t))
    return dataclasses.field(default=default, metadata={"wire": wire, "range": rng})


# Called only when the value is not already of the target type (the common case is inlined
# in the generated code as a `type(v) is …` check).


def _int(v: Any, cls: str, name: str) -> int:
    if type(v) is str:
        try:
            return int(v)  # int() itself allows surrounding whitespace
        except ValueError:
            pass
    elif type(v) is bool or (type(v) is float and v.is_integer()):
        return int(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not an integer: {v!r}")


_TRUE = frozenset(("true", "1"))


_FALSE = frozenset(("false", "0", ""))


def _bool(v: Any, cls: str, name: str) -> bool:
    if type(v) is str:
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    elif type(v) is int and v in (0, 1):
        return bool(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not a boolean: {v!r}")


def _str(v: Any, cls: str, name: str) -> str:
    if type(v) is bool:
        return "true" if v else "false"
    if type(v) is int or type(v) is float:
        return str(v)
    raise RemotingCommandError(f"{cls}: field {name!r} is not a string: {v!r}")


def _missing(cls: str, name: str) -> RemotingCommandError:
    return RemotingCommandError(f"{cls}: missing required field {name!r}")


def _out_of_range(cls: str, name: str, v: int, lo: int, hi: int) -> RemotingCommandError:
    shown = str(v) if abs(v) < 10**30 else f"a {v.bit_length()}-bit integer"
    return RemotingCommandError(f"{cls}: field {name!r} is out of range {lo}..{hi}: {shown}")


def _check_text(v: str, cls: str, name: str) -> None:
    """Refuse text that cannot be written as UTF-8 (lone surrogates)."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise RemotingCommandError(f"{cls}: field {name!r} is not valid Unicode text (a lone surrogate)") from None


def _wstr(v: Any) -> str:
    if type(v) is str:
        return v
    if type(v) is bool:
        return "true" if v else "false"
    return str(v)


_READERS = {int: "_int", bool: "_bool", str: "_str"}


# The Cython twin of the generated readers (rmq/protocol/_codec.pyx): takes the common values, hands
# everything else to the generated reader. RMQ_NO_EXTENSIONS=1 leaves it out.
_HeaderReader: "type[HeaderReader] | None" = None

if native.ENABLED:
    try:
        from rmq.protocol._codec import HeaderReader as _HeaderReader
    except ImportError:  # pragma: no cover - an extension built before the reader existed
        pass
    if not getattr(_HeaderReader, "checks_ranges", False):  # pragma: no cover - built before
        _HeaderReader = None  # the reader checked ranges: it would let out-of-range values in

native.chose("header reader", _HeaderReader is not None)


_KIND = {str: 0, int: 1, bool: 2}


# (field, its base type: int, str or bool) per header field, in declaration order.
_Fields = list[tuple["dataclasses.Field[Any]", type]]


def _base_type(tp: Any) -> type:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    base: type = args[0] if args else tp
    if base not in _READERS:
        raise TypeError(f"header fields must be int, str or bool (optionally | None), not {tp!r}")
    return base


def _gen_reader(cls: type, fields: _Fields, names: dict[str, str]) -> "classmethod[Any, ..., Any]":
    # Straight-line code, one local per field, one keyword call at the end: about twice as
    # fast as filling a dict and calling cls(**kw).
    cname = cls.__name__
    ns: dict[str, Any] = {
        "_missing": _missing,
        "_int": _int,
        "_bool": _bool,
        "_str": _str,
        "_new": object.__new__,
        "_oor": _out_of_range,
        "_text": _check_text,
    }
    lines = ["def from_ext_fields(cls, ext):", "    g = ext.get"]
    args = []
    for i, (f, tp) in enumerate(fields):
        wire = names[f.name]
        slow = f"{_READERS[tp]}(v, {cname!r}, {wire!r})"
        lines.append(f"    v = g({wire!r})")
        if f.default is _REQUIRED:
            lines.append(f"    if v is None: raise _missing({cname!r}, {wire!r})")
        else:
            ns[f"_d{i}"] = f.default
            lines.append(f"    if v is None: a{i} = _d{i}")
        lines.append(f"    {'el' if f.default is not _REQUIRED else ''}if type(v) is {tp.__name__}: a{i} = v")
        # Java clients send every value as a JSON string ("3", "false"): the common
        # conversions are inlined; the reader functions handle the rest and word the errors.
        if tp is int:
            lines.append("    elif type(v) is str:")
            lines.append(f"        try: a{i} = int(v)")
            lines.append(f"        except ValueError: a{i} = {slow}")
        elif tp is bool:
            lines.append(f"    elif v == 'false' and type(v) is str: a{i} = False")
            lines.append(f"    elif v == 'true' and type(v) is str: a{i} = True")
        lines.append(f"    else: a{i} = {slow}")
        lines += _check_lines(f"a{i}", f, tp, cname, wire, "    ")
        args.append(f"{f.name}=a{i}")
    # Slot stores on a bare instance: a third cheaper than a 14-keyword __init__ call (the
    # generated dataclass __init__ only assigns; no header has a __post_init__).
    lines.append("    o = _new(cls)")
    lines += [f"    o.{a.split('=')[0]} = {a.split('=')[1]}" for a in args]
    lines.append("    return o")
    exec("\n".join(lines), ns)  # generated once per class, on its first use
    reader = ns["from_ext_fields"]
    if _HeaderReader is not None:
        spec = [
            (
                f.name,
                names[f.name],
                _KIND[tp],
                f.default is _REQUIRED,
                None if f.default is _REQUIRED else f.default,
                *(f.metadata["range"] if tp is int else (0, 0)),
            )
            for f, tp in fields
        ]
        reader = _HeaderReader(spec, reader)  # .fallback is the generated reader
    return classmethod(reader)


def _check_lines(var: str, f: "dataclasses.Field[Any]", tp: type, cname: str, wire: str, indent: str) -> list[str]:
    """Generated checks of one decoded value: the int range, or text encodable as UTF-8."""
    maybe_none = f.default is not _REQUIRED and f.default is None
    guard = f"{var} is not None and " if maybe_none else ""
    if tp is int:
        lo, hi = f.metadata["range"]
        return [f"{indent}if {guard}not ({lo} <= {var} <= {hi}): raise _oor({cname!r}, {wire!r}, {var}, {lo}, {hi})"]
    if tp is str:
        return [f"{indent}if {guard}not {var}.isascii(): _text({var}, {cname!r}, {wire!r})"]
    return []


def _gen_writer(cls: type, fields: _Fields, names: dict[str, str], fname: str) -> Callable[..., dict[str, str]]:
    lines = [f"def {fname}(self):", "    d = {}"]
    for f, tp in fields:
        wire = names[f.name]
        conv = {str: "_wstr(v)", int: "str(v)", bool: "('true' if v else 'false')"}[tp]
        lines.append(f"    v = self.{f.name}")
        lines.append(f"    if v is not None: d[{wire!r}] = {conv}")
    lines.append("    return d")
    ns: dict[str, Any] = {"_wstr": _wstr}
    exec("\n".join(lines), ns)
    writer: Callable[..., dict[str, str]] = ns[fname]
    return writer


class Header:
    """Base of all typed headers (for isinstance checks and typing)."""

    __slots__ = ()
    WIRE_NAMES: ClassVar[dict[str, str]]
    __dataclass_fields__: ClassVar[dict[str, "dataclasses.Field[Any]"]]  # set by @header

    # Both are generated per class by the @header decorator (straight-line code, no reflection
    # per call, made on the class's first use); reaching these means a header class was
    # declared without it.
    @classmethod
    def from_ext_fields(cls, ext: Mapping[str, Any]) -> Self:
        raise TypeError(f"{cls.__name__} is not decorated with @header")

    def to_ext_fields(self) -> dict[str, str]:
        raise TypeError(f"{type(self).__name__} is not decorated with @header")


_H = TypeVar("_H", bound=Header)


@overload
def header(cls: type[_H], /) -> type[_H]: ...


@overload
def header(*, v2: dict[str, str] | None = None) -> Callable[[type[_H]], type[_H]]: ...


@dataclass_transform(kw_only_default=True, field_specifiers=(w,))
def header(
    cls: type[_H] | None = None, *, v2: dict[str, str] | None = None
) -> type[_H] | Callable[[type[_H]], type[_H]]:
    """Class decorator: make ``cls`` a slotted kw-only dataclass and generate its codecs.

    Args:
        v2: optional second set of wire names (snake_case attribute → wire name), which
            generates ``from_ext_fields_v2`` / ``to_ext_fields_v2`` (the class declares them
            for the type checker). ``from_ext_fields`` reads the first naming only: a
            request's code says which naming it uses, never the names present.
    """

    def wrap(cls: type[_H]) -> type[_H]:
        if "__post_init__" in vars(cls):
            raise TypeError(f"{cls.__name__}: headers are built without __init__, so no __post_init__")
        undocumented = not cls.__doc__
        if undocumented:  # keeps dataclass() from asking inspect for the signature (see _LazyDoc)
            cls.__doc__ = cls.__name__
        # __init__, __repr__ and __eq__ come from _generate_members, on first use; eq=True's
        # other effect (instances unhashable) is set here.
        dc = dataclasses.dataclass(slots=True, kw_only=True, init=False, repr=False, eq=False)(cls)
        dc.__hash__ = None  # type: ignore[assignment]
        fields = dataclasses.fields(dc)
        for f in fields:
            if f.default_factory is not _REQUIRED:  # pragma: no cover - w() declares none
                raise TypeError(f"{dc.__name__}.{f.name}: header fields take a default, not a factory")
        names = {f.name: f.metadata["wire"] for f in fields}
        members: dict[str, Any] = {"WIRE_NAMES": names}
        lazy = ["__init__", "__repr__", "__eq__", "from_ext_fields", "to_ext_fields"]
        if v2 is not None:
            members["WIRE_NAMES_V2"] = {n: v2.get(n, wire) for n, wire in names.items()}
            lazy += ["from_ext_fields_v2", "to_ext_fields_v2"]
        # The dataclass methods and the codecs are generated on a class's first use (_Lazy):
        # making them for every header class at import cost rmq's CLI and daemons most of
        # their start-up, and a process uses a few dozen of the classes (docs/design.md
        # "Start-up time"). The stubs replace the base class's (setattr: not in the body).
        members.update({m: _Lazy(dc, m) for m in lazy})
        if undocumented:
            members["__doc__"] = _LazyDoc()
        for name, value in members.items():
            setattr(dc, name, value)
        return dc

    return wrap if cls is None else wrap(cls)


def _gen_dunders(dc: type, fields: _Fields) -> dict[str, Any]:
    """``__init__``, ``__repr__`` and ``__eq__`` as ``dataclass(kw_only=True)`` writes them
    (keyword-only parameters with the fields' defaults; ``Name(a=..., b=...)``; equal when of
    the same class with equal fields)."""
    ns: dict[str, Any] = {}
    params, stores = [], []
    for i, (f, _) in enumerate(fields):
        if f.default is _REQUIRED:
            params.append(f.name)
        else:
            ns[f"_d{i}"] = f.default
            params.append(f"{f.name}=_d{i}")
        stores.append(f"    self.{f.name} = {f.name}")
    attrs = [f.name for f, _ in fields]
    shown = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
    mine = "".join(f"self.{a}," for a in attrs)
    theirs = "".join(f"other.{a}," for a in attrs)
    lines = [
        f"def __init__(self{', *, ' + ', '.join(params) if params else ''}):",
        *(stores or ["    pass"]),
        "def __repr__(self):",
        f"    return f'{{self.__class__.__qualname__}}({shown})'",
        "def __eq__(self, other):",
        "    if other.__class__ is self.__class__:",
        f"        return ({mine}) == ({theirs})",
        "    return NotImplemented",
    ]
    exec("\n".join(lines), ns)
    out = {m: ns[m] for m in ("__init__", "__repr__", "__eq__")}
    for m, fn in out.items():
        fn.__qualname__ = f"{dc.__qualname__}.{m}"
    out["__init__"].__annotations__ = {**{f.name: f.type for f, _ in fields}, "return": None}
    return out


def _generate_members(dc: type[Header]) -> None:
    """Generate ``dc``'s dataclass methods and codecs (see :func:`header`) and put them on the
    class in place of its :class:`_Lazy` stubs. Idempotent: two threads racing here set equal
    members."""
    hints = typing.get_type_hints(dc)
    fields = [(f, _base_type(hints[f.name])) for f in dataclasses.fields(dc)]
    names: dict[str, str] = dc.WIRE_NAMES
    members = _gen_dunders(dc, fields)
    members["to_ext_fields"] = _gen_writer(dc, fields, names, "to_ext_fields")
    v2_names: dict[str, str] | None = vars(dc).get("WIRE_NAMES_V2")
    if v2_names is not None:
        members["from_ext_fields_v2"] = _gen_reader(dc, fields, v2_names)
        members["to_ext_fields_v2"] = _gen_writer(dc, fields, v2_names, "to_ext_fields_v2")
    members["from_ext_fields"] = _gen_reader(dc, fields, names)
    for name, value in members.items():
        setattr(dc, name, value)


class _Lazy:
    """Stands for one generated member of a header class until its first use: reading it
    (``Cls(...)``, ``Cls.from_ext_fields``, ``header.to_ext_fields``, ``repr``, ``==``)
    generates all of the class's members, which replace the stubs, so later calls cost
    nothing extra. ``__func__`` answers as a classmethod's would (the generated reader), for
    code that inspects ``vars(Cls)``."""

    __slots__ = ("cls", "name")

    def __init__(self, cls: type[Header], name: str) -> None:
        self.cls = cls
        self.name = name

    def _real(self) -> Any:
        if vars(self.cls).get(self.name) is self:
            _generate_members(self.cls)
        return vars(self.cls)[self.name]

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        return self._real().__get__(obj, owner)

    @property
    def __func__(self) -> Any:
        return self._real().__func__


class _LazyDoc:
    """The docstring ``dataclass()`` gives an undocumented class (``Name(*, field: type, ...)``),
    made when read: it asks ``inspect`` for the signature of the generated ``__init__``."""

    def __get__(self, obj: object, owner: type | None = None) -> str:
        import inspect

        cls = owner if owner is not None else type(obj)
        return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


def header_classes() -> list[type[Header]]:
    """Every header class of every area module of this package (importing them all), by name."""
    import importlib
    import pkgutil

    out: list[type[Header]] = []
    for m in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{m.name}")
        # the module's own names, not Header.__subclasses__(): a slotted dataclass replaces the
        # class it decorates, and the undecorated original lingers until collected
        out += [
            c
            for c in vars(mod).values()
            if isinstance(c, type) and issubclass(c, Header) and c.__module__ == mod.__name__
        ]
    return sorted(out, key=lambda c: c.__name__)
