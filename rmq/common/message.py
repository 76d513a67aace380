"""One message codec for every layer (Java ``MessageDecoder``, ``MessageSysFlag``,
``PullSysFlag``, ``MessageConst`` and ``UtilAll`` in RocketMQ's ``common``).

Pure and synchronous, so it is tested byte for byte without a broker. The hot scans over
records stay in their layers (``rmq._store.decode_record`` → dict, the SDK's
``decode_messages`` → ``MessageExt``, the Spark reader's ``decode_records`` → Arrow columns):
they share the layout constants and the helpers below.
"""
from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Mapping

from rmq.errors import RemotingCommandError

__all__ = [
    "MessageSysFlag", "PullSysFlag", "MessageConst",
    "NAME_VALUE_SEPARATOR", "PROPERTY_SEPARATOR",
    "properties_to_string", "string_to_properties", "java_string_hash",
    "host_bytes", "offset_msg_id", "create_offset_msg_id", "decode_offset_msg_id",
    "encode_batch_item", "encode_batch", "RecordDecodeError",
    "MESSAGE_MAGIC_CODE", "MESSAGE_MAGIC_CODE_V2", "RECORD_HEAD", "RECORD_FIXED_V4",
    "MIN_RECORD_HEADER", "MIN_RECORD_V4", "HOST_V6_EXTRA",
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
        return ((PullSysFlag.FLAG_COMMIT_OFFSET if commit_offset else 0)
                | (PullSysFlag.FLAG_SUSPEND if suspend else 0)
                | (PullSysFlag.FLAG_SUBSCRIPTION if subscription else 0)
                | (PullSysFlag.FLAG_CLASS_FILTER if class_filter else 0))


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

    # Keys a user may not set through ``Message.properties``: the SDK owns them.
    RESERVED = frozenset(
        {
            KEYS, TAGS, WAIT_STORE_MSG_OK, DELAY_TIME_LEVEL, RETRY_TOPIC, REAL_TOPIC,
            REAL_QUEUE_ID, TRANSACTION_PREPARED, PRODUCER_GROUP, MIN_OFFSET, MAX_OFFSET,
            ORIGIN_MESSAGE_ID, RECONSUME_TIME, MAX_RECONSUME_TIMES, CONSUME_START_TIME,
            UNIQ_CLIENT_MESSAGE_ID_KEYIDX, TRANSACTION_ID,
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


def properties_to_string(props: Mapping[str, str] | None, *, trailing_separator: bool,
                         check_separators: bool = False) -> str:
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
            if (PROPERTY_SEPARATOR in k or NAME_VALUE_SEPARATOR in k
                    or (v is not None and (PROPERTY_SEPARATOR in v or NAME_VALUE_SEPARATOR in v))):
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
# Message records: the Java v1 CommitLog layout, also what PULL_MESSAGE bodies hold back to
# back (Java CommitLog.DefaultAppendMessageCallback.doAppend writes it, MessageDecoder.decode
# reads it), big-endian; offsets from the start of the record, IPv4 hosts:
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
# SYSFLAG bit 0x10 widens BORNHOST and bit 0x20 STOREHOST to 16 + 4 bytes (12 more each);
# MAGIC v2 gives TOPICLEN 2 bytes.

MESSAGE_MAGIC_CODE = 0xDAA320A7      # v1: 1-byte topic length
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB   # v2: 2-byte topic length
RECORD_HEAD = struct.Struct(">iIiiiqqiq")        # fields 1..9, up to BORNHOST (48 bytes)
RECORD_FIXED_V4 = struct.Struct(">iIiiiqqiq4siq4siiqi")   # fields 1..15, IPv4 hosts (88 bytes)
MIN_RECORD_HEADER = RECORD_FIXED_V4.size         # 88: everything before the body
MIN_RECORD_V4 = MIN_RECORD_HEADER + 1 + 2        # 91: empty body, topic and properties
HOST_V6_EXTRA = 12                               # bytes an IPv6 host adds to its field


class RecordDecodeError(RemotingCommandError, ValueError):
    """A message record or pull body is truncated or malformed; the message names where.
    Both a ``RemotingCommandError`` (not retriable: the same bytes fail again) and a
    ``ValueError``."""


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
