"""Request builders and reply parsers of RocketMQ 5 POP consumption, and the ack handle.

The handle (Java ``ExtraInfoUtil``, the ``POP_CK`` property of a popped message) is a string of
space-separated fields::

    ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]

``retry`` is ``0`` (the topic itself), ``1`` (Java ``KeyBuilder.buildPopRetryTopicV1``:
``%RETRY%<group>_<topic>``) or ``2`` (V2: ``%RETRY%<group>+<topic>``); ``reviveQid`` 999 marks an
orderly pop (Java ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``). :class:`ExtraInfo` builds and parses it;
:func:`parse_pop` attaches one to every message of a POP answer the way Java's
``MQClientAPIImpl.processPopResponse`` does (from ``startOffsetInfo``/``msgOffsetInfo``), unless
the broker already put one in the message (it does for retry messages).

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rmq.common.constants import MixAll
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rmq.protocol.requests import _request, check_success, raise_for

__all__ = [
    "POP_ORDER_REVIVE_QUEUE",
    "REVIVE_TOPIC_PREFIX",
    "BatchAck",
    "ExtraInfo",
    "PopReply",
    "PopStatus",
    "ack_message",
    "batch_ack_message",
    "build_msg_offset_info",
    "build_order_count_info",
    "build_start_offset_info",
    "change_invisible_time",
    "decode_batch_ack_body",
    "encode_batch_ack_body",
    "notification",
    "parse_ack",
    "parse_change_invisible_time",
    "parse_notification",
    "parse_offset_info",
    "parse_polling_info",
    "parse_pop",
    "polling_info",
    "pop_message",
    "pop_retry_topic",
    "real_topic",
    "retry_mark",
    "revive_topic",
]

#: Java ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``: the revive queue id of an orderly pop's handle.
POP_ORDER_REVIVE_QUEUE = 999

#: Java ``PopAckConstants.REVIVE_TOPIC``; the cluster name follows.
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"

_SEP = " "  # Java MessageConst.KEY_SEPARATOR


def revive_topic(cluster: str) -> str:
    """Java ``PopAckConstants.buildClusterReviveTopic``."""
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """Java ``KeyBuilder.buildPopRetryTopic``: ``%RETRY%<group>_<topic>`` (V1, the default) or
    ``%RETRY%<group>+<topic>`` (V2)."""
    return f"{MixAll.RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_mark(topic: str) -> str:
    """Java ``ExtraInfoUtil.getRetry(topic)``: ``2`` a V2 pop retry topic, ``1`` any other
    ``%RETRY%`` topic, ``0`` otherwise."""
    if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
        return "2" if "+" in topic else "1"
    return "0"


def real_topic(topic: str, group: str, retry: str) -> str:
    """Java ``ExtraInfoUtil.getRealTopic(topic, cid, retry)``: the topic a handle's message is
    in. Raises ValueError for a mark other than 0/1/2."""
    if retry == "0":
        return topic
    if retry == "1":
        return pop_retry_topic(topic, group)
    if retry == "2":
        return pop_retry_topic(topic, group, v2=True)
    raise ValueError(f"retry mark must be 0, 1 or 2, not {retry!r}")


def _java_long(s: str, what: str, lo: int = -(1 << 63), hi: int = (1 << 63) - 1) -> int:
    # Java Long.parseLong: optional sign, ASCII digits only (int() would also take "1_0", " 1").
    body = s[1:] if s[:1] in ("-", "+") else s
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(f"{what} is not a number: {s!r}")
    v = int(s)
    if not lo <= v <= hi:
        raise ValueError(f"{what} is out of range {lo}..{hi}: {s!r}")
    return v


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A POP ack handle (Java ``ExtraInfoUtil.buildExtraInfo``/``split`` and getters).

    ``queue_offset`` is the message's own queue offset (the 8th field; None in the 7-field form).
    """

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None

    @classmethod
    def build(
        cls,
        ck_queue_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        topic: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int | None = None,
    ) -> ExtraInfo:
        """From the topic the message was popped from (its retry mark is derived as Java does)."""
        return cls(
            ck_queue_offset,
            pop_time,
            invisible_time,
            revive_qid,
            retry_mark(topic),
            broker_name,
            queue_id,
            queue_offset,
        )

    def __str__(self) -> str:
        parts = [
            str(self.ck_queue_offset),
            str(self.pop_time),
            str(self.invisible_time),
            str(self.revive_qid),
            self.retry,
            self.broker_name,
            str(self.queue_id),
        ]
        if self.queue_offset is not None:
            parts.append(str(self.queue_offset))
        return _SEP.join(parts)

    @classmethod
    def parse(cls, s: str) -> ExtraInfo:
        """Parse a handle; ValueError (saying which field) for anything Java's getters refuse:
        fewer than 7 fields, a field that is not a Java long/int, a retry mark not 0/1/2."""
        if not isinstance(s, str):
            raise ValueError("extraInfo is not a string")
        # Java String.split(" ") drops trailing empty strings.
        parts = s.split(_SEP)
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) < 7:
            raise ValueError(f"extraInfo has {len(parts)} fields, needs at least 7: {s[:200]!r}")
        i32 = (-(1 << 31), (1 << 31) - 1)
        retry = parts[4]
        if retry not in ("0", "1", "2"):
            raise ValueError(f"extraInfo retry mark must be 0, 1 or 2, not {retry[:20]!r}")
        return cls(
            _java_long(parts[0], "extraInfo ckQueueOffset"),
            _java_long(parts[1], "extraInfo popTime"),
            _java_long(parts[2], "extraInfo invisibleTime"),
            _java_long(parts[3], "extraInfo reviveQid", *i32),
            retry,
            parts[5],
            _java_long(parts[6], "extraInfo queueId", *i32),
            _java_long(parts[7], "extraInfo queueOffset") if len(parts) > 7 else None,
        )

    @property
    def is_order(self) -> bool:
        """Java ``ExtraInfoUtil.isOrder``."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        """Java ``ExtraInfoUtil.getRealTopic(extraInfo, topic, cid)``."""
        return real_topic(topic, group, self.retry)


# --------------------------------------------------------------------------- offset infos
# Java ExtraInfoUtil.buildStartOffsetInfo / buildMsgOffsetInfo / buildQueueIdOrderCountInfo:
# ";"-joined entries "<retry mark> <queueId> <value>", keyed "<retry mark>@<queueId>" on parsing.


def build_start_offset_info(entries: Iterable[tuple[str, int, int]]) -> str:
    """``(topic, queue_id, start_offset)`` per queue popped → the ``startOffsetInfo`` string."""
    return ";".join(f"{retry_mark(t)}{_SEP}{q}{_SEP}{o}" for t, q, o in entries)


def build_msg_offset_info(entries: Iterable[tuple[str, int, Sequence[int]]]) -> str:
    """``(topic, queue_id, [queue offsets])`` per queue popped → the ``msgOffsetInfo`` string."""
    return ";".join(f"{retry_mark(t)}{_SEP}{q}{_SEP}{','.join(map(str, offs))}" for t, q, offs in entries)


def build_order_count_info(entries: Iterable[tuple[str, int, int]]) -> str:
    """``(topic, queue_id, count)`` → ``orderCountInfo`` (Java ``buildQueueIdOrderCountInfo``)."""
    return ";".join(f"{retry_mark(t)}{_SEP}{q}{_SEP}{c}" for t, q, c in entries)


def parse_offset_info(s: str | None) -> dict[str, list[int]]:
    """Parse any of the three infos into ``{"<mark>@<queueId>": [values]}`` (one value for
    start offsets and counts). ValueError for a malformed or duplicate entry, as Java."""
    out: dict[str, list[int]] = {}
    if not s:
        return out
    for one in s.split(";"):
        parts = one.split(_SEP)
        if len(parts) != 3:
            raise ValueError(f"malformed offset info entry {one[:100]!r}")
        key = f"{parts[0]}@{parts[1]}"
        if key in out:
            raise ValueError(f"duplicate offset info entry {key!r}")
        out[key] = [_java_long(v, "offset info value") for v in parts[2].split(",")]
    return out


# --------------------------------------------------------------------------- POP_MESSAGE


class PopStatus(Enum):
    """Java ``PopStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


_POP_STATUS: dict[int, PopStatus] = {
    ResponseCode.SUCCESS: PopStatus.FOUND,
    ResponseCode.POLLING_FULL: PopStatus.POLLING_FULL,
    ResponseCode.POLLING_TIMEOUT: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.PULL_NOT_FOUND: PopStatus.POLLING_NOT_FOUND,
    ResponseCode.NO_MESSAGE: PopStatus.NO_NEW_MSG,
}


@dataclass(slots=True)
class PopReply:
    """A POP_MESSAGE answer before its records are decoded (``body``: records in the PULL
    format). :meth:`handle` gives the ack handle of a decoded message."""

    status: PopStatus
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    body: bytes = b""
    start_offsets: dict[str, list[int]] = field(default_factory=dict)
    msg_offsets: dict[str, list[int]] = field(default_factory=dict)
    order_counts: dict[str, list[int]] = field(default_factory=dict)
    remark: str | None = None

    def handle(self, topic: str, queue_id: int, queue_offset: int, broker_name: str, pop_ck: str | None = None) -> str:
        """The ack handle (``POP_CK``) of a message of this answer, as Java's
        ``processPopResponse`` builds it: the message's own ``pop_ck`` property when the broker
        set one, else from the start offset of its queue (``topic``: the message's topic as
        stored, a retry topic keeps its mark)."""
        if pop_ck:
            return pop_ck
        key = f"{retry_mark(topic)}@{queue_id}"
        start = self.start_offsets.get(key)
        ck = start[0] if start else queue_offset
        return str(
            ExtraInfo.build(
                ck, self.pop_time, self.invisible_time, self.revive_qid, topic, broker_name, queue_id, queue_offset
            )
        )

    def order_count(self, topic: str, queue_id: int) -> int:
        """The times an orderly message was delivered before (Java sets reconsumeTimes from it)."""
        v = self.order_counts.get(f"{retry_mark(topic)}@{queue_id}")
        return v[0] if v else 0


def pop_message(header: PopMessageRequestHeader) -> RemotingCommand:
    """POP_MESSAGE (200050)."""
    return _request(RequestCode.POP_MESSAGE, header)


def parse_pop(resp: RemotingCommand) -> PopReply:
    """Java ``MQClientAPIImpl.processPopResponse``: FOUND / NO_NEW_MSG / POLLING_FULL /
    POLLING_NOT_FOUND, raise for any other code."""
    status = _POP_STATUS.get(resp.code)
    if status is None:
        raise_for(resp)
    if status is not PopStatus.FOUND:
        rest = resp.ext_fields.get("restNum") if resp.ext_fields else None
        try:
            rest_num = int(rest) if rest is not None else 0
        except (TypeError, ValueError):
            rest_num = 0
        return PopReply(status, rest_num=rest_num, remark=resp.remark)
    h = PopMessageResponseHeader.from_ext_fields(resp.ext_fields)
    try:
        starts = parse_offset_info(h.start_offset_info)
        msgs = parse_offset_info(h.msg_offset_info)
        counts = parse_offset_info(h.order_count_info)
    except ValueError as e:
        raise RemotingCommandError(f"malformed POP_MESSAGE answer: {e}") from None
    return PopReply(
        status,
        h.pop_time,
        h.invisible_time,
        h.revive_qid,
        h.rest_num,
        resp.body_bytes() or b"",
        starts,
        msgs,
        counts,
        resp.remark,
    )


# --------------------------------------------------------------------------- ACK


def ack_message(group: str, topic: str, extra_info: str, bname: str | None = None) -> RemotingCommand:
    """ACK_MESSAGE (200051) of one popped message by its handle. ``topic`` is the topic popped
    (the header carries the real topic, a retry topic for a retried message, as Java's
    ``DefaultMQPushConsumerImpl.ackAsync`` sends it). Raises ValueError for a malformed handle."""
    info = ExtraInfo.parse(extra_info)
    if info.queue_offset is None:
        raise ValueError("extraInfo lacks the message's queue offset (8th field)")
    return _request(
        RequestCode.ACK_MESSAGE,
        AckMessageRequestHeader(
            consumer_group=group,
            topic=info.real_topic(topic, group),
            queue_id=info.queue_id,
            extra_info=extra_info,
            offset=info.queue_offset,
            bname=bname,
        ),
    )


def parse_ack(resp: RemotingCommand) -> None:
    """SUCCESS, or raise (NO_MESSAGE: the handle's offset is gone from the queue)."""
    check_success(resp)


@dataclass(slots=True)
class BatchAck:
    """Java ``BatchAck`` (a ``BatchAckMessageRequestBody`` entry): the acked offsets of one
    checkpoint, ``start_offset + i`` for every set bit ``i``."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: frozenset[int]

    @classmethod
    def of(cls, group: str, topic: str, handles: Iterable[str]) -> list[BatchAck]:
        """Group handles by checkpoint (Java ``DefaultMQPushConsumerImpl.batchAckAsync``)."""
        by_ck: dict[tuple[Any, ...], set[int]] = {}
        for h in handles:
            info = ExtraInfo.parse(h)
            if info.queue_offset is None:
                raise ValueError("extraInfo lacks the message's queue offset (8th field)")
            key = (info.retry, info.queue_id, info.ck_queue_offset, info.revive_qid, info.pop_time, info.invisible_time)
            by_ck.setdefault(key, set()).add(info.queue_offset - info.ck_queue_offset)
        return [
            cls(group, topic, r, so, q, rq, pt, it, frozenset(bits)) for (r, q, so, rq, pt, it), bits in by_ck.items()
        ]

    def to_json(self) -> dict[str, Any]:
        # fastjson writes the @JSONField short names, sorted, and a BitSet as its
        # toByteArray() (little-endian) in base64, through BitSetSerializerDeserializer.
        n = max(self.bits) + 1 if self.bits else 0
        bitset = sum(1 << i for i in self.bits).to_bytes((n + 7) // 8, "little") if n else b""
        return {
            "b": base64.b64encode(bitset).decode("ascii"),
            "c": self.consumer_group,
            "it": self.invisible_time,
            "pt": self.pop_time,
            "q": self.queue_id,
            "r": self.retry,
            "rq": self.revive_queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }

    @classmethod
    def from_json(cls, d: Any, max_bits: int = 1 << 16) -> BatchAck:
        """Read either naming (short or long, Java's ``alternateNames``). ValueError/TypeError
        for a malformed entry; a bitset wider than ``max_bits`` is refused."""
        if not isinstance(d, dict):
            raise TypeError("a BatchAck entry is not an object")

        def get(short: str, long: str) -> Any:
            v = d.get(short)
            return d.get(long) if v is None else v

        def num(short: str, long: str, lo: int = -(1 << 63), hi: int = (1 << 63) - 1) -> int:
            v = get(short, long)
            if isinstance(v, str):
                return _java_long(v, long, lo, hi)
            if type(v) is not int or not lo <= v <= hi:
                raise ValueError(f"BatchAck {long} is not an integer in {lo}..{hi}: {v!r}")
            return v

        raw = get("b", "bitSet")
        if isinstance(raw, str):
            data = base64.b64decode(raw, validate=True)
        elif isinstance(raw, list) and all(type(x) is int and -128 <= x <= 255 for x in raw):
            data = bytes(x & 0xFF for x in raw)
        else:
            raise ValueError("BatchAck bitSet is not base64 bytes")
        if len(data) * 8 > max_bits:
            raise ValueError(f"BatchAck bitSet wider than {max_bits} bits")
        word = int.from_bytes(data, "little")
        bits = frozenset(i for i in range(word.bit_length()) if word >> i & 1)
        group, topic, retry = get("c", "consumerGroup"), get("t", "topic"), get("r", "retry")
        if not isinstance(group, str) or not isinstance(topic, str) or not isinstance(retry, str):
            raise ValueError("BatchAck consumerGroup, topic and retry must be strings")
        i32 = (-(1 << 31), (1 << 31) - 1)
        return cls(
            group,
            topic,
            retry,
            num("so", "startOffset"),
            num("q", "queueId", *i32),
            num("rq", "reviveQueueId", *i32),
            num("pt", "popTime"),
            num("it", "invisibleTime"),
            bits,
        )


def encode_batch_ack_body(acks: Sequence[BatchAck], broker_name: str | None = None) -> bytes:
    """Java ``BatchAckMessageRequestBody`` as fastjson writes it (``acks``, ``brokerName``)."""
    d: dict[str, Any] = {"acks": [a.to_json() for a in acks]}
    if broker_name is not None:
        d["brokerName"] = broker_name
    return json.dumps(d, separators=(",", ":")).encode()


def decode_batch_ack_body(body: bytes, max_acks: int = 1024) -> tuple[str | None, list[BatchAck]]:
    """``(brokerName, acks)``; ValueError for a malformed body or more than ``max_acks``."""
    try:
        d = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"BatchAckMessageRequestBody is not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError("BatchAckMessageRequestBody is not an object")
    acks = d.get("acks") or []
    if not isinstance(acks, list):
        raise ValueError("BatchAckMessageRequestBody acks is not a list")
    if len(acks) > max_acks:
        raise ValueError(f"BatchAckMessageRequestBody has {len(acks)} acks, at most {max_acks}")
    bn = d.get("brokerName")
    try:
        return (bn if isinstance(bn, str) else None), [BatchAck.from_json(a) for a in acks]
    except TypeError as e:
        raise ValueError(str(e)) from None


def batch_ack_message(acks: Sequence[BatchAck], broker_name: str | None = None) -> RemotingCommand:
    """BATCH_ACK_MESSAGE (200151)."""
    return _request(RequestCode.BATCH_ACK_MESSAGE, None, encode_batch_ack_body(acks, broker_name))


# --------------------------------------------------------------------------- change invisible time


def change_invisible_time(
    group: str, topic: str, extra_info: str, invisible_time: int, bname: str | None = None
) -> RemotingCommand:
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message becomes visible ``invisible_time`` ms
    from now. Raises ValueError for a malformed handle."""
    info = ExtraInfo.parse(extra_info)
    if info.queue_offset is None:
        raise ValueError("extraInfo lacks the message's queue offset (8th field)")
    return _request(
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
        ChangeInvisibleTimeRequestHeader(
            consumer_group=group,
            topic=info.real_topic(topic, group),
            queue_id=info.queue_id,
            extra_info=extra_info,
            offset=info.queue_offset,
            invisible_time=invisible_time,
            bname=bname,
        ),
    )


def parse_change_invisible_time(resp: RemotingCommand, old_extra_info: str) -> str:
    """The message's new handle (Java's client rebuilds it from the answer's popTime,
    invisibleTime and reviveQid, the checkpoint now being the message itself)."""
    check_success(resp)
    h = ChangeInvisibleTimeResponseHeader.from_ext_fields(resp.ext_fields)
    old = ExtraInfo.parse(old_extra_info)
    off = old.queue_offset if old.queue_offset is not None else old.ck_queue_offset
    return str(
        ExtraInfo(off, h.pop_time, h.invisible_time, h.revive_qid, old.retry, old.broker_name, old.queue_id, off)
    )


# --------------------------------------------------------------------------- NOTIFICATION, POLLING_INFO


def notification(header: NotificationRequestHeader) -> RemotingCommand:
    """NOTIFICATION (200054)."""
    return _request(RequestCode.NOTIFICATION, header)


def parse_notification(resp: RemotingCommand) -> NotificationResponseHeader:
    """``has_msg`` / ``polling_full``."""
    check_success(resp)
    return NotificationResponseHeader.from_ext_fields(resp.ext_fields or {})


def polling_info(group: str, topic: str, queue_id: int) -> RemotingCommand:
    """POLLING_INFO (200055)."""
    return _request(
        RequestCode.POLLING_INFO, PollingInfoRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
    )


def parse_polling_info(resp: RemotingCommand) -> int:
    """The number of requests held for the group on the queue."""
    check_success(resp)
    return PollingInfoResponseHeader.from_ext_fields(resp.ext_fields).polling_num
