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
from typing import Mapping

from rmq.common import message as common
from rmq.common.message import (MIN_RECORD_V4, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, RECORD_FIXED_V4,
                                RECORD_HEAD, MessageSysFlag, PullSysFlag, RecordDecodeError,
                                create_offset_msg_id, decode_offset_msg_id, encode_batch, java_string_hash,
                                string_to_properties)
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


# Properties: "name\x01value\x02name\x01value\x02" (UTF-8, trailing \x02 as Java clients write
# it; wire-contract §9.2). Reading is rmq.common.message.string_to_properties.

def properties_to_string(props: Mapping[str, str]) -> str:
    """The client form of a properties string (a ``\\x02`` after every pair)."""
    return common.properties_to_string(props, trailing_separator=True)


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
# Pulled records: the Java v1 CommitLog layout back to back (diagram in rmq.common.message).

_HEAD = RECORD_HEAD                 # 1..9: up to and including BORNTIMESTAMP (48 bytes)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_MIN_RECORD = MIN_RECORD_V4         # 91 for IPv4


def _host(buf: memoryview, pos: int, v6: bool) -> tuple[str, int]:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, bytes(buf[pos:pos + 16]))
        return f"{ip}:{_I32.unpack_from(buf, pos + 16)[0]}", pos + 20
    ip = socket.inet_ntoa(bytes(buf[pos:pos + 4]))
    return f"{ip}:{_I32.unpack_from(buf, pos + 4)[0]}", pos + 8


# The fixed part of an IPv4 record (fields 1..15 up to BODYLEN), read with one unpack.
_FIXED_V4 = RECORD_FIXED_V4
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


# Batch bodies (wire-contract §5.2): rmq.common.message.encode_batch.


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
