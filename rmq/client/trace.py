"""Message trace (Java ``org.apache.rocketmq.client.trace``: ``TraceContext``, ``TraceBean``,
``TraceDataEncoder``, ``AsyncTraceDispatcher``, ``SendMessageTraceHookImpl``,
``ConsumeMessageTraceHookImpl``, ``TraceView``).

With ``trace=True`` a producer records a **Pub** trace of each send, and a push consumer a
**SubBefore** and a **SubAfter** trace of each consumption, as messages of the trace topic
(``RMQ_SYS_TRACE_TOPIC``; the broker creates it with ``traceTopicEnable=true``) whose keys are
the traced message ids and user keys, so the broker's index finds them by message id. The
text is Java's ``TraceDataEncoder`` format, so Java's tools read our traces and
:func:`decode_trace_data` reads theirs::

    Pub      \\1 timestamp \\1 regionId \\1 group \\1 topic \\1 msgId \\1 tags \\1 keys \\1 storeHost
             \\1 bodyLength \\1 costTime \\1 msgType \\1 offsetMsgId \\1 success \\2
    SubBefore\\1 timestamp \\1 regionId \\1 group \\1 requestId \\1 msgId \\1 retryTimes \\1 keys \\2
    SubAfter \\1 requestId \\1 msgId \\1 costTime \\1 success \\1 keys \\1 contextCode
             \\1 timestamp \\1 group \\2

(Java writes a missing tag or key as ``null``; so do we.)

The hooks only build a small context and put it on the dispatcher's bounded queue
(``queue_size``, 1024 as Java's ``traceContextQueue``); a full queue drops the trace with one
rate-limited log line, so tracing never slows or blocks a send or a handler. A background task
of the dispatcher takes up to ``batch_size`` (100) contexts or waits ``polling_time`` (0.1 s),
packs them per trace topic into messages of at most ``max_msg_size`` bytes (128 000, Java's)
and at most 63 keys (the index keeps 64 keys per record, one being the message's own id), and
sends them with its own producer (group ``_INNER_TRACE_PRODUCER-<group>-<type>``). Closing the
traced client flushes what is queued (within ``close_timeout``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import MessageConst, java_str
from rmq.common.tasks import BackgroundTasks
from rmq.errors import RMQError
from rmq.remoting.acl import SessionCredentials
from rmq.types import Message, MessageExt, SendStatus

from .hooks import ConsumeMessageContext, SendMessageContext


class TraceProducer(Protocol):
    """What a :class:`TraceDispatcher` sends its trace messages with: ``rmq.Producer``, given as
    ``producer_factory`` by the producer and the push consumer (trace does not import the
    producer, which imports trace)."""

    async def start(self) -> None: ...

    def send(self, msg: Message) -> Awaitable[Any]: ...

    async def close(self) -> None: ...


__all__ = [
    "CONTENT_SPLITOR",
    "FIELD_SPLITOR",
    "TraceType",
    "TraceBean",
    "TraceContext",
    "TraceTransferBean",
    "encode_trace_context",
    "decode_trace_data",
    "TraceView",
    "trace_views",
    "TraceDispatcher",
    "SendMessageTraceHook",
    "ConsumeMessageTraceHook",
    "GROUP_NAME_PREFIX",
    "MAX_KEYS_PER_TRACE_MESSAGE",
]

log = logging.getLogger("rmq.client")
_rlog = RateLimitedLog(log)

#: Java TraceConstants
CONTENT_SPLITOR = "\x01"
FIELD_SPLITOR = "\x02"
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
#: the broker indexes 64 keys per record: the message's own UNIQ_KEY and 63 KEYS
MAX_KEYS_PER_TRACE_MESSAGE = 63
DEFAULT_REGION = "DefaultRegion"


class TraceType:
    """Java ``TraceType`` names."""

    PUB = "Pub"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


@dataclass(slots=True)
class TraceBean:
    """One traced message (Java ``TraceBean``); ``None`` text fields are written ``null``."""

    topic: str | None = ""
    msg_id: str | None = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    client_host: str | None = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: int = 0
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False


def _request_id() -> str:
    return uuid.uuid4().hex.upper()


@dataclass(slots=True)
class TraceContext:
    """One trace record (Java ``TraceContext``)."""

    trace_type: str
    time_stamp: int = field(default_factory=lambda: int(time.time() * 1000))
    region_id: str | None = ""
    group_name: str | None = ""
    cost_time: int = 0
    success: bool = True
    request_id: str | None = field(default_factory=_request_id)
    context_code: int = 0
    trace_beans: list[TraceBean] = field(default_factory=list)


@dataclass(slots=True)
class TraceTransferBean:
    """What one context becomes (Java ``TraceTransferBean``): its text and the keys to index."""

    trans_data: str
    trans_keys: set[str]


def _line(*values: object, end: str = FIELD_SPLITOR) -> str:
    return CONTENT_SPLITOR.join(java_str(v) for v in values) + end


def encode_trace_context(ctx: TraceContext) -> TraceTransferBean:
    """Java ``TraceDataEncoder.encoderFromContextBean``: the same text, character for character."""
    parts: list[str] = []
    t = ctx.trace_type
    if t == TraceType.PUB:
        b = ctx.trace_beans[0]
        parts.append(
            _line(
                t,
                ctx.time_stamp,
                ctx.region_id,
                ctx.group_name,
                b.topic,
                b.msg_id,
                b.tags,
                b.keys,
                b.store_host,
                b.body_length,
                ctx.cost_time,
                b.msg_type,
                b.offset_msg_id,
                ctx.success,
            )
        )
    elif t == TraceType.SUB_BEFORE:
        for b in ctx.trace_beans:
            parts.append(
                _line(t, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id, b.retry_times, b.keys)
            )
    elif t == TraceType.SUB_AFTER:
        for b in ctx.trace_beans:
            parts.append(
                _line(
                    t,
                    ctx.request_id,
                    b.msg_id,
                    ctx.cost_time,
                    ctx.success,
                    b.keys,
                    ctx.context_code,
                    ctx.time_stamp,
                    ctx.group_name,
                )
            )
    elif t == TraceType.END_TRANSACTION:
        b = ctx.trace_beans[0]
        parts.append(
            _line(
                t,
                ctx.time_stamp,
                ctx.region_id,
                ctx.group_name,
                b.topic,
                b.msg_id,
                b.tags,
                b.keys,
                b.store_host,
                b.msg_type,
                b.transaction_id,
                b.transaction_state,
                b.from_transaction_check,
            )
        )
    keys: set[str] = set()
    for b in ctx.trace_beans:
        keys.add(java_str(b.msg_id))
        if b.keys:
            keys.update(k for k in b.keys.split(MessageConst.KEY_SEPARATOR) if k)
    return TraceTransferBean("".join(parts), keys)


def _java_split(text: str, sep: str) -> list[str]:
    """Java ``String.split``: trailing empty strings are removed."""
    items = text.split(sep)
    while items and items[-1] == "":
        items.pop()
    return items


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Java Boolean.parseBoolean


def decode_trace_data(data: str) -> list[TraceContext]:
    """Java ``TraceDataEncoder.decoderFromTraceDataString``: the contexts of a trace message's
    body, whichever client wrote it (the Pub line with 13, 14 or 15+ fields, the SubAfter line
    with 6, 7 or 9). A line that cannot be read is skipped (Java would throw and lose the
    whole message)."""
    out: list[TraceContext] = []
    if not data:
        return out
    for context in _java_split(data, FIELD_SPLITOR):
        line = _java_split(context, CONTENT_SPLITOR)
        if not line:
            continue
        try:
            ctx = _decode_line(line)
        except (IndexError, ValueError):
            _rlog.warning("trace-decode", "unreadable trace line skipped: %s", clip(context))
            continue
        if ctx is not None:
            out.append(ctx)
    return out


def _decode_line(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == TraceType.PUB:
        ctx = TraceContext(TraceType.PUB, int(line[1]), line[2], line[3])
        bean = TraceBean(
            topic=line[4],
            msg_id=line[5],
            tags=line[6],
            keys=line[7],
            store_host=line[8],
            body_length=int(line[9]),
            msg_type=int(line[11]),
        )
        ctx.cost_time = int(line[10])
        if len(line) == 13:
            ctx.success = _bool(line[12])
        elif len(line) >= 14:
            bean.offset_msg_id = line[12]
            ctx.success = _bool(line[13])
            if len(line) >= 15:
                bean.client_host = line[14]
        ctx.trace_beans = [bean]
        return ctx
    if kind == TraceType.SUB_BEFORE:
        ctx = TraceContext(TraceType.SUB_BEFORE, int(line[1]), line[2], line[3], request_id=line[4])
        ctx.trace_beans = [TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])]
        return ctx
    if kind == TraceType.SUB_AFTER:
        ctx = TraceContext(TraceType.SUB_AFTER, request_id=line[1])
        ctx.trace_beans = [TraceBean(msg_id=line[2], keys=line[5])]
        ctx.cost_time = int(line[3])
        ctx.success = _bool(line[4])
        if len(line) >= 7:
            ctx.context_code = int(line[6])
        if len(line) >= 9:
            ctx.time_stamp = int(line[7])
            ctx.group_name = line[8]
        return ctx
    if kind == TraceType.END_TRANSACTION:
        ctx = TraceContext(TraceType.END_TRANSACTION, int(line[1]), line[2], line[3])
        ctx.trace_beans = [
            TraceBean(
                topic=line[4],
                msg_id=line[5],
                tags=line[6],
                keys=line[7],
                store_host=line[8],
                msg_type=int(line[9]),
                transaction_id=line[10],
                transaction_state=line[11],
                from_transaction_check=_bool(line[12]),
            )
        ]
        return ctx
    return None


@dataclass(frozen=True, slots=True)
class TraceView:
    """One trace record of one message as mqadmin shows it (Java ``TraceView``)."""

    msg_id: str
    msg_type: str
    """The trace type: ``Pub``, ``SubBefore``, ``SubAfter``, ``EndTransaction``."""
    group_name: str
    client_host: str
    """The host that wrote the trace (the trace message's born host)."""
    time_stamp: int
    cost_time: int
    status: str
    """``success`` or ``failed``."""
    topic: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    offset_msg_id: str | None = None


def trace_views(msg_id: str, trace_message: MessageExt) -> list[TraceView]:
    """Java ``TraceView.decodeFromTraceTransData``: the records of ``msg_id`` in one trace message."""
    body = trace_message.body.decode("utf-8", "replace")
    host = trace_message.born_host.rsplit(":", 1)[0] if trace_message.born_host else ""
    views = []
    for ctx in decode_trace_data(body):
        bean = ctx.trace_beans[0]
        if bean.msg_id != msg_id:
            continue
        views.append(
            TraceView(
                msg_id,
                ctx.trace_type,
                java_str(ctx.group_name),
                host,
                ctx.time_stamp,
                ctx.cost_time,
                "success" if ctx.success else "failed",
                bean.topic,
                bean.tags,
                bean.keys,
                bean.store_host,
                bean.offset_msg_id,
            )
        )
    return views


# ----------------------------------------------------------------------------------- dispatch

_counter = itertools.count(1)


class TraceDispatcher:
    """Java ``AsyncTraceDispatcher``: a bounded queue of trace contexts and one task that
    batches them into trace messages and sends them with an internal producer.

    Args:
        namesrv_addr: the traced client's name servers.
        group: the traced client's group (names the internal producer's group).
        kind: ``"PRODUCER"`` or ``"CONSUMER"`` (Java ``Type``).
        trace_topic: default ``RMQ_SYS_TRACE_TOPIC``.
        queue_size: contexts waiting at most (1024); past it a trace is dropped (logged,
            rate-limited) and counted in ``dropped``.
        batch_size: contexts per round (100); polling_time: seconds a round waits for more (0.1).
        max_msg_size: bytes of one trace message (128 000).
        close_timeout: seconds ``close`` spends flushing (5.0).
        producer_factory: makes the trace producer (``rmq.Producer``'s signature); required.
    """

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        kind: str,
        trace_topic: str | None = None,
        *,
        instance_name: str = "DEFAULT",
        credentials: SessionCredentials | None = None,
        tls: bool | ssl.SSLContext | None = None,
        queue_size: int = 1024,
        batch_size: int = 100,
        polling_time: float = 0.1,
        max_msg_size: int = 128_000,
        close_timeout: float = 5.0,
        producer_factory: Callable[..., TraceProducer],
    ) -> None:
        self.trace_topic = trace_topic or TopicValidator.RMQ_SYS_TRACE_TOPIC
        self.group = group
        self._namesrv_addr = namesrv_addr
        self._producer_group = f"{GROUP_NAME_PREFIX}-{group}-{kind}-{next(_counter)}"
        self._instance_name = instance_name
        self._credentials = credentials
        self._tls = tls
        self._queue: asyncio.Queue[TraceContext] | None = None
        self._queue_size = queue_size
        self.batch_size = batch_size
        self.polling_time = polling_time
        self.max_msg_size = max_msg_size
        self.close_timeout = close_timeout
        self._tasks = BackgroundTasks(f"trace dispatcher {group}", log)
        self._worker: asyncio.Task[None] | None = None
        self._producer: TraceProducer | None = None
        self._producer_factory = producer_factory
        self._closed = False
        #: traces dropped because the queue was full, and trace messages that failed to send
        self.dropped = 0
        self.send_failures = 0
        self.sent_messages = 0

    def append(self, ctx: TraceContext) -> bool:
        """Queue one context (never blocks); False when it was dropped."""
        if self._closed:
            return False
        if self._queue is None:
            self._queue = asyncio.Queue(self._queue_size)
            self._worker = self._tasks.spawn(self._run(), f"rmq-trace-{self.group}")
        try:
            self._queue.put_nowait(ctx)
        except asyncio.QueueFull:
            self.dropped += 1
            _rlog.warning(
                f"trace-full:{self.group}",
                "trace of %s dropped: %d traces already wait to be sent (%d dropped so far)",
                self.group,
                self._queue_size,
                self.dropped,
            )
            return False
        return True

    async def _run(self) -> None:
        assert self._queue is not None
        q = self._queue
        while True:
            batch = [await q.get()]
            deadline = time.monotonic() + self.polling_time
            while len(batch) < self.batch_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    async with asyncio.timeout(left):
                        batch.append(await q.get())
                except TimeoutError:
                    break
            try:
                await self._send_batch(batch)
            finally:
                for _ in batch:
                    q.task_done()

    async def _send_batch(self, batch: Sequence[TraceContext]) -> None:
        """Java ``TraceDataSegment``: contexts joined into messages by size and key count."""
        data: list[str] = []
        keys: set[str] = set()
        size = 0
        for ctx in batch:
            bean = encode_trace_context(ctx)
            if data and (
                size + len(bean.trans_data) > self.max_msg_size
                or len(keys | bean.trans_keys) > MAX_KEYS_PER_TRACE_MESSAGE
            ):
                await self._send("".join(data), keys)
                data, keys, size = [], set(), 0
            data.append(bean.trans_data)
            keys |= bean.trans_keys
            size += len(bean.trans_data)
        if data:
            await self._send("".join(data), keys)

    async def _send(self, text: str, keys: set[str]) -> None:
        try:
            producer = await self._get_producer()
            await producer.send(
                Message(
                    topic=self.trace_topic, body=text.encode(), keys=tuple(sorted(keys))[:MAX_KEYS_PER_TRACE_MESSAGE]
                )
            )
            self.sent_messages += 1
        except (RMQError, OSError) as e:
            self.send_failures += 1
            _rlog.warning(
                f"trace-send:{self.group}",
                "trace data of %s not sent to %s: %s",
                self.group,
                self.trace_topic,
                clip(repr(e)),
            )

    async def _get_producer(self) -> TraceProducer:
        if self._producer is None:
            p = self._producer_factory(
                self._namesrv_addr,
                self._producer_group,
                instance_name=f"{TRACE_INSTANCE_NAME}_{self._instance_name}",
                access_key=self._credentials.access_key if self._credentials else None,
                secret_key=self._credentials.secret_key if self._credentials else None,
                security_token=self._credentials.security_token if self._credentials else None,
                tls=self._tls,
                max_message_size=max(self.max_msg_size * 2, 256 * 1024),
            )
            await p.start()
            self._producer = p
        return self._producer

    async def close(self) -> None:
        """Send what is queued (within ``close_timeout``), then stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._queue is not None:
            try:  # the worker sends what is queued (Java AsyncTraceDispatcher.flush)
                async with asyncio.timeout(self.close_timeout):
                    await self._queue.join()
            except TimeoutError:
                _rlog.warning(
                    f"trace-close:{self.group}",
                    "trace data of %s not all sent within %.1f s at close (%d left)",
                    self.group,
                    self.close_timeout,
                    self._queue.qsize(),
                )
        await self._tasks.close()
        if self._producer is not None:
            await self._producer.close()


class SendMessageTraceHook:
    """Java ``SendMessageTraceHookImpl``: a Pub trace after each accepted send."""

    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def hook_name(self) -> str:
        return "SendMessageTraceHook"

    def send_message_before(self, ctx: SendMessageContext) -> None:
        if ctx.topic.startswith(self.dispatcher.trace_topic):
            return
        ctx.props["trace_start"] = int(time.time() * 1000)

    def send_message_after(self, ctx: SendMessageContext) -> None:
        start = ctx.props.get("trace_start")
        result = ctx.send_result
        if start is None or result is None:
            return
        now = int(time.time() * 1000)
        bean = TraceBean(
            topic=ctx.topic,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            tags=ctx.tags,
            keys=ctx.keys,
            store_host=ctx.broker_addr,
            body_length=ctx.body_length,
            msg_type=ctx.msg_type,
        )
        cost = now - start
        bean.store_time = start + cost // 2
        trace = TraceContext(
            TraceType.PUB,
            start,
            DEFAULT_REGION,
            ctx.producer_group,
            cost,
            result.status is SendStatus.SEND_OK,
            trace_beans=[bean],
        )
        self.dispatcher.append(trace)

    async def close(self) -> None:
        await self.dispatcher.close()


class ConsumeMessageTraceHook:
    """Java ``ConsumeMessageTraceHookImpl``: SubBefore before the handler, SubAfter after it."""

    def __init__(self, dispatcher: TraceDispatcher) -> None:
        self.dispatcher = dispatcher

    def hook_name(self) -> str:
        return "ConsumeMessageTraceHook"

    def consume_message_before(self, ctx: ConsumeMessageContext) -> None:
        beans = []
        region: str | None = None
        for msg in ctx.msgs:
            if msg.properties.get(MessageConst.TRACE_SWITCH) == "false" or msg.topic.startswith(
                self.dispatcher.trace_topic
            ):
                continue
            region = msg.properties.get("MSG_REGION")
            beans.append(
                TraceBean(
                    topic=msg.topic,
                    msg_id=msg.msg_id,
                    tags=msg.tags,
                    keys=msg.properties.get(MessageConst.KEYS),
                    store_time=msg.store_timestamp,
                    body_length=len(msg.body),
                    retry_times=msg.reconsume_times,
                )
            )
        if not beans:
            return
        before = TraceContext(TraceType.SUB_BEFORE, region_id=region, group_name=ctx.consumer_group, trace_beans=beans)
        ctx.props["trace_before"] = before
        self.dispatcher.append(before)

    def consume_message_after(self, ctx: ConsumeMessageContext) -> None:
        before: Any = ctx.props.get("trace_before")
        if not isinstance(before, TraceContext):
            return
        now = int(time.time() * 1000)
        after = TraceContext(
            TraceType.SUB_AFTER,
            now,
            before.region_id,
            before.group_name,
            (now - before.time_stamp) // max(1, len(ctx.msgs)),
            ctx.success,
            before.request_id,
            # Java ConsumeReturnType ordinals: SUCCESS 0, FAILED 4
            0 if ctx.success else 4,
            before.trace_beans,
        )
        self.dispatcher.append(after)

    async def close(self) -> None:
        await self.dispatcher.close()
