"""Automatic batching of ``Producer.send`` calls (aiokafka's ``linger_ms`` / ``max_batch_size``).

With ``linger_ms > 0`` a message that can go in a batch joins the open batch of its topic (and
queue, when the caller fixed one): the batch goes as one SEND_BATCH_MESSAGE when it would grow
past ``max_batch_size`` bytes, after ``linger_ms``, or when the producer closes. The broker
answers a batch with its first queue offset and the items' broker ids joined by commas (Java
``SendMessageProcessor`` / ``MQClientAPIImpl.processSendResponse``), so each caller's future
gets its own :class:`~rmq.types.SendResult`: its ``UNIQ_KEY`` as ``msg_id``, its broker id,
``queue_offset`` = first + its index. A failed batch fails every caller with the same exception
(``retriable`` as the broker or the transport said).

What does not batch goes alone, as without batching: compressed bodies (the batch's sysFlag is
one for all items; Java never compresses a batch), delayed and timer messages, ``%RETRY%``
topics, replies, and messages larger than ``max_batch_size`` on their own.

Bounds: ``buffer_memory`` bytes in open and in-flight batches, ``max_pending_batches`` open and
in-flight batches; past either the send call raises ``RemotingTooMuchRequestError`` (retriable:
await some pending futures first), as ``max_pending_sends`` does, with one rate-limited line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from rmq.common.constants import MixAll
from rmq.common.log import RateLimitedLog
from rmq.common.message import encode_batch
from rmq.errors import RemotingTooMuchRequestError
from rmq.types import MessageConst, MessageQueue, SendResult

__all__ = ["BatchAccumulator", "Prepared", "batch_item_size", "can_batch", "UNBATCHABLE_PROPERTIES"]

log = logging.getLogger("rmq.client")
_rlog = RateLimitedLog(log)

#: Properties that keep a message out of a batch: the broker schedules delayed and timer
#: messages one by one (Java ``Validators`` / ``MessageBatch.generateFromList`` refuse delays;
#: RocketMQ 5's timer properties ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``
#: and 4.x commercial ``__STARTDELIVERTIME``), and a reply goes as SEND_REPLY_MESSAGE_V2.
UNBATCHABLE_PROPERTIES = (
    f"\x02{MessageConst.DELAY_TIME_LEVEL}\x01",
    "\x02TIMER_DELIVER_MS\x01",
    "\x02TIMER_DELAY_SEC\x01",
    "\x02TIMER_DELAY_MS\x01",
    "\x02__STARTDELIVERTIME\x01",
    f"\x02{MessageConst.MESSAGE_TYPE}\x01",
)


class Prepared:
    """A message ready for the wire: encoded properties, maybe compressed body, its uniq id(s)."""

    __slots__ = ("topic", "body", "properties", "sys_flag", "flag", "uniq_id", "batch")

    def __init__(
        self, topic: str, body: bytes, properties: str, sys_flag: int, flag: int, uniq_id: str, batch: bool
    ) -> None:
        self.topic = topic
        self.body = body
        self.properties = properties
        self.sys_flag = sys_flag
        self.flag = flag
        self.uniq_id = uniq_id
        self.batch = batch


# One batch item on the wire (Java MessageDecoder.encodeMessage): TOTALSIZE, MAGICCODE,
# BODYCRC, FLAG, BODY length (4 bytes each), the body, PROPERTIES length (2), the properties.
_ITEM_OVERHEAD = 4 * 5 + 2


def batch_item_size(p: Prepared) -> int:
    """Bytes ``p`` takes in a SEND_BATCH_MESSAGE body."""
    return _ITEM_OVERHEAD + len(p.body) + len(p.properties.encode("utf-8"))


def can_batch(p: Prepared, max_batch_size: int) -> bool:
    """Whether ``p`` may join a batch (see the module's docstring)."""
    if p.sys_flag or p.batch or MixAll.is_retry_topic(p.topic):
        return False
    props = "\x02" + p.properties
    if any(k in props for k in UNBATCHABLE_PROPERTIES):
        return False
    return batch_item_size(p) <= max_batch_size


#: The send of a ready batch (the producer's): ``send(prepared, queue, deadline)``.
BatchSender = Callable[[Prepared, MessageQueue | None, float], Coroutine[Any, Any, SendResult]]


class _Batch:
    __slots__ = ("key", "items", "size", "timeout", "timer")

    def __init__(self, key: tuple[str, MessageQueue | None, bool]) -> None:
        self.key = key
        self.items: list[tuple[Prepared, asyncio.Future[SendResult]]] = []
        self.size = 0
        self.timeout = float("inf")
        self.timer: asyncio.TimerHandle | None = None


def _retrieve(fut: asyncio.Future[Any]) -> None:
    # A caller that never awaits its future: its failure is logged by the producer already,
    # so asyncio need not warn "exception was never retrieved" (BackgroundTasks does the same).
    if not fut.cancelled():
        fut.exception()


class BatchAccumulator:
    """The open batches of one producer, keyed by (topic, fixed queue or None, WAIT flag).

    Args:
        owner: the producer group, for log lines.
        linger: seconds a batch waits for more messages (> 0).
        max_batch_size: bytes of one SEND_BATCH_MESSAGE body at most.
        buffer_memory: bytes of open and in-flight batches at most.
        max_pending_batches: open and in-flight batches at most.
        send: sends a ready batch (or a lone item): ``send(prepared, queue, deadline)``.
        spawn: runs a coroutine as a task the producer's close waits for.
    """

    def __init__(
        self,
        owner: str,
        *,
        linger: float,
        max_batch_size: int,
        buffer_memory: int,
        max_pending_batches: int,
        send: BatchSender,
        spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
    ) -> None:
        self.owner = owner
        self.linger = linger
        self.max_batch_size = max_batch_size
        self.buffer_memory = buffer_memory
        self.max_pending_batches = max_pending_batches
        self._send = send
        self._spawn = spawn
        self._open: dict[tuple[str, MessageQueue | None, bool], _Batch] = {}
        self.buffered = 0
        """Bytes in open and in-flight batches."""
        self.pending_batches = 0
        """Open and in-flight batches."""
        self.pending_messages = 0
        """Messages whose future is not resolved yet."""
        self.batches_sent = 0
        """SEND_BATCH_MESSAGE requests made (a batch of one goes as a plain send, not counted)."""

    def add(self, p: Prepared, queue: MessageQueue | None, timeout: float) -> asyncio.Future[SendResult]:
        """Put ``p`` (batchable: :func:`can_batch`) in its open batch; returns its future.

        Raises:
            RemotingTooMuchRequestError: past ``buffer_memory`` or ``max_pending_batches``.
        """
        size = batch_item_size(p)
        wait = f"\x02{MessageConst.WAIT_STORE_MSG_OK}\x01false\x02" not in "\x02" + p.properties
        key = (p.topic, queue, wait)
        batch = self._open.get(key)
        if batch is not None and batch.size + size > self.max_batch_size:
            self._flush(batch)
            batch = None
        if batch is None and self.pending_batches >= self.max_pending_batches:
            n = self.pending_batches
            self._refuse(f"{n} batches are pending (max_pending_batches={self.max_pending_batches})")
        if self.buffered + size > self.buffer_memory:
            self._refuse(f"{self.buffered} bytes are buffered in batches (buffer_memory={self.buffer_memory})")
        if batch is None:
            batch = self._open[key] = _Batch(key)
            self.pending_batches += 1
            batch.timer = asyncio.get_running_loop().call_later(self.linger, self._flush, batch)
        fut: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        batch.items.append((p, fut))
        batch.size += size
        batch.timeout = min(batch.timeout, timeout)
        self.buffered += size
        self.pending_messages += 1
        if batch.size >= self.max_batch_size:
            self._flush(batch)
        return fut

    def _refuse(self, why: str) -> None:
        _rlog.warning(f"batch-full:{self.owner}", "producer %s: %s, refusing more sends", self.owner, why)
        raise RemotingTooMuchRequestError(f"{why}; await some pending sends and retry")

    def flush_all(self) -> None:
        """Send every open batch now (the producer's close, or an application's ``flush``)."""
        for batch in list(self._open.values()):
            self._flush(batch)

    def _flush(self, batch: _Batch) -> None:
        if self._open.get(batch.key) is batch:
            del self._open[batch.key]
        if batch.timer is not None:
            batch.timer.cancel()
            batch.timer = None
        self._spawn(self._run(batch))

    async def _run(self, batch: _Batch) -> None:
        # callers that cancelled their future before the batch left are not sent
        items = [(p, f) for p, f in batch.items if not f.done()]
        # the send timeout counts from when the batch leaves, not from the first send() (the
        # linger may be longer than it)
        deadline = time.monotonic() + batch.timeout
        try:
            if not items:
                return
            topic, queue, wait = batch.key
            if len(items) == 1:
                p, fut = items[0]
                try:
                    result = await self._send(p, queue, deadline)
                except Exception as e:  # noqa: BLE001 - handed to the caller's future
                    if not fut.done():
                        fut.set_exception(e)
                else:
                    if not fut.done():
                        fut.set_result(result)
                return
            self.batches_sent += 1
            await self._send_batch(topic, queue, wait, items, deadline)
        finally:
            for _, fut in batch.items:  # cancelled mid-send (the loop is closing): none hangs
                if not fut.done():
                    fut.cancel()
            self.buffered -= batch.size
            self.pending_batches -= 1
            self.pending_messages -= len(batch.items)

    async def _send_batch(
        self,
        topic: str,
        queue: MessageQueue | None,
        wait: bool,
        items: list[tuple[Prepared, asyncio.Future[SendResult]]],
        deadline: float,
    ) -> None:
        ids = [p.uniq_id for p, _ in items]
        try:
            body = encode_batch((p.flag, p.body, p.properties) for p, _ in items)
            outer = f"{MessageConst.WAIT_STORE_MSG_OK}\x01{'true' if wait else 'false'}\x02"
            result = await self._send(Prepared(topic, body, outer, 0, 0, ",".join(ids), True), queue, deadline)
        except Exception as e:  # noqa: BLE001 - every caller gets the batch's failure
            for _, fut in items:
                if not fut.done():
                    fut.set_exception(e)
            return
        offset_ids = result.offset_msg_id.split(",")
        if len(offset_ids) != len(items):  # a broker that answers one id for the batch
            offset_ids = [result.offset_msg_id] * len(items)
        for i, (_, fut) in enumerate(items):
            if not fut.done():
                fut.set_result(
                    SendResult(
                        status=result.status,
                        msg_id=ids[i],
                        offset_msg_id=offset_ids[i],
                        message_queue=result.message_queue,
                        queue_offset=result.queue_offset + i,
                    )
                )
