"""The one reader of the JSON dialect Java's fastjson writes for RocketMQ bodies.

fastjson writes a ``Map<K, V>`` with non-string keys as they are: integers unquoted
(``TopicRouteData.brokerDatas[].brokerAddrs``: ``{0:"addr"}``) and objects as objects
(``TopicStatsTable.offsetTable``, ``ConsumeStats.offsetTable``, ``ResetOffsetBody.offsetTable``
keyed by ``MessageQueue``: ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``).
Neither is JSON.

:func:`loads` reads both. An integer key becomes its decimal string, an object key the
canonical JSON text of the object (:func:`canonical`: keys sorted, compact), so the result is
plain JSON data (every map key a ``str``) and a reader turns a key back with :func:`object_key`
(``rmq.protocol.body._mq.mq_of`` does it for MessageQueue keys).

Plain JSON (most bodies) goes through msgspec's C decoder first; only text it refuses is
parsed here, with the scalars and every standard-JSON subtree still decoded by the C ``json``
scanner, so a ``Map<MessageQueue, V>`` of thousands of queues costs one Python step per entry.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["MAX_DEPTH", "MAX_SIZE", "canonical", "dumps", "loads", "object_key"]

#: The deepest nesting the fastjson parser accepts: RocketMQ bodies nest a few levels; a peer's
#: body nested deeper is refused with ValueError rather than exhausting the stack. (Plain JSON
#: is bounded by the C decoders' own recursion limit, also reported as ValueError.)
MAX_DEPTH = 64

#: The largest text :func:`loads` reads by default (64 MiB, the largest remoting frame the
#: blocking client accepts); a longer one is refused with ValueError before parsing.
MAX_SIZE = 64 * 1024 * 1024

_decoder = json.JSONDecoder()
_WS = " \t\n\r"


def canonical(obj: Any) -> str:
    """The text an object key becomes in :func:`loads`'s result (sorted keys, compact), which is
    also how fastjson writes a ``MessageQueue`` key (its fields in alphabetical order)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON as fastjson writes it (no spaces, non-ASCII kept): what the broker and
    the name server answer with. (Bodies too large for ``json`` on the event loop use msgspec:
    ``rmq.protocol.body.dumps_json``.)"""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def object_key(key: str) -> Any:
    """The object (or number) a key of :func:`loads`'s result stood for; ValueError if none."""
    return json.loads(key)


def loads(text: str | bytes | bytearray | memoryview, *, max_size: int = MAX_SIZE) -> Any:
    """Parse fastjson output (standard JSON included).

    Integer map keys come back as their decimal text and object keys as :func:`canonical` text.
    Raises ``ValueError`` (``UnicodeDecodeError`` and ``json.JSONDecodeError`` are ValueErrors)
    when the text is neither, is longer than ``max_size`` (default :data:`MAX_SIZE`) or nests
    deeper than :data:`MAX_DEPTH` (plain JSON: deeper than the C decoder allows)."""
    if len(text) > max_size:
        raise ValueError(f"fastjson text of {len(text)} bytes is over the limit of {max_size}")
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass
    if not isinstance(text, str):
        text = bytes(text).decode("utf-8")
    try:
        return _Parser(text).parse()
    except RecursionError:
        raise ValueError("fastjson text nested too deeply") from None


class _Parser:
    """A recursive-descent parser for the fastjson dialect; standard-JSON subtrees are handed to
    the C scanner whole, as long as failed attempts have not scanned more than twice the text
    (so a pathological body costs at most a few linear passes, never a quadratic one)."""

    __slots__ = ("s", "n", "budget")

    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)
        self.budget = 2 * len(s)

    def parse(self) -> Any:
        value, end = self.value(self.skip(0), 0)
        end = self.skip(end)
        if end != self.n:
            raise ValueError(f"extra data at offset {end}")
        return value

    def skip(self, i: int) -> int:
        s, n = self.s, self.n
        while i < n and s[i] in _WS:
            i += 1
        return i

    def value(self, i: int, depth: int) -> tuple[Any, int]:
        s = self.s
        if i >= self.n:
            raise ValueError("unexpected end of fastjson text")
        c = s[i]
        if c == "{" or c == "[":
            if depth >= MAX_DEPTH:
                raise ValueError(f"fastjson text nested deeper than {MAX_DEPTH} levels")
            if self.budget > 0:
                try:
                    return _decoder.raw_decode(s, i)
                except json.JSONDecodeError as e:
                    self.budget -= e.pos - i + 1
                except RecursionError:
                    raise ValueError("fastjson text nested too deeply") from None
            return self.object(i, depth + 1) if c == "{" else self.array(i, depth + 1)
        try:
            return _decoder.raw_decode(s, i)
        except json.JSONDecodeError as e:
            raise ValueError(f"malformed fastjson text at offset {i}: {e.msg}") from None

    def expect(self, i: int, ch: str) -> int:
        i = self.skip(i)
        if i >= self.n or self.s[i] != ch:
            raise ValueError(f"expected {ch!r} at offset {i}")
        return i + 1

    def object(self, i: int, depth: int) -> tuple[dict[str, Any], int]:
        s = self.s
        out: dict[str, Any] = {}
        i = self.skip(i + 1)
        if i < self.n and s[i] == "}":
            return out, i + 1
        while True:
            i = self.skip(i)
            key_value, i = self.value(i, depth)
            if isinstance(key_value, str):
                key = key_value
            elif isinstance(key_value, (dict, list, bool)) or key_value is None:
                key = canonical(key_value)
            else:
                key = str(key_value)
            i = self.expect(i, ":")
            out[key], i = self.value(self.skip(i), depth)
            i = self.skip(i)
            if i < self.n and s[i] == ",":
                i += 1
                continue
            return out, self.expect(i, "}")

    def array(self, i: int, depth: int) -> tuple[list[Any], int]:
        s = self.s
        out: list[Any] = []
        i = self.skip(i + 1)
        if i < self.n and s[i] == "]":
            return out, i + 1
        while True:
            item, i = self.value(self.skip(i), depth)
            out.append(item)
            i = self.skip(i)
            if i < self.n and s[i] == ",":
                i += 1
                continue
            return out, self.expect(i, "]")
