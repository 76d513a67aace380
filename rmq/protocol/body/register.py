"""REGISTER_BROKER's compressed body (Java ``RegisterBrokerBody.encode(true)`` / ``decode(data,
true)``, sent with ``compressed=true`` in the header when the broker's ``compressedRegister``
is set).

Deflated (zlib format, Java's ``DeflaterOutputStream`` with ``BEST_COMPRESSION``), big-endian
int32 lengths: the dataVersion's JSON, the topic count, one ``TopicConfig.encode()`` line per
topic (``name readQueueNums writeQueueNums perm topicFilterType``, space-separated: topicSysFlag
and order are not carried, as in Java), then the filter-server list's JSON.

Both forms of the body decode into :class:`TopicEntry` values, the four fields of a
``TopicConfig`` a route needs: the JSON one with msgspec (:func:`decode_register_body`), the
compressed one's topic lines with the native reader ``rmq.protocol._codec.register_topic_lines``
(its pure-Python reference here runs for anything outside the usual shape, naming what is wrong,
and under ``RMQ_NO_EXTENSIONS=1``). The name server compares them with what it holds
(``RouteInfoManager.register_broker``), so they are frozen (hashable, comparable in C) and
untracked by the garbage collector (ints only): a 10,000-topic registration allocates no
tracked object per topic.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from rmq.common import fastjson, native
from rmq.common.constants import PermName

__all__ = [
    "MAX_TOPIC_LINE",
    "TopicEntry",
    "compressed_register_raw",
    "decode_compressed_register_body",
    "decode_register_body",
    "topic_lines",
]

_INT = struct.Struct(">i")

#: The longest topic line the decoder takes: a 127-character name (Java's limit) and four
#: numbers and a filter type with room to spare.
MAX_TOPIC_LINE = 256


def topic_lines(table: Mapping[str, Mapping[str, Any]]) -> bytes:
    """Length-prefixed ``TopicConfig.encode()`` lines of ``table`` (topic -> TopicConfig JSON),
    the body's middle part without the count."""
    out = bytearray()
    for name, tc in table.items():
        line = (
            f"{tc.get('topicName', name)} {tc.get('readQueueNums', 16)} {tc.get('writeQueueNums', 16)} "
            f"{tc.get('perm', 6)} {tc.get('topicFilterType', 'SINGLE_TAG')}"
        ).encode()
        out += _INT.pack(len(line))
        out += line
    return bytes(out)


def compressed_register_raw(
    data_version: Mapping[str, Any], count: int, lines: Iterable[bytes], filter_servers: list[str] | None = None
) -> bytes:
    """The uncompressed stream: ``data_version``, ``count`` topics whose :func:`topic_lines`
    parts are ``lines``, the filter servers. ``zlib.compress(raw, 9)`` is the body."""
    dv = json.dumps(dict(data_version), separators=(",", ":")).encode()
    fs = json.dumps(filter_servers or []).encode()
    return b"".join((_INT.pack(len(dv)), dv, _INT.pack(count), *lines, _INT.pack(len(fs)), fs))


class TopicEntry(msgspec.Struct, frozen=True, gc=False):
    """The four fields of a Java ``TopicConfig`` a route needs (defaults: no queues, read +
    write, no sysFlag); a typed decode of a RegisterBrokerBody skips the rest of each entry.
    A compressed body carries no ``topicSysFlag`` (Java's ``TopicConfig.encode()`` leaves it
    out), so its entries have 0."""

    readQueueNums: int = 0
    writeQueueNums: int = 0
    perm: int = int(PermName.READ_WRITE)
    topicSysFlag: int = 0


class _RegisterWrapper(msgspec.Struct):
    topicConfigTable: dict[str, TopicEntry] = msgspec.field(default_factory=dict)
    dataVersion: dict[str, Any] = msgspec.field(default_factory=dict)


class _RegisterBody(msgspec.Struct):
    topicConfigSerializeWrapper: _RegisterWrapper | None = None


_REGISTER_BODY = msgspec.json.Decoder(_RegisterBody)


def decode_register_body(body: bytes) -> tuple[dict[str, TopicEntry], dict[str, Any]] | None:
    """(topicConfigTable, dataVersion) of a JSON RegisterBrokerBody of the usual shape (what
    Java and rmq brokers send: integer fields as JSON integers), decoded straight into
    :class:`TopicEntry` values: about a third of the CPU of a decode into dicts, for a body
    of 10,000 topics (1.5 MB) every 30 s per broker. None for any other shape or text, or a
    body past ``fastjson.MAX_SIZE``; the caller then decodes it generally (fastjson, which
    names the size limit) and the name server's checks name what is wrong."""
    if len(body) > fastjson.MAX_SIZE:
        return None
    try:
        wrapper = _REGISTER_BODY.decode(body).topicConfigSerializeWrapper
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if wrapper is None:
        return {}, {}
    return wrapper.topicConfigTable, wrapper.dataVersion


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"compressed RegisterBrokerBody ends inside {what}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def read_int(self, what: str) -> int:
        return int(_INT.unpack(self.take(4, what))[0])


def decode_compressed_register_body(body: bytes, max_topics: int) -> tuple[dict[str, TopicEntry], dict[str, Any]]:
    """``(topicConfigTable, dataVersion)`` of a compressed body, each table entry a
    :class:`TopicEntry` (``topicSysFlag`` 0: the body does not carry it). ``ValueError`` for a
    body that is not one, has more than ``max_topics`` topics, has a malformed topic line, or
    inflates past what that many topics need (a zip bomb)."""
    limit = 65_536 + max_topics * (4 + MAX_TOPIC_LINE)
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise ValueError(f"compressed RegisterBrokerBody does not inflate: {e}") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise ValueError(f"compressed RegisterBrokerBody inflates past {limit} bytes ({max_topics} topics)")
    if not inflater.eof:
        raise ValueError("compressed RegisterBrokerBody does not inflate: the deflate stream is cut short")
    r = _Reader(raw)
    dv_len = r.read_int("the dataVersion length")
    if dv_len > 65_536:
        raise ValueError(f"compressed RegisterBrokerBody: dataVersion of {dv_len} bytes")
    try:
        data_version = json.loads(r.take(dv_len, "the dataVersion"))
    except ValueError:
        raise ValueError("compressed RegisterBrokerBody: the dataVersion is not JSON") from None
    if not isinstance(data_version, dict):
        raise ValueError("compressed RegisterBrokerBody: the dataVersion is not an object")
    count = r.read_int("the topic count")
    if not 0 <= count <= max_topics:
        raise ValueError(f"compressed RegisterBrokerBody: {count} topics (at most {max_topics})")
    if _native_lines is not None:
        fast = _native_lines(raw, r.pos, count, TopicEntry)
        if fast is not None:
            return fast, data_version
    return _topic_lines_py(r, count), data_version


def _topic_lines_py(r: _Reader, count: int) -> dict[str, TopicEntry]:
    """The reference reader of the topic lines (and the one that names a malformed line)."""
    table: dict[str, TopicEntry] = {}
    for _ in range(count):
        n = r.read_int("a topic length")
        if not 0 < n <= MAX_TOPIC_LINE:
            raise ValueError(f"compressed RegisterBrokerBody: a topic line of {n} bytes")
        parts = r.take(n, "a topic").decode("utf-8", "replace").split(" ")
        if len(parts) != 5:
            raise ValueError(f"compressed RegisterBrokerBody: topic line {' '.join(parts)[:160]!r} is not 5 fields")
        name, read, write, perm, _filter_type = parts
        try:
            table[name] = TopicEntry(int(read), int(write), int(perm))
        except ValueError:
            raise ValueError(f"compressed RegisterBrokerBody: topic {name[:160]!r} has a non-integer field") from None
    return table


# The native reader of the topic lines (rmq/protocol/_codec.pyx); RMQ_NO_EXTENSIONS=1 leaves it out.
_native_lines: Callable[[bytes, int, int, type[TopicEntry]], dict[str, TopicEntry] | None] | None = None
if native.ENABLED:
    try:
        from rmq.protocol._codec import register_topic_lines as _native_lines
    except ImportError:  # pragma: no cover - an extension built before the reader existed
        pass
native.chose("register body reader", _native_lines is not None)
