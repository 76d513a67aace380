"""Pulled message records → Arrow columns, and rows → the SEND batch body.

Pure Python plus pyarrow (imported by the functions that need it), no pyspark, so the codec is
unit-tested without a JVM.

A PULL_MESSAGE body is message records back to back, each the CommitLog record layout drawn in
:mod:`rmq.common.message`; the record walker there (``walk_records``) validates every record
and says where its fields are, and this module projects it onto Arrow columns. The offsetMsgId
is ``HEX(STOREHOST ip ‖ port ‖ PHYSICALOFFSET)``.

The SEND_BATCH_MESSAGE body (Java MessageDecoder.encodeMessages) is items back to back::

     +-----------+-----------+-----------+-----------+-----------+--------+---------+-------+
     | TOTALSIZE | MAGIC (0) | BODYCRC(0)|   FLAG    |  BODYLEN  |  BODY  | PROPLEN | PROPS |
     |  int32    |  int32    |  int32    |  int32    |  int32    |        |  int16  |       |
     +-----------+-----------+-----------+-----------+-----------+--------+---------+-------+
     TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from rmq.common import message as common
from rmq.common.message import (
    HOST_V4_LEN,
    MAX_INFLATED_BODY,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MIN_RECORD_HEADER,
    OFF_BORNHOST,
    OFF_BORNTIMESTAMP,
    OFF_MAGIC,
    OFF_PHYSICALOFFSET,
    OFF_QUEUEID,
    OFF_QUEUEOFFSET,
    OFF_SYSFLAG,
    OFF_TOTALSIZE,
    RECORD_HEAD,
    MessageConst,
    MessageSysFlag,
    RecordDecodeError,
    encode_batch_item,
    inflate_body,
    string_to_properties,
    walk_records,
)

__all__ = [
    "MAGIC_V1",
    "MAGIC_V2",
    "Columns",
    "decode_records",
    "parse_properties",
    "encode_properties",
    "encode_batch_item",
    "RecordDecodeError",
    "Chunk",
    "record_starts",
    "queue_offset_at",
    "chunk_to_arrow",
    "to_arrow_batch",
    "headers_array",
]

MAGIC_V1 = MESSAGE_MAGIC_CODE  # v1: 1-byte topic length
MAGIC_V2 = MESSAGE_MAGIC_CODE_V2  # v2: 2-byte topic length

_SYSFLAG_COMPRESSED = MessageSysFlag.COMPRESSED_FLAG
_SYSFLAG_BORNHOST_V6 = MessageSysFlag.BORNHOST_V6_FLAG
_SYSFLAG_STOREHOST_V6 = MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
_HEAD = RECORD_HEAD  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_I64 = struct.Struct(">q")
# With IPv4 hosts (what the vectorized path handles) every field before the body is fixed:
_V4_STORETIMESTAMP = OFF_BORNHOST + HOST_V4_LEN
_V4_STOREHOST = _V4_STORETIMESTAMP + 8
_V4_BODYLEN = MIN_RECORD_HEADER - 4
_V4_BODY = MIN_RECORD_HEADER

parse_properties = string_to_properties  # "k\x01v\x02k\x01v\x02" → dict; empty or malformed items skipped


def encode_properties(props: Mapping[str, str]) -> str:
    """dict → RocketMQ's properties string (trailing separator, as Java clients write it);
    ValueError when a name or value holds a separator character."""
    return common.properties_to_string(props, trailing_separator=True, check_separators=True)


_NO_PROPS: Mapping[str, str] = MappingProxyType({})

# pyarrow ships no type stubs: its arrays, schemas and batches are Any to the type checker.
ArrowArray = Any
ArrowSchema = Any
RecordBatch = Any
#: record i's properties are items offsets[i]:offsets[i+1] of the flat key and value arrays
ArrowProps = tuple["npt.NDArray[np.int64]", ArrowArray, ArrowArray]


class Columns:
    """Column lists filled by :func:`decode_records`; ``want`` limits the work to the columns asked for."""

    __slots__ = (
        "want",
        "n",
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "bornTimestamp",
        "tags",
        "msgId",
        "properties",
        "brokerName",
        "_need_props",
    )

    def __init__(self, want: Iterable[str]) -> None:
        self.want = frozenset(want)
        self._need_props = bool(self.want & {"key", "tags", "properties", "headers"})
        self.clear()

    def clear(self) -> None:
        """Empty every column (``want`` stays)."""
        self.n = 0
        self.key: list[bytes | None] = []
        self.value: list[bytes] = []
        self.topic: list[str] = []
        self.partition: list[int] = []
        self.offset: list[int] = []
        self.timestamp: list[int] = []
        self.bornTimestamp: list[int] = []
        self.tags: list[str | None] = []
        self.msgId: list[str] = []
        self.properties: list[Mapping[str, str]] = []
        self.brokerName: str | None = None


def decode_records(
    body: bytes, cols: Columns, *, start: int, end: int, tags: frozenset[str] | None = None
) -> tuple[int | None, int]:
    """Decode every record of a pull body into ``cols``.

    Only records with ``start <= queue offset < end`` are kept, and with ``tags`` given only
    those whose TAGS is in it (brokers filter by tag hash code; the string check is ours, as
    every RocketMQ client does it).

    Returns:
        ``(first, after)``: the queue offset of the first record in ``[start, end)`` (None if
        there was none) and the offset after the last one (``start`` if there was none).

    Raises:
        RecordDecodeError: a record is malformed (the walker checks the whole body first), or
            a compressed body does not inflate or inflates past 4 MiB.
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
    w_props = "properties" in want or "headers" in want
    head_unpack = _HEAD.unpack_from
    last = start
    first = None
    props: Mapping[str, str]
    mv = memoryview(body)
    for (
        rec_start,
        _size,
        _version,
        sysflag,
        _bh_at,
        _bh_len,
        store_host_at,
        host_len,
        body_at,
        body_len,
        topic_at,
        topic_len,
        props_at,
        prop_len,
    ) in walk_records(body):
        (_s, _magic, _crc, qid, _flag, qoff, _phy, _sf, born_ts) = head_unpack(body, rec_start)
        (store_ts,) = _I64.unpack_from(body, store_host_at - 8)
        if qoff < start or qoff >= end:
            if qoff >= end:
                break
            continue
        if first is None:
            first = qoff
        last = qoff + 1
        if need_props:
            props = parse_properties(str(mv[props_at : props_at + prop_len], "utf-8", "replace"))
            tag = props.get(MessageConst.TAGS)
            if tags is not None and tag not in tags:
                continue
        else:
            props = _NO_PROPS  # read only when need_props (every column that reads it sets it)
        cols.n += 1
        if w_value:
            v = body[body_at : body_at + body_len]
            if sysflag & _SYSFLAG_COMPRESSED:
                v = inflate_body(v, MAX_INFLATED_BODY, what=f"body of queue offset {qoff}", sys_flag=sysflag)
            cols.value.append(v)
        if w_key:
            k = props.get(MessageConst.KEYS)
            cols.key.append(None if k is None else k.encode("utf-8"))
        if w_topic:
            cols.topic.append(str(mv[topic_at : topic_at + topic_len], "utf-8", "replace"))
        if w_part:
            cols.partition.append(qid)
        if w_off:
            cols.offset.append(qoff)
        if w_ts:
            cols.timestamp.append(store_ts)
        if w_bts:
            cols.bornTimestamp.append(born_ts)
        if w_tags:
            cols.tags.append(props.get(MessageConst.TAGS))
        if w_id:
            phy_at = rec_start + OFF_PHYSICALOFFSET
            cols.msgId.append(
                (body[store_host_at : store_host_at + host_len] + body[phy_at : phy_at + 8]).hex().upper()
            )
        if w_props:
            cols.properties.append(props)
    return first, last


def to_arrow_batch(cols: Columns, names: Sequence[str], arrow_schema: ArrowSchema, kinds: Sequence[str]) -> RecordBatch:
    """Build a ``pyarrow.RecordBatch`` with exactly ``arrow_schema`` from decoded columns.

    ``names[i]`` is our column name for schema field ``i``; ``kinds[i]`` says how the user
    declared it: ``"native"``, ``"string"`` (key/value as text), ``"long"`` (timestamps as
    epoch ms, partition widened).
    """
    import pyarrow as pa

    n = cols.n
    arrays = []
    for name, field, kind in zip(names, arrow_schema, kinds, strict=True):
        t = field.type
        if name in ("timestamp", "bornTimestamp"):
            ms = np.fromiter(getattr(cols, name), dtype=np.int64, count=n)
            arr = pa.array(ms if kind == "long" else ms * 1000, type=t)
        elif name == "timestampType":
            arr = pa.array(np.ones(n, dtype=np.int32), type=t)  # store time = log-append time
        elif name == "brokerName":
            arr = pa.array([cols.brokerName] * n, type=t)
        elif name == "properties":
            keys: list[str] = []
            items: list[str] = []
            offs = [0]
            for d in cols.properties:
                keys.extend(d.keys())
                items.extend(d.values())
                offs.append(len(keys))
            arr = pa.MapArray.from_arrays(
                pa.array(offs, pa.int32()), pa.array(keys, t.key_type), pa.array(items, t.item_type), type=t
            )
        elif name == "headers":
            hkeys: list[str] = []
            hvalues: list[bytes] = []
            hoffs = [0]
            for d in cols.properties:
                hkeys.extend(d.keys())
                hvalues.extend(v.encode("utf-8") for v in d.values())
                hoffs.append(len(hkeys))
            arr = headers_array(
                np.asarray(hoffs, dtype=np.int32), pa.array(hkeys, pa.string()), pa.array(hvalues, pa.binary()), t
            )
        elif name in ("key", "value") and kind == "string":
            arr = pa.array([None if b is None else b.decode("utf-8", "replace") for b in getattr(cols, name)], type=t)
        else:
            arr = pa.array(getattr(cols, name), type=t)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


# ------------------------------------------------------------------------------ vectorized path
#
# The per-record loop above costs a few microseconds of bytecode per message. For the common
# case (IPv4 hosts, v1 magic, uncompressed bodies) the reader instead walks only the TOTALSIZE
# chain in Python, joins the pull bodies of a chunk into one buffer, and gathers every fixed
# field for all records at once with numpy; values become an Arrow binary-view array over that
# buffer (no per-row Python objects) that Arrow casts to plain binary in C++.

_CHUNK_MAX_BYTES = 256 * 1024 * 1024  # keeps buffer offsets far below the int32 view limit


def record_starts(body: bytes) -> list[int]:
    """Byte positions of the records of a pull body, each validated by the record walker.

    Raises:
        RecordDecodeError: a record is malformed (the walker's message says where and how).
    """
    return [span[0] for span in walk_records(body)]


def queue_offset_at(body: bytes, start: int) -> int:
    """QUEUEOFFSET of the record at ``start``."""
    offset: int = _I64.unpack_from(body, start + OFF_QUEUEOFFSET)[0]
    return offset


class Chunk:
    """Pull bodies of one range waiting to become a RecordBatch: each body with its record
    starts and the offsets ``[lo, hi)`` it may contribute (the reader's cursor at that pull)."""

    __slots__ = ("bodies", "starts", "bounds", "records", "nbytes")

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.starts: list[list[int]] = []
        self.bounds: list[tuple[int, int]] = []
        self.records = 0
        self.nbytes = 0

    def add(self, body: bytes, starts: list[int], lo: int, hi: int) -> None:
        self.bodies.append(body)
        self.starts.append(starts)
        self.bounds.append((lo, hi))
        self.records += len(starts)
        self.nbytes += len(body)

    def full(self, rows: int) -> bool:
        return self.records >= rows or self.nbytes >= _CHUNK_MAX_BYTES


def _slow_chunk(
    chunk: Chunk,
    names: Sequence[str],
    arrow_schema: ArrowSchema,
    kinds: Sequence[str],
    tags: frozenset[str] | None,
    broker_name: str,
) -> RecordBatch:
    cols = Columns(names)
    cols.brokerName = broker_name
    for body, (lo, hi) in zip(chunk.bodies, chunk.bounds, strict=True):
        decode_records(body, cols, start=lo, end=hi, tags=tags)
    return to_arrow_batch(cols, names, arrow_schema, kinds)


def _props_arrow(
    u8: npt.NDArray[np.uint8], data: bytes, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> ArrowProps | None:
    """Parse properties strings for many records at once (Arrow compute, no per-row Python).

    Returns ``(offsets, keys, values)``: record ``i``'s properties are items
    ``offsets[i]:offsets[i+1]`` of the flat key and value string arrays. Items are split on
    \x02 and then on the first \x01; empty items and items without a name are dropped, like
    :func:`parse_properties`. None if some properties string is not valid UTF-8.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(starts)
    try:
        strings = _binary_view(u8, data, starts, lengths, n).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    lists = pc.split_pattern(strings, "\x02")
    flat = lists.flatten()
    ok = np.asarray(pc.and_(pc.match_substring(flat, "\x01"), pc.invert(pc.starts_with(flat, "\x01"))))
    counts = np.concatenate([[0], np.cumsum(ok, dtype=np.int64)])
    offsets = counts[np.asarray(lists.offsets)]
    kv = pc.split_pattern(flat.filter(pa.array(ok)), "\x01", max_splits=1)
    return offsets, pc.list_element(kv, 0), pc.list_element(kv, 1)


def _prop_column(props: ArrowProps, name: str) -> ArrowArray:
    """One property as a string column (null where absent; the last one wins, as in a dict)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets, keys, values = props
    n = len(offsets) - 1
    hit = np.asarray(pc.equal(keys, name))
    rows = np.repeat(np.arange(n), np.diff(offsets))[hit]
    pick = np.full(n, -1, dtype=np.int64)
    pick[rows] = np.flatnonzero(hit)
    return values.take(pa.array(pick, mask=pick < 0))


def chunk_to_arrow(
    chunk: Chunk,
    names: Sequence[str],
    arrow_schema: ArrowSchema,
    kinds: Sequence[str],
    *,
    tags: frozenset[str] | None,
    broker_name: str,
) -> RecordBatch:
    """The RecordBatch of a chunk: records inside their bounds and, with ``tags``, whose TAGS
    is in it; columns exactly ``arrow_schema``. Same result as :func:`decode_records` +
    :func:`to_arrow_batch`, which it falls back to for IPv6 hosts, v2 magic or compressed bodies."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not chunk.records:
        return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)
    data = b"".join(chunk.bodies)
    u8 = np.frombuffer(data, dtype=np.uint8)
    base = 0
    parts: list[npt.NDArray[np.int64]] = []
    lo_parts: list[npt.NDArray[np.int64]] = []
    hi_parts: list[npt.NDArray[np.int64]] = []
    for body, starts, (lo, hi) in zip(chunk.bodies, chunk.starts, chunk.bounds, strict=True):
        s = np.asarray(starts, dtype=np.int64)
        parts.append(s + base)
        lo_parts.append(np.full(len(s), lo, dtype=np.int64))
        hi_parts.append(np.full(len(s), hi, dtype=np.int64))
        base += len(body)
    S = np.concatenate(parts)
    ar8 = np.arange(8)
    ar4 = np.arange(4)

    def i32(at: int) -> npt.NDArray[np.int32]:
        out: npt.NDArray[np.int32] = u8[S[:, None] + at + ar4].view(">i4").ravel().astype(np.int32)
        return out

    def i64(at: int, rows: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.int64]:
        idx = S if rows is None else rows
        out: npt.NDArray[np.int64] = u8[idx[:, None] + at + ar8].view(">i8").ravel().astype(np.int64)
        return out

    magic = u8[S[:, None] + OFF_MAGIC + ar4].view(">u4").ravel()
    sysflag = i32(OFF_SYSFLAG)
    if (magic != MAGIC_V1).any() or (
        sysflag & (_SYSFLAG_COMPRESSED | _SYSFLAG_BORNHOST_V6 | _SYSFLAG_STOREHOST_V6)
    ).any():
        return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)
    size = i32(OFF_TOTALSIZE).astype(np.int64)
    blen = i32(_V4_BODYLEN).astype(np.int64)
    tpos = S + _V4_BODY + blen
    if (blen < 0).any() or (tpos + 3 > S + size).any():
        return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)  # raises the precise error
    tlen = u8[tpos].astype(np.int64)
    ppos = tpos + 1 + tlen
    plen = u8[ppos[:, None] + np.arange(2)].view(">i2").ravel().astype(np.int64)
    if (ppos + 2 + plen != S + size).any():
        return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)
    qoff = i64(OFF_QUEUEOFFSET)
    keep = (qoff >= np.concatenate(lo_parts)) & (qoff < np.concatenate(hi_parts))

    want = set(names)
    if tags is not None:
        idx = np.flatnonzero(keep)
        got = _props_arrow(u8, data, ppos[idx] + 2, plen[idx])
        if got is None:
            return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)
        match = pc.is_in(_prop_column(got, MessageConst.TAGS), value_set=pa.array(sorted(tags), pa.string()))
        keep[idx[~np.asarray(match.fill_null(False))]] = False
    rows = np.flatnonzero(keep)
    n = len(rows)
    Sk = S[rows]
    props: ArrowProps | None = None
    if want & {"key", "tags", "properties", "headers"}:
        props = _props_arrow(u8, data, ppos[rows] + 2, plen[rows])
        if props is None:  # not valid UTF-8: the per-record path decodes with replacement
            return _slow_chunk(chunk, names, arrow_schema, kinds, tags, broker_name)
    arrays = []
    for name, field, kind in zip(names, arrow_schema, kinds, strict=True):
        t = field.type
        if name == "value":
            bl = blen[rows]
            bs = Sk + _V4_BODY
            if kind == "string":
                arr = pa.array(
                    [data[a : a + b].decode("utf-8", "replace") for a, b in zip(bs.tolist(), bl.tolist(), strict=True)],
                    type=t,
                )
            else:
                arr = _binary_view(u8, data, bs, bl, n).cast(t)
        elif name == "offset":
            arr = pa.array(qoff[rows], type=t)
        elif name == "partition":
            arr = pa.array(u8[Sk[:, None] + OFF_QUEUEID + ar4].view(">i4").ravel().astype(np.int32), type=t)
        elif name in ("timestamp", "bornTimestamp"):
            ms = i64(_V4_STORETIMESTAMP if name == "timestamp" else OFF_BORNTIMESTAMP, Sk)
            arr = pa.array(ms if kind == "long" else ms * 1000, type=t)
        elif name == "timestampType":
            arr = pa.array(np.ones(n, dtype=np.int32), type=t)
        elif name == "brokerName":
            arr = pa.array([broker_name] * n, type=t)
        elif name == "topic":
            tl = tlen[rows]
            tp = tpos[rows] + 1
            arr = pa.array(
                [str(data[a : a + b], "utf-8", "replace") for a, b in zip(tp.tolist(), tl.tolist(), strict=True)],
                type=t,
            )
        elif name == "msgId":
            hb = np.empty((n, 16), dtype=np.uint8)
            hb[:, :8] = u8[Sk[:, None] + _V4_STOREHOST + ar8]
            hb[:, 8:] = u8[Sk[:, None] + OFF_PHYSICALOFFSET + ar8]
            hexed = np.empty((n, 32), dtype=np.uint8)
            hexed[:, 0::2] = _HEX[hb >> 4]
            hexed[:, 1::2] = _HEX[hb & 15]
            hex_offs = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
            arr = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(hex_offs), pa.py_buffer(hexed)])
        elif name == "key":
            assert props is not None  # parsed above when key, tags or properties is wanted
            arr = _prop_column(props, MessageConst.KEYS).cast(t)
        elif name == "tags":
            assert props is not None
            arr = _prop_column(props, MessageConst.TAGS)
        elif name == "properties":
            assert props is not None
            offs, keys, items = props
            arr = pa.MapArray.from_arrays(pa.array(offs.astype(np.int32)), keys, items, type=t)
        elif name == "headers":
            assert props is not None
            offs, keys, items = props
            arr = headers_array(offs.astype(np.int32), keys, items.cast(pa.binary()), t)
        else:  # pragma: no cover - _column_plan only lets known names through
            raise ValueError(f"unknown column {name!r}")
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def headers_array(offsets: npt.NDArray[np.int32], keys: ArrowArray, values: ArrowArray, t: Any) -> ArrowArray:
    """Spark-Kafka's ``headers`` column, ``array<struct<key string, value binary>>``: record
    ``i``'s properties are items ``offsets[i]:offsets[i+1]`` (values as UTF-8 bytes)."""
    import pyarrow as pa

    struct_type = t.value_type
    items = pa.StructArray.from_arrays(
        [keys.cast(struct_type[0].type), values.cast(struct_type[1].type)], fields=list(struct_type)
    )
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, type=t)


def _binary_view(
    u8: npt.NDArray[np.uint8], data: bytes, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64], n: int
) -> ArrowArray:
    """An Arrow binary-view array of ``data[starts[i]:starts[i]+lengths[i]]`` (no copies).

    Each view is 16 bytes, little-endian: ``length | 12 inline bytes`` when length <= 12,
    else ``length | first 4 bytes | buffer index (0) | offset`` (Arrow columnar format).
    """
    import pyarrow as pa

    views = np.zeros((n, 16), dtype=np.uint8)
    if n:
        ln = lengths.astype("<i4")
        views[:, 0:4] = ln.view(np.uint8).reshape(n, 4)
        idx = np.minimum(starts[:, None] + np.arange(12), len(data) - 1)
        head = u8[idx]
        inline = lengths <= 12
        if inline.any():
            h = head[inline]
            h[np.arange(12)[None, :] >= lengths[inline][:, None]] = 0
            views[inline, 4:16] = h
        big = ~inline
        if big.any():
            views[big, 4:8] = head[big, :4]
            views[big, 12:16] = starts[big].astype("<i4").view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), pa.py_buffer(data)])
