"""Consumer settings as frozen dataclasses, validated once when built.

:class:`ConsumerOptions` holds what every consumer has (Java ``DefaultMQPushConsumer`` and
``DefaultLitePullConsumer`` share these fields); :class:`PushConsumerOptions` and
:class:`PullConsumerOptions` add their own. The consumer constructors take the same names as
keyword arguments and build the options from them, so ``PushConsumer(ns, g, pull_batch_size=8)``
and ``PushConsumer(ns, g, options=PushConsumerOptions(pull_batch_size=8))`` are the same.
Out-of-range values raise :class:`rmq.errors.ClientError` naming the field and the range.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rmq.client.arguments import check_namespace
from rmq.client.arguments import check_range as check_range
from rmq.common.constants import TopicValidator
from rmq.errors import ClientError, ConfigError, RMQError
from rmq.remoting.acl import SessionCredentials
from rmq.types import ConsumeFromWhere, ConsumeMode, MessageModel, MessageQueue

from .allocate import STRATEGIES, AllocateStrategy
from .pop import POP_DELAY_LEVELS

__all__ = [
    "ConsumerOptions",
    "PushConsumerOptions",
    "PullConsumerOptions",
    "RebalanceListener",
    "ConsumerRebalanceListener",
    "ErrorHandler",
    "resolve_allocate_strategy",
    "build_options",
]


class ConsumerRebalanceListener:
    """Told which queues a rebalance took from this member and which it gave (aiokafka's
    ``ConsumerRebalanceListener``; Java ``MessageQueueListener`` gives only the new share).

    Subclass it and pass an instance as ``on_rebalance=``. Both methods may be ``async``; the
    consumer waits for them. ``on_queues_revoked`` runs before the revoked queues' offsets are
    persisted and their pulling stops (a pull consumer may still :meth:`commit` them);
    ``on_queues_assigned`` runs after the new queues started. Queue topics carry no namespace.
    """

    def on_queues_revoked(self, revoked: set[MessageQueue]) -> Awaitable[None] | None:
        """``revoked``: the queues of one topic this member no longer owns (may be empty)."""

    def on_queues_assigned(self, assigned: set[MessageQueue]) -> Awaitable[None] | None:
        """``assigned``: the queues of one topic newly owned by this member (may be empty)."""


#: ``fn(topic, owned_queues)``, sync or async: called after the queues of ``topic`` owned by this
#: member changed, with the queues it now owns; or a :class:`ConsumerRebalanceListener`.
RebalanceListener = Callable[[str, "set[MessageQueue]"], Awaitable[None] | None] | ConsumerRebalanceListener
#: ``fn(error)``, sync or async: a push consumer's persistent failure (see ``on_error``).
ErrorHandler = Callable[[RMQError], Awaitable[None] | None]

_O = TypeVar("_O", bound="ConsumerOptions")


def resolve_allocate_strategy(strategy: str | AllocateStrategy) -> AllocateStrategy:
    """The callable behind a strategy name (``"AVG"``, ``"AVG_BY_CIRCLE"``,
    ``"CONSISTENT_HASH"``), or the callable itself."""
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise ConfigError(
                "allocate_strategy", f"unknown strategy {strategy!r}", f"one of {sorted(STRATEGIES)} or a callable"
            )
        return STRATEGIES[strategy]
    if not callable(strategy):
        raise ConfigError(
            "allocate_strategy",
            f"{strategy!r} is neither a name nor a callable",
            f"one of {sorted(STRATEGIES)} or a callable",
        )
    return strategy


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """Settings every consumer has.

    Attributes:
        message_model: ``CLUSTERING`` (default: each message to one member of the group) or
            ``BROADCASTING`` (every member gets every message; offsets kept in a local file).
        consume_from_where: where a queue without a stored offset starts; default
            ``CONSUME_FROM_LAST_OFFSET``.
        consume_timestamp: ms since the epoch for ``CONSUME_FROM_TIMESTAMP``; default None =
            half an hour before the consumer starts (Java's default).
        allocate_strategy: ``"AVG"`` (default), ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"`` or a
            callable ``(group, cid, mqs, cids) -> list[MessageQueue]``.
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``,
            which a clustering consumer turns into ``pid#nanotime`` as Java's
            ``changeInstanceNameToPID`` does (its own client id, ``ip@pid#nanotime``). Two
            consumers of one group in one process need different names unless DEFAULT.
        client_ip: address in the client id; default None = the one used to reach the name
            server.
        pull_batch_size: messages per pull, [1, 1024]; default 32.
        offset_store_dir: broadcasting: directory of the local offset file; default None =
            ``$RMQ_CLIENT_OFFSET_DIR`` or ``~/.rmq_offsets``.
        on_rebalance: ``fn(topic, queues)`` (sync or async) after the queues of ``topic`` owned
            by this member changed, with those it now owns; or a
            :class:`ConsumerRebalanceListener` told the revoked and the assigned queues.
            Default None.
        namespace: Java's client namespace: topics and groups are ``namespace%name`` on the
            broker (retry and DLQ topics ``%RETRY%namespace%group``); the application sees the
            plain names. Default None (no namespace).
        error_retries: consecutive failures of one kind that cannot heal by themselves
            (SUBSCRIPTION_GROUP_NOT_EXIST, TOPIC_NOT_EXIST, NO_PERMISSION, no route for a
            subscribed topic) before the application is told: ``poll`` raises, a push consumer
            calls ``on_error``; [1, 1000]; default 5 (with the 3 s pull back-off, about 15 s).
        access_key: ACL accessKey: every request is signed as Java's ``AclClientRPCHook``
            does (for brokers with ``aclEnable=true``); default None = unsigned.
        secret_key: the account's secretKey, given with ``access_key``; default None. Never
            shown in the options' repr.
        security_token: optional ``SecurityToken`` sent with each signed request; default None.
        tls: ``True`` to connect over TLS, verifying the servers' certificates against the
            system's trust store; an ``ssl.SSLContext`` for your own CA or a client certificate
            (``rmq.remoting.tls.client_context(trust_cert_path=...)``); default None = plain TCP
            (Java ``useTLS``).
        value_deserializer: ``fn(body: bytes) -> value`` (aiokafka's): each message handed to
            the application has it as ``MessageExt.value_deserializer``, and
            ``message.value`` calls it once, on first access (a failure raises
            :class:`rmq.errors.SerializationError` there: in a push handler, a failed
            consumption). Default None: ``message.value`` is the body.
    """

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: int | None = None
    allocate_strategy: str | AllocateStrategy = "AVG"
    instance_name: str = "DEFAULT"
    client_ip: str | None = None
    pull_batch_size: int = 32
    offset_store_dir: str | None = None
    on_rebalance: RebalanceListener | None = None
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    security_token: str | None = None
    tls: bool | ssl.SSLContext | None = None
    namespace: str | None = None
    error_retries: int = 5
    value_deserializer: Callable[[bytes], Any] | None = None

    def __post_init__(self) -> None:
        if self.value_deserializer is not None and not callable(self.value_deserializer):
            raise ConfigError("value_deserializer", f"{self.value_deserializer!r} is not callable", "fn(body) or None")
        if not isinstance(self.message_model, MessageModel):
            raise ConfigError(
                "message_model",
                f"must be a MessageModel, got {self.message_model!r}",
                "MessageModel.CLUSTERING or MessageModel.BROADCASTING",
            )
        if not isinstance(self.consume_from_where, ConsumeFromWhere):
            raise ConfigError(
                "consume_from_where",
                f"must be a ConsumeFromWhere, got {self.consume_from_where!r}",
                ", ".join(f"ConsumeFromWhere.{c.name}" for c in ConsumeFromWhere),
            )
        check_range("pull_batch_size", self.pull_batch_size, 1, 1024)
        resolve_allocate_strategy(self.allocate_strategy)
        if not self.instance_name or not isinstance(self.instance_name, str):
            raise ConfigError("instance_name", f"must be a non-empty string, got {self.instance_name!r}")
        if (
            self.on_rebalance is not None
            and not callable(self.on_rebalance)
            and not isinstance(self.on_rebalance, ConsumerRebalanceListener)
        ):
            raise ConfigError(
                "on_rebalance",
                f"{self.on_rebalance!r} is not callable",
                "fn(topic, queues) or a ConsumerRebalanceListener",
            )
        if self.tls is not None and not isinstance(self.tls, (bool, ssl.SSLContext)):
            raise ConfigError("tls", f"must be True, False, None or an ssl.SSLContext, got {type(self.tls).__name__}")
        if self.consume_timestamp is not None:
            check_range("consume_timestamp", self.consume_timestamp, 0, 2**63 - 1)
        check_namespace(self.namespace)
        check_range("error_retries", self.error_retries, 1, 1000)
        try:
            SessionCredentials.of(self.access_key, self.secret_key, self.security_token)
        except ValueError as e:
            raise ConfigError("access_key", str(e)) from None

    @property
    def credentials(self) -> SessionCredentials | None:
        """The ACL credentials, or None when the consumer does not sign."""
        return SessionCredentials.of(self.access_key, self.secret_key, self.security_token)


@dataclass(frozen=True, slots=True)
class PushConsumerOptions(ConsumerOptions):
    """Settings of a :class:`rmq.PushConsumer` (and those of :class:`ConsumerOptions`).

    Attributes:
        consume_concurrency: handler tasks running at once (concurrently), [1, 1000]; default 20.
        consume_thread_min: Java ``consumeThreadMin``, [1, 1000]; default None =
            ``consume_concurrency``. Given, it is the number of handler tasks (Java's consume
            pool has an unbounded queue, so only its core threads ever run).
        consume_thread_max: Java ``consumeThreadMax``, [1, 1000], not below
            ``consume_thread_min``; default None = the larger of 20 and the minimum. Checked
            only, as Java's pool never grows past its core size.
        pull_threshold_for_topic: cached messages per topic before pulling pauses (Java
            ``pullThresholdForTopic``), [1, 6553500] or -1 (default: none). Set, it replaces
            ``pull_threshold_for_queue`` by ``max(1, it // queues owned)`` after each rebalance
            that changed the queues (Java ``RebalancePushImpl.messageQueueChanged``).
        pull_threshold_size_for_topic: cached MiB per topic (Java ``pullThresholdSizeForTopic``),
            [1, 102400] or -1 (default); divided over the queues the same way.
        post_subscription_when_pull: send the subscription expression with every pull (Java
            ``postSubscriptionWhenPull``); default False: the broker filters by the subscription
            of the last heartbeat and answers SUBSCRIPTION_NOT_LATEST to a pull whose version is
            newer (the pull is retried after 3 s, by then the heartbeat has arrived).
        consume_batch_size: messages per handler call, [1, 1024]; default 1 (more needs a
            ``batch_handler``).
        pull_interval: seconds between pulls of a queue, [0, 65.535]; default 0.
        pull_threshold_for_queue: cached messages per queue before pulling pauses, [1, 65535];
            default 1000.
        pull_threshold_size_for_queue: cached MiB per queue, [1, 1024]; default 100.
        consume_concurrently_max_span: largest offset span cached per queue (concurrently),
            [1, 65535]; default 2000.
        max_reconsume_times: deliveries before a message goes to ``%DLQ%group``; default None =
            16 concurrently, -1 (retry in place forever) orderly.
        suspend_current_queue_time: orderly: pause after a failure, seconds, [0, 60]; default 1.0.
        iterator_buffer: iterator mode: messages handed to ``async for`` ahead of it,
            [1, 1000000]; default 256.
        delay_level_when_next_consume: delay level (0..18) of a message sent back after a failed
            concurrent consumption; default 0 = the broker's choice, 3 + reconsume times.
        trace: record SubBefore/SubAfter message traces in the trace topic; default False.
        trace_topic: the trace topic; default None = ``RMQ_SYS_TRACE_TOPIC``.
        consume_timeout: seconds a concurrent handler call may run (Java ``consumeTimeout``,
            15 min); past it the call is cancelled, counted as failed and its messages sent
            back with delay level 3 as Java's ``ProcessQueue.cleanExpiredMsg`` does. (0, 86400];
            default 900. Orderly consumers have none, as in Java, nor
            does ``async for`` (the loop body is the application's own code).
        on_error: ``fn(error)`` (sync or async), called with a :class:`rmq.errors.RMQError` after
            ``error_retries`` consecutive failures of one kind that need the application (no
            subscription group, no topic or route, no permission); the consumer keeps trying.
            Default None: the error is logged.
        consume_mode: ``ConsumeMode.PULL`` (default: client rebalance, pulls from offsets) or
            ``ConsumeMode.POP`` (RocketMQ 5: every member pops from every broker, the broker
            assigns messages; clustering only, with a handler).
        pop_invisible_time: POP: seconds a popped message stays invisible to the group while
            the handler runs (Java ``popInvisibleTime``), [5, 300]; default 60.
        pop_batch_size: POP: messages per pop (Java ``popBatchNums``), [1, 32]; default 32.
        pop_threshold_for_queue: POP: popped messages of one broker not yet acked before
            popping pauses (Java ``popThresholdForQueue``), [1, 65535]; default 96.
        pop_retry_delays: POP: seconds (each 1..43200) a failed message stays invisible before it
            is delivered again, by its reconsume times (the last one for all later attempts); default Java's
            ``popDelayLevel`` (10 s, 30 s, 1 min, 2 min … 2 h).
    """

    consume_concurrency: int = 20
    consume_thread_min: int | None = None
    consume_thread_max: int | None = None
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1
    post_subscription_when_pull: bool = False
    consume_batch_size: int = 1
    pull_interval: float = 0.0
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100
    consume_concurrently_max_span: int = 2000
    max_reconsume_times: int | None = None
    suspend_current_queue_time: float = 1.0
    iterator_buffer: int = 256
    delay_level_when_next_consume: int = 0
    trace: bool = False
    trace_topic: str | None = None
    consume_timeout: float = 900.0
    on_error: ErrorHandler | None = None
    consume_mode: ConsumeMode = ConsumeMode.PULL
    pop_invisible_time: float = 60.0
    pop_batch_size: int = 32
    pop_threshold_for_queue: int = 96
    pop_retry_delays: tuple[float, ...] = POP_DELAY_LEVELS

    def __post_init__(self) -> None:
        super(PushConsumerOptions, self).__post_init__()
        if not isinstance(self.consume_mode, ConsumeMode):
            raise ConfigError(
                "consume_mode",
                f"must be a ConsumeMode, got {self.consume_mode!r}",
                "ConsumeMode.PULL or ConsumeMode.POP",
            )
        if self.consume_mode is ConsumeMode.POP and self.message_model is not MessageModel.CLUSTERING:
            raise ConfigError("consume_mode", "POP consumes in clustering mode only", "MessageModel.CLUSTERING")
        check_range("pop_invisible_time", self.pop_invisible_time, 5, 300)
        check_range("pop_batch_size", self.pop_batch_size, 1, 32)
        check_range("pop_threshold_for_queue", self.pop_threshold_for_queue, 1, 65535)
        delays = self.pop_retry_delays
        if (
            not isinstance(delays, tuple)
            or not delays
            or any(isinstance(d, bool) or not isinstance(d, (int, float)) or not 1 <= d <= 43200 for d in delays)
        ):
            raise ConfigError(
                "pop_retry_delays",
                f"{str(delays)[:80]} is not a tuple of seconds",
                "a non-empty tuple of seconds in 1..43200",
            )
        reason = None if self.trace_topic is None else TopicValidator.check_topic(self.trace_topic)
        if reason is not None:
            raise ConfigError("trace_topic", f"{str(self.trace_topic)[:40]!r}: {reason}", "a valid topic name or None")
        check_range("consume_timeout", self.consume_timeout, 0.001, 86400)
        if self.on_error is not None and not callable(self.on_error):
            raise ConfigError("on_error", f"{self.on_error!r} is not callable", "fn(error) or None")
        check_range("consume_concurrency", self.consume_concurrency, 1, 1000)
        # Java DefaultMQPushConsumerImpl.checkConfig's ranges
        if self.consume_thread_min is not None:
            check_range("consume_thread_min", self.consume_thread_min, 1, 1000)
        if self.consume_thread_max is not None:
            check_range("consume_thread_max", self.consume_thread_max, 1, 1000)
            if self.consume_threads > self.consume_thread_max:
                raise ConfigError(
                    "consume_thread_min",
                    f"{self.consume_threads} is larger than consume_thread_max ({self.consume_thread_max})",
                    f"[1, {self.consume_thread_max}]",
                )
        if self.pull_threshold_for_topic != -1:
            check_range("pull_threshold_for_topic", self.pull_threshold_for_topic, 1, 6553500)
        if self.pull_threshold_size_for_topic != -1:
            check_range("pull_threshold_size_for_topic", self.pull_threshold_size_for_topic, 1, 102400)
        check_range("consume_batch_size", self.consume_batch_size, 1, 1024)
        check_range("pull_threshold_for_queue", self.pull_threshold_for_queue, 1, 65535)
        check_range("pull_threshold_size_for_queue", self.pull_threshold_size_for_queue, 1, 1024)
        check_range("consume_concurrently_max_span", self.consume_concurrently_max_span, 1, 65535)
        check_range("pull_interval (ms)", int(self.pull_interval * 1000), 0, 65535)
        check_range("iterator_buffer", self.iterator_buffer, 1, 1_000_000)
        check_range("delay_level_when_next_consume", self.delay_level_when_next_consume, 0, 18)
        check_range("suspend_current_queue_time", self.suspend_current_queue_time, 0, 60)
        if self.max_reconsume_times is not None:
            check_range("max_reconsume_times", self.max_reconsume_times, -1, 16 * 1024)

    @property
    def consume_threads(self) -> int:
        """Handler tasks running at once: ``consume_thread_min`` when given, else
        ``consume_concurrency``."""
        return self.consume_thread_min if self.consume_thread_min is not None else self.consume_concurrency


@dataclass(frozen=True, slots=True)
class PullConsumerOptions(ConsumerOptions):
    """Settings of a :class:`rmq.PullConsumer` (and those of :class:`ConsumerOptions`).

    Attributes:
        auto_commit: commit consumed positions every ``auto_commit_interval``; default True.
        auto_commit_interval: seconds, >= 1; default 5.0.
        pull_threshold_for_queue: messages buffered per queue before its pulling pauses,
            [1, 65535]; default 1000.
        pull_threshold_for_all: messages buffered in total before pulling pauses,
            [1, 6553500]; default 10000.
        poll_timeout: default ``poll`` timeout, seconds, >= 0; default 5.0.
    """

    auto_commit: bool = True
    auto_commit_interval: float = 5.0
    pull_threshold_for_queue: int = 1000
    pull_threshold_for_all: int = 10000
    poll_timeout: float = 5.0

    def __post_init__(self) -> None:
        super(PullConsumerOptions, self).__post_init__()
        check_range("pull_threshold_for_queue", self.pull_threshold_for_queue, 1, 65535)
        check_range("pull_threshold_for_all", self.pull_threshold_for_all, 1, 6553500)
        check_range("auto_commit_interval", self.auto_commit_interval, 1.0, 86400)
        check_range("poll_timeout", self.poll_timeout, 0, 86400)


def build_options(cls: type[_O], given: _O | None, kwargs: dict[str, Any]) -> _O:
    """The constructors' rule: ``options=`` or keyword arguments, not both. ``kwargs`` holds
    every keyword option of the constructor; those left at their default do not count as
    given."""
    if given is None:
        return cls(**kwargs)
    if not isinstance(given, cls):
        raise ClientError(f"options must be a {cls.__name__}, got {type(given).__name__}")
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    changed = sorted(k for k, v in kwargs.items() if v != defaults[k])
    if changed:
        raise ClientError(f"give either options= or keyword options, not both (also given: {', '.join(changed)})")
    return given
