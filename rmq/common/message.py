"""One message codec for every layer (Java ``MessageDecoder``, ``MessageSysFlag``,
``PullSysFlag``, ``MessageConst`` and ``UtilAll`` in RocketMQ's ``common``).

Pure and synchronous, so it is tested byte for byte without a broker. The record layout is
drawn once, below, with the one record walker's reference implementation (``walk_record``);
``walk_records`` is its Cython twin from ``rmq._store``. The layers project the walker's
spans: the store (``rmq._store.decode_record`` → dict, ``scan_records`` → dispatch tuples),
the SDK (``rmq.client._codec.decode_messages`` → ``MessageExt``) and the Spark reader
(``rmq.spark._records`` → Arrow columns).
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from rmq.common import compression as _compression
from rmq.common import native
from rmq.errors import RemotingCommandError

__all__ = [
    "MessageSysFlag",
    "PullSysFlag",
    "MessageConst",
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "properties_to_string",
    "string_to_properties",
    "java_string_hash",
    "java_str",
    "host_bytes",
    "offset_msg_id",
    "create_offset_msg_id",
    "decode_offset_msg_id",
    "encode_batch_item",
    "encode_batch",
    "RecordDecodeError",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "BLANK_MAGIC_CODE",
    "RECORD_HEAD",
    "RECORD_FIXED_V4",
    "MIN_RECORD_HEADER",
    "MIN_RECORD_V4",
    "RECORD_FIXED_SIZE",
    "HOST_V4_LEN",
    "HOST_V6_LEN",
    "HOST_V6_EXTRA",
    "OFF_TOTALSIZE",
    "OFF_MAGIC",
    "OFF_BODYCRC",
    "OFF_QUEUEID",
    "OFF_FLAG",
    "OFF_QUEUEOFFSET",
    "OFF_PHYSICALOFFSET",
    "OFF_SYSFLAG",
    "OFF_BORNTIMESTAMP",
    "OFF_BORNHOST",
    "REL_RECONSUMETIMES",
    "REL_PREPARED_TX_OFFSET",
    "REL_BODYLEN",
    "REL_BODY",
    "RecordSpan",
    "RecordWalker",
    "walk_record",
    "walk_records_py",
    "walk_records",
    "inflate_body",
    "MAX_INFLATED_BODY",
]


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
    # RocketMQ 5: the codec of a COMPRESSED_FLAG body (rmq.common.compression; none = zlib)
    COMPRESSION_LZ4_TYPE = 0x1 << 8
    COMPRESSION_ZSTD_TYPE = 0x2 << 8
    COMPRESSION_ZLIB_TYPE = 0x3 << 8
    COMPRESSION_TYPE_COMPARATOR = 0x7 << 8

    @staticmethod
    def get_transaction_value(flag: int) -> int:
        """Java ``getTransactionValue``: the two transaction bits of ``flag``."""
        return flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @staticmethod
    def reset_transaction_value(flag: int, tran_type: int) -> int:
        """Java ``resetTransactionValue``: ``flag`` with its transaction bits set to ``tran_type``."""
        return (flag & ~MessageSysFlag.TRANSACTION_ROLLBACK_TYPE) | tran_type


class PullSysFlag:
    """Bits of PULL_MESSAGE's ``sysFlag`` (Java ``PullSysFlag``)."""

    FLAG_COMMIT_OFFSET = 0x1
    FLAG_SUSPEND = 0x2
    FLAG_SUBSCRIPTION = 0x4
    FLAG_CLASS_FILTER = 0x8

    @staticmethod
    def build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False) -> int:
        """Java ``buildSysFlag`` (``class_filter`` defaults to False)."""
        return (
            (PullSysFlag.FLAG_COMMIT_OFFSET if commit_offset else 0)
            | (PullSysFlag.FLAG_SUSPEND if suspend else 0)
            | (PullSysFlag.FLAG_SUBSCRIPTION if subscription else 0)
            | (PullSysFlag.FLAG_CLASS_FILTER if class_filter else 0)
        )


class MessageConst:
    """Property names RocketMQ keeps in a message's properties string (Java ``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIME = "CONSUME_START_TIME"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    TRANSACTION_ID = "__transactionId__"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    SHARDING_KEY = "__SHARDINGKEY"
    KEY_SEPARATOR = " "
    # request-reply (Java MessageConst.PROPERTY_CORRELATION_ID ... PROPERTY_MESSAGE_TYPE)
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    TRACE_SWITCH = "TRACE_ON"
    # typed topics: what Java 5 TopicMessageType.parseFromMessageProperty reads (the timer
    # properties are Java 5's; __STARTDELIVERTIME is the 4.x commercial clients' timer, which
    # Java 5's BrokerMetricsManager.getMessageType also counts as DELAY)
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    START_DELIVER_TIME = "__STARTDELIVERTIME"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    # RocketMQ 5 POP (Java 5.3.3 MessageConst.PROPERTY_POP_CK ... PROPERTY_FIRST_POP_TIME)
    POP_CK = "POP_CK"
    POP_CK_OFFSET = "POP_CK_OFFSET"
    FIRST_POP_TIME = "1ST_POP_TIME"
    # timer messages in the broker (Java 5 MessageConst.PROPERTY_TIMER_*, rmq.store.timer)
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"

    # Keys a user may not set through ``Message.properties``: the SDK owns them.
    RESERVED = frozenset(
        {
            KEYS,
            TAGS,
            WAIT_STORE_MSG_OK,
            DELAY_TIME_LEVEL,
            RETRY_TOPIC,
            REAL_TOPIC,
            REAL_QUEUE_ID,
            TRANSACTION_PREPARED,
            PRODUCER_GROUP,
            MIN_OFFSET,
            MAX_OFFSET,
            ORIGIN_MESSAGE_ID,
            RECONSUME_TIME,
            MAX_RECONSUME_TIMES,
            CONSUME_START_TIME,
            UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
            TRANSACTION_ID,
        }
    )


# ---------------------------------------------------------------------------------------------
# Properties: "name\x01value\x02name\x01value" in UTF-8.
#
# Java 4.9.8 writes two forms: the broker (``MessageDecoder.messageProperties2String`` as the
# store and the broker's rewrites use it) puts no \x02 after the last pair; the clients (Java,
# C++, ali-ons, our SDK and Spark sink) put one after every pair. Readers accept both, so each
# writer passes ``trailing_separator`` to say which form it keeps.

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def properties_to_string(
    props: Mapping[str, str] | None, *, trailing_separator: bool, check_separators: bool = False
) -> str:
    """Encode properties. Pairs whose value is None are left out.

    Args:
        trailing_separator: True writes ``\\x02`` after every pair (client form), False only
            between pairs (Java 4.9.8 broker form).
        check_separators: raise ValueError when a name or value holds ``\\x01``/``\\x02``
            (default False: callers that build the names themselves skip the check).
    """
    if not props:
        return ""
    if check_separators:
        for k, v in props.items():
            if (
                PROPERTY_SEPARATOR in k
                or NAME_VALUE_SEPARATOR in k
                or (v is not None and (PROPERTY_SEPARATOR in v or NAME_VALUE_SEPARATOR in v))
            ):
                raise ValueError(f"property {k!r} contains a reserved separator character (\\x01 or \\x02)")
    if trailing_separator:
        return "".join(f"{k}\x01{v}\x02" for k, v in props.items() if v is not None)
    return "\x02".join(f"{k}\x01{v}" for k, v in props.items() if v is not None)


def string_to_properties(s: str | bytes | bytearray | memoryview | None) -> dict[str, str]:
    """Java ``string2messageProperties``, leniently: empty items and items without ``\\x01``
    (or with an empty name) are skipped; bytes are decoded as UTF-8 with replacement."""
    if not s:
        return {}
    if not isinstance(s, str):
        s = bytes(s).decode("utf-8", "replace")
    out: dict[str, str] = {}
    for item in s.split(PROPERTY_SEPARATOR):
        k, sep, v = item.partition(NAME_VALUE_SEPARATOR)
        if sep and k:
            out[k] = v
    return out


def java_properties(s: str) -> dict[str, str]:
    """Exactly Java ``MessageDecoder.string2messageProperties``: a pair with an empty name or an
    empty value is absent (a later empty pair does not hide an earlier value). The broker reads
    properties this way where Java's semantics hang on presence (message type, timers)."""
    out: dict[str, str] = {}
    for item in s.split(PROPERTY_SEPARATOR):
        k, sep, v = item.partition(NAME_VALUE_SEPARATOR)
        if sep and k and v:
            out[k] = v
    return out


def java_str(value: object) -> str:
    """Java ``String.valueOf`` / ``StringBuilder.append``: ``null`` for None, ``true`` / ``false``
    for booleans, ``str`` otherwise. The ACL signer joins header values with it (Java
    ``AclUtils.combineRequestContent``) and the trace encoder its fields (Java
    ``TraceDataEncoder.encoderFromContextBean``)."""
    if type(value) is str:
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, 32-bit signed): tag codes of ConsumeQueue
    units and the sharding-key selector, so Java and Python pick the same values. (The store's
    scan uses the Cython twin ``rmq._store.java_hash_code``; tests check they agree.)"""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# ---------------------------------------------------------------------------------------------
# Hosts and offsetMsgId: HEX_UPPER( IPv4 (4) | port int32 BE (4) | CommitLog offset int64 BE (8) )
# (Java MessageDecoder.createMessageId; with an IPv6 store host the 16-byte address takes the
# IPv4 slot).

_PORT = struct.Struct(">i")
_PORT_OFFSET = struct.Struct(">iq")
_OFFSET = struct.Struct(">q")


def host_bytes(host: tuple[str, int], resolve: bool = False) -> bytes:
    """8 bytes: IPv4 octets then an int32 port (the v1 record's host fields).

    The v1 layout has no room for IPv6 (and we never set the IPv6 sysFlag bits): an
    IPv4-mapped address (``::ffff:a.b.c.d``) gives its IPv4 part, any other non-IPv4 address
    0.0.0.0. Host names are resolved only with ``resolve`` (default False; the advertised
    store host, once)."""
    ip, port = host
    ip = (ip or "").strip("[]")
    try:
        packed = socket.inet_aton(ip) if ip.count(".") == 3 else None
    except OSError:
        packed = None
    if packed is None:
        if ip.lower().startswith("::ffff:") and ip.count(".") == 3:
            packed = socket.inet_aton(ip[7:])
        elif resolve and ip and ":" not in ip:
            packed = socket.inet_aton(socket.gethostbyname(ip))
        else:
            packed = b"\x00\x00\x00\x00"
    return packed + _PORT.pack(int(port) & 0x7FFFFFFF)


def offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """offsetMsgId of a record from its STOREHOST bytes (8, or 20 for IPv6) and offset."""
    return (bytes(store_host) + _OFFSET.pack(commit_log_offset)).hex().upper()


def create_offset_msg_id(store_ip: str, store_port: int, commit_log_offset: int) -> str:
    """offsetMsgId from an IPv4 address, port and offset (Java ``MessageDecoder.createMessageId``)."""
    return (socket.inet_aton(store_ip) + _PORT_OFFSET.pack(store_port, commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """offsetMsgId → ``(store ip, store port, CommitLog offset)``. Raises ValueError if it is
    not 32 hex digits."""
    raw = bytes.fromhex(msg_id)
    if len(raw) != 16:
        raise ValueError(f"offsetMsgId must be 32 hex digits, got {msg_id!r}")
    port, offset = _PORT_OFFSET.unpack(raw[4:])
    return socket.inet_ntoa(raw[:4]), port, offset


# ---------------------------------------------------------------------------------------------
# Message records: the CommitLog record, also what PULL_MESSAGE bodies hold back to back
# (Java CommitLog.DefaultAppendMessageCallback.doAppend writes it, MessageDecoder.decode reads
# it), big-endian. This is the one drawing of the layout; the Cython walker (rmq/_store.pyx,
# ``_walk``) and the pure-Python reference below (``walk_record``) use the names defined under it.
#
#   offset  field              size  name of the offset
#   0       TOTALSIZE          4     OFF_TOTALSIZE
#   4       MAGICCODE          4     OFF_MAGIC          v1 0xDAA320A7 | v2 0xDAA320AB
#   8       BODYCRC            4     OFF_BODYCRC        crc32(body) & 0x7FFFFFFF
#   12      QUEUEID            4     OFF_QUEUEID
#   16      FLAG               4     OFF_FLAG
#   20      QUEUEOFFSET        8     OFF_QUEUEOFFSET
#   28      PHYSICALOFFSET     8     OFF_PHYSICALOFFSET
#   36      SYSFLAG            4     OFF_SYSFLAG
#   40      BORNTIMESTAMP      8     OFF_BORNTIMESTAMP
#   48      BORNHOST           8|20  OFF_BORNHOST       ip (4, or 16 with SYSFLAG 0x10) + port int32
#   ---- from here on offsets move with the host sizes: bh = 8|20, sh = 8|20 ----
#   48+bh   STORETIMESTAMP     8     born_host_at + born_host_len
#   56+bh   STOREHOST          8|20                     ip (4, or 16 with SYSFLAG 0x20) + port int32
#   56+bh+sh RECONSUMETIMES    4     store_host_at + store_host_len
#   +4      PREPARED TX OFFSET 8
#   +8      BODYLEN            4     body_at - 4
#   +4      BODY               n     body_at, body_len
#           TOPICLEN           1|2   v1: uint8, v2: uint16 (RocketMQ 5 MessageVersion V2)
#           TOPIC              n     topic_at, topic_len
#           PROPLEN            2     int16 >= 0
#           PROPERTIES         n     props_at, props_len  ("k\x01v\x02k\x01v")
#
# TOTALSIZE = 72 + bh - 8 + sh - 8 + 8 + BODYLEN + TOPICLEN(1|2) + TOPIC + 2 + PROPLEN, so with
# IPv4 hosts and v1: 91 + BODYLEN + TOPIC + PROPLEN (RECORD_FIXED_SIZE).

MESSAGE_MAGIC_CODE = 0xDAA320A7  # v1: 1-byte topic length (Java 4.9.8 MessageDecoder)
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB  # v2: 2-byte topic length (RocketMQ 5 MessageDecoder)
BLANK_MAGIC_CODE = 0xCBD43194  # the end-of-file filler (Java CommitLog.BLANK_MAGIC_CODE)

OFF_TOTALSIZE = 0
OFF_MAGIC = 4
OFF_BODYCRC = 8
OFF_QUEUEID = 12
OFF_FLAG = 16
OFF_QUEUEOFFSET = 20
OFF_PHYSICALOFFSET = 28
OFF_SYSFLAG = 36
OFF_BORNTIMESTAMP = 40
OFF_BORNHOST = 48
HOST_V4_LEN = 8  # 4-byte address + int32 port
HOST_V6_LEN = 20  # 16-byte address + int32 port
HOST_V6_EXTRA = HOST_V6_LEN - HOST_V4_LEN
# Relative to the end of the STOREHOST field:
REL_RECONSUMETIMES = 0
REL_PREPARED_TX_OFFSET = 4
REL_BODYLEN = 12
REL_BODY = 16
RECORD_FIXED_SIZE = OFF_BORNHOST + HOST_V4_LEN + 8 + HOST_V4_LEN + REL_BODY + 1 + 2  # 91

RECORD_HEAD = struct.Struct(">iIiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
RECORD_FIXED_V4 = struct.Struct(">iIiiiqqiq4siq4siiqi")  # .. BODYLEN, IPv4 hosts (88 bytes)
MIN_RECORD_HEADER = RECORD_FIXED_V4.size  # 88: everything before the body
MIN_RECORD_V4 = RECORD_FIXED_SIZE  # 91: empty body, topic and properties


class RecordDecodeError(RemotingCommandError, ValueError):
    """A message record or pull body is truncated or malformed; the message names where.
    Both a ``RemotingCommandError`` (not retriable: the same bytes fail again) and a
    ``ValueError``."""


class RecordSpan(NamedTuple):
    """Where the variable fields of one record are (absolute positions in the buffer walked).

    The fixed fields sit at ``pos + OFF_*``; STORETIMESTAMP at ``born_host_at +
    born_host_len``, RECONSUMETIMES at ``store_host_at + store_host_len`` (``REL_*``)."""

    pos: int
    total: int
    version: int  # 1 or 2 (the magic code)
    sys_flag: int
    born_host_at: int
    born_host_len: int
    store_host_at: int
    store_host_len: int
    body_at: int
    body_len: int
    topic_at: int
    topic_len: int
    props_at: int
    props_len: int


_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")


def walk_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int = -1, check_crc: bool = False
) -> RecordSpan:
    """Validate the record at ``pos`` (of ``buf[:end]``; -1: the whole buffer) and return where
    its fields are. The reference implementation of the Cython walker ``rmq._store``
    (``record_span``), which must agree with it on every input.

    Checks: room for the fixed part; magic v1 or v2; TOTALSIZE at least the minimum for its
    host sizes and inside the buffer; BODYLEN, TOPICLEN, PROPLEN non-negative and adding up
    to TOTALSIZE exactly; with ``check_crc`` (default False) the body CRC.

    Raises:
        RecordDecodeError: naming the position and what is wrong.
    """
    if end < 0 or end > len(buf):
        end = len(buf)
    if pos < 0 or pos > end:
        raise RecordDecodeError(f"record position {pos} outside a buffer of {end} bytes")
    avail = end - pos
    if avail < RECORD_FIXED_SIZE:
        raise RecordDecodeError(
            f"truncated record at {pos}: {avail} bytes left, a record has at least {RECORD_FIXED_SIZE}"
        )
    total = _I32.unpack_from(buf, pos + OFF_TOTALSIZE)[0]
    magic = _U32.unpack_from(buf, pos + OFF_MAGIC)[0]
    if magic == MESSAGE_MAGIC_CODE:
        version = 1
    elif magic == MESSAGE_MAGIC_CODE_V2:
        version = 2
    else:
        raise RecordDecodeError(f"record at {pos} has unknown magic code 0x{magic:08X}")
    sys_flag = _I32.unpack_from(buf, pos + OFF_SYSFLAG)[0]
    bh = HOST_V6_LEN if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else HOST_V4_LEN
    sh = HOST_V6_LEN if sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG else HOST_V4_LEN
    store_host_at = pos + OFF_BORNHOST + bh + 8
    body_at = store_host_at + sh + REL_BODY
    tl_size = version  # TOPICLEN is 1 (v1) or 2 (v2) bytes
    minimum = body_at - pos + tl_size + 2
    if total < minimum or total > avail:
        raise RecordDecodeError(f"record at {pos} has TOTALSIZE {total}; it must be {minimum}..{avail}")
    rec_end = pos + total
    body_len = _I32.unpack_from(buf, body_at - 4)[0]
    if body_len < 0 or body_at + body_len + tl_size + 2 > rec_end:
        raise RecordDecodeError(f"record at {pos} has BODYLEN {body_len}, past its TOTALSIZE {total}")
    tl_at = body_at + body_len
    topic_len = buf[tl_at] if version == 1 else _U16.unpack_from(buf, tl_at)[0]
    topic_at = tl_at + tl_size
    if topic_at + topic_len + 2 > rec_end:
        raise RecordDecodeError(f"record at {pos} has TOPICLEN {topic_len}, past its TOTALSIZE {total}")
    props_len = _I16.unpack_from(buf, topic_at + topic_len)[0]
    props_at = topic_at + topic_len + 2
    if props_len < 0 or props_at + props_len != rec_end:
        raise RecordDecodeError(
            f"record at {pos} has PROPLEN {props_len}; the lengths do not add up to TOTALSIZE {total}"
        )
    if check_crc:
        crc = _I32.unpack_from(buf, pos + OFF_BODYCRC)[0]
        actual = zlib.crc32(memoryview(buf)[body_at : body_at + body_len]) & 0x7FFFFFFF
        if crc != actual:
            raise RecordDecodeError(f"record at {pos} has BODYCRC {crc}, the body's is {actual}")
    return RecordSpan(
        pos,
        total,
        version,
        sys_flag,
        pos + OFF_BORNHOST,
        bh,
        store_host_at,
        sh,
        body_at,
        body_len,
        topic_at,
        topic_len,
        props_at,
        props_len,
    )


MAX_INFLATED_BODY = 4 * 1024 * 1024
"""Default bound on a decompressed body: the message size limit (Java
DefaultMQProducer.maxMessageSize and the broker's maxMessageSize, 4 MiB)."""


def inflate_body(
    data: bytes | memoryview, limit: int = MAX_INFLATED_BODY, *, what: str = "body", sys_flag: int = 0
) -> bytes:
    """Decompress a COMPRESSED_FLAG body (Java ``UtilAll.uncompress``; RocketMQ 5's
    ``CompressorFactory`` by ``sys_flag``'s compression-type bits, none = zlib as 4.x) into at
    most ``limit`` bytes (default 4 MiB), so that a small record from any producer cannot make a
    consumer allocate without bound (a zlib bomb).

    Raises:
        RecordDecodeError: the body inflates past ``limit``, is not a complete stream, names an
            unknown codec, or needs a codec library that is not installed (the message says
            which extra); ``what`` names the message in the text.
    """
    try:
        return _compression.decompress(data, sys_flag, limit)
    except _compression.CompressionUnavailable as e:
        raise RecordDecodeError(f"compressed {what} cannot be read: {e}") from None
    except ValueError as e:
        raise RecordDecodeError(f"compressed {what} {e}") from None


def walk_records_py(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int = -1, check_crc: bool = False
) -> list[RecordSpan]:
    """Every record of ``buf[start:end]`` back to back (a pull body); the pure-Python twin of
    ``rmq._store.walk_records``. Raises RecordDecodeError at the first bad record."""
    if end < 0 or end > len(buf):
        end = len(buf)
    out = []
    pos = start
    while pos < end:
        span = walk_record(buf, pos, end, check_crc)
        out.append(span)
        pos += span.total
    return out


# ---------------------------------------------------------------------------------------------
# Batch body (Java MessageDecoder.encodeMessages, one MessageDecoder.encodeMessage per message):
#
#   +-----------+----------+------------+--------+---------+------+---------+-------+
#   | TOTALSIZE | MAGIC(0) | BODYCRC(0) | FLAG   | BODYLEN | body | PROPLEN | props |
#   | int32     | int32    | int32      | int32  | int32   |  n   | int16   |  n    |
#   +-----------+----------+------------+--------+---------+------+---------+-------+
#   TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN

_BATCH_HEAD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")
MAX_BATCH_ITEM_PROPERTIES = 0x7FFF


def _batch_item_parts(flag: int, body: bytes, props: str) -> tuple[bytes, bytes, bytes, bytes]:
    pb = props.encode("utf-8")
    if len(pb) > MAX_BATCH_ITEM_PROPERTIES:
        raise ValueError(f"properties of a batch item are {len(pb)} bytes; RocketMQ allows at most 32767")
    return _BATCH_HEAD.pack(20 + len(body) + 2 + len(pb), 0, 0, flag, len(body)), body, _I16.pack(len(pb)), pb


def encode_batch_item(body: bytes, props_str: str, flag: int = 0) -> bytes:
    """One item of a SEND_BATCH_MESSAGE body (``flag`` defaults to 0). ValueError when the
    properties exceed 32767 bytes."""
    return b"".join(_batch_item_parts(flag, body, props_str))


def encode_batch(items: Iterable[tuple[int, bytes, str]]) -> bytes:
    """Encode ``(flag, body, properties string)`` items into one batch body."""
    parts: list[bytes] = []
    for flag, body, props in items:
        parts.extend(_batch_item_parts(flag, body, props))
    return b"".join(parts)


# The walker the layers use: the Cython one (rmq._store.walk_records, same results and errors
# as walk_records_py, tests/property and tests/store/test_codec.py check it) unless the
# extension is missing or RMQ_NO_EXTENSIONS=1 (rmq.common.native).


class RecordWalker(Protocol):
    """``walk_records(buf, start=0, end=-1, check_crc=False)`` → the records' spans, each in
    the field order of :class:`RecordSpan`."""

    def __call__(
        self, buf: bytes | bytearray | memoryview, start: int = 0, end: int = -1, check_crc: bool = False, /
    ) -> Sequence[tuple[int, ...]]: ...


def _pick_walker() -> RecordWalker:
    try:
        from rmq import _store
    except ImportError:  # pragma: no cover - the extension is not built
        return walk_records_py
    _store.set_record_error(RecordDecodeError)  # the store's decoders raise ours too
    if not native.ENABLED:
        return walk_records_py
    return _store.walk_records


walk_records: RecordWalker = _pick_walker()
native.chose("record walker", walk_records is not walk_records_py)
