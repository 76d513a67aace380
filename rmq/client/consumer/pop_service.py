"""How a push consumer in ``ConsumeMode.POP`` hands popped messages to its handler.

* :class:`ConsumeMessagePopConcurrentlyService` (Java ``ConsumeMessagePopConcurrentlyService``):
  the concurrent service's workers and consume timeout; a consumed message is acked
  (ACK_MESSAGE); a failed one stays invisible for ``pop_retry_delays[reconsume_times]`` seconds
  (CHANGE_MESSAGE_INVISIBLETIME), after which the broker delivers it again through the group's
  retry topic. A message already delivered ``max_reconsume_times`` times is acked when it is
  older than twice the longest delay, else kept invisible for the delay its age calls for
  (Java ``checkNeedAckOrDelay``).
* :class:`ConsumeMessagePopOrderlyService` (orderly POP): the broker hands out one queue's
  messages to one consumer at a time and not the next ones before these are acked; each batch
  is consumed in order by one task; on a failure the failed message and those after it stay
  invisible for ``suspend_current_queue_time`` and come back in order.

There are no offsets: the ProcessQueue of a broker only counts the messages in flight
(``pop_inflight``), which pauses popping past ``pop_threshold_for_queue``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rmq.common.log import RateLimitedLog
from rmq.protocol.requests.pop import ExtraInfo
from rmq.types import MessageExt

from .consume_service import ConsumeMessageConcurrentlyService, ConsumeRequest, Handlers, _HandlerService
from .pop import pop_retry_delay
from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from .push import PushConsumerImpl

__all__ = ["ConsumeMessagePopConcurrentlyService", "ConsumeMessagePopOrderlyService"]

log = logging.getLogger("rmq.client")
_rlog = RateLimitedLog(log)

#: Orderly POP: the shortest time a failed message stays invisible (the broker refuses an
#: invisible time under 1 s).
MIN_ORDERLY_SUSPEND = 1.0
#: Handles in one BATCH_ACK_MESSAGE at most (the broker's ``popMaxBatchAcks`` bounds the
#: checkpoint entries of a body; a pop answer is one checkpoint per queue).
ACK_BATCH_MAX = 256


class _PopAcks:
    """The acks and invisible-time changes in flight, so close() can wait for them (a message
    whose ack was lost is delivered again)."""

    def __init__(self, consumer: PushConsumerImpl) -> None:
        self._consumer = consumer
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        t = self._consumer.spawn(coro, name)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def wait(self, timeout: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)


def _done(pq: ProcessQueue, n: int) -> None:
    pq.pop_inflight = max(0, pq.pop_inflight - n)
    pq.wakeup.set()


class ConsumeMessagePopConcurrentlyService(ConsumeMessageConcurrentlyService):
    """The concurrent service over POP: ack on success, invisible time on failure."""

    def __init__(self, consumer: PushConsumerImpl, handlers: Handlers) -> None:
        super().__init__(consumer, handlers)
        self._acks = _PopAcks(consumer)
        self._ack_pending: list[tuple[ProcessQueue, list[MessageExt]]] = []
        self._ack_flush_scheduled = False

    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        pq.pop_inflight += len(msgs)
        await super().submit(pq, msgs)

    def stale(self, req: ConsumeRequest) -> bool:
        """Messages whose invisible time passed while they waited for a worker are not consumed
        (nor acked): the broker delivers them again (Java ``ConsumeRequest.isPopTimeout``)."""
        now = time.time() * 1000
        for m in req.msgs:
            try:
                info = ExtraInfo.parse(m.receipt_handle or "")
            except ValueError:
                return False
            if now < info.pop_time + info.invisible_time:
                return False
        c = self._consumer
        _rlog.info(
            f"pop-timeout:{c.group}",
            "group %s: %d message(s) waited past their invisible time; left for redelivery",
            c.group,
            len(req.msgs),
        )
        _done(req.pq, len(req.msgs))
        return True

    def commit_consumed(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Ack the consumed messages. Java acks each one (``ackAsync``); here the acks of the
        handler calls that end in one loop turn go together in one BATCH_ACK_MESSAGE per broker
        and topic (Java's ``batchAckMessageAsync``, which its proxy uses): the broker writes one
        revive record per checkpoint instead of one per message."""
        self._ack_pending.append((pq, msgs))
        if not self._ack_flush_scheduled:
            self._ack_flush_scheduled = True
            self._acks.spawn(self._flush_acks(), "pop-ack")

    async def _flush_acks(self) -> None:
        await asyncio.sleep(0)  # let the handler calls ending in this loop turn join the batch
        self._ack_flush_scheduled = False
        pending, self._ack_pending = self._ack_pending, []
        msgs = [m for _, ms in pending for m in ms]
        pops = self._consumer.pops
        assert pops is not None
        try:
            for i in range(0, len(msgs), ACK_BATCH_MAX):
                chunk = msgs[i : i + ACK_BATCH_MAX]
                try:
                    await pops.ack_batch(chunk)
                except Exception as e:  # noqa: BLE001 - one by one then; what is not acked comes back
                    _rlog.warning(
                        f"pop-batch-ack:{self._consumer.group}",
                        "group %s: batch ack of %d message(s) failed (%r); acking one by one",
                        self._consumer.group,
                        len(chunk),
                        e,
                    )
                    await asyncio.gather(*(pops.ack_quietly(m) for m in chunk))
        finally:
            for pq, ms in pending:
                _done(pq, len(ms))

    async def consume_failed(self, req: ConsumeRequest, delay_level: int | None = None) -> None:
        """Keep the messages invisible for the delay their reconsume times call for (Java
        ``processConsumeResult`` → ``changePopInvisibleTime`` / ``checkNeedAckOrDelay``)."""
        c = self._consumer
        c.count_consumed(req.pq.mq.topic, len(req.msgs), False)
        self._acks.spawn(self._hand_back(req.pq, req.msgs), "pop-retry")

    async def _hand_back(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        c = self._consumer
        pops = c.pops
        assert pops is not None
        delays = c.options.pop_retry_delays
        limit = c.max_reconsume_times if c.max_reconsume_times >= 0 else 16
        try:
            for m in msgs:
                if m.reconsume_times >= limit:
                    age = time.time() - m.born_timestamp / 1000
                    if age > delays[-1] * 2:
                        _rlog.warning(
                            f"pop-give-up:{c.group}",
                            "group %s: %s consumed %d times and failed; acked (dropped)",
                            c.group,
                            m.msg_id,
                            m.reconsume_times + 1,
                        )
                        await pops.ack_quietly(m)
                        continue
                    # the first delay longer than its age (Java checkNeedAckOrDelay)
                    delay = next((d for d in delays if d > age), delays[-1])
                else:
                    delay = pop_retry_delay(delays, m.reconsume_times)
                try:
                    await pops.change_invisible_time(m, delay)
                except Exception as e:  # noqa: BLE001 - the message comes back after its invisible time anyway
                    _rlog.warning(
                        f"pop-change-invisible:{c.group}",
                        "group %s: change of the invisible time of %s failed: %r",
                        c.group,
                        m.msg_id,
                        e,
                    )
        finally:
            _done(pq, len(msgs))

    async def wait_idle(self, timeout: float) -> None:
        await super().wait_idle(timeout)
        await self._acks.wait(timeout)


class ConsumeMessagePopOrderlyService(_HandlerService):
    """Orderly POP: each popped batch (messages of one queue, in order) is consumed by one task,
    message by message; see the module."""

    orderly = True

    def __init__(self, consumer: PushConsumerImpl, handlers: Handlers) -> None:
        super().__init__(consumer, handlers)
        self._acks = _PopAcks(consumer)

    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        pq.pop_inflight += len(msgs)
        by_queue: dict[tuple[str, int], list[MessageExt]] = {}
        for m in msgs:
            by_queue.setdefault((m.real_topic or m.topic, m.queue_id), []).append(m)
        for (topic, qid), batch in by_queue.items():
            self._acks.spawn(self._consume_batch(pq, batch), f"pop-orderly-{topic}-{qid}")

    async def _consume_batch(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        c = self._consumer
        pops = c.pops
        assert pops is not None
        n = c.options.consume_batch_size
        i = 0
        try:
            while i < len(msgs):
                if pq.dropped or not c.active:
                    return  # the rest comes back after its invisible time, in order
                chunk = msgs[i : i + n]
                if await self.call_handler(chunk, pq.mq.topic):
                    c.count_consumed(pq.mq.topic, len(chunk), True)
                    await asyncio.gather(*(pops.ack_quietly(m) for m in chunk))
                    i += len(chunk)
                    continue
                c.count_consumed(pq.mq.topic, len(chunk), False)
                limit = c.max_reconsume_times
                if limit >= 0 and any(m.reconsume_times >= limit for m in chunk):
                    _rlog.warning(
                        f"pop-orderly-give-up:{c.group}",
                        "group %s: orderly message %s failed %d times; acked (dropped)",
                        c.group,
                        chunk[0].msg_id,
                        chunk[0].reconsume_times + 1,
                    )
                    await asyncio.gather(*(pops.ack_quietly(m) for m in chunk))
                    i += len(chunk)
                    continue
                suspend = max(c.options.suspend_current_queue_time, MIN_ORDERLY_SUSPEND)
                for m in msgs[i:]:
                    try:
                        await pops.change_invisible_time(m, suspend)
                    except Exception as e:  # noqa: BLE001 - it comes back after its invisible time anyway
                        log.warning("group %s: change of the invisible time of %s failed: %r", c.group, m.msg_id, e)
                return
        finally:
            _done(pq, len(msgs))

    async def wait_idle(self, timeout: float) -> None:
        await super().wait_idle(timeout)
        await self._acks.wait(timeout)
