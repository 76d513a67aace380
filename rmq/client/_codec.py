"""Message codecs the SDK needs: properties strings, pulled records, batch bodies, message ids.

Everything here is pure and synchronous so it can be tested byte for byte without a broker.
"""
from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import threading
import time
import zlib
from typing import Iterable, Mapping

from rmq.types import Message, MessageConst, MessageExt

__all__ = [
    "MessageSysFlag",
    "PullSysFlag",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "properties_to_string",
    "string_to_properties",
    "java_string_hash",
    "UniqKeyGenerator",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "decode_messages",
    "encode_batch",
    "compress_body",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class MessageSysFlag:
    """Bits of a message's ``sysFlag`` (Java ``MessageSysFlag``)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0
    TRANSACTION_PREPARED_TYPE = 0x1 << 2
    TRANSACTION_COMMIT_TYPE = 0x2 << 2
    TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
    BORNHOST_V6_FLAG = 0x1 << 4
    STOREHOSTADDRESS_V6_FLAG = 0x1 << 5


class PullSysFlag:
    """Bits of PULL_MESSAGE's ``sysFlag`` (Java ``PullSysFlag``)."""

    FLAG_COMMIT_OFFSET = 0x1
    FLAG_SUSPEND = 0x2
    FLAG_SUBSCRIPTION = 0x4
    FLAG_CLASS_FILTER = 0x8

    @staticmethod
    def build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False) -> int:
        return ((PullSysFlag.FLAG_COMMIT_OFFSET if commit_offset else 0)
                | (PullSysFlag.FLAG_SUSPEND if suspend else 0)
                | (PullSysFlag.FLAG_SUBSCRIPTION if subscription else 0)
                | (PullSysFlag.FLAG_CLASS_FILTER if class_filter else 0))


# ---------------------------------------------------------------------------------------------
# Properties: "name\x01value\x02name\x01value\x02" (UTF-8, trailing \x02; wire-contract §9.2)

def properties_to_string(props: Mapping[str, str]) -> str:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items())


def string_to_properties(s: str | None) -> dict[str, str]:
    """Parse a properties string leniently: empty items and items without \\x01 are skipped."""
    out: dict[str, str] = {}
    if not s:
        return out
    for item in s.split(PROPERTY_SEPARATOR):
        k, sep, v = item.partition(NAME_VALUE_SEPARATOR)
        if sep and k:
            out[k] = v
    return out


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, 32-bit signed), used for tag codes and the
    default sharding-key selector so that Java and Python producers pick the same queue."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# ---------------------------------------------------------------------------------------------
# UNIQ_KEY: the client-side message id (Java MessageClientIDSetter), 16 bytes as 32 hex chars:
#
#   +--------+--------+-----------+----------------------+---------+
#   | ip (4) | pid(2) | random(4) | ms since month (4)   | seq (2) |
#   +--------+--------+-----------+----------------------+---------+
#
# Java puts the class loader's hash where we put 4 random bytes: both only make the prefix
# unique per process. The time field is relative to the start of the current month so it fits
# in 32 bits; the counter disambiguates ids made in the same millisecond.

class UniqKeyGenerator:
    def __init__(self, ip: str = "127.0.0.1") -> None:
        try:
            ip_bytes = socket.inet_aton(ip)
        except OSError:
            ip_bytes = b"\x7f\x00\x00\x01"
        prefix = ip_bytes + struct.pack(">H", os.getpid() & 0xFFFF) + random.randbytes(4)
        self._prefix = prefix.hex().upper()
        self._counter = itertools.count(random.randrange(0, 0x10000))
        self._lock = threading.Lock()
        self._month_start_ms = 0
        self._next_month_ms = 0

    def _roll_month(self, now_ms: int) -> None:
        t = time.localtime(now_ms / 1000)
        start = time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))
        year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        nxt = time.mktime((year, month, 1, 0, 0, 0, 0, 0, -1))
        self._month_start_ms = int(start * 1000)
        self._next_month_ms = int(nxt * 1000)

    def new_id(self) -> str:
        now = int(time.time() * 1000)
        with self._lock:
            if now >= self._next_month_ms:
                self._roll_month(now)
            seq = next(self._counter) & 0xFFFF
        return self._prefix + struct.pack(">IH", (now - self._month_start_ms) & 0xFFFFFFFF, seq).hex().upper()


# ---------------------------------------------------------------------------------------------
# offsetMsgId: HEX_UPPER( IPv4(4) | port int32 BE (4) | CommitLog offset int64 BE (8) ) (§11)

def create_offset_msg_id(store_ip: str, store_port: int, commit_log_offset: int) -> str:
    return (socket.inet_aton(store_ip) + struct.pack(">iq", store_port, commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """offsetMsgId → (store ip, store port, CommitLog offset). Raises ValueError if malformed."""
    raw = bytes.fromhex(msg_id)
    if len(raw) != 16:
        raise ValueError(f"offsetMsgId must be 32 hex digits, got {msg_id!r}")
    port, offset = struct.unpack(">iq", raw[4:])
    return socket.inet_ntoa(raw[:4]), port, offset


# ---------------------------------------------------------------------------------------------
# Pulled records: the Java v1 CommitLog layout, back to back (wire-contract §9), big-endian:
#
#   0        4        8        12       16       20               28               36
#   +--------+--------+--------+--------+--------+----------------+----------------+
#   |TOTALSZ |MAGIC   |BODYCRC |QUEUEID |FLAG    |QUEUEOFFSET     |PHYSICALOFFSET  |
#   +--------+--------+--------+--------+--------+----------------+----------------+
#   36       40               48       52       56               64       68       72
#   +--------+----------------+--------+--------+----------------+--------+--------+
#   |SYSFLAG |BORNTIMESTAMP   |BORNHOST(ip,port)|STORETIMESTAMP  |STOREHOST(ip,port)|
#   +--------+----------------+--------+--------+----------------+--------+--------+
#   72       76               84       88
#   +--------+----------------+--------+------+-------+------+--------+-------+
#   |RECONSUM|PREPARED TX OFF |BODYLEN | body |TOPICLN| topic|PROPLEN | props |
#   +--------+----------------+--------+------+-------+------+--------+-------+
#                                        n      1 byte   n     int16     n
#
# With the IPv6 sysFlag bits a host takes 16 + 4 bytes instead of 4 + 4.

_HEAD = struct.Struct(">iiiiiqqiq")          # 1..9: up to and including BORNTIMESTAMP (44 bytes)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_MIN_RECORD = 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2   # 91 for IPv4


class RecordDecodeError(ValueError):
    """A pulled record could not be parsed (truncated or inconsistent lengths)."""


def _host(buf: memoryview, pos: int, v6: bool) -> tuple[str, int]:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, bytes(buf[pos:pos + 16]))
        return f"{ip}:{_I32.unpack_from(buf, pos + 16)[0]}", pos + 20
    ip = socket.inet_ntoa(bytes(buf[pos:pos + 4]))
    return f"{ip}:{_I32.unpack_from(buf, pos + 4)[0]}", pos + 8


# The fixed part of an IPv4 record (fields 1..15 up to BODYLEN), read with one unpack.
_FIXED_V4 = struct.Struct(">iiiiiqqiq4siq4siiqi")
_V6_FLAGS = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
# ip bytes + port → "ip:port" and the upper-hex offsetMsgId prefix; hosts repeat in every record
_host_cache: dict[tuple[bytes, int], tuple[str, str]] = {}


def _host_v4(ip: bytes, port: int) -> tuple[str, str]:
    key = (ip, port)
    hit = _host_cache.get(key)
    if hit is None:
        if len(_host_cache) > 4096:
            _host_cache.clear()
        hit = _host_cache[key] = (f"{socket.inet_ntoa(ip)}:{port}", (ip + _I32.pack(port)).hex().upper())
    return hit


def decode_messages(data: bytes | memoryview, broker_name: str = "", *, decompress: bool = True,
                    ) -> list[MessageExt]:
    """Decode back-to-back records. Raises :class:`RecordDecodeError` on a malformed record
    (the records before it are not returned either: a batch is all or nothing)."""
    buf = data if isinstance(data, bytes) else bytes(data)
    end = len(buf)
    pos = 0
    out: list[MessageExt] = []
    append = out.append
    unpack_fixed = _FIXED_V4.unpack_from
    fixed_size = _FIXED_V4.size
    while pos < end:
        if end - pos < _MIN_RECORD:
            raise RecordDecodeError(f"truncated record at {pos}: {end - pos} bytes left")
        sys_flag = _I32.unpack_from(buf, pos + 36)[0]
        if sys_flag & _V6_FLAGS:
            msg, pos = _decode_one_generic(buf, pos, end, broker_name, decompress)
            append(msg)
            continue
        (total, _magic, body_crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts,  # 1..9
         born_ip, born_port, store_ts, store_ip, store_port,                                # 10..12
         reconsume, prepared, body_len) = unpack_fixed(buf, pos)                            # 13..15
        rec_end = pos + total
        if total < _MIN_RECORD or rec_end > end:
            raise RecordDecodeError(f"bad TOTALSIZE {total} at {pos} (buffer {end})")
        p = pos + fixed_size
        if body_len < 0 or p + body_len + 3 > rec_end:
            raise RecordDecodeError(f"bad BODYLEN {body_len} at {pos}")
        body = buf[p:p + body_len]
        p += body_len
        topic_len = buf[p]                                                                  # 16 TOPIC
        topic = buf[p + 1:p + 1 + topic_len].decode()
        p += 1 + topic_len
        if p + 2 > rec_end:
            raise RecordDecodeError(f"record at {pos} ends inside the topic")
        prop_len = _I16.unpack_from(buf, p)[0]                                             # 17 PROPERTIES
        p += 2
        if prop_len < 0 or p + prop_len > rec_end:
            raise RecordDecodeError(f"bad PROPLEN {prop_len} at {pos}")
        props = string_to_properties(buf[p:p + prop_len].decode("utf-8", "replace"))
        if decompress and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            try:
                body = zlib.decompress(body)
            except zlib.error as e:
                raise RecordDecodeError(f"compressed body of {topic}@{queue_offset} does not inflate: {e}") from e
        born_host = _host_v4(born_ip, born_port)[0]
        store_host, id_prefix = _host_v4(store_ip, store_port)
        offset_msg_id = f"{id_prefix}{phy_offset:016X}"
        append(_message_ext(topic, body, props, offset_msg_id, queue_id, queue_offset, reconsume, phy_offset,
                            born_ts, store_ts, born_host, store_host, sys_flag, flag, body_crc, prepared,
                            broker_name))
        pos = rec_end
    return out


def _message_ext(topic, body, props, offset_msg_id, queue_id, queue_offset, reconsume, phy_offset, born_ts,
                 store_ts, born_host, store_host, sys_flag, flag, body_crc, prepared, broker_name) -> MessageExt:
    keys = props.get(MessageConst.KEYS)
    return MessageExt(
        topic=props.get(MessageConst.RETRY_TOPIC, topic),
        body=body,
        tags=props.get(MessageConst.TAGS),
        keys=tuple(k for k in keys.split(" ") if k) if keys else (),
        properties=props,
        msg_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or offset_msg_id,
        offset_msg_id=offset_msg_id,
        queue_id=queue_id,
        queue_offset=queue_offset,
        reconsume_times=reconsume,
        commit_log_offset=phy_offset,
        born_timestamp=born_ts,
        store_timestamp=store_ts,
        born_host=born_host,
        store_host=store_host,
        sys_flag=sys_flag,
        flag=flag,
        body_crc=body_crc,
        prepared_transaction_offset=prepared,
        broker_name=broker_name,
        real_topic=topic,
    )


def _decode_one_generic(buf: bytes, pos: int, end: int, broker_name: str, decompress: bool,
                        ) -> tuple[MessageExt, int]:
    """One record of any layout (IPv6 born/store hosts included); the slow path."""
    (total, _magic, body_crc, queue_id, flag, queue_offset, phy_offset, sys_flag,
     born_ts) = _HEAD.unpack_from(buf, pos)                         # 1..9
    if total < _MIN_RECORD or pos + total > end:
        raise RecordDecodeError(f"bad TOTALSIZE {total} at {pos} (buffer {end})")
    rec_end = pos + total
    mv = memoryview(buf)
    p = pos + _HEAD.size
    born_host, p = _host(mv, p, bool(sys_flag & MessageSysFlag.BORNHOST_V6_FLAG))   # 10
    store_ts = _I64.unpack_from(buf, p)[0]                          # 11 STORETIMESTAMP
    p += 8
    store_v6 = bool(sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG)
    store_host_pos = p
    store_host, p = _host(mv, p, store_v6)                          # 12 STOREHOST
    reconsume = _I32.unpack_from(buf, p)[0]                         # 13 RECONSUMETIMES
    prepared = _I64.unpack_from(buf, p + 4)[0]                      # 14 PREPARED TX OFFSET
    body_len = _I32.unpack_from(buf, p + 12)[0]                     # 15 BODY
    p += 16
    if body_len < 0 or p + body_len + 3 > rec_end:
        raise RecordDecodeError(f"bad BODYLEN {body_len} at {pos}")
    body = buf[p:p + body_len]
    p += body_len
    topic_len = buf[p]                                              # 16 TOPIC
    topic = buf[p + 1:p + 1 + topic_len].decode()
    p += 1 + topic_len
    if p + 2 > rec_end:
        raise RecordDecodeError(f"record at {pos} ends inside the topic")
    prop_len = _I16.unpack_from(buf, p)[0]                          # 17 PROPERTIES
    p += 2
    if prop_len < 0 or p + prop_len > rec_end:
        raise RecordDecodeError(f"bad PROPLEN {prop_len} at {pos}")
    props = string_to_properties(buf[p:p + prop_len].decode("utf-8", "replace"))
    if decompress and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        try:
            body = zlib.decompress(body)
        except zlib.error as e:
            raise RecordDecodeError(f"compressed body of {topic}@{queue_offset} does not inflate: {e}") from e
    host_len = 20 if store_v6 else 8
    offset_msg_id = (buf[store_host_pos:store_host_pos + host_len] + _I64.pack(phy_offset)).hex().upper()
    msg = _message_ext(topic, body, props, offset_msg_id, queue_id, queue_offset, reconsume, phy_offset, born_ts,
                       store_ts, born_host, store_host, sys_flag, flag, body_crc, prepared, broker_name)
    return msg, rec_end


# ---------------------------------------------------------------------------------------------
# Batch body (wire-contract §5.2; Java MessageDecoder.encodeMessage), one item per message:
#
#   +-----------+----------+------------+--------+---------+------+---------+-------+
#   | TOTALSIZE | MAGIC(0) | BODYCRC(0) | FLAG   | BODYLEN | body | PROPLEN | props |
#   | int32     | int32    | int32      | int32  | int32   |  n   | int16   |  n    |
#   +-----------+----------+------------+--------+---------+------+---------+-------+
#   TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN

_BATCH_HEAD = struct.Struct(">iiiii")


def encode_batch(items: Iterable[tuple[int, bytes, str]]) -> bytes:
    """Encode (flag, body, properties string) items into one batch body."""
    parts: list[bytes] = []
    for flag, body, props in items:
        pb = props.encode()
        if len(pb) > 0x7FFF:
            raise ValueError(f"properties of a batch item are {len(pb)} bytes (max 32767)")
        parts.append(_BATCH_HEAD.pack(20 + len(body) + 2 + len(pb), 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(_I16.pack(len(pb)))
        parts.append(pb)
    return b"".join(parts)


def compress_body(body: bytes, level: int = 5) -> bytes:
    """zlib (Java ``Deflater``) compression; level 5 is Java's default compressLevel."""
    return zlib.compress(body, level)


def message_properties(msg: Message, uniq_key: str | None) -> dict[str, str]:
    """The full properties a message is sent with (system keys first, as Java orders them)."""
    props: dict[str, str] = {}
    if msg.keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(msg.keys)
    if msg.tags:
        props[MessageConst.TAGS] = msg.tags
    if msg.delay_level > 0:
        props[MessageConst.DELAY_TIME_LEVEL] = str(msg.delay_level)
    props[MessageConst.WAIT_STORE_MSG_OK] = "true" if msg.wait_store_msg_ok else "false"
    if uniq_key:
        props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
    props.update(msg.properties)
    return props
