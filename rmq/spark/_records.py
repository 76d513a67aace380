"""Pulled message records → Arrow columns, and rows → the SEND batch body.

Pure Python plus pyarrow (imported by the functions that need it), no pyspark, so the codec is
unit-tested without a JVM.

A PULL_MESSAGE body is message records back to back, each the CommitLog record layout
(big-endian; wire-contract §9). Offsets below are from the start of the record, for IPv4 hosts
(SYSFLAG bit 0x10 widens BORNHOST, bit 0x20 widens STOREHOST, each by 12 bytes)::

      0               4               8               12              16
     +---------------+---------------+---------------+---------------+
   0 |   TOTALSIZE   |   MAGICCODE   |    BODYCRC    |    QUEUEID    |
     +---------------+---------------+---------------+---------------+
  16 |     FLAG      |          QUEUEOFFSET          |  PHYSICALOFF… |
     +---------------+-------------------------------+---------------+
  32 | …PHYSICALOFF  |    SYSFLAG    |        BORNTIMESTAMP          |
     +---------------+---------------+-------------------------------+
  48 |  BORNHOST ip  | BORNHOST port |        STORETIMESTAMP         |
     +---------------+---------------+-------------------------------+
  64 | STOREHOST ip  | STOREHOST port| RECONSUMETIMES| PREPARED TX … |
     +---------------+---------------+---------------+---------------+
  80 | … TX OFFSET   |    BODYLEN    | BODY (BODYLEN bytes) ...
     +---------------+---------------+------------------------------
     | TOPICLEN (1 byte; 2 bytes when MAGICCODE is v2) | TOPIC ...
     | PROPLEN (int16) | PROPERTIES  "k\\x01v\\x02k\\x01v\\x02" (UTF-8) ...

The offsetMsgId (wire-contract §11) is ``HEX(STOREHOST ip ‖ port ‖ PHYSICALOFFSET)``.

The SEND_BATCH_MESSAGE body (wire-contract §5.2) is items back to back::

     +-----------+-----------+-----------+-----------+-----------+--------+---------+-------+
     | TOTALSIZE | MAGIC (0) | BODYCRC(0)|   FLAG    |  BODYLEN  |  BODY  | PROPLEN | PROPS |
     |  int32    |  int32    |  int32    |  int32    |  int32    |        |  int16  |       |
     +-----------+-----------+-----------+-----------+-----------+--------+---------+-------+
     TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterable, Mapping, Sequence

from rmq.errors import RemotingCommandError

__all__ = [
    "MAGIC_V1",
    "MAGIC_V2",
    "Columns",
    "decode_records",
    "parse_properties",
    "encode_properties",
    "encode_batch_item",
    "RecordDecodeError",
]

MAGIC_V1 = 0xDAA320A7  # MessageDecoder.MESSAGE_MAGIC_CODE (v1: 1-byte topic length)
MAGIC_V2 = 0xDAA320AB  # MESSAGE_MAGIC_CODE_V2 (2-byte topic length)

_SYSFLAG_COMPRESSED = 0x1
_SYSFLAG_BORNHOST_V6 = 0x10
_SYSFLAG_STOREHOST_V6 = 0x20

# TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP
_HEAD = struct.Struct(">iIiiiqqiq")  # 48 bytes, up to BORNHOST
_I16 = struct.Struct(">h")
_H16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ITEM_HEAD = struct.Struct(">iiiii")  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN

_PROP_SEP = "\x02"
_NAME_SEP = "\x01"


class RecordDecodeError(RemotingCommandError):
    """A pulled record is truncated or malformed; names the record's position."""


def parse_properties(s: str) -> dict[str, str]:
    """``"k\\x01v\\x02k\\x01v\\x02"`` → dict; empty or malformed items are skipped."""
    out = {}
    for item in s.split(_PROP_SEP):
        k, sep, v = item.partition(_NAME_SEP)
        if sep and k:
            out[k] = v
    return out


def encode_properties(props: Mapping[str, str]) -> str:
    """dict → RocketMQ's properties string (trailing separator, as Java writes it)."""
    for k, v in props.items():
        if _PROP_SEP in k or _NAME_SEP in k or _PROP_SEP in v or _NAME_SEP in v:
            raise ValueError(f"property {k!r} contains a reserved separator character (\\x01 or \\x02)")
    return "".join(f"{k}{_NAME_SEP}{v}{_PROP_SEP}" for k, v in props.items())


class Columns:
    """Column lists filled by :func:`decode_records`; ``want`` limits the work to the columns asked for."""

    __slots__ = ("want", "n", "key", "value", "topic", "partition", "offset", "timestamp",
                 "bornTimestamp", "tags", "msgId", "properties", "brokerName", "_need_props")

    def __init__(self, want: Iterable[str]) -> None:
        self.want = frozenset(want)
        self.n = 0
        for name in ("key", "value", "topic", "partition", "offset", "timestamp", "bornTimestamp",
                     "tags", "msgId", "properties"):
            setattr(self, name, [])
        self.brokerName = None
        self._need_props = bool(self.want & {"key", "tags", "properties"})

    def clear(self) -> None:
        self.__init__(self.want)


def decode_records(body: bytes, cols: Columns, *, start: int, end: int,
                   tags: frozenset[str] | None = None) -> int:
    """Decode every record of a pull body into ``cols``.

    Only records with ``start <= queue offset < end`` are kept, and with ``tags`` given only
    those whose TAGS is in it (brokers filter by tag hash code; the string check is ours, as
    every RocketMQ client does it).

    Returns:
        ``(first, after)``: the queue offset of the first record in ``[start, end)`` (None if
        there was none) and the offset after the last one (``start`` if there was none).

    Raises:
        RecordDecodeError: a record is truncated or its magic code is unknown.
    """
    want = cols.want
    need_props = cols._need_props or tags is not None
    w_key = "key" in want
    w_value = "value" in want
    w_topic = "topic" in want
    w_part = "partition" in want
    w_off = "offset" in want
    w_ts = "timestamp" in want
    w_bts = "bornTimestamp" in want
    w_tags = "tags" in want
    w_id = "msgId" in want
    w_props = "properties" in want
    head_unpack = _HEAD.unpack_from
    pos = 0
    total = len(body)
    last = start
    first = None
    mv = memoryview(body)
    while pos < total:
        if total - pos < 88:
            raise RecordDecodeError(f"truncated record header at byte {pos} of a {total}-byte pull body")
        (size, magic, _crc, qid, _flag, qoff, phy, sysflag, born_ts) = head_unpack(body, pos)
        if size < 88 or pos + size > total:
            raise RecordDecodeError(f"record at byte {pos} claims {size} bytes; {total - pos} remain")
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            raise RecordDecodeError(f"record at byte {pos} has unknown magic code 0x{magic:08X}")
        p = pos + 48 + (20 if sysflag & _SYSFLAG_BORNHOST_V6 else 8)
        (store_ts,) = _I64.unpack_from(body, p)
        p += 8
        store_host_at = p
        p += 20 if sysflag & _SYSFLAG_STOREHOST_V6 else 8
        p += 12  # RECONSUMETIMES, PREPARED TX OFFSET
        (body_len,) = _I32.unpack_from(body, p)
        p += 4
        body_at = p
        p += body_len
        if magic == MAGIC_V1:
            topic_len = body[p]
            p += 1
        else:
            (topic_len,) = _H16.unpack_from(body, p)
            p += 2
        topic_at = p
        p += topic_len
        (prop_len,) = _I16.unpack_from(body, p)
        p += 2
        if body_len < 0 or prop_len < 0 or p + prop_len != pos + size:
            raise RecordDecodeError(
                f"record at byte {pos} (queue offset {qoff}) has inconsistent lengths: body {body_len}, "
                f"topic {topic_len}, properties {prop_len}, total {size}")
        props_at = p
        rec_start = pos
        pos += size
        if qoff < start or qoff >= end:
            if qoff >= end:
                break
            continue
        if first is None:
            first = qoff
        last = qoff + 1
        if need_props:
            props = parse_properties(str(mv[props_at:props_at + prop_len], "utf-8", "replace"))
            tag = props.get("TAGS")
            if tags is not None and tag not in tags:
                continue
        else:
            props = None
        cols.n += 1
        if w_value:
            v = body[body_at:body_at + body_len]
            if sysflag & _SYSFLAG_COMPRESSED:
                try:
                    v = zlib.decompress(v)
                except zlib.error as e:
                    raise RecordDecodeError(f"body of queue offset {qoff} is flagged compressed but does not inflate: {e}") from e
            cols.value.append(v)
        if w_key:
            k = props.get("KEYS")
            cols.key.append(None if k is None else k.encode("utf-8"))
        if w_topic:
            cols.topic.append(str(mv[topic_at:topic_at + topic_len], "utf-8", "replace"))
        if w_part:
            cols.partition.append(qid)
        if w_off:
            cols.offset.append(qoff)
        if w_ts:
            cols.timestamp.append(store_ts)
        if w_bts:
            cols.bornTimestamp.append(born_ts)
        if w_tags:
            cols.tags.append(props.get("TAGS"))
        if w_id:
            host_len = 20 if sysflag & _SYSFLAG_STOREHOST_V6 else 8
            cols.msgId.append((body[store_host_at:store_host_at + host_len] + body[rec_start + 28:rec_start + 36]).hex().upper())
        if w_props:
            cols.properties.append(props)
    return first, last


def encode_batch_item(body: bytes, props_str: str, flag: int = 0) -> bytes:
    """One item of a SEND_BATCH_MESSAGE body (layout in the module docstring)."""
    pb = props_str.encode("utf-8")
    if len(pb) > 32767:
        raise ValueError(f"message properties are {len(pb)} bytes; RocketMQ allows at most 32767")
    return b"".join((_ITEM_HEAD.pack(20 + len(body) + 2 + len(pb), 0, 0, flag, len(body)), body,
                     _I16.pack(len(pb)), pb))


def to_arrow_batch(cols: Columns, names: Sequence[str], arrow_schema, kinds: Sequence[str]):
    """Build a ``pyarrow.RecordBatch`` with exactly ``arrow_schema`` from decoded columns.

    ``names[i]`` is our column name for schema field ``i``; ``kinds[i]`` says how the user
    declared it: ``"native"``, ``"string"`` (key/value as text), ``"long"`` (timestamps as
    epoch ms, partition widened).
    """
    import numpy as np
    import pyarrow as pa

    n = cols.n
    arrays = []
    for name, field, kind in zip(names, arrow_schema, kinds):
        t = field.type
        if name in ("timestamp", "bornTimestamp"):
            ms = np.fromiter(getattr(cols, name), dtype=np.int64, count=n)
            arr = pa.array(ms if kind == "long" else ms * 1000, type=t)
        elif name == "timestampType":
            arr = pa.array(np.ones(n, dtype=np.int32), type=t)  # store time = log-append time
        elif name == "brokerName":
            arr = pa.array([cols.brokerName] * n, type=t)
        elif name == "properties":
            keys: list = []
            items: list = []
            offs = [0]
            for d in cols.properties:
                keys.extend(d.keys())
                items.extend(d.values())
                offs.append(len(keys))
            arr = pa.MapArray.from_arrays(pa.array(offs, pa.int32()), pa.array(keys, t.key_type),
                                          pa.array(items, t.item_type), type=t)
        elif name in ("key", "value") and kind == "string":
            arr = pa.array([None if b is None else b.decode("utf-8", "replace") for b in getattr(cols, name)], type=t)
        else:
            arr = pa.array(getattr(cols, name), type=t)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
