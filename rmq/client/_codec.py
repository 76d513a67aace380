"""Message codecs the SDK needs: properties strings, pulled records, batch bodies, message ids.

Everything here is pure and synchronous so it can be tested byte for byte without a broker.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Mapping

from rmq.common import message as common
from rmq.common.compression import CompressionType, compress
from rmq.common.message import (
    HOST_V4_LEN,
    MAX_INFLATED_BODY,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    RECORD_HEAD,
    MessageSysFlag,
    PullSysFlag,
    RecordDecodeError,
    create_offset_msg_id,
    decode_offset_msg_id,
    encode_batch,
    inflate_body,
    java_string_hash,
    string_to_properties,
    walk_records,
)
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
    "RecordDecodeError",
    "encode_batch",
    "compress_body",
]


# Properties: "name\x01value\x02name\x01value\x02" (UTF-8, trailing \x02 as Java clients write
# it). Reading is rmq.common.message.string_to_properties.


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
# Pulled records: the CommitLog layout back to back (drawn in rmq.common.message). The walker
# (rmq.common.message.walk_records) validates each record and says where its fields are;
# this is the SDK's projection of it onto MessageExt.

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_RECONSUME_PREPARED = struct.Struct(">iq")  # RECONSUMETIMES, PREPARED TX OFFSET
# ip bytes + port → "ip:port" and the upper-hex offsetMsgId prefix; hosts repeat in every record
_host_cache: dict[bytes, tuple[str, str]] = {}


def _host(buf: bytes, at: int, length: int) -> tuple[str, str]:
    """``("ip:port", HEX(ip ‖ port))`` of a BORNHOST / STOREHOST field (8 or 20 bytes)."""
    raw = buf[at : at + length]
    hit = _host_cache.get(raw)
    if hit is None:
        if len(_host_cache) > 4096:
            _host_cache.clear()
        ip = socket.inet_ntoa(raw[:4]) if length == HOST_V4_LEN else socket.inet_ntop(socket.AF_INET6, raw[:16])
        hit = _host_cache[raw] = (f"{ip}:{_I32.unpack_from(raw, length - 4)[0]}", raw.hex().upper())
    return hit


def decode_messages(
    data: bytes | memoryview, broker_name: str = "", *, decompress: bool = True, max_body_size: int = MAX_INFLATED_BODY
) -> list[MessageExt]:
    """Decode back-to-back records (a pull body) into messages.

    Args:
        decompress: inflate COMPRESSED_FLAG bodies (default True), into at most
            ``max_body_size`` bytes each (default 4 MiB, the message size limit).

    Raises:
        RecordDecodeError: a malformed record, or a compressed body that does not inflate or
            inflates past ``max_body_size`` (the records before it are not returned either:
            a batch is all or nothing).
    """
    buf = data if isinstance(data, bytes) else bytes(data)
    out: list[MessageExt] = []
    append = out.append
    unpack_head = RECORD_HEAD.unpack_from
    unpack_i64 = _I64.unpack_from
    unpack_rp = _RECONSUME_PREPARED.unpack_from
    for (
        pos,
        _total,
        _version,
        sys_flag,
        bh_at,
        bh_len,
        sh_at,
        sh_len,
        body_at,
        body_len,
        topic_at,
        topic_len,
        props_at,
        props_len,
    ) in walk_records(buf):
        (_size, _magic, body_crc, queue_id, flag, queue_offset, phy_offset, _sf, born_ts) = unpack_head(buf, pos)
        store_ts = unpack_i64(buf, sh_at - 8)[0]
        reconsume, prepared = unpack_rp(buf, sh_at + sh_len)
        body = buf[body_at : body_at + body_len]
        topic = buf[topic_at : topic_at + topic_len].decode("utf-8", "replace")
        props = string_to_properties(buf[props_at : props_at + props_len].decode("utf-8", "replace"))
        if decompress and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            body = inflate_body(body, max_body_size, what=f"body of {topic}@{queue_offset}", sys_flag=sys_flag)
        born_host = _host(buf, bh_at, bh_len)[0]
        store_host, id_prefix = _host(buf, sh_at, sh_len)
        offset_msg_id = f"{id_prefix}{phy_offset & 0xFFFFFFFFFFFFFFFF:016X}"
        append(
            _message_ext(
                topic,
                body,
                props,
                offset_msg_id,
                queue_id,
                queue_offset,
                reconsume,
                phy_offset,
                born_ts,
                store_ts,
                born_host,
                store_host,
                sys_flag,
                flag,
                body_crc,
                prepared,
                broker_name,
            )
        )
    return out


def _message_ext(
    topic: str,
    body: bytes,
    props: dict[str, str],
    offset_msg_id: str,
    queue_id: int,
    queue_offset: int,
    reconsume: int,
    phy_offset: int,
    born_ts: int,
    store_ts: int,
    born_host: str,
    store_host: str,
    sys_flag: int,
    flag: int,
    body_crc: int,
    prepared: int,
    broker_name: str,
) -> MessageExt:
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


# Batch bodies (Java MessageDecoder.encodeMessages): rmq.common.message.encode_batch.


def compress_body(body: bytes, level: int = 5, ctype: CompressionType = CompressionType.ZLIB) -> bytes:
    """``body`` compressed as Java 5's compressor of ``ctype`` does (default zlib, Java
    ``Deflater``; level 5 is Java's default compressLevel); see :mod:`rmq.common.compression`."""
    return compress(body, ctype, level)


_MS = datetime.timedelta(milliseconds=1)


def message_properties(msg: Message, uniq_key: str | None) -> dict[str, str]:
    """The full properties a message is sent with (system keys first, as Java orders them)."""
    props: dict[str, str] = {}
    if msg.keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(msg.keys)
    if msg.tags:
        props[MessageConst.TAGS] = msg.tags
    if msg.delay_level > 0:
        props[MessageConst.DELAY_TIME_LEVEL] = str(msg.delay_level)
    # timer messages: the delivery time, absolute (a delay counts from this first encoding)
    if msg.delivery_time is not None:
        props[MessageConst.TIMER_DELIVER_MS] = str(msg.delivery_time)
    elif msg.delay is not None:
        props[MessageConst.TIMER_DELIVER_MS] = str(time.time_ns() // 1_000_000 + msg.delay // _MS)
    props[MessageConst.WAIT_STORE_MSG_OK] = "true" if msg.wait_store_msg_ok else "false"
    if uniq_key:
        props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
    props.update(msg.properties)
    if msg.message_group:
        props[MessageConst.SHARDING_KEY] = msg.message_group
    return props
