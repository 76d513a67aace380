"""Public value types of the rmq SDK.

Messages, queues and results are frozen dataclasses: they are safe to share between tasks and to
use as dict keys (``MessageQueue``). Statuses are enums named exactly like their Java
counterparts so a RocketMQ user recognises them (``SendStatus.SEND_OK``,
``PullStatus.NO_NEW_MSG`` ...). Normal outcomes are statuses; failures are exceptions from
:mod:`rmq.errors`.
"""

from __future__ import annotations

import datetime as _dt
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.common.message import MessageConst
from rmq.errors import SerializationError

__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendStatus",
    "SendResult",
    "PullStatus",
    "PullResult",
    "ConsumeResult",
    "MessageModel",
    "ConsumeFromWhere",
    "LocalTransactionState",
    "TransactionSendResult",
    "MessageConst",
    "ServiceState",
]
__all__ += ["ConsumeMode"]


@lazy_dataclass(frozen=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker; hashable and ordered (topic, broker, queue id)."""

    topic: str
    """Topic name."""
    broker_name: str
    """The broker (master/slave set) that hosts the queue, e.g. ``"broker-a"``."""
    queue_id: int
    """Queue number within the topic on that broker, from 0."""

    def __lt__(self, other: MessageQueue) -> bool:
        return (self.topic, self.broker_name, self.queue_id) < (other.topic, other.broker_name, other.queue_id)

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"

    def to_json(self) -> dict[str, Any]:
        """The Java/fastjson shape, as used in LOCK_BATCH_MQ bodies."""
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MessageQueue:
        """The inverse of :meth:`to_json`."""
        return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))


def _keys_tuple(keys: str | Iterable[str] | None) -> tuple[str, ...]:
    if keys is None:
        return ()
    if isinstance(keys, str):
        return tuple(k for k in keys.split(MessageConst.KEY_SEPARATOR) if k)
    return tuple(str(k) for k in keys)


@dataclass(frozen=True, slots=True, init=False)
class Message:
    """A message to send.

    Args:
        topic: destination topic (≤ 127 bytes, ``^[%|a-zA-Z0-9_-]+$``).
        body: payload, ``bytes`` (or any bytes-like object) or ``str`` (encoded as UTF-8); kept
            as ``bytes`` (≤ 4 MiB after compression).
        tags: one tag used for broker-side filtering (``TAGS``); default ``None`` (no tag).
        keys: business keys for lookup (``KEYS``): any iterable of ``str`` (a list, a tuple …)
            or one space-separated string; kept as a tuple; default none.
        properties: user properties (string → string); default none. Names reserved by
            RocketMQ (``TAGS``, ``UNIQ_KEY`` …) raise ``ValueError``.
        flag: a user int stored with the message as-is; default 0.
        delay_level: 1..18 delays delivery (``1s 5s 10s 30s 1m … 2h``); default 0 (none).
        wait_store_msg_ok: the ``WAIT`` property; default True.
        message_group: the FIFO message group (``__SHARDINGKEY``, Java 5's message group);
            default None. A producer sends every message of one group to the same queue
            (the hash of the group over the topic's queues) and never retries it on another,
            so an orderly consumer sees each group in send order; a FIFO-typed topic
            (``message.type=FIFO``) takes only messages with a group.
        delivery_time: a timer message (RocketMQ 5): delivered at this time, a ``datetime``
            (naive: local time) or epoch milliseconds; sent as ``TIMER_DELIVER_MS``. Default
            None (at once). The broker refuses a time more than its ``timerMaxDelaySec``
            (3 days by default) ahead; a time already passed is delivered at once.
        delay: a timer message delivered this long after it is sent (a ``timedelta`` ≥ 0;
            ``TIMER_DELIVER_MS`` = the send time + ``delay``, fixed at the first attempt so a
            retry does not postpone it). Default None. At most one of ``delivery_time``,
            ``delay`` and ``delay_level``; timer messages go alone (``send_batch`` and
            ``send_in_transaction`` refuse them, automatic batching sends them on their own).
    """

    topic: str
    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    flag: int
    delay_level: int
    wait_store_msg_ok: bool
    message_group: str | None
    delivery_time: int | None
    delay: _dt.timedelta | None

    # An explicit __init__ (not the dataclass one) so the parameters can be wider than the
    # attributes: callers pass str bodies and list keys, and read back bytes and a tuple.
    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview | str,
        tags: str | None = None,
        keys: str | Iterable[str] | None = (),
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        delay_level: int = 0,
        wait_store_msg_ok: bool = True,
        message_group: str | None = None,
        *,
        delivery_time: _dt.datetime | int | None = None,
        delay: _dt.timedelta | None = None,
    ) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "body", body)
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "properties", properties)
        object.__setattr__(self, "flag", flag)
        object.__setattr__(self, "delay_level", delay_level)
        object.__setattr__(self, "wait_store_msg_ok", wait_store_msg_ok)
        object.__setattr__(self, "message_group", message_group)
        object.__setattr__(self, "delivery_time", delivery_time)
        object.__setattr__(self, "delay", delay)
        self.__post_init__()

    def __post_init__(self) -> None:
        if isinstance(self.body, str):
            object.__setattr__(self, "body", self.body.encode("utf-8"))
        elif not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))
        object.__setattr__(self, "keys", _keys_tuple(self.keys))
        props = dict(self.properties or {})
        for k, v in props.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValueError(f"message properties must be str → str, got {k!r}: {v!r}")
            if k in MessageConst.RESERVED:
                raise ValueError(f"property name {k!r} is reserved by RocketMQ")
            if "\x01" in k or "\x02" in k or "\x01" in v or "\x02" in v:
                raise ValueError(f"property {k!r} contains a separator character (\\x01/\\x02)")
        object.__setattr__(self, "properties", props)
        if not 0 <= self.delay_level <= 18:
            raise ValueError(f"delay_level must be in 0..18, got {self.delay_level}")
        group = self.message_group
        if group is not None and (not isinstance(group, str) or not group or "\x01" in group or "\x02" in group):
            raise ValueError(f"message_group must be a non-empty str without \\x01/\\x02, got {group!r}")
        # timer messages (RocketMQ 5's TIMER_DELIVER_MS)
        when: Any = self.delivery_time
        if when is not None:
            if isinstance(when, _dt.datetime):
                when = int(when.timestamp() * 1000)
            elif isinstance(when, bool) or not isinstance(when, int):
                raise ValueError(f"delivery_time must be a datetime or epoch milliseconds, got {when!r}")
            object.__setattr__(self, "delivery_time", when)
        if self.delay is not None and (not isinstance(self.delay, _dt.timedelta) or self.delay < _dt.timedelta(0)):
            raise ValueError(f"delay must be a timedelta >= 0, got {self.delay!r}")
        if sum(x is not None and x != 0 for x in (self.delivery_time, self.delay, self.delay_level or None)) > 1:
            raise ValueError("give at most one of delivery_time, delay and delay_level")


_UNSET: Any = object()  # MessageExt.value not deserialized yet


@lazy_dataclass(frozen=True, slots=True)
class MessageExt:
    """A message as stored by the broker and delivered to consumers.

    ``topic`` is the original topic also for redelivered messages (the SDK maps
    ``%RETRY%group`` back through the ``RETRY_TOPIC`` property).
    """

    topic: str
    """Topic (the original one for retries)."""
    body: bytes
    """Payload, already decompressed."""
    tags: str | None
    """The ``TAGS`` property, or None."""
    keys: tuple[str, ...]
    """The ``KEYS`` property split on spaces."""
    properties: Mapping[str, str]
    """All properties, system ones included."""
    msg_id: str
    """The client id (``UNIQ_KEY``) when present, else ``offset_msg_id``."""
    offset_msg_id: str
    """Broker id: store host + CommitLog offset, 32 upper-case hex digits."""
    queue_id: int
    """Queue the message was read from."""
    queue_offset: int
    """Logical offset in that queue."""
    reconsume_times: int
    """How often it was redelivered (0 the first time)."""
    commit_log_offset: int = 0
    """Physical CommitLog offset (used for send-back)."""
    born_timestamp: int = 0
    """Producer clock, ms since the epoch."""
    store_timestamp: int = 0
    """Broker clock when stored, ms since the epoch."""
    born_host: str = ""
    """``ip:port`` of the producer connection."""
    store_host: str = ""
    """``ip:port`` of the broker that stored it."""
    sys_flag: int = 0
    """RocketMQ ``MessageSysFlag`` bits as stored."""
    flag: int = 0
    """User flag."""
    body_crc: int = 0
    """CRC32 of the stored (possibly compressed) body, as the broker wrote it."""
    prepared_transaction_offset: int = 0
    """Transaction bookkeeping offset."""
    broker_name: str = ""
    """Broker the message was pulled from."""
    real_topic: str = ""
    """The topic as stored (``%RETRY%group`` for a retry)."""
    value_deserializer: Callable[[bytes], Any] | None = field(default=None, repr=False, compare=False)
    """The consumer's ``value_deserializer`` behind :attr:`value`; None = the body as is."""
    _value: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @property
    def value(self) -> Any:
        """The body through the consumer's ``value_deserializer`` (aiokafka's
        ``ConsumerRecord.value``), called on the first access and kept; the body itself without
        one.

        Raises:
            rmq.errors.SerializationError: the deserializer raised (chained as the cause); in a
                push consumer's handler that is a failed consumption: the message is retried
                and, after ``max_reconsume_times``, goes to the DLQ.
        """
        v = self._value
        if v is _UNSET:
            fn = self.value_deserializer
            if fn is None:
                return self.body
            try:
                v = fn(self.body)
            except Exception as e:
                raise SerializationError(
                    f"value_deserializer failed for message {self.msg_id} of {self.topic}: {e!r}"
                ) from e
            object.__setattr__(self, "_value", v)
        return v

    @property
    def queue(self) -> MessageQueue:
        """The queue the message came from (``real_topic`` based)."""
        return MessageQueue(self.real_topic or self.topic, self.broker_name, self.queue_id)

    @property
    def delay_level(self) -> int:
        """The ``DELAY`` property (0 when not delayed)."""
        return int(self.properties.get(MessageConst.DELAY_TIME_LEVEL, "0") or 0)

    @property
    def message_group(self) -> str | None:
        """The FIFO message group it was sent with (``__SHARDINGKEY``), or None."""
        return self.properties.get(MessageConst.SHARDING_KEY) or None

    @property
    def receipt_handle(self) -> str | None:
        """POP: the handle to :meth:`rmq.SimpleConsumer.ack` or change the invisible time of this
        delivery (Java's ``POP_CK`` property, ``ExtraInfoUtil``'s string); None for a pulled
        message. Each delivery has its own: a redelivered message carries a new one."""
        return self.properties.get(MessageConst.POP_CK)

    @property
    def delivery_attempt(self) -> int:
        """The delivery this is, from 1 (Java 5 ``MessageView.getDeliveryAttempt``:
        ``reconsume_times + 1``)."""
        return self.reconsume_times + 1

    @property
    def transaction_id(self) -> str | None:
        """The transaction id (``__transactionId__``, else the client message id), if any."""
        return self.properties.get(MessageConst.TRANSACTION_ID) or self.properties.get(
            MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        )


class ServiceState(enum.Enum):
    """Life cycle of a producer or consumer (Java ``ServiceState``).

    ``CREATE_JUST`` until :meth:`start` succeeds (then ``RUNNING``) or fails (then
    ``START_FAILED``: create a new object); ``SHUTDOWN_ALREADY`` after :meth:`close`. Only a
    ``CREATE_JUST`` object can be started; calls that need a running client raise
    :class:`rmq.errors.IllegalStateError` in every other state.
    """

    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


class SendStatus(enum.Enum):
    """Outcome of a send the broker accepted (Java ``SendStatus``)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@lazy_dataclass(frozen=True, slots=True)
class SendResult:
    """What a send returns."""

    status: SendStatus
    """SEND_OK, or a flush/replication warning (the message is stored on the master)."""
    msg_id: str
    """The client message id (``UNIQ_KEY``); comma-joined for a batch."""
    offset_msg_id: str
    """Broker id(s): store host + CommitLog offset; comma-joined for a batch."""
    message_queue: MessageQueue
    """The queue it went to."""
    queue_offset: int
    """Logical offset of the (first) message in that queue."""
    transaction_id: str | None = None
    """Transaction id for half messages."""

    @property
    def queue_id(self) -> int:
        return self.message_queue.queue_id

    @property
    def topic(self) -> str:
        return self.message_queue.topic


class LocalTransactionState(enum.Enum):
    """What a local transaction or a check-back decided (Java ``LocalTransactionState``)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic: Java's spelling, kept so the names match


@lazy_dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """Result of :meth:`rmq.Producer.send_in_transaction`."""

    send_result: SendResult
    local_transaction_state: LocalTransactionState

    @property
    def status(self) -> SendStatus:
        return self.send_result.status

    @property
    def msg_id(self) -> str:
        return self.send_result.msg_id


class PullStatus(enum.Enum):
    """Outcome of one pull (Java ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@lazy_dataclass(frozen=True, slots=True)
class PullResult:
    """What one PULL_MESSAGE returned, messages already decoded and tag-filtered."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt]
    suggest_which_broker_id: int = 0


class ConsumeResult(enum.Enum):
    """What a consume handler may return (returning ``None`` means SUCCESS).

    ``RECONSUME_LATER`` (or raising) sends the message back for redelivery in concurrent mode,
    and suspends the queue for a moment in orderly mode.
    """

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class MessageModel(enum.Enum):
    """Clustering: each message to one member of the group. Broadcasting: to every member."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeMode(enum.Enum):
    """How a :class:`rmq.PushConsumer` gets its messages (Java ``MessageRequestMode``).

    ``PULL`` (the 4.x way): the group's members split the queues among themselves (client
    rebalance) and pull from offsets. ``POP`` (the 5.x way, Java ``setClientRebalance(false)``):
    every member pops from every broker; the broker hands each message to one member, invisible
    to the others until acked or until its invisible time passes; more members than queues
    all get messages.
    """

    PULL = "PULL"
    POP = "POP"


class ConsumeFromWhere(enum.Enum):
    """Where a group with no stored offset starts (Java names)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"
