"""SQL92 message selectors: the grammar and the evaluation rules of Java's ``filter`` module.

``compile_sql92(text)`` parses an expression (Java ``SelectorParser``: a recursive-descent
parser written here) into a small syntax tree, checks it the way Java's expression factories
do (``ComparisonExpression.checkLessThanOperand`` / ``checkEqualOperand``, BETWEEN bounds, IN on
a property only) and compiles it into nested closures over a list of property values, one slot
per property name the expression reads. The broker's pull scan hands the compiled selector the
values of those names only (``Sql92Filter.match_values``), never a decoded properties map.

The grammar (case-insensitive keywords, tightest binding last)::

    or        := and (OR and)*
    and       := equality (AND equality)*
    equality  := compare ( '=' compare | '<>' compare | IS NULL | IS NOT NULL )*
    compare   := unary ( ('>'|'>='|'<'|'<=') unary | [NOT] BETWEEN unary AND unary
                       | [NOT] IN '(' string (',' string)* ')' )*
    unary     := '+' unary | '-' unary | NOT unary | primary
    primary   := literal | identifier | '(' or ')'
    literal   := 'string' ('' escapes a quote) | 123 | 123L | 1.5 | .5 | 1E3 | TRUE | FALSE | NULL

(``NOT`` binds tighter than comparisons, as in Java: ``NOT a = 1`` is ``(NOT a) = 1``.)

Values are Java's: a property is a ``str`` (or ``None`` when the message lacks it); literals are
Java ``Integer`` (``int``), ``Long`` (:class:`JLong`), ``Double`` (``float``), ``String`` and
``Boolean``. Comparing a property with a number converts the property text to the number's
type (``Integer.valueOf`` / ``Long.valueOf`` / ``Double.valueOf``); two strings under ``>``,
``<``... are both read as doubles. A conversion that fails is an evaluation error, which makes
the whole expression not match the message (Java ``ExpressionMessageFilter.isMatchedByCommitLog``
catches it), even inside an OR. Three-valued logic: a comparison with a missing property is
unknown (``None``); AND/OR/NOT follow Java ``LogicExpression`` / ``UnaryExpression``; a message
matches only when the result is TRUE.

Bounds: an expression longer than :data:`MAX_EXPRESSION_LENGTH` characters or nesting deeper
than :data:`MAX_DEPTH` is refused with a :class:`SelectorError` (a ``ValueError``) before any
work proportional to it; every malformed input is a ``SelectorError`` naming the position.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Union

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "EvaluationError",
    "JLong",
    "SelectorError",
    "Sql92Filter",
    "compile_sql92",
]

#: Longest expression accepted, in characters (Java has no bound; 4096 is far above any
#: selector seen in practice and keeps a parse well under a millisecond).
MAX_EXPRESSION_LENGTH: Final = 4096
#: Deepest nesting of parentheses and unary operators accepted.
MAX_DEPTH: Final = 64

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_DOUBLE_MIN_VALUE = 5e-324  # Java Double.MIN_VALUE: the smallest positive double


class SelectorError(ValueError):
    """A selector that does not parse or is refused (Java ``MQFilterException`` "Invalid
    MessageSelector."). Not retriable: the expression must be changed."""


class EvaluationError(Exception):
    """A message whose properties cannot be compared as the expression asks (Java throws from
    ``ComparisonExpression.evaluate``); the message does not match."""


class JLong(int):
    """A Java ``Long`` value (a plain ``int`` is a Java ``Integer``): the type decides how a
    property's text is converted when compared with it."""

    __slots__ = ()


Value = Union[None, bool, int, float, str]  # noqa: UP007 - a runtime alias
Fn = Callable[[Sequence["str | None"]], Value]

# ------------------------------------------------------------------------------------- lexer
_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line>--[^\n\r]*(?:\r\n|\n|\r))
  | (?P<block>/\*[^*]*\*+(?:[^/*][^*]*\*+)*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<dec>0|[1-9][0-9]*[lL]?)
  | (?P<str>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
    """,
    re.VERBOSE,
)
_KIND_WORDS = {"str": "a quoted string", "id": "a property name", "dec": "an integer"}
_KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "kw", "id", "dec", "float", "str", "op", "eof"
    text: str
    pos: int


class _Tokens:
    """Tokens read on demand, as JavaCC's token manager does: a parse that ends before the end
    of the text never reads the rest, so what follows a complete expression is ignored unless
    the parser had to look at it (Java ``SelectorParser.JmsSelector`` does not ask for EOF:
    ``a = 1 b = 2`` selects by ``a = 1``, while ``a = 1 !`` fails on the ``!`` the parser
    peeks at)."""

    __slots__ = ("text", "pos", "toks")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.toks: list[_Tok] = []

    def __getitem__(self, i: int) -> _Tok:
        toks = self.toks
        while len(toks) <= i:
            if toks and toks[-1].kind == "eof":
                return toks[-1]
            toks.append(self._next())
        return toks[i]

    def _next(self) -> _Tok:
        text, n = self.text, len(self.text)
        while self.pos < n:
            pos = self.pos
            m = _TOKEN.match(text, pos)
            if m is None:
                raise SelectorError(f"Invalid MessageSelector. unexpected character {text[pos]!r} at {pos}")
            kind = m.lastgroup
            assert kind is not None
            self.pos = m.end()
            s = m.group()
            if kind == "id" and s.upper() in _KEYWORDS:
                return _Tok("kw", s.upper(), pos)
            if kind not in ("ws", "line", "block"):
                return _Tok(kind, s, pos)
        return _Tok("eof", "", n)


# ------------------------------------------------------------------------------- syntax tree
# Nodes are tuples: (kind, ...). Kinds and what Java class each stands for:
#   ("const", value)             ConstantExpression (value None/bool: BooleanConstantExpression)
#   ("prop", name)               PropertyExpression
#   ("neg", node)                UnaryExpression.createNegate
#   ("not", node)                UnaryExpression.createNOT
#   ("cast", node)               UnaryExpression.createBooleanCast (a property used as a boolean)
#   ("in", name, values, negated)UnaryInExpression
#   ("eq", left, right)          ComparisonExpression.doCreateEqual (also IS NULL)
#   ("cmp", op, left, right)     ComparisonExpression >, >=, <, <=
#   ("and", [nodes]) ("or", [nodes])  LogicExpression chains (left-folded in Java; same result)
Node = tuple[Any, ...]

_BOOLEAN_KINDS = frozenset({"not", "cast", "in", "eq", "cmp", "and", "or"})


def _is_boolean(node: Node) -> bool:
    """Java ``instanceof BooleanExpression``."""
    return node[0] in _BOOLEAN_KINDS or (node[0] == "const" and (node[1] is None or type(node[1]) is bool))


def _describe(node: Node) -> str:
    kind = node[0]
    if kind == "const":
        v = node[1]
        if v is None:
            return "NULL"
        if type(v) is bool:
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return str(v)
    if kind == "prop":
        return str(node[1])
    return f"{kind.upper()} expression"


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _Tokens(text)
        self.i = 0
        self.depth = 0
        self.names: dict[str, int] = {}

    # -- helpers
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def _is(self, kind: str, text: str | None = None) -> bool:
        t = self.toks[self.i]
        return t.kind == kind and (text is None or t.text == text)

    def _is_kw2(self, a: str, b: str) -> bool:
        t1 = self.toks[self.i]
        if t1.kind != "kw" or t1.text != a:
            return False
        t2 = self.toks[self.i + 1]  # JavaCC's LOOKAHEAD(2) reads the second token only here
        return t2.kind == "kw" and t2.text == b

    def _take(self, kind: str, text: str | None = None) -> _Tok:
        t = self.toks[self.i]
        if t.kind != kind or (text is not None and t.text != text):
            want = text or _KIND_WORDS.get(kind, kind)
            got = "end of expression" if t.kind == "eof" else repr(t.text)
            raise SelectorError(f"Invalid MessageSelector. expected {want} at {t.pos}, found {got}")
        self.i += 1
        return t

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectorError(f"Invalid MessageSelector. nested deeper than {MAX_DEPTH} at {self.tok.pos}")

    def _bool(self, node: Node) -> Node:
        """Java ``SelectorParser.asBooleanExpression``."""
        if _is_boolean(node):
            return node
        if node[0] == "prop":
            return ("cast", node)
        raise SelectorError(f"Invalid MessageSelector. {_describe(node)} will not result in a boolean value")

    # -- grammar
    def parse(self) -> Node:
        # No check for the end of the text: Java ignores what follows (see _Tokens).
        return self._bool(self._or())

    def _or(self) -> Node:
        left = self._and()
        if not self._is("kw", "OR"):
            return left
        items = [self._bool(left)]
        while self._is("kw", "OR"):
            self.i += 1
            items.append(self._bool(self._and()))
        return ("or", items)

    def _and(self) -> Node:
        left = self._equality()
        if not self._is("kw", "AND"):
            return left
        items = [self._bool(left)]
        while self._is("kw", "AND"):
            self.i += 1
            items.append(self._bool(self._equality()))
        return ("and", items)

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            if self._is("op", "="):
                self.i += 1
                left = _create_equal(left, self._comparison())
            elif self._is("op", "<>"):
                self.i += 1
                left = ("not", _create_equal(left, self._comparison()))
            elif self._is_kw2("IS", "NULL"):
                self.i += 2
                left = ("eq", left, ("const", None))
            elif self._is("kw", "IS"):
                self.i += 1
                self._take("kw", "NOT")
                self._take("kw", "NULL")
                left = ("not", ("eq", left, ("const", None)))
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            t = self.tok
            if t.kind == "op" and t.text in (">", ">=", "<", "<="):
                self.i += 1
                left = _create_less_than_family(t.text, left, self._unary())
            elif t.kind == "kw" and t.text == "BETWEEN":
                self.i += 1
                low = self._unary()
                self._take("kw", "AND")
                high = self._unary()
                left = _create_between(left, low, high)
            elif self._is_kw2("NOT", "BETWEEN"):
                self.i += 2
                low = self._unary()
                self._take("kw", "AND")
                high = self._unary()
                left = ("or", [_create_less_than_family("<", left, low), _create_less_than_family(">", left, high)])
            elif t.kind == "kw" and t.text == "IN":
                self.i += 1
                left = self._in(left, False)
            elif self._is_kw2("NOT", "IN"):
                self.i += 2
                left = self._in(left, True)
            elif t.kind == "kw" and t.text == "NOT":
                # Java enters this loop on NOT and then needs BETWEEN or IN after it
                nxt = self.toks[self.i + 1]
                got = "end of expression" if nxt.kind == "eof" else repr(nxt.text)
                raise SelectorError(
                    f"Invalid MessageSelector. expected BETWEEN or IN after NOT at {nxt.pos}, found {got}"
                )
            else:
                return left

    def _in(self, left: Node, negated: bool) -> Node:
        self._take("op", "(")
        values = [_string_value(self._take("str").text)]
        while self._is("op", ","):
            self.i += 1
            values.append(_string_value(self._take("str").text))
        self._take("op", ")")
        if left[0] != "prop":
            raise SelectorError(f"Invalid MessageSelector. expected a property for IN, got {_describe(left)}")
        return ("in", left, frozenset(values), negated)

    def _unary(self) -> Node:
        t = self.tok
        if t.kind == "op" and t.text in ("+", "-"):
            self.i += 1
            self._enter()
            inner = self._unary()
            self.depth -= 1
            return inner if t.text == "+" else ("neg", inner)
        if t.kind == "kw" and t.text == "NOT":
            self.i += 1
            self._enter()
            inner = self._unary()
            self.depth -= 1
            return ("not", self._bool(inner))
        return self._primary()

    def _primary(self) -> Node:
        t = self.tok
        if t.kind == "str":
            self.i += 1
            return ("const", _string_value(t.text))
        if t.kind == "dec":
            self.i += 1
            return ("const", _decimal_value(t.text))
        if t.kind == "float":
            self.i += 1
            return ("const", _float_value(t.text))
        if t.kind == "kw" and t.text in ("TRUE", "FALSE", "NULL"):
            self.i += 1
            return ("const", {"TRUE": True, "FALSE": False, "NULL": None}[t.text])
        if t.kind == "id":
            self.i += 1
            self.names.setdefault(t.text, len(self.names))
            return ("prop", t.text)
        if t.kind == "op" and t.text == "(":
            self.i += 1
            self._enter()
            node = self._or()
            self.depth -= 1
            self._take("op", ")")
            return node
        got = "end of expression" if t.kind == "eof" else repr(t.text)
        raise SelectorError(f"Invalid MessageSelector. expected a value at {t.pos}, found {got}")


def _string_value(image: str) -> str:
    return image[1:-1].replace("''", "'")


def _decimal_value(image: str) -> int:
    """Java ``ConstantExpression.createFromDecimal``: an Integer when it fits, else a Long."""
    text = image[:-1] if image[-1] in "lL" else image
    if len(text) > 19:
        raise SelectorError(f"Invalid MessageSelector. {image[:40]} is out of the range of a long")
    v = int(text)
    if v > _LONG_MAX:
        raise SelectorError(f"Invalid MessageSelector. {image} is out of the range of a long")
    return v if v <= _INT_MAX else JLong(v)


def _float_value(image: str) -> float:
    """Java ``ConstantExpression.createFloat``, which refuses infinity and anything below
    ``Double.MIN_VALUE`` (so ``0.0`` too, as Java does)."""
    v = float(image)
    if v > 1.7976931348623157e308:
        raise SelectorError(f"Invalid MessageSelector. {image[:40]} is greater than Double.MAX_VALUE")
    if v < _DOUBLE_MIN_VALUE:
        raise SelectorError(f"Invalid MessageSelector. {image[:40]} is less than Double.MIN_VALUE")
    return v


def _create_equal(left: Node, right: Node) -> Node:
    """Java ``ComparisonExpression.createEqual``: no NULL constant on either side, and a boolean
    constant only against a boolean."""
    for side in (left, right):
        if side[0] == "const" and side[1] is None:
            raise SelectorError("Invalid MessageSelector. 'NULL' cannot be compared (use IS NULL)")
    if left[0] == "const" and right[0] == "const" and _is_boolean(left) and not _is_boolean(right):
        raise SelectorError(f"Invalid MessageSelector. {_describe(left)} cannot be compared with {_describe(right)}")
    return ("eq", left, right)


def _create_less_than_family(op: str, left: Node, right: Node) -> Node:
    """Java ``ComparisonExpression.checkLessThanOperand`` on both sides: a constant must be a
    number, and no boolean expression."""
    for side in (left, right):
        if side[0] == "const":
            v = side[1]
            if v is None or isinstance(v, (bool, str)):
                raise SelectorError(f"Invalid MessageSelector. value {_describe(side)} cannot be compared by {op}")
        elif _is_boolean(side):
            raise SelectorError(f"Invalid MessageSelector. {_describe(side)} cannot be compared by {op}")
    return ("cmp", op, left, right)


def _create_between(value: Node, low: Node, high: Node) -> Node:
    if low[0] == "const" and high[0] == "const":
        lv, hv = low[1], high[1]
        if lv is None or hv is None:
            raise SelectorError("Invalid MessageSelector. the bounds of BETWEEN can not be null")
        try:
            order = _compare(hv, lv)
        except EvaluationError:
            order = 0
        if order < 0:
            raise SelectorError(
                f"Invalid MessageSelector. BETWEEN's lower bound ({_describe(low)}) must be less "
                f"than or equal to its upper bound ({_describe(high)})"
            )
    return ("and", [_create_less_than_family(">=", value, low), _create_less_than_family("<=", value, high)])


# ---------------------------------------------------------------------- Java's comparisons
_INT_TEXT = re.compile(r"[+-]?\d+\Z")
_DOUBLE_TEXT = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z")
_JAVA_TRIM = "".join(chr(c) for c in range(33))  # String.trim: every char <= ' '


def _parse_int(text: str, lo: int, hi: int) -> int:
    """Java ``Integer.valueOf`` / ``Long.valueOf`` (no spaces, no underscores)."""
    if _INT_TEXT.match(text) is None:
        raise EvaluationError(f"not an integer: {text[:40]!r}")
    v = int(text)
    if not lo <= v <= hi:
        raise EvaluationError(f"out of range: {text[:40]!r}")
    return v


def _parse_double(text: str) -> float:
    """Java ``Double.valueOf``: surrounding control characters and spaces trimmed, an optional
    ``d``/``f`` suffix, ``NaN`` and ``Infinity`` spelled as Java does."""
    t = text.strip(_JAVA_TRIM)
    if _DOUBLE_TEXT.match(t) is None:
        raise EvaluationError(f"not a number: {text[:40]!r}")
    if t[-1] in "fFdD" and not t.endswith("Infinity"):
        t = t[:-1]
    return float(t.replace("Infinity", "inf"))


def _double_compare(a: float, b: float) -> int:
    """Java ``Double.compare``: NaN equals NaN and is above everything; -0.0 < 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b and a != 0.0:
        return 0
    if math.isnan(a) or math.isnan(b):
        return 0 if math.isnan(a) and math.isnan(b) else (1 if math.isnan(a) else -1)
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return 0 if sa == sb else (-1 if sa < sb else 1)


def _compare(lv: Value, rv: Value) -> int:
    """Java ``ComparisonExpression.__compare`` with string conversion on (as ``SelectorParser``
    always sets it): convert the right or left side up to the other's type, then compareTo.
    Mismatched types that Java does not convert answer -1."""
    lc, rc = type(lv), type(rv)
    if lc is not rc:
        if lc is bool:
            if rc is str:  # Java casts the Boolean to String here and fails
                raise EvaluationError("a boolean cannot be compared with a string in this order")
            return -1
        if lc is int:
            if rc is JLong:
                lv = JLong(lv)  # type: ignore[arg-type]
            elif rc is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rc is str:
                rv = _parse_int(rv, _INT_MIN, _INT_MAX)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is JLong:
            if rc is int:
                rv = JLong(rv)  # type: ignore[arg-type]
            elif rc is float:
                lv = float(lv)  # type: ignore[arg-type]
            elif rc is str:
                rv = _parse_int(rv, _LONG_MIN, _LONG_MAX)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is float:
            if rc is int or rc is JLong:
                rv = float(rv)  # type: ignore[arg-type]
            elif rc is str:
                rv = _parse_double(rv)  # type: ignore[arg-type]
            else:
                return -1
        elif lc is str:
            if rc is bool:
                lv = lv.lower() == "true"  # type: ignore[union-attr]  # Boolean.valueOf
            elif rc is int:
                lv = _parse_int(lv, _INT_MIN, _INT_MAX)  # type: ignore[arg-type]
            elif rc is JLong:
                lv = _parse_int(lv, _LONG_MIN, _LONG_MAX)  # type: ignore[arg-type]
            elif rc is float:
                lv = _parse_double(lv)  # type: ignore[arg-type]
            else:
                return -1
        else:
            return -1
    if isinstance(lv, float):
        return _double_compare(lv, rv)  # type: ignore[arg-type]
    if isinstance(lv, str):
        # String.compareTo orders UTF-16 code units; only its sign's zero-ness is ever used
        # (equality), ordering of strings goes through doubles.
        return 0 if lv == rv else (-1 if lv < rv else 1)  # type: ignore[operator]
    return 0 if lv == rv else (-1 if lv < rv else 1)  # type: ignore[operator]


def _negate(v: Value) -> Value:
    """Java ``UnaryExpression.negate`` (wrapping as Java's int and long do)."""
    if v is None or type(v) is bool or isinstance(v, str):
        return None
    if type(v) is float:
        return -v
    if type(v) is JLong:
        n = -int(v)
        return JLong(n - (1 << 64) if n > _LONG_MAX else n)
    n = -int(v)
    return n - (1 << 32) if n > _INT_MAX else n


# ------------------------------------------------------------------------------- compiling
def _children(node: Node) -> list[Node]:
    kind = node[0]
    if kind in ("neg", "not", "cast"):
        return [node[1]]
    if kind == "eq":
        return [node[1], node[2]]
    if kind == "cmp":
        return [node[2], node[3]]
    if kind in ("and", "or"):
        return list(node[1])
    return []


def _tree_depth(root: Node) -> int:
    """Depth of the tree, without recursion (chains such as ``1 = 1 = 1 ...`` nest to the left
    without parentheses, so the parser's nesting count alone does not bound it)."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in _children(node))
    return deepest


def _constant_of(node: Node) -> tuple[bool, Value]:
    """(True, value) for a constant, or a negated constant folded (its value never changes;
    Java negates it at each evaluation with the same result)."""
    if node[0] == "const":
        return True, node[1]
    if node[0] == "neg":
        ok, v = _constant_of(node[1])
        if ok:
            return True, _negate(v)
    return False, None


def _fast_int32(x: str) -> int:
    if len(x) <= 9 and x.isdigit() and x.isascii():
        return int(x)
    return _parse_int(x, _INT_MIN, _INT_MAX)


def _fast_int64(x: str) -> int:
    if len(x) <= 18 and x.isdigit() and x.isascii():
        return int(x)
    return _parse_int(x, _LONG_MIN, _LONG_MAX)


def _fast_double(x: str) -> float:
    # Python's float() takes what Java's Double.valueOf takes for ASCII text without '_',
    # except the spellings of NaN and infinity, which go through the exact reader.
    if x.isascii() and "_" not in x:
        try:
            d = float(x)
        except ValueError:
            return _parse_double(x)
        if d - d == 0.0:
            return d
    return _parse_double(x)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


def _specialize(node: Node, slots: Mapping[str, int]) -> Fn | None:
    """A faster closure for the common shapes: a property against a constant in = and the
    ordering comparisons, and IS [NOT] NULL of a property; None for every other shape. Each
    gives exactly the generic path's result (the tests compare both on the same inputs)."""
    kind = node[0]
    if kind == "not":
        inner = node[1]
        if inner[0] == "eq" and inner[1][0] == "prop" and inner[2] == ("const", None):
            i = slots[inner[1][1]]
            return lambda v: v[i] is not None
        return None
    if kind == "eq":
        left, right = node[1], node[2]
    elif kind == "cmp":
        left, right = node[2], node[3]
    else:
        return None
    if left[0] == "prop":
        prop_left, name = True, left[1]
        ok, k = _constant_of(right)
    elif right[0] == "prop":
        prop_left, name = False, right[1]
        ok, k = _constant_of(left)
    else:
        return None
    if not ok:
        return None
    i = slots[name]
    if kind == "eq" and k is None and prop_left:  # IS NULL
        return lambda v: v[i] is None
    tk = type(k)
    if tk is int:
        conv: Callable[[str], Any] = _fast_int32
    elif tk is JLong:
        conv = _fast_int64
    elif tk is float and k == k and k != 0.0:
        conv = _fast_double
    elif kind == "eq" and tk is str:
        conv = str
    elif kind == "eq" and tk is bool and prop_left:
        conv = _java_boolean
    else:
        return None
    missing: Value = None if prop_left or kind == "cmp" else False  # Java's asymmetric null in =
    if kind == "eq":

        def eq(v: Sequence[str | None]) -> Value:
            x = v[i]
            if x is None:
                return missing
            return bool(conv(x) == k)

        return eq
    op = _OPS[node[1]]
    nan_answer = _ANSWER[node[1]](1 if prop_left else -1)  # Double.compare puts NaN above all

    def cmp(v: Sequence[str | None]) -> Value:
        x = v[i]
        if x is None:
            return None
        n = conv(x)
        if n != n:
            return nan_answer
        return op(n, k) if prop_left else op(k, n)

    return cmp


class _NoPlan(Exception):
    """A node the C program does not take (the Python evaluator handles the expression)."""


def _plan(node: Node, slots: Mapping[str, int]) -> tuple[Any, ...]:
    """The plan the store's ``SqlProgram`` evaluates without Python objects: AND / OR / NOT
    over the leaves :func:`_specialize` knows (a property against a number, a string or a
    boolean constant; IN; IS NULL). Raises ``_NoPlan`` for anything else."""
    kind = node[0]
    if kind in ("and", "or"):
        return (kind, [_plan(n, slots) for n in node[1]])
    if kind == "not":
        return ("not", _plan(node[1], slots))
    if kind == "in":
        members = sorted(node[2])
        try:
            encoded = [m.encode("utf-8") for m in members]
        except UnicodeEncodeError:
            raise _NoPlan() from None
        return ("in", slots[node[1][1]], encoded, bool(node[3]), any("\ufffd" in m for m in members))
    if kind == "eq":
        left, right, op = node[1], node[2], "="
    elif kind == "cmp":
        left, right, op = node[2], node[3], node[1]
    else:
        raise _NoPlan()
    if left[0] == "prop":
        prop_left, name = True, left[1]
        ok, k = _constant_of(right)
    elif right[0] == "prop":
        prop_left, name = False, right[1]
        ok, k = _constant_of(left)
    else:
        raise _NoPlan()
    if not ok:
        raise _NoPlan()
    i = slots[name]
    tk = type(k)
    if kind == "eq" and k is None and prop_left:
        return ("isnull", i)
    if tk is int:
        return ("int", i, op, k, _INT_MIN, _INT_MAX, prop_left)
    if tk is JLong:
        return ("int", i, op, int(k), _LONG_MIN, _LONG_MAX, prop_left)  # type: ignore[arg-type]
    if tk is float and k == k and k != 0.0:
        return ("dbl", i, op, k, prop_left)
    if kind == "eq" and isinstance(k, str):
        try:
            return ("str", i, k.encode("utf-8"), prop_left, "\ufffd" in k)
        except UnicodeEncodeError:
            raise _NoPlan() from None
    if kind == "eq" and tk is bool and prop_left:
        return ("bool", i, k)
    raise _NoPlan()


def _java_boolean(x: str) -> bool:
    """Java ``Boolean.valueOf(String)``."""
    return x.lower() == "true"


def _compile(node: Node, slots: Mapping[str, int], fast: bool = True) -> Fn:
    """The closure of ``node``; ``fast=False`` skips the specialized shapes (tests compare
    both)."""
    if fast:
        spec = _specialize(node, slots)
        if spec is not None:
            return spec
    kind = node[0]
    if kind == "const":
        value = node[1]
        return lambda v: value
    if kind == "prop":
        i = slots[node[1]]
        return lambda v: v[i]
    if kind == "neg":
        inner = _compile(node[1], slots, fast)
        return lambda v: _negate(inner(v))
    if kind == "not":
        inner = _compile(node[1], slots, fast)

        def not_(v: Sequence[str | None]) -> Value:
            x = inner(v)
            if x is None:
                return None
            if type(x) is not bool:
                raise EvaluationError("NOT of a value that is not a boolean")
            return not x

        return not_
    if kind == "cast":
        inner = _compile(node[1], slots, fast)

        def cast(v: Sequence[str | None]) -> Value:
            x = inner(v)
            if x is None:
                return None
            return x if type(x) is bool else False

        return cast
    if kind == "in":
        i = slots[node[1][1]]
        members: frozenset[str] = node[2]
        negated: bool = node[3]

        def in_(v: Sequence[str | None]) -> Value:
            x = v[i]
            if x is None:
                return None
            return (x in members) != negated

        return in_
    if kind == "eq":
        left, right = _compile(node[1], slots, fast), _compile(node[2], slots, fast)

        def eq(v: Sequence[str | None]) -> Value:
            lv = left(v)
            rv = right(v)
            if lv is None:
                return True if rv is None else None
            if rv is None:
                return False
            return _compare(lv, rv) == 0

        return eq
    if kind == "cmp":
        return _compile_cmp(node[1], _compile(node[2], slots, fast), _compile(node[3], slots, fast))
    if kind in ("and", "or"):
        parts = tuple(_compile(n, slots, fast) for n in node[1])
        stop = kind == "or"  # OR stops at the first TRUE, AND at the first FALSE

        def logic(v: Sequence[str | None]) -> Value:
            unknown = False
            for p in parts:
                x = p(v)
                if x is None:
                    unknown = True
                elif type(x) is not bool:
                    raise EvaluationError("a logical operand that is not a boolean")
                elif x is stop:
                    return stop
            return None if unknown else not stop

        return logic
    raise AssertionError(kind)


_ANSWER: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _compile_cmp(op: str, left: Fn, right: Fn) -> Fn:
    answer = _ANSWER[op]

    def cmp(v: Sequence[str | None]) -> Value:
        lv = left(v)
        if lv is None:
            return None
        rv = right(v)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # two strings: both must be numbers
            return answer(_double_compare(_parse_double(lv), _parse_double(rv)))
        return answer(_compare(lv, rv))

    return cmp


class Sql92Filter:
    """A compiled SQL92 selector.

    Attributes:
        expression: the text it was compiled from.
        keys: the property names it reads, in slot order.
        key_bytes: the same names UTF-8 encoded (what the store's scan looks up).
    """

    __slots__ = ("expression", "keys", "key_bytes", "plan", "_fn")

    def __init__(self, expression: str, keys: tuple[str, ...], fn: Fn, plan: tuple[Any, ...] | None = None) -> None:
        self.expression = expression
        self.keys = keys
        self.key_bytes = tuple(k.encode("utf-8", "surrogatepass") for k in keys)
        #: the nested tuples ``rmq._store.SqlProgram`` evaluates in C, or None when the
        #: expression has a shape only the Python evaluator takes
        self.plan = plan
        self._fn = fn

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """Java ``Expression.evaluate``: TRUE, FALSE or unknown (``None``); raises
        :class:`EvaluationError` when a property cannot be converted as the expression asks."""
        result = self._fn([properties.get(k) for k in self.keys])
        return result if type(result) is bool else None

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether a message with these properties passes (errors and unknown do not)."""
        return self.match_values([properties.get(k) for k in self.keys])

    def match_values(self, values: Sequence[str | None]) -> bool:
        """:meth:`matches` given the values of :attr:`keys` in order (``None`` when absent);
        never raises."""
        try:
            return self._fn(values) is True
        except (EvaluationError, ValueError, TypeError, OverflowError, RecursionError):
            return False

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


def compile_sql92(expression: str, *, _fast: bool = True) -> Sql92Filter:
    """Parse and compile a SQL92 selector; :class:`SelectorError` when it is not valid.

    The expression may be at most :data:`MAX_EXPRESSION_LENGTH` characters and nest at most
    :data:`MAX_DEPTH` levels."""
    if not isinstance(expression, str):
        raise SelectorError(
            f"Invalid MessageSelector. the expression must be a string, not {type(expression).__name__}"
        )
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(
            f"Invalid MessageSelector. the expression has {len(expression)} characters, "
            f"at most {MAX_EXPRESSION_LENGTH} are allowed"
        )
    if not expression.strip():
        raise SelectorError("Invalid MessageSelector. the expression is empty")
    parser = _Parser(expression)
    node = parser.parse()
    if _tree_depth(node) > 2 * MAX_DEPTH:
        raise SelectorError(f"Invalid MessageSelector. the expression nests deeper than {2 * MAX_DEPTH} operators")
    keys = tuple(parser.names)
    try:
        plan: tuple[Any, ...] | None = _plan(node, parser.names) if _fast else None
    except _NoPlan:
        plan = None
    return Sql92Filter(expression, keys, _compile(node, parser.names, _fast), plan)
