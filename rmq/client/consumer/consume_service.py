"""How a push consumer hands pulled messages to the application (Java ``ConsumeMessageService``).

The pull loop of each queue puts what it pulled into the queue's :class:`ProcessQueue` and calls
:meth:`ConsumeMessageService.submit`. One service is chosen when the consumer is built:

* :class:`ConsumeMessageConcurrentlyService` (a handler, ``orderly=False``): ``consume_concurrency``
  worker tasks call the handler; a failure sends the message back to the broker
  (CONSUMER_SEND_MSG_BACK → ``%RETRY%group``), or when that fails consumes it again here after
  5 s (Java ``ConsumeMessageConcurrentlyService``);
* :class:`ConsumeMessageOrderlyService` (a handler, ``orderly=True``): one task per queue
  consumes in offset order while holding the queue's broker lock; a failure suspends the queue
  for ``suspend_current_queue_time`` and retries the same messages (Java
  ``ConsumeMessageOrderlyService``);
* :class:`ConsumeMessageIteratorService` (no handler): ``async for`` takes messages from a
  bounded buffer; a message counts as consumed when the loop asks for the next one. Failures
  go back as in the concurrent service (it is one, without workers).
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from rmq.client.hooks import ConsumeMessageContext, run_consume_after, run_consume_before
from rmq.common.log import RateLimitedLog
from rmq.common.tasks import wait_event
from rmq.errors import ClientError
from rmq.types import ConsumeResult, MessageExt, MessageModel

from .process_queue import ProcessQueue

if TYPE_CHECKING:
    from .push import PushConsumerImpl

__all__ = [
    "ConsumeMessageService",
    "ConsumeMessageConcurrentlyService",
    "ConsumeMessageOrderlyService",
    "ConsumeMessageIteratorService",
    "Handlers",
    "HandlerResult",
    "MessageHandler",
    "BatchMessageHandler",
]

log = logging.getLogger("rmq.client")
# a stuck handler repeats on every message: one line per group per 10 s, with a count
_rlog = RateLimitedLog(log)

HandlerResult = ConsumeResult | None
#: ``async def handler(msg) -> ConsumeResult | None``; raising means "consume later".
MessageHandler = Callable[[MessageExt], Awaitable[HandlerResult] | HandlerResult]
#: ``async def handler(msgs) -> ConsumeResult | None`` for ``consume_batch_size`` > 1.
BatchMessageHandler = Callable[[list[MessageExt]], Awaitable[HandlerResult] | HandlerResult]

#: Local retry after a failed send-back (Java submitConsumeRequestLater: 5 s).
LOCAL_RETRY_DELAY = 5.0
#: Orderly: how long to wait before retrying to lock a queue the broker refused.
LOCK_RETRY_DELAY = 3.0
#: The delay level of a message whose handler ran past ``consume_timeout`` (Java
#: ``ProcessQueue.cleanExpiredMsg`` sends it back with level 3, 10 s).
CONSUME_TIMEOUT_DELAY_LEVEL = 3


class ConsumeRequest:
    """Messages of one queue handed to the application together."""

    __slots__ = ("msgs", "pq")

    def __init__(self, msgs: list[MessageExt], pq: ProcessQueue) -> None:
        self.msgs = msgs
        self.pq = pq


class ConsumeMessageService(abc.ABC):
    """The interface the push consumer drives (Java ``ConsumeMessageService``)."""

    #: Consumes each queue in offset order (reported in running info; no offset-span limit).
    orderly = False

    def __init__(self, consumer: PushConsumerImpl) -> None:
        self._consumer = consumer

    def start(self) -> None:
        """Begin consuming (spawn workers in the consumer's task group)."""

    @abc.abstractmethod
    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Messages just pulled from ``pq`` (already in it): consume them (Java
        ``submitConsumeRequest``). May wait (iterator back-pressure)."""

    async def wait_idle(self, timeout: float) -> None:
        """close(): wait up to ``timeout`` s for handler calls in progress."""

    def stop(self) -> None:
        """close(), after the queues are dropped: wake whoever waits for messages."""

    @abc.abstractmethod
    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY (an admin tool): consume ``msg`` now, report the outcome."""


class Handlers(NamedTuple):
    """The application's handler: one of the two is set."""

    single: MessageHandler | None
    batch: BatchMessageHandler | None


class _HandlerService(ConsumeMessageService):
    """Calls the application's handler, counting calls in progress so close() can wait."""

    def __init__(self, consumer: PushConsumerImpl, handlers: Handlers) -> None:
        super().__init__(consumer)
        self._single = handlers.single
        self._batch = handlers.batch
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # the first failure is logged with its traceback; after it one line per group per 10 s
        # with a count (a handler that always raises once wrote a traceback per message)
        self._traceback_logged = False

    async def call_handler(self, msgs: list[MessageExt], topic: str | None = None) -> bool:
        """True when the handler consumed ``msgs`` (returned None/SUCCESS). With ``topic`` (the
        pulled queue's, Java ``messageQueue.getTopic()``) the call's time is counted as consume
        RT (Java ``ConsumeRequest.run`` → ``incConsumeRT``)."""
        if not self._busy:
            self._idle.clear()
        self._busy += 1
        started = time.monotonic()
        try:
            hooks = self._consumer.consume_hooks  # (Java ConsumeMessageHook around the listener)
            if not hooks:
                return await self._call(msgs)
            ctx = run_consume_before(hooks, self._consumer.group, msgs)
            ok = False
            try:
                ok = await self._call(msgs)
            finally:
                run_consume_after(hooks, ctx, ok)
            return ok
        finally:
            if topic is not None:
                self._consumer.consume_stats.inc_consume_rt(topic, (time.monotonic() - started) * 1000)
            self._busy -= 1
            if not self._busy:
                self._idle.set()

    async def _call(self, msgs: list[MessageExt]) -> bool:
        try:
            app = self._consumer.app_messages(msgs)
            if self._batch is not None:
                result = self._batch(app)
            else:
                assert self._single is not None
                result = self._single(app[0])
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any handler error means "consume later"; logged below
            if _rlog.warning(
                f"handler-raised:{self._consumer.group}",
                "group %s: handler raised on %s@%d: %r (will consume later)",
                self._consumer.group,
                msgs[0].topic,
                msgs[0].queue_offset,
                e,
                exc_info=not self._traceback_logged,
            ):
                self._traceback_logged = True
            return False
        if result is None or result is ConsumeResult.SUCCESS:
            return True
        if isinstance(result, ConsumeResult):
            return False
        _rlog.warning(
            f"handler-returned:{self._consumer.group}",
            "group %s: handler returned %r; treating as RECONSUME_LATER",
            self._consumer.group,
            result,
        )
        return False

    async def wait_idle(self, timeout: float) -> None:
        if not self._busy:
            return
        if not await wait_event(self._idle, timeout):
            log.warning(
                "group %s: %d handler call(s) still running after %.1f s; cancelling them",
                self._consumer.group,
                self._busy,
                timeout,
            )

    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]:
        start = time.monotonic()
        ok = await self.call_handler([msg])
        return {
            "order": self.orderly,
            "autoCommit": True,
            "consumeResult": "CR_SUCCESS" if ok else "CR_LATER",
            "remark": None,
            "spentTimeMills": int((time.monotonic() - start) * 1000),
        }


class ConsumeMessageConcurrentlyService(_HandlerService):
    """Worker tasks call the handler on any queue's messages (Java
    ``ConsumeMessageConcurrentlyService``); offsets advance past the smallest unconsumed one."""

    def __init__(self, consumer: PushConsumerImpl, handlers: Handlers) -> None:
        super().__init__(consumer, handlers)
        self._requests: asyncio.Queue[ConsumeRequest] = asyncio.Queue()

    def start(self) -> None:
        n = self._consumer.options.consume_threads
        #: per worker: monotonic start of the handler call in progress, or None when idle
        self._call_started: list[float | None] = [None] * n
        self._expired: set[int] = set()  # workers the sweep cancelled for consume_timeout
        self._worker_tasks = [self._consumer.spawn(self._worker(i), f"consume-{i}") for i in range(n)]
        self._consumer.spawn(self._expire_calls(), "consume-timeout")

    async def _expire_calls(self) -> None:
        """Cancel handler calls running past ``consume_timeout`` (Java
        ``ConsumeMessageConcurrentlyService.cleanExpireMsg``, which runs every consumeTimeout
        minutes; here every quarter of it, at most every second). A sweep rather than a timer per
        call: a timer costs more per message than the whole bookkeeping of this one."""
        timeout = self._consumer.options.consume_timeout
        interval = max(0.05, min(timeout / 4, 1.0))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for i, started in enumerate(self._call_started):
                if started is not None and now - started > timeout and i not in self._expired:
                    # The worker is suspended inside the handler's await (a sync handler never
                    # yields, so the sweep cannot run during it): the cancellation lands there.
                    self._expired.add(i)
                    self._worker_tasks[i].cancel()

    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        n = self._consumer.options.consume_batch_size
        for i in range(0, len(msgs), n):
            self._requests.put_nowait(ConsumeRequest(msgs[i : i + n], pq))

    def stale(self, req: ConsumeRequest) -> bool:
        """Hook: True drops ``req`` before its handler call (POP: its invisible time passed, the
        broker delivers it again)."""
        return False

    async def _resubmit(self, req: ConsumeRequest) -> None:
        """A local retry (after a failed send-back) comes back in."""
        self._requests.put_nowait(req)

    async def _worker(self, i: int) -> None:
        task = asyncio.current_task()
        assert task is not None
        while True:
            req = await self._requests.get()
            if req.pq.dropped or not self._consumer.active or self.stale(req):
                continue  # closing: start nothing new; it is redelivered from the offset
            self._call_started[i] = time.monotonic()
            try:
                ok = await self.call_handler(req.msgs, req.pq.mq.topic)
            except asyncio.CancelledError:
                if i not in self._expired or task.uncancel() > 0:
                    raise  # close() (too): stop
                ok = False
            finally:
                self._call_started[i] = None
            if i in self._expired:
                self._expired.discard(i)
                if task.cancelling():  # the handler swallowed the cancellation and returned
                    task.uncancel()
                await self._consume_timed_out(req)
                continue
            if req.pq.dropped:
                continue  # the queue moved to another member: it redelivers from the offset
            if ok:
                self._consumer.count_consumed(req.pq.mq.topic, len(req.msgs), True)
                self.commit_consumed(req.pq, req.msgs)
            else:
                await self.consume_failed(req)

    async def _consume_timed_out(self, req: ConsumeRequest) -> None:
        """A handler call ran past ``consume_timeout`` and was cancelled: as Java's
        ``ProcessQueue.cleanExpiredMsg``, its messages go back to the broker with delay level 3
        (Java leaves the thread running; cancelling frees the worker)."""
        c = self._consumer
        c.stats["consume_timeouts"] += len(req.msgs)
        m = req.msgs[0]
        _rlog.warning(
            f"consume-timeout:{c.group}",
            "group %s: handler ran longer than consume_timeout (%.3g s) on "
            "%s#%d@%d; cancelled, sending %d message(s) back (delay level %d)",
            c.group,
            c.options.consume_timeout,
            m.topic,
            m.queue_id,
            m.queue_offset,
            len(req.msgs),
            CONSUME_TIMEOUT_DELAY_LEVEL,
        )
        if not req.pq.dropped:
            await self.consume_failed(req, CONSUME_TIMEOUT_DELAY_LEVEL)

    def commit_consumed(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """``msgs`` are done: the queue's committable offset moves past the smallest left."""
        c = self._consumer
        assert c.offset_store is not None
        offset = pq.remove_messages(msgs)
        if offset >= 0 and not pq.dropped:
            c.offset_store.update(pq.mq, offset, increase_only=True)

    async def consume_failed(self, req: ConsumeRequest, delay_level: int | None = None) -> None:
        """Send the messages back to the broker (``delay_level``, default
        ``delay_level_when_next_consume``); those it could not take are consumed again here
        after 5 s. Broadcasting: log and drop, as Java does (Java
        ``ConsumeMessageConcurrentlyService.processConsumeResult``)."""
        c = self._consumer
        if delay_level is None:
            delay_level = c.options.delay_level_when_next_consume
        pq = req.pq
        c.count_consumed(req.pq.mq.topic, len(req.msgs), False)
        if c.message_model is MessageModel.BROADCASTING:
            for m in req.msgs:
                _rlog.warning(
                    f"broadcast-dropped:{c.group}",
                    "group %s: BROADCASTING consume failed, dropped: %s@%d",
                    c.group,
                    m.topic,
                    m.queue_offset,
                )
            self.commit_consumed(pq, req.msgs)
            return
        failed_back: list[MessageExt] = []
        for m in req.msgs:
            if not await c.send_message_back(m, delay_level):
                failed_back.append(dataclasses.replace(m, reconsume_times=m.reconsume_times + 1))
        failed_offsets = {f.queue_offset for f in failed_back}
        done = [m for m in req.msgs if m.queue_offset not in failed_offsets]
        if done:
            self.commit_consumed(pq, done)
        if failed_back:
            c.stats["local_retries"] += len(failed_back)
            for m in failed_back:
                pq.replace(m)
            c.spawn(self._retry_later(ConsumeRequest(failed_back, pq)), "local-retry")

    async def _retry_later(self, req: ConsumeRequest) -> None:
        await asyncio.sleep(LOCAL_RETRY_DELAY)
        if not req.pq.dropped:
            await self._resubmit(req)


class ConsumeMessageIteratorService(ConsumeMessageConcurrentlyService):
    """``async for msg in consumer``: the concurrent service without workers, the loop being the
    one consumer. The buffer is bounded (``iterator_buffer``): pulling waits when the loop lags.

    With ``orderly=True`` the queues are locked as for the orderly service and a message cannot
    be skipped (:meth:`reconsume_later` refuses)."""

    def __init__(self, consumer: PushConsumerImpl, *, orderly: bool) -> None:
        super().__init__(consumer, Handlers(None, None))
        self.orderly = orderly
        # None wakes a waiting loop at close()
        self._items: asyncio.Queue[ConsumeRequest | None] = asyncio.Queue(maxsize=consumer.options.iterator_buffer)
        self._current: ConsumeRequest | None = None
        self._current_ctx: ConsumeMessageContext | None = None  # the consume hooks' context
        self._current_app: MessageExt | None = None  # what the loop got (topic without namespace)

    def start(self) -> None:
        pass

    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        for m in msgs:  # one message per item; ``put`` waits when the loop lags
            await self._items.put(ConsumeRequest([m], pq))

    async def _resubmit(self, req: ConsumeRequest) -> None:
        await self.submit(req.pq, req.msgs)

    def stop(self) -> None:
        try:
            self._items.put_nowait(None)
        except asyncio.QueueFull:
            pass

    async def next(self) -> MessageExt:
        """The next message; the previous one counts as consumed. StopAsyncIteration once the
        consumer is closed."""
        self.ack_current()
        while True:
            if not self._consumer.active and self._items.empty():
                raise StopAsyncIteration
            req = await self._items.get()
            if req is None:
                self.stop()  # wake the next waiter too
                raise StopAsyncIteration
            if req.pq.dropped:
                continue
            self._current = req
            self._current_app = self._consumer.app_messages(req.msgs)[0]
            if self._consumer.consume_hooks:
                self._current_ctx = run_consume_before(self._consumer.consume_hooks, self._consumer.group, req.msgs)
            return self._current_app

    def _hooks_after(self, success: bool) -> None:
        ctx, self._current_ctx = self._current_ctx, None
        if ctx is not None:
            run_consume_after(self._consumer.consume_hooks, ctx, success)

    def ack_current(self) -> None:
        """The message last returned is consumed."""
        req, self._current = self._current, None
        self._hooks_after(True)
        if req is not None:
            self._consumer.count_consumed(req.pq.mq.topic, len(req.msgs), True)
            self.commit_consumed(req.pq, req.msgs)

    def forget_current(self) -> None:
        """Leave the message last returned unacknowledged (redelivered from the offset)."""
        self._current = None
        self._hooks_after(False)

    async def reconsume_later(self, msg: MessageExt | None) -> None:
        """Hand the message last returned back instead of acknowledging it."""
        req = self._current
        if req is None or (msg is not None and msg is not self._current_app and msg is not req.msgs[0]):
            raise ClientError("reconsume_later() applies to the message async for returned last")
        if self.orderly:
            raise ClientError(
                "an orderly consumer cannot skip a message: handle it again, or leave "
                "the loop with an exception to have it redelivered"
            )
        self._current = None
        self._hooks_after(False)
        await self.consume_failed(req)

    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]:
        raise ClientError("consume directly needs a handler (iterator-mode consumer)")


class ConsumeMessageOrderlyService(_HandlerService):
    """One task per queue consumes in offset order while the queue's broker lock is held (Java
    ``ConsumeMessageOrderlyService``). A failure suspends the queue and retries the same
    messages; past ``max_reconsume_times`` (when not -1) they go to the DLQ via the broker."""

    orderly = True

    async def submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if not pq.consuming:
            pq.consuming = True
            self._consumer.spawn(self._consume_queue(pq), f"orderly-{pq.mq}")

    async def _consume_queue(self, pq: ProcessQueue) -> None:
        """Consume one queue in order while we hold its lock; ends when the queue is empty and is
        started again by :meth:`submit` when new messages arrive."""
        c = self._consumer
        opts = c.options
        assert c.offset_store is not None
        clustering = c.message_model is MessageModel.CLUSTERING
        try:
            while not pq.dropped and c.active:
                if clustering and (not pq.locked or pq.lock_expired()) and pq.mq not in await c.lock_batch([pq.mq]):
                    await asyncio.sleep(LOCK_RETRY_DELAY if not pq.dropped else 0)
                    continue
                async with pq.consume_lock:
                    if pq.dropped:
                        return
                    msgs = pq.take_messages(opts.consume_batch_size)
                    if not msgs:
                        return
                    ok = await self.call_handler(msgs, pq.mq.topic)
                    if pq.dropped:
                        return
                    if ok:
                        c.count_consumed(pq.mq.topic, len(msgs), True)
                        self._commit(pq)
                        continue
                    c.count_consumed(pq.mq.topic, len(msgs), False)
                    # give up on these: to the DLQ via the broker, then go on
                    if self._exceeds_max_reconsume(msgs) and all([await c.send_message_back(m, 0) for m in msgs]):
                        self._commit(pq)
                        continue
                    pq.make_messages_consume_again(
                        [dataclasses.replace(m, reconsume_times=m.reconsume_times + 1) for m in msgs]
                    )
                await asyncio.sleep(opts.suspend_current_queue_time)
        finally:
            pq.consuming = False
            if pq.msgs and not pq.dropped and c.active:
                pq.consuming = True
                c.spawn(self._consume_queue(pq), f"orderly-{pq.mq}")

    def _commit(self, pq: ProcessQueue) -> None:
        offset = pq.commit()
        if offset >= 0:
            assert self._consumer.offset_store is not None
            self._consumer.offset_store.update(pq.mq, offset, increase_only=False)

    def _exceeds_max_reconsume(self, msgs: list[MessageExt]) -> bool:
        limit = self._consumer.max_reconsume_times
        return limit >= 0 and any(m.reconsume_times >= limit for m in msgs)
