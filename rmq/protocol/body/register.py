"""REGISTER_BROKER's compressed body (Java ``RegisterBrokerBody.encode(true)`` / ``decode(data,
true)``, sent with ``compressed=true`` in the header when the broker's ``compressedRegister``
is set).

Deflated (zlib format, Java's ``DeflaterOutputStream`` with ``BEST_COMPRESSION``), big-endian
int32 lengths: the dataVersion's JSON, the topic count, one ``TopicConfig.encode()`` line per
topic (``name readQueueNums writeQueueNums perm topicFilterType``, space-separated: topicSysFlag
and order are not carried, as in Java), then the filter-server list's JSON.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MAX_TOPIC_LINE",
    "compressed_register_raw",
    "decode_compressed_register_body",
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


def decode_compressed_register_body(body: bytes, max_topics: int) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``(topicConfigTable, dataVersion)`` of a compressed body; each table entry as the JSON
    form has it (``topicName``, ``readQueueNums``, ``writeQueueNums``, ``perm``,
    ``topicFilterType``). ``ValueError`` for a body that is not one, has more than
    ``max_topics`` topics, or inflates past what that many topics need (a zip bomb)."""
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
    table: dict[str, dict[str, Any]] = {}
    for _ in range(count):
        n = r.read_int("a topic length")
        if not 0 < n <= MAX_TOPIC_LINE:
            raise ValueError(f"compressed RegisterBrokerBody: a topic line of {n} bytes")
        parts = r.take(n, "a topic").decode("utf-8", "replace").split(" ")
        if len(parts) != 5:
            raise ValueError(f"compressed RegisterBrokerBody: topic line {' '.join(parts)[:160]!r} is not 5 fields")
        name, read, write, perm, filter_type = parts
        try:
            table[name] = {
                "topicName": name,
                "readQueueNums": int(read),
                "writeQueueNums": int(write),
                "perm": int(perm),
                "topicFilterType": filter_type,
            }
        except ValueError:
            raise ValueError(f"compressed RegisterBrokerBody: topic {name[:160]!r} has a non-integer field") from None
    return table, data_version
