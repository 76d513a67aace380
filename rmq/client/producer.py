"""The producer: send, send with a callback, oneway, batch, orderly and transactional sends.

Example::

    async with rmq.Producer(namesrv_addr="127.0.0.1:9876", group="PG") as p:
        r = await p.send(rmq.Message(topic="T", body=b"x", tags="TagA"))
        print(r.status, r.msg_id, r.queue_id, r.queue_offset)
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import inspect
import logging
import ssl
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from rmq.common.compression import CompressionType, CompressionUnavailable, check_available
from rmq.common.constants import MixAll, TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import MessageSysFlag, decode_offset_msg_id, encode_batch, java_string_hash
from rmq.common.tasks import BackgroundTasks
from rmq.errors import (
    BrokerResponseError,
    ClientError,
    ConfigError,
    IllegalStateError,
    RemotingCommandError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    RequestTimeoutError,
    RMQError,
    RouteError,
    SerializationError,
    TopicNotExistError,
)
from rmq.protocol.codes import RequestCode
from rmq.protocol.headers.message import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
)
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.topic import create_topic as create_topic_request
from rmq.remoting.acl import SessionCredentials
from rmq.types import (
    LocalTransactionState,
    Message,
    MessageConst,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
    ServiceState,
    TransactionSendResult,
)

from . import hooks as _hooks
from . import request_reply as _rr
from ._codec import UniqKeyGenerator, compress_body, message_properties, properties_to_string
from .arguments import Namespace, check_namesrv_addr, check_positive, check_range
from .batching import BatchAccumulator, can_batch
from .batching import Prepared as _Prepared
from .instance import ClientInstance, get_client_instance

if TYPE_CHECKING:
    from .instance import _TopicPublishInfo

__all__ = ["Producer", "MessageQueueSelector", "select_by_hash", "validate_group", "validate_topic"]

log = logging.getLogger("rmq.client")
# per-request failures repeat during an outage: one line per kind per 10 s, with a count
_rlog = RateLimitedLog(log)

#: futures of ``Producer.send`` not resolved yet, at most (``max_pending_sends``)
DEFAULT_MAX_PENDING_SENDS = 10_000

DEFAULT_PRODUCER_GROUP = MixAll.DEFAULT_PRODUCER_GROUP
CLIENT_INNER_PRODUCER_GROUP = MixAll.CLIENT_INNER_PRODUCER_GROUP
AUTO_CREATE_TOPIC_KEY = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC
MAX_MESSAGE_SIZE = 4 * 1024 * 1024

#: A selector picks one queue of a topic: ``selector(queues, message, arg) -> MessageQueue``.
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
#: What a local-transaction function or check-back handler may return (or await).
TransactionOutcome = LocalTransactionState | Awaitable[LocalTransactionState]
_T = TypeVar("_T")
if TYPE_CHECKING:  # PEP 696 defaults (typing has them from 3.13): a bare ``Producer`` is Producer[Any, Any]
    from typing_extensions import TypeVar as _TypeVarWithDefault

    _V = _TypeVarWithDefault("_V", default=Any)
    _K = _TypeVarWithDefault("_K", default=Any)
else:
    _V = TypeVar("_V")
    _K = TypeVar("_K")


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """The default orderly selector: ``abs(hash(arg)) % len(queues)``, with Java's
    ``String.hashCode`` for strings so Java and Python producers put a key on the same queue
    (Java 4.x ``SelectMessageQueueByHash``; also the queue of a ``Message.message_group``)."""
    h = java_string_hash(arg) if isinstance(arg, str) else hash(arg)
    return queues[abs(h) % len(queues)]


def validate_group(group: str, *, reserved: str) -> None:
    """RocketMQ's group rule: non-empty, ``^[%|a-zA-Z0-9_-]+$``, ≤ 255 chars, not the reserved
    default. Raises :class:`rmq.errors.ConfigError` naming ``group``."""
    allowed = f"1..255 characters matching {TopicValidator.VALID_PATTERN_STR}, not {reserved}"
    if not isinstance(group, str) or not group:
        raise ConfigError("group", f"must be a non-empty string, got {group!r}", allowed)
    if len(group) > 255:
        raise ConfigError("group", f"longer than 255 characters: {group[:40]}…", allowed)
    if TopicValidator.is_topic_or_group_illegal(group):
        raise ConfigError("group", f"{group[:80]!r} contains illegal characters", allowed)
    if group == reserved:
        raise ConfigError("group", f"{group!r} is reserved; choose your own", allowed)


def validate_topic(topic: str, *, for_send: bool = True) -> None:
    """A topic a producer may send to (``for_send``, the default) or a consumer subscribe to
    (Java ``Validators.checkTopic`` / ``TopicValidator.validateTopic``): legal characters,
    at most 127 characters, not TBW102; for sends also not a topic only the broker writes
    (``SCHEDULE_TOPIC_XXXX``, the transaction topics ...). Raises :class:`rmq.errors.ClientError`."""
    reason = TopicValidator.check_topic(topic)
    if reason is not None:
        raise ClientError(f"{reason} (topic {topic[:40]!r})")
    if topic == AUTO_CREATE_TOPIC_KEY:
        raise ClientError(f"topic {topic!r} is reserved for auto-creation; send to a real topic")
    if for_send and TopicValidator.is_not_allowed_send_topic(topic):
        raise ClientError(f"topic {topic!r} is a system topic only the broker writes")


class _FaultTolerance:
    """Which brokers to avoid for a while after slow or failed sends (Java ``MQFaultStrategy``).

    A send that took ``latency`` makes its broker unavailable for the matching duration; a send
    that failed isolates the broker for ``ISOLATION`` seconds. When every broker is avoided we
    still send (to the least recently failed), so a single-broker cluster keeps working.
    """

    LATENCY_MAX = (0.05, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0)
    NOT_AVAILABLE = (0.0, 0.0, 30.0, 60.0, 120.0, 180.0, 600.0)
    #: Java isolates a failed broker for 10 min (its 30 s "latency" falls in the last bucket);
    #: we use 30 s so a restarted broker is back in rotation soon.
    ISOLATION = 30.0

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def update(self, broker_name: str, latency: float, isolation: bool) -> None:
        if isolation:
            duration = self.ISOLATION
        else:
            duration = 0.0
            for lat, na in zip(reversed(self.LATENCY_MAX), reversed(self.NOT_AVAILABLE), strict=True):
                if latency >= lat:
                    duration = na
                    break
        if duration > 0:
            self._until[broker_name] = time.monotonic() + duration
        else:
            self._until.pop(broker_name, None)

    def available(self, broker_name: str) -> bool:
        until = self._until.get(broker_name)
        return until is None or time.monotonic() >= until


class Producer(Generic[_V, _K]):
    """An asyncio RocketMQ producer.

    Generic in the types its serializers take (``Producer[V, K]``, inferred from
    ``value_serializer`` / ``key_serializer``; ``Any`` without them), so a type checker checks
    the ``value`` and ``key`` given to :meth:`send`.

    Args:
        namesrv_addr: name server address(es), ``"host:port"`` or ``"h1:p1;h2:p2"`` or a list.
        group: producer group (``^[%|a-zA-Z0-9_-]+$``, not ``DEFAULT_PRODUCER``); required.
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``.
            Producers with the same client id share connections and timers.
        client_ip: the address reported in the client id; default: the local address used to
            reach the name server.
        send_timeout: seconds for a whole send including retries; default 3.0.
        retry_times: extra attempts on another queue/broker after a retriable failure; default 2.
        compress_over: bodies larger than this many bytes are compressed; default 4096 (Java
            ``compressMsgBodyOverHowmuch``).
        compress_level: the codec's level; default 5 (Java's ``compressLevel``); zlib 0..9,
            zstd 1..22 (LZ4 has none: Java's frame compressor is the fast one).
        compress_type: ``"zlib"`` (default, the only codec Java 4.x consumers read), ``"lz4"`` or
            ``"zstd"`` (RocketMQ 5 consumers, and ours, read all three; Java 5's
            ``compressType``), or a :class:`rmq.CompressionType`. The sysFlag gets
            COMPRESSED_FLAG and the type bits as Java 5 sets them; LZ4 and ZSTD need the
            ``compression`` extra (``pip install 'rmq[compression]'``), checked here.
        max_message_size: largest body (after compression) or batch; default 4 MiB.
        default_topic_queue_nums: queues for a topic auto-created from TBW102; default 4.
        send_latency_fault_enable: avoid brokers that were slow or failing; default True.
        transaction_checker: ``checker(msg: MessageExt) -> LocalTransactionState`` (sync or
            async), answers the broker's CHECK_TRANSACTION_STATE; required for
            :meth:`send_in_transaction`. Default None.
        access_key: ACL accessKey; every request is then signed as Java's ``AclClientRPCHook``
            does (brokers with ``aclEnable=true``); default None = unsigned.
        secret_key: the account's secretKey, given together with ``access_key``; default None.
        security_token: optional ``SecurityToken`` sent with each signed request; default None.
        tls: ``True`` to connect over TLS, verifying the servers' certificates against the
            system's trust store; an ``ssl.SSLContext`` for your own CA or a client certificate
            (``rmq.remoting.tls.client_context(trust_cert_path=...)``); default None = plain TCP
            (Java ``useTLS``).
        max_outstanding_requests: :meth:`request` calls waiting for their replies at once;
            default 10 000 (past it ``request`` raises ``RemotingTooMuchRequestError``).
        trace: record a Pub message trace of each send in the trace topic (Java's
            ``enableMsgTrace``), batched off the send path; default False.
        trace_topic: the trace topic; default ``RMQ_SYS_TRACE_TOPIC``.
        namespace: Java's client namespace: topics and the group are ``namespace%name`` on the
            broker; results (``SendResult.message_queue``) carry the plain names. Default None.
        retry_backoff: seconds before the first retry of a failed send, doubling per retry up
            to 1 s and never past the send's deadline (aiokafka ``retry_backoff_ms``);
            [0, 10]; default 0.1.
        max_pending_sends: futures of :meth:`send` / :meth:`send_with_callback` not resolved
            yet; default 10 000, [1, 10 000 000]. Past it those calls raise
            ``RemotingTooMuchRequestError`` (retriable: await some pending futures first), so
            an application that never awaits cannot grow memory without bound.
        linger_ms: milliseconds a :meth:`send` / :meth:`send_and_wait` waits for more
            messages to the same topic (and queue, when one is given or a selector picked it)
            so they go as one SEND_BATCH_MESSAGE (aiokafka's ``linger_ms``); each caller still
            gets its own SendResult. Default 0: every message goes alone, at once. [0, 60000].
        max_batch_size: bytes of one automatic batch at most (aiokafka's ``max_batch_size``);
            a full batch goes at once; default 16384; [1, ``max_message_size``].
        buffer_memory: bytes in automatic batches not answered yet at most (kafka-python's
            ``buffer_memory``); past it :meth:`send` raises ``RemotingTooMuchRequestError``;
            default 32 MiB; [1, 2**40].
        max_pending_batches: automatic batches open or in flight at most; past it as
            ``buffer_memory``; default 1024; [1, 1 000 000].
        value_serializer: ``fn(value) -> bytes | str`` (aiokafka's): turns the ``value`` given
            to :meth:`send` / :meth:`send_and_wait` with a topic into the body (e.g.
            ``lambda v: json.dumps(v).encode()``). Default None: the value must be bytes or
            str. Its exception is raised by the send call as
            :class:`rmq.errors.SerializationError` (not retriable).
        key_serializer: ``fn(key) -> str`` for the ``key`` given with a topic, which becomes
            the message's key (``KEYS``, indexed by the broker for queries; it does not pick the
            queue: use ``sharding_key``). Default None: the key must be a str.

    Use ``async with Producer(...) as p`` or ``await p.start()`` / ``await p.close()``.

    Raises:
        rmq.errors.ConfigError: an argument out of range (it names the argument and the
            allowed values).
    """

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        *,
        instance_name: str = "DEFAULT",
        client_ip: str | None = None,
        send_timeout: float = 3.0,
        retry_times: int = 2,
        compress_over: int = 4096,
        compress_level: int = 5,
        max_message_size: int = MAX_MESSAGE_SIZE,
        default_topic_queue_nums: int = 4,
        send_latency_fault_enable: bool = True,
        transaction_checker: Callable[[MessageExt], TransactionOutcome] | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        max_outstanding_requests: int = _rr.DEFAULT_MAX_OUTSTANDING_REQUESTS,
        trace: bool = False,
        trace_topic: str | None = None,
        namespace: str | None = None,
        retry_backoff: float = 0.1,
        max_pending_sends: int = DEFAULT_MAX_PENDING_SENDS,
        compress_type: str | CompressionType = "zlib",
        linger_ms: float = 0,
        max_batch_size: int = 16384,
        buffer_memory: int = 32 * 1024 * 1024,
        max_pending_batches: int = 1024,
        value_serializer: Callable[[_V], bytes | str] | None = None,
        key_serializer: Callable[[_K], str] | None = None,
    ) -> None:
        check_namesrv_addr(namesrv_addr)
        validate_group(group, reserved=MixAll.DEFAULT_PRODUCER_GROUP)
        self._ns = Namespace(namespace)
        check_range("max_outstanding_requests", max_outstanding_requests, 1, 10_000_000)
        self._max_outstanding_requests = max_outstanding_requests
        self._send_hooks: list[_hooks.SendMessageHook] = []
        try:
            self._credentials = SessionCredentials.of(access_key, secret_key, security_token)
        except ValueError as e:
            raise ConfigError("access_key", str(e)) from None
        check_range("send_timeout", send_timeout, 0.001, 86400)
        check_range("retry_times", retry_times, 0, 100)
        check_range("max_message_size", max_message_size, 1, MAX_MESSAGE_SIZE)
        check_range("compress_over", compress_over, 0, 2**31 - 1)
        check_range("default_topic_queue_nums", default_topic_queue_nums, 1, 1024)
        check_range("retry_backoff", retry_backoff, 0, 10)
        check_range("max_pending_sends", max_pending_sends, 1, 10_000_000)
        self._max_pending_sends = max_pending_sends
        self._compress_type = _check_compress_type(compress_type)
        if self._compress_type is CompressionType.ZSTD:
            check_range("compress_level", compress_level, 1, 22)
        else:
            check_range("compress_level", compress_level, 0, 9)
        check_range("linger_ms", linger_ms, 0, 60_000)
        check_range("max_batch_size", max_batch_size, 1, max_message_size)
        check_range("buffer_memory", buffer_memory, 1, 2**40)
        check_range("max_pending_batches", max_pending_batches, 1, 1_000_000)
        for name, fn in (("value_serializer", value_serializer), ("key_serializer", key_serializer)):
            if fn is not None and not callable(fn):
                raise ConfigError(name, f"{fn!r} is not callable", "fn(value) or None")
        self._value_serializer = value_serializer
        self._key_serializer = key_serializer
        self._batcher: BatchAccumulator | None = None
        if linger_ms > 0:
            self._batcher = BatchAccumulator(
                group,
                linger=linger_ms / 1000,
                max_batch_size=max_batch_size,
                buffer_memory=buffer_memory,
                max_pending_batches=max_pending_batches,
                send=self._send_batched,
                spawn=lambda coro: self._pending.spawn(coro, f"rmq-batch-{self._group}"),
            )
        if not instance_name or not isinstance(instance_name, str):
            raise ConfigError("instance_name", f"must be a non-empty string, got {instance_name!r}")
        if transaction_checker is not None and not callable(transaction_checker):
            raise ConfigError("transaction_checker", f"{transaction_checker!r} is not callable", "fn(msg) or None")
        self._retry_backoff = retry_backoff
        self._namesrv_addr = namesrv_addr
        self._user_group = group
        self._group = self._ns.wrap(group)
        self._instance_name = instance_name
        self._client_ip = client_ip
        self._send_timeout = send_timeout
        self._retry_times = retry_times
        self._compress_over = compress_over
        self._compress_level = compress_level
        self._max_message_size = max_message_size
        self._default_topic_queue_nums = default_topic_queue_nums
        self._send_latency_fault_enable = send_latency_fault_enable
        self._transaction_checker = transaction_checker
        if tls is not None and not isinstance(tls, (bool, ssl.SSLContext)):
            raise ConfigError("tls", f"must be True, False, None or an ssl.SSLContext, got {type(tls).__name__}")
        self._tls = tls
        self._instance: ClientInstance | None = None
        self._uniq: UniqKeyGenerator | None = None
        self._faults = _FaultTolerance()
        self._topics: set[str] = set()
        self._pending = BackgroundTasks(f"producer {group}", log, death_level=logging.DEBUG)
        self._state = ServiceState.CREATE_JUST
        self._closing = False
        self._member = _ProducerMember(self)
        reason = None if trace_topic is None else TopicValidator.check_topic(trace_topic)
        if reason is not None:
            raise ConfigError("trace_topic", f"{str(trace_topic)[:40]!r}: {reason}", "a valid topic name or None")
        if trace:
            from .trace import SendMessageTraceHook, TraceDispatcher

            self.add_send_hook(
                SendMessageTraceHook(
                    TraceDispatcher(
                        namesrv_addr,
                        group,
                        "PRODUCER",
                        trace_topic,
                        instance_name=instance_name,
                        credentials=self._credentials,
                        tls=tls,
                        producer_factory=Producer,
                    )
                )
            )

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Register with the client instance.

        Raises:
            rmq.errors.IllegalStateError: started before (a producer starts once; after
                :meth:`close` or a failed start, create a new one).
            rmq.errors.ClientError: another producer with the same client id already uses the
                group (give it another ``instance_name``).
        """
        if self._state is not ServiceState.CREATE_JUST:
            raise IllegalStateError(
                f"producer {self._group} is {self._state.name}; only a new producer can be started (create another one)"
            )
        inst = get_client_instance(
            self._namesrv_addr,
            instance_name=self._instance_name,
            client_ip=self._client_ip,
            credentials=self._credentials,
            tls=self._tls,
        )
        try:
            await inst.register_producer(self._group, self._member)
        except BaseException:
            self._state = ServiceState.START_FAILED
            raise
        self._instance = inst
        self._uniq = UniqKeyGenerator(inst.client_ip)
        self._state = ServiceState.RUNNING

    async def close(self) -> None:
        """Wait for callback sends in flight, then unregister. Idempotent."""
        if self._state is not ServiceState.RUNNING:
            if self._state is ServiceState.CREATE_JUST:
                self._state = ServiceState.SHUTDOWN_ALREADY
            return
        if self._closing:
            return
        self._closing = True
        if self._batcher is not None:
            self._batcher.flush_all()  # the open batches go now; close waits for their answers
        await self._pending.wait()
        await _hooks.close_hooks(self._send_hooks)
        assert self._instance is not None
        await self._instance.unregister_producer(self._group)
        self._state = ServiceState.SHUTDOWN_ALREADY

    def __del__(self, _warn: Any = warnings.warn) -> None:
        if getattr(self, "_state", None) is ServiceState.RUNNING and not self._closing:
            _warn(f"producer {self._group!r} was not closed", ResourceWarning, source=self)

    def __repr__(self) -> str:
        return f"<Producer group={self._group!r} {self._state.name}>"

    @property
    def group(self) -> str:
        """The producer group (without the namespace)."""
        return self._user_group

    @property
    def state(self) -> ServiceState:
        """CREATE_JUST → RUNNING → SHUTDOWN_ALREADY (or START_FAILED)."""
        return self._state

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def client_id(self) -> str | None:
        """``ip@pid#instance_name`` once started, else None."""
        return self._instance.client_id if self._instance else None

    def _in_flight_instance(self) -> ClientInstance:
        """The client instance for a send already accepted: close() waits for those, so they may
        go on while it does (``_closing``), but not after it."""
        if self._state is not ServiceState.RUNNING or self._instance is None:
            raise IllegalStateError(f"producer {self._group} is {self._state.name}")
        return self._instance

    def _check_running(self) -> ClientInstance:
        if self._state is not ServiceState.RUNNING or self._instance is None or self._closing:
            raise IllegalStateError(
                f"producer {self._group} is not running ({self._state.name}); call start() on a new producer"
            )
        return self._instance

    # ---------------------------------------------------------------- public send API

    def send(
        self,
        msg: Message | str,
        value: _V | None = None,
        *,
        key: _K | None = None,
        tags: str | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        sharding_key: Any = None,
        timeout: float | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start sending one message; returns a future of its :class:`SendResult` (aiokafka's
        ``send``). ``await producer.send(m)`` waits for the broker's answer as before; keep the
        future to await it later, or use :meth:`send_and_wait`.

        The message is checked (and encoded) at once: a ClientError for an invalid message or a
        producer that is not running, and RemotingTooMuchRequestError past
        ``max_pending_sends``, are raised by this call, not by the future. :meth:`close`
        waits for the futures still pending.

        With ``linger_ms`` > 0 the message may wait up to ``linger_ms`` to go in one
        SEND_BATCH_MESSAGE with others to the same topic (and queue); its future still
        resolves to its own SendResult (see :mod:`rmq.client.batching`).

        Args:
            msg: the message (its topic without the namespace), or a topic: then ``value``
                (through ``value_serializer``), ``key`` and ``tags`` make the message.
            value: the body when ``msg`` is a topic: bytes or str, or anything
                ``value_serializer`` takes. Default None.
            key: the message key (``KEYS``) when ``msg`` is a topic: a str, or anything
                ``key_serializer`` takes. Default None: no key.
            tags: the message's tag when ``msg`` is a topic. Default None.
            queue: send to exactly this queue (no retry on another one). Default: choose.
            selector: orderly send: ``selector(queues, msg, sharding_key)`` picks the queue; no
                retry on another queue, to keep per-key order. Default None.
            sharding_key: orderly send with the default hash selector when no ``selector`` is
                given (messages with equal keys go to the same queue, in order). Default None.
            timeout: seconds for the whole send including retries; default ``send_timeout``.

        Returns:
            A future (an ``asyncio.Task``; a plain future when batched) resolving to the
            SendResult (``status`` is SEND_OK unless the broker reported a flush/replication
            problem; the message is stored on the master either way), or failing with:

            - rmq.errors.BrokerResponseError: the broker refused it (``code``, ``retriable``).
            - rmq.errors.RemotingError: connection failure or timeout after all retries.

        Raises:
            rmq.errors.SerializationError: ``value_serializer`` / ``key_serializer`` failed
                (or no serializer and the value is not bytes or str).
            rmq.errors.RemotingTooMuchRequestError: past ``max_pending_sends``,
                ``buffer_memory`` or ``max_pending_batches``.
        """
        self._check_running()
        self._check_pending()
        m = self._as_message(msg, value, key, tags)
        prepared = self._prepare(m)
        batched = self._batched(m, prepared, queue, selector, sharding_key, timeout)
        if batched is not None:
            return batched
        return self._pending.spawn(
            self._send_prepared(m, prepared, queue, selector, sharding_key, timeout), f"rmq-send-{self._group}"
        )

    async def flush(self) -> None:
        """Send the open automatic batches now and wait until every send pending at the call
        has its answer (aiokafka's ``flush``); their failures stay on their futures."""
        self._check_running()
        if self._batcher is not None:
            self._batcher.flush_all()
        await self._pending.wait()

    def _as_message(self, msg: Message | str, value: _V | None, key: _K | None, tags: str | None) -> Message:
        """``msg`` itself, or the message ``send(topic, value, key=, tags=)`` describes."""
        if isinstance(msg, Message):
            if value is not None or key is not None or tags is not None:
                raise ClientError("value, key and tags go with a topic: send(topic, value, key=, tags=)")
            return msg
        if not isinstance(msg, str):
            raise ClientError(f"send takes a Message or a topic name, got {type(msg).__name__}")
        body = _serialize("value_serializer", self._value_serializer, value, msg, (bytes, bytearray, memoryview, str))
        keys: tuple[str, ...] = ()
        if key is not None:
            keys = (_serialize("key_serializer", self._key_serializer, key, msg, (str,)),)
        return Message(msg, body, tags=tags, keys=keys)

    def _batched(
        self,
        msg: Message,
        p: _Prepared,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        sharding_key: Any,
        timeout: float | None,
    ) -> asyncio.Future[SendResult] | None:
        """The future of ``p`` in an automatic batch, or None when it goes alone (no
        ``linger_ms``, a message that cannot batch, or a selector whose route is not cached)."""
        b = self._batcher
        if b is None or not can_batch(p, b.max_batch_size):
            return None
        if queue is None and selector is None and sharding_key is None and msg.message_group:
            sharding_key = msg.message_group  # a FIFO group batches on its own queue (_send_prepared)
        mq: MessageQueue | None = None
        if queue is not None:
            mq = self._ns.wrap_mq(queue)
        elif selector is not None or sharding_key is not None:
            info = self._instance.publish_info.get(p.topic) if self._instance is not None else None
            if info is None or not info.ok:
                return None  # the lone send fetches the route
            try:
                mq = self._apply_selector(info, msg, selector or select_by_hash, sharding_key)
            except Exception:  # noqa: BLE001 - the lone send raises it on the future
                return None
        return b.add(p, mq, timeout or self._send_timeout)

    async def _send_batched(self, p: _Prepared, mq: MessageQueue | None, deadline: float) -> SendResult:
        """The accumulator's sender: a batch (or a lone item) to ``mq``, or to a queue chosen
        with retries as a plain send."""
        if mq is not None:
            return self._unwrap_result(await self._send_to(mq, p, deadline))
        return self._unwrap_result(await self._send_default(p, max(0.001, deadline - time.monotonic())))

    def _check_pending(self) -> None:
        n = len(self._pending) + (self._batcher.pending_messages if self._batcher is not None else 0)
        if n >= self._max_pending_sends:
            _rlog.warning(
                f"send-pending:{self._group}",
                "producer %s: %d sends pending, refusing more (max_pending_sends)",
                self._group,
                n,
            )
            raise RemotingTooMuchRequestError(
                f"{n} sends are pending (max_pending_sends={self._max_pending_sends}); "
                "await some of their futures and retry"
            )

    async def send_and_wait(
        self,
        msg: Message | str,
        value: _V | None = None,
        *,
        key: _K | None = None,
        tags: str | None = None,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        sharding_key: Any = None,
        timeout: float | None = None,
    ) -> SendResult:
        """Send one message and wait for the broker's answer (aiokafka's ``send_and_wait``); the
        arguments and errors of :meth:`send`, raised here."""
        self._check_running()
        m = self._as_message(msg, value, key, tags)
        prepared = self._prepare(m)
        batched = self._batched(m, prepared, queue, selector, sharding_key, timeout)
        if batched is not None:
            return await batched
        return await self._send_prepared(m, prepared, queue, selector, sharding_key, timeout)

    async def cancel_timer(
        self, result: SendResult, delivery_time: _dt.datetime | int, *, timeout: float | None = None
    ) -> SendResult:
        """Cancel a timer message before its delivery time (Java 5's ``TIMER_DEL_UNIQKEY``
        marker, what RocketMQ 5.3's ``recallMessage`` sends): a marker for the same time goes
        to the broker and queue of ``result``, and that broker's timer wheel drops the message
        with ``result.msg_id`` of that topic when the time comes.

        Args:
            result: the SendResult of the timer message to cancel.
            delivery_time: its delivery time exactly as sent (a ``datetime`` or epoch ms; the
                marker must fall in the same timer tick: send with ``delivery_time`` rather
                than ``delay`` when the message may be cancelled).
            timeout: seconds for the send; default ``send_timeout``.

        Returns:
            The marker's SendResult.

        Raises:
            rmq.errors.BrokerResponseError: MESSAGE_ILLEGAL when the time has passed (too late
                to cancel) or is past ``timerMaxDelaySec``.
        """
        self._check_running()
        m = Message(result.topic, b"0", delivery_time=delivery_time)
        real = self._ns.wrap(result.topic)
        prepared = self._prepare(m, {MessageConst.TIMER_DEL_UNIQKEY: f"{real}+{result.msg_id}"})
        return await self._send_prepared(m, prepared, result.message_queue, None, None, timeout)

    async def _send_prepared(
        self,
        msg: Message,
        prepared: _Prepared,
        queue: MessageQueue | None,
        selector: MessageQueueSelector | None,
        sharding_key: Any,
        timeout: float | None,
    ) -> SendResult:
        if queue is None and selector is None and sharding_key is None and msg.message_group:
            sharding_key = msg.message_group  # a FIFO group: one queue, no retry elsewhere
        if queue is not None or selector is not None or sharding_key is not None:
            deadline = time.monotonic() + (timeout or self._send_timeout)
            if queue is not None:
                mq = self._ns.wrap_mq(queue)
            else:
                mq = await self._select_with(msg, selector or select_by_hash, sharding_key, deadline)
            return self._unwrap_result(await self._send_to(mq, prepared, deadline))
        return self._unwrap_result(await self._send_default(prepared, timeout))

    def _unwrap_result(self, result: SendResult) -> SendResult:
        """A SendResult as the application sees it: its queue's topic without the namespace."""
        if not self._ns:
            return result
        return dataclasses.replace(result, message_queue=self._ns.unwrap_mq(result.message_queue))

    def send_with_callback(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], Any],
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        sharding_key: Any = None,
        timeout: float | None = None,
    ) -> asyncio.Task[SendResult]:
        """Start a send in the background and call ``callback(result, None)`` on success or
        ``callback(None, exc)`` on failure (``callback`` may be ``async``). Returns the task, which
        :meth:`close` waits for; its own result is the SendResult (or the exception)."""
        self._check_running()
        self._check_pending()

        async def run() -> SendResult:
            try:
                result = await self.send_and_wait(
                    msg, queue=queue, selector=selector, sharding_key=sharding_key, timeout=timeout
                )
            except Exception as e:
                await _call(callback, None, e)
                raise
            await _call(callback, result, None)
            return result

        return self._pending.spawn(run(), f"rmq-send-{self._group}")

    async def send_oneway(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        sharding_key: Any = None,
    ) -> None:
        """Write the message and return without waiting for any answer (no retry; the broker's
        outcome is unknown). Raises only if no queue or connection could be found."""
        inst = self._check_running()
        prepared = self._prepare(msg)
        if queue is None and selector is None and sharding_key is None and msg.message_group:
            sharding_key = msg.message_group  # (as _send_prepared)
        if queue is not None:
            queue = self._ns.wrap_mq(queue)
        elif selector is not None or sharding_key is not None:
            queue = await self._select_with(msg, selector or select_by_hash, sharding_key)
        else:
            info = await self._publish_info(prepared.topic)
            queue = self._select_queue(info, None)
        addr = await self._broker_addr(inst, queue)
        header = self._header(prepared, queue)
        send = inst.api.send_message_oneway(addr, header, prepared.body, batch=prepared.batch)
        if self._send_hooks:  # (Java sendKernelImpl runs the hooks for ONEWAY too; no result)
            ctx = _hooks.SendMessageContext.of(
                self.group,
                prepared.topic,
                prepared.properties,
                len(prepared.body),
                prepared.sys_flag,
                queue,
                addr,
                "ONEWAY",
            )
            await _hooks.run_send_hooks(self._send_hooks, ctx, send)
            return
        await send

    async def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout: float | None = None
    ) -> SendResult:
        """Send messages of one topic as one batch (≤ ``max_message_size`` encoded, 4 MiB).

        All go to the same queue, in order. Delayed messages and ``%RETRY%`` topics are not
        allowed in a batch (as in Java). ``SendResult.msg_id`` / ``offset_msg_id`` are the
        comma-joined ids of the items; ``queue_offset`` is the first item's.
        """
        self._check_running()
        prepared = self._prepare_batch(msgs)
        if queue is not None:
            deadline = time.monotonic() + (timeout or self._send_timeout)
            return self._unwrap_result(await self._send_to(self._ns.wrap_mq(queue), prepared, deadline))
        return self._unwrap_result(await self._send_default(prepared, timeout))

    async def send_in_transaction(
        self,
        msg: Message,
        local_transaction: Callable[[Message, SendResult], TransactionOutcome],
        *,
        timeout: float | None = None,
    ) -> TransactionSendResult:
        """Send a half message, run ``local_transaction(msg, send_result)`` (sync or async), and
        commit or roll back according to what it returns (an exception means UNKNOW: the
        broker will ask ``transaction_checker`` later).

        Raises ClientError when the producer has no ``transaction_checker``.
        """
        inst = self._check_running()
        if self._transaction_checker is None:
            raise ClientError("send_in_transaction needs a transaction_checker for the broker's check-back")
        if msg.delay_level or msg.delivery_time is not None or msg.delay is not None:
            raise ClientError("transactional messages cannot be delayed (delay_level, delivery_time, delay)")
        props = dict(msg.properties)
        half = _with_props(msg, props)
        prepared = self._prepare(
            half, extra={MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: self._group}
        )
        prepared.sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        raw = await self._send_default(prepared, timeout)
        result = self._unwrap_result(raw)
        state = LocalTransactionState.UNKNOW
        if result.status is SendStatus.SEND_OK:
            try:
                state = await _maybe_await(local_transaction(msg, result))
                if not isinstance(state, LocalTransactionState):
                    log.warning("producer %s: local transaction returned %r; treating as UNKNOW", self._group, state)
                    state = LocalTransactionState.UNKNOW
            except Exception as e:  # noqa: BLE001 - the broker's check-back decides later
                log.warning(
                    "producer %s: local transaction of %s raised %r; state UNKNOW", self._group, result.msg_id, e
                )
                state = LocalTransactionState.UNKNOW
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(inst, raw, state)
        except RMQError as e:
            log.warning(
                "producer %s: END_TRANSACTION for %s failed (the broker will check back): %r",
                self._group,
                result.msg_id,
                e,
            )
        return TransactionSendResult(result, state)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (from the route cache, fetched if needed)."""
        self._check_running()
        return [self._ns.unwrap_mq(mq) for mq in (await self._publish_info(self._ns.wrap(topic))).message_queues]

    async def create_topic(
        self,
        new_topic: str,
        queue_num: int = 4,
        *,
        key: str = TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
        attributes: str | None = None,
        message_type: str | None = None,
        timeout: float = 3.0,
    ) -> list[str]:
        """Create ``new_topic`` with ``queue_num`` read and write queues (default 4) on every
        master broker of ``key``'s route (default TBW102), as Java's ``MQProducer.createTopic``
        (``MQAdminImpl.createTopic``): UPDATE_AND_CREATE_TOPIC with ``key`` as its default
        topic. ``attributes`` (Java 5's ``+name=value,-name`` text, default none) and
        ``message_type`` (NORMAL, FIFO, DELAY, TRANSACTION; default None) type the topic.
        Returns the broker addresses written; a broker's refusal raises its
        ``BrokerResponseError``, no route for ``key`` a ``RouteError``."""
        inst = self._check_running()
        validate_topic(new_topic)
        check_range("queue_num", queue_num, 1, 1024)
        text = attributes or ""
        if message_type is not None:
            item = f"+message.type={message_type}"
            text = f"{text},{item}" if text else item
        route = await inst.api.get_topic_route(self._ns.wrap(key), timeout=timeout)
        addrs = [a for bd in (route.broker_datas if route is not None else ()) if (a := bd.master_addr)]
        if not addrs:
            raise RouteError(f"no master broker in the route of {key}; cannot create {new_topic}")
        header = CreateTopicRequestHeader(
            topic=self._ns.wrap(new_topic),
            default_topic=self._ns.wrap(key),
            read_queue_nums=queue_num,
            write_queue_nums=queue_num,
            attributes=text or None,
        )
        for addr in addrs:
            check_success(await inst.api.remoting.invoke(addr, create_topic_request(header), timeout=timeout))
        return addrs

    def add_send_hook(self, hook: _hooks.SendMessageHook) -> None:
        """Call ``hook.send_message_before(ctx)`` / ``send_message_after(ctx)`` around every send
        attempt (Java ``registerSendMessageHook``); see :mod:`rmq.client.hooks`. An exception
        in a hook is logged and does not affect the send."""
        if not (
            callable(getattr(hook, "send_message_before", None)) and callable(getattr(hook, "send_message_after", None))
        ):
            raise ClientError("a send hook needs send_message_before(ctx) and send_message_after(ctx)")
        self._send_hooks.append(hook)

    async def request(self, msg: Message, timeout: float = 3.0) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (Java ``DefaultMQProducer.request``).

        A responder answers with :func:`rmq.reply` (or any client sending
        :func:`rmq.create_reply_message`'s message, Java's ``MessageUtil.createReplyMessage``);
        the broker pushes the reply to this client.

        Args:
            msg: the request.
            timeout: seconds for the send and the reply together; default 3.0.

        Returns:
            The reply message (``properties`` carry ``CORRELATION_ID`` and ``ARRIVE_TIME``).

        Raises:
            rmq.errors.RequestTimeoutError: sent, but no reply within ``timeout`` (retriable:
                a retry is a new request).
            rmq.errors.RemotingTooMuchRequestError: ``max_outstanding_requests`` requests
                already wait.
            rmq.errors.BrokerResponseError, rmq.errors.RemotingError: the send failed.
        """
        inst = self._check_running()
        check_positive("timeout", timeout)
        start = time.monotonic()
        correlation_id, extra = _rr.request_properties(inst.client_id, timeout)
        prepared = self._prepare(msg, extra)
        if prepared.topic not in inst.publish_info:
            # Java prepareSendRequest: a new route may mean a new broker, which must know our
            # connection before the reply comes back
            await self._publish_info(prepared.topic, start + timeout)
            await inst.send_heartbeat_to_all_brokers()
        table = inst.request_futures
        fut = table.add(correlation_id, self, self._max_outstanding_requests)
        try:
            await self._send_default(prepared, max(0.001, timeout - (time.monotonic() - start)))
            try:
                async with asyncio.timeout(max(0.0, timeout - (time.monotonic() - start))):
                    return await fut
            except TimeoutError:
                raise RequestTimeoutError(
                    f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                    f"{int(timeout * 1000)} ms."
                ) from None
        finally:
            table.remove(correlation_id)

    # ---------------------------------------------------------------- internals

    def _prepare(self, msg: Message, extra: dict[str, str] | None = None) -> _Prepared:
        validate_topic(msg.topic)
        if not msg.body:
            raise ClientError("message body is empty")
        assert self._uniq is not None
        uniq = self._uniq.new_id()
        props = message_properties(msg, uniq)
        if extra:
            props.update(extra)
        body = msg.body
        sys_flag = 0
        if len(body) > self._compress_over:
            # Java 5 DefaultMQProducerImpl.sendKernelImpl: COMPRESSED_FLAG | the type's bits
            body = compress_body(body, self._compress_level, self._compress_type)
            sys_flag |= MessageSysFlag.COMPRESSED_FLAG | self._compress_type.flag
        if len(body) > self._max_message_size:
            raise ClientError(f"message body is {len(body)} bytes; the maximum is {self._max_message_size}")
        return _Prepared(self._ns.wrap(msg.topic), body, properties_to_string(props), sys_flag, msg.flag, uniq, False)

    def _prepare_batch(self, msgs: Sequence[Message]) -> _Prepared:
        if not msgs:
            raise ClientError("send_batch needs at least one message")
        topic = msgs[0].topic
        validate_topic(topic)
        assert self._uniq is not None
        items = []
        ids = []
        for m in msgs:
            if m.topic != topic:
                raise ClientError(f"all messages of a batch must have the same topic ({topic!r} != {m.topic!r})")
            if m.delay_level or m.delivery_time is not None or m.delay is not None:
                raise ClientError("delayed and timer messages are not supported in a batch")
            if MixAll.is_retry_topic(topic):
                raise ClientError("retry-topic messages are not supported in a batch")
            if m.wait_store_msg_ok != msgs[0].wait_store_msg_ok:
                raise ClientError("all messages of a batch must have the same wait_store_msg_ok")
            if not m.body:
                raise ClientError("a message body in the batch is empty")
            uniq = self._uniq.new_id()
            ids.append(uniq)
            items.append((m.flag, m.body, properties_to_string(message_properties(m, uniq))))
        body = encode_batch(items)
        if len(body) > self._max_message_size:
            raise ClientError(f"batch is {len(body)} bytes encoded; the maximum is {self._max_message_size}")
        outer = {MessageConst.WAIT_STORE_MSG_OK: "true" if msgs[0].wait_store_msg_ok else "false"}
        return _Prepared(self._ns.wrap(topic), body, properties_to_string(outer), 0, 0, ",".join(ids), True)

    def _header(self, p: _Prepared, mq: MessageQueue) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producer_group=self._group,
            topic=p.topic,
            default_topic=AUTO_CREATE_TOPIC_KEY,
            default_topic_queue_nums=self._default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=p.sys_flag,
            born_timestamp=int(time.time() * 1000),
            flag=p.flag,
            properties=p.properties,
            reconsume_times=0,
            unit_mode=False,
            batch=p.batch,
        )

    async def _publish_info(self, topic: str, deadline: float | None = None) -> _TopicPublishInfo:
        inst = self._in_flight_instance()
        self._topics.add(topic)
        info = inst.publish_info.get(topic)

        def remaining() -> float:
            if deadline is None:
                return self._send_timeout
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemotingTimeoutError(
                    "<namesrv>", self._send_timeout, f"no route of {topic} within the send timeout"
                )
            return left

        if info is None or not info.ok:
            await inst.update_topic_route(topic, timeout=remaining())
            info = inst.publish_info.get(topic)
        if info is None or not info.ok:
            # Unknown topic: publish through TBW102's brokers; they auto-create it (if allowed).
            await inst.update_topic_route(
                topic,
                default_topic=AUTO_CREATE_TOPIC_KEY,
                default_queue_nums=self._default_topic_queue_nums,
                timeout=remaining(),
            )
            info = inst.publish_info.get(topic)
        if info is None or not info.ok:
            raise TopicNotExistError(17, f"No route info of this topic: {topic}")
        return info

    def _select_queue(self, info: _TopicPublishInfo, last_broker: str | None) -> MessageQueue:
        mqs = info.message_queues
        n = len(mqs)
        if self._send_latency_fault_enable:
            for _ in range(n):
                info.send_which_queue += 1
                mq = mqs[info.send_which_queue % n]
                if self._faults.available(mq.broker_name) and mq.broker_name != last_broker:
                    return mq
        for _ in range(n):
            info.send_which_queue += 1
            mq = mqs[info.send_which_queue % n]
            if mq.broker_name != last_broker:
                return mq
        info.send_which_queue += 1
        return mqs[info.send_which_queue % n]

    async def _select_with(
        self, msg: Message, selector: MessageQueueSelector, arg: Any, deadline: float | None = None
    ) -> MessageQueue:
        info = await self._publish_info(self._ns.wrap(msg.topic), deadline)
        return self._apply_selector(info, msg, selector, arg)

    def _apply_selector(
        self, info: _TopicPublishInfo, msg: Message, selector: MessageQueueSelector, arg: Any
    ) -> MessageQueue:
        mqs = info.message_queues
        if self._ns:  # the selector sees the queues as the application names them
            mq = self._ns.wrap_mq(selector([self._ns.unwrap_mq(q) for q in mqs], msg, arg))
        else:
            mq = selector(mqs, msg, arg)
        if not isinstance(mq, MessageQueue):
            raise ClientError(f"selector returned {mq!r}, not a MessageQueue")
        return mq

    async def _broker_addr(self, inst: ClientInstance, mq: MessageQueue) -> str:
        addr = await inst.find_broker_addr_refreshing(mq, publish=True)
        if addr is None:
            raise ClientError(f"the broker {mq.broker_name} of {mq} has no master address in the route")
        return addr

    async def _send_to(self, mq: MessageQueue, p: _Prepared, deadline: float) -> SendResult:
        """One attempt to ``mq`` within ``deadline`` (monotonic)."""
        inst = self._in_flight_instance()
        self._topics.add(mq.topic)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RemotingTimeoutError(mq.broker_name, self._send_timeout, "send timed out before an attempt")
        addr = await self._broker_addr(inst, mq)
        # a reply (MSG_TYPE=reply) goes as SEND_REPLY_MESSAGE_V2 (Java MQClientAPIImpl.sendMessage)
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if _rr.is_reply_message(p.properties) else None
        send = inst.api.send_message(
            addr, mq, self._header(p, mq), p.body, batch=p.batch, uniq_id=p.uniq_id, timeout=remaining, code=code
        )
        if self._send_hooks:
            ctx = _hooks.SendMessageContext.of(self.group, p.topic, p.properties, len(p.body), p.sys_flag, mq, addr)
            return await _hooks.run_send_hooks(self._send_hooks, ctx, send)
        return await send

    async def _send_default(self, p: _Prepared, timeout: float | None) -> SendResult:
        """Send with retries on another queue, preferably another broker (Java ``sendDefaultImpl``).

        Retries wait ``retry_backoff`` seconds, doubling up to 1 s, within the deadline (Java
        retries at once; a broker that just refused is given a moment). The failures are logged
        once per send, when it finally fails or succeeds after a retry, not once per attempt."""
        timeout = timeout or self._send_timeout
        deadline = time.monotonic() + timeout
        info = await self._publish_info(p.topic, deadline)
        last_broker: str | None = None
        last_exc: Exception | None = None
        failures: list[str] = []
        attempts = 1 + self._retry_times
        for attempt in range(attempts):
            if attempt and self._retry_backoff:
                pause = min(self._retry_backoff * 2 ** (attempt - 1), 1.0, deadline - time.monotonic())
                if pause > 0:
                    await asyncio.sleep(pause)
            if time.monotonic() >= deadline:
                break
            mq = self._select_queue(info, last_broker)
            last_broker = mq.broker_name
            start = time.monotonic()
            try:
                result = await self._send_to(mq, p, deadline)
            except RemotingError as e:
                self._faults.update(mq.broker_name, time.monotonic() - start, True)
                failures.append(f"{mq.broker_name}#{mq.queue_id}: {clip(repr(e))}")
                last_exc = e
                if isinstance(e, RemotingConnectError):
                    try:  # the broker may have moved or gone: see what the name server says now
                        await self._in_flight_instance().update_topic_route(
                            p.topic, timeout=max(0.1, min(1.0, deadline - time.monotonic()))
                        )
                        info = await self._publish_info(p.topic, deadline)
                    except RMQError:
                        pass
                continue
            except BrokerResponseError as e:
                if not e.retriable:
                    raise  # about this message (e.g. MESSAGE_ILLEGAL), not the broker
                self._faults.update(mq.broker_name, time.monotonic() - start, True)
                failures.append(f"{mq.broker_name}#{mq.queue_id}: {clip(repr(e))}")
                last_exc = e
                if e.refresh_route:
                    try:
                        await self._in_flight_instance().update_topic_route(p.topic)
                        info = await self._publish_info(p.topic)
                    except RMQError:
                        pass
                continue
            self._faults.update(mq.broker_name, time.monotonic() - start, False)
            if failures:
                _rlog.warning(
                    f"send-retried:{self._group}",
                    "producer %s: send to %s succeeded at attempt %d after: %s",
                    self._group,
                    p.topic,
                    attempt + 1,
                    "; ".join(failures),
                )
            return result
        if last_exc is None:
            raise RemotingTimeoutError(p.topic, timeout, f"send to {p.topic} timed out after {timeout}s")
        _rlog.warning(
            f"send-failed:{self._group}",
            "producer %s: send to %s failed after %d attempt(s): %s",
            self._group,
            p.topic,
            len(failures),
            "; ".join(failures),
        )
        last_exc.add_note(f"send to topic {p.topic} failed after {len(failures)} attempt(s)")
        raise last_exc

    async def _end_transaction(self, inst: ClientInstance, result: SendResult, state: LocalTransactionState) -> None:
        _, _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        addr = await self._broker_addr(inst, result.message_queue)
        header = EndTransactionRequestHeader(
            producer_group=self._group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=commit_log_offset,
            commit_or_rollback=_COMMIT_OR_ROLLBACK[state],
            from_transaction_check=False,
            msg_id=result.msg_id,
            transaction_id=result.transaction_id or result.msg_id,
        )
        await inst.api.end_transaction_oneway(addr, header, None)

    def _on_check_transaction_state(self, broker_addr: str, ext: dict[str, Any], msg: MessageExt) -> None:
        """CHECK_TRANSACTION_STATE from a broker: ask the checker in a task, answer with a oneway
        END_TRANSACTION (the broker expects no response to the check itself)."""
        checker = self._transaction_checker
        if checker is None or self._instance is None:
            log.warning(
                "producer %s: broker %s checks transaction %s but no transaction_checker is set",
                self._group,
                broker_addr,
                msg.msg_id,
            )
            return
        inst = self._instance
        # the checker sees the topic as the application names it (Java
        # ClientRemotingProcessor.checkTransactionState unwraps the namespace)
        app_msg = dataclasses.replace(msg, topic=self._ns.unwrap(msg.topic)) if self._ns else msg

        async def check() -> None:
            remark = None
            try:
                state = await _maybe_await(checker(app_msg))
                if not isinstance(state, LocalTransactionState):
                    state = LocalTransactionState.UNKNOW
            except Exception as e:  # noqa: BLE001 - reported to the broker in the remark
                state = LocalTransactionState.UNKNOW
                remark = f"checkLocalTransactionState Exception: {type(e).__name__}: {e}"
            try:
                check = CheckTransactionStateRequestHeader.from_ext_fields(ext)
            except RemotingCommandError as e:
                log.warning("producer %s: malformed CHECK_TRANSACTION_STATE from %s: %s", self._group, broker_addr, e)
                return
            header = EndTransactionRequestHeader(
                producer_group=self._group,
                tran_state_table_offset=check.tran_state_table_offset,
                commit_log_offset=check.commit_log_offset,
                commit_or_rollback=_COMMIT_OR_ROLLBACK[state],
                from_transaction_check=True,
                msg_id=msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
                transaction_id=check.transaction_id or msg.transaction_id or msg.msg_id,
            )
            try:
                await inst.api.end_transaction_oneway(broker_addr, header, remark)
            except RMQError as e:
                log.warning("producer %s: END_TRANSACTION after check failed: %r", self._group, e)

        self._pending.spawn(check(), f"rmq-txcheck-{self._group}")


class _ProducerMember:
    """What the client instance sees of a producer (Java ``MQProducerInner``): the topics it
    publishes to (their routes are kept fresh) and the broker's transaction check-backs."""

    __slots__ = ("_producer",)

    def __init__(self, producer: Producer) -> None:
        self._producer = producer

    @property
    def group(self) -> str:
        return self._producer._group  # on the wire: with the namespace

    def publish_topics(self) -> set[str]:
        return self._producer._topics

    def check_transaction_state(self, broker_addr: str, ext: dict[str, Any], msg: MessageExt) -> None:
        self._producer._on_check_transaction_state(broker_addr, ext, msg)


_COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: MessageSysFlag.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: MessageSysFlag.TRANSACTION_NOT_TYPE,
}


def _with_props(msg: Message, props: dict[str, str]) -> Message:
    return Message(
        topic=msg.topic,
        body=msg.body,
        tags=msg.tags,
        keys=msg.keys,
        properties=props,
        flag=msg.flag,
        delay_level=msg.delay_level,
        wait_store_msg_ok=msg.wait_store_msg_ok,
        message_group=msg.message_group,
        delivery_time=msg.delivery_time,
        delay=msg.delay,
    )


def _check_compress_type(value: str | CompressionType) -> CompressionType:
    allowed = "'zlib', 'lz4' or 'zstd'"
    try:
        ctype = value if isinstance(value, CompressionType) else CompressionType.of(value)
    except ValueError:
        raise ConfigError("compress_type", f"unsupported compress type {value!r}", allowed) from None
    try:
        check_available(ctype)
    except CompressionUnavailable as e:
        raise ConfigError("compress_type", str(e), allowed) from None
    return ctype


def _serialize(name: str, fn: Callable[[Any], Any] | None, value: Any, topic: str, types: tuple[type, ...]) -> Any:
    """``fn(value)`` (the value itself without ``fn``), checked to be one of ``types``; any
    failure is a SerializationError naming the serializer and the topic."""
    what = "str" if types == (str,) else "bytes or str"
    if fn is None:
        if isinstance(value, types):
            return value
        raise SerializationError(
            f"a message to {topic}: {type(value).__name__} is not {what}; give the producer a {name}"
        )
    try:
        out = fn(value)
    except Exception as e:
        raise SerializationError(f"{name} failed for a message to {topic}: {e!r}") from e
    if not isinstance(out, types):
        raise SerializationError(f"{name} returned {type(out).__name__} for a message to {topic}, not {what}")
    return out


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    if inspect.isawaitable(value):
        return await value
    return value


async def _call(callback: Callable[..., Any], *args: Any) -> None:
    try:
        await _maybe_await(callback(*args))
    except Exception:
        log.exception("send callback raised")
