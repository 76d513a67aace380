"""The push consumer (SPEC C2): long-poll pulls per queue, delivered to a handler or ``async for``.

Example::

    c = rmq.PushConsumer(namesrv_addr="127.0.0.1:9876", group="CG")
    c.subscribe("T", "TagA || TagB")
    async with c:
        async for msg in c:
            print(msg.topic, msg.queue_offset, msg.body)

Each assigned queue has one pull task (the asyncio form of Java's PullRequest on the
PullMessageService queue). It long-polls the broker, puts what it gets into the queue's
:class:`ProcessQueue` and hands it to consumption:

* concurrently: ``consume_concurrency`` worker tasks call the handler; a failure sends the
  message back to the broker (CONSUMER_SEND_MSG_BACK → ``%RETRY%group``), or when that fails
  consumes it again locally after 5 s;
* orderly: one task per queue consumes in offset order while holding the queue's broker lock;
  a failure suspends the queue for ``suspend_current_queue_time`` and retries the same messages;
* iterator: without a handler, ``async for`` pulls from the same buffer; a message counts as
  consumed when the loop asks for the next one (or leaves ``async with`` without an error).
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import time
from typing import Any, Awaitable, Callable, Union

from rmq.common.log import RateLimitedLog, clip
from rmq.common.tasks import BackgroundTasks
from rmq.errors import ClientError, IllegalStateError, RMQError
from rmq.types import (ConsumeFromWhere, ConsumeResult, MessageExt, MessageModel, MessageQueue,
                       PullStatus)

from .allocate import AllocateStrategy
from .base import PULL_DELAY_WHEN_EXCEPTION, ConsumerBase, _check_range
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue

__all__ = ["PushConsumer", "MessageHandler", "BatchMessageHandler"]

log = logging.getLogger("rmq.client")
# per-request failures repeat during an outage: one line per kind per 10 s, with a count
_rlog = RateLimitedLog(log)

HandlerResult = Union[ConsumeResult, None]
#: ``async def handler(msg) -> ConsumeResult | None``; raising means "consume later".
MessageHandler = Callable[[MessageExt], Awaitable[HandlerResult]]
#: ``async def handler(msgs) -> ConsumeResult | None`` for ``consume_batch_size`` > 1.
BatchMessageHandler = Callable[[list[MessageExt]], Awaitable[HandlerResult]]

#: Flow control back-off (Java PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL) and the wait while the
#: consumer is paused (SPEC C2: 3 s; resume() wakes it at once).
FLOW_CONTROL_DELAY = 0.05
PAUSED_DELAY = 3.0
#: Local retry after a failed send-back (Java submitConsumeRequestLater: 5 s).
LOCAL_RETRY_DELAY = 5.0
#: Orderly: how long to wait before retrying to lock a queue the broker refused.
LOCK_RETRY_DELAY = 3.0
#: Orderly: rebalance again this soon when a newly assigned queue is still locked by its
#: previous owner.
RELOCK_DELAY = 1.0
#: Orderly: renew every queue lock this often (Java REBALANCE_LOCK_INTERVAL).
LOCK_RENEW_INTERVAL = 20.0

_STOP = object()


class _ConsumeRequest:
    __slots__ = ("msgs", "pq")

    def __init__(self, msgs: list[MessageExt], pq: ProcessQueue) -> None:
        self.msgs = msgs
        self.pq = pq


class PushConsumer(ConsumerBase):
    """An asyncio push consumer.

    Args:
        namesrv_addr: name server address(es), ``"host:port"``, ``"a:1;b:2"`` or a list.
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 chars, not ``DEFAULT_CONSUMER``).
        handler: ``async def handler(msg) -> ConsumeResult | None``; ``None``/``SUCCESS`` acks,
            ``RECONSUME_LATER`` or an exception means "consume later". Default None: iterate
            the consumer with ``async for`` instead.
        batch_handler: like ``handler`` but receives a list of up to ``consume_batch_size``
            messages of one queue. Give at most one of the two.
        orderly: consume each queue in order, one message at a time per queue, under a broker
            lock (LOCK_BATCH_MQ) in clustering mode; default False (concurrently).
        message_model: ``CLUSTERING`` (default) or ``BROADCASTING``.
        consume_from_where: where a group with no stored offset starts; default
            ``CONSUME_FROM_LAST_OFFSET``.
        consume_timestamp: ms since the epoch for ``CONSUME_FROM_TIMESTAMP``; default 30 min ago.
        allocate_strategy: ``"AVG"`` (default), ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"`` or a
            callable ``(group, cid, mqs, cids) -> list[MessageQueue]``.
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``.
            Two consumers of one group in one process need different names.
        client_ip: address in the client id; default: the one used to reach the name server.
        consume_concurrency: handler tasks running at once, [1, 1000]; default 20.
        consume_batch_size: messages per handler call, [1, 1024]; default 1.
        pull_batch_size: messages per pull, [1, 1024]; default 32.
        pull_interval: seconds between pulls of a queue, [0, 65.535]; default 0.
        pull_threshold_for_queue: cached messages per queue before pulling pauses, [1, 65535];
            default 1000.
        pull_threshold_size_for_queue: cached MiB per queue, [1, 1024]; default 100.
        consume_concurrently_max_span: largest offset span cached per queue (concurrently),
            [1, 65535]; default 2000.
        max_reconsume_times: deliveries before a message goes to ``%DLQ%group``; default 16
            (orderly: -1 = retry in place forever).
        suspend_current_queue_time: orderly: pause after a failure, seconds; default 1.0.
        offset_store_dir: broadcasting: directory of the local offset file; default
            ``$RMQ_CLIENT_OFFSET_DIR`` or ``~/.rmq_offsets``.
        iterator_buffer: iterator mode: messages handed to ``async for`` ahead of it; default 256.
        delay_level_when_next_consume: delay level (1..18) of a message sent back after a failed
            concurrent consumption; default 0 = the broker's choice, 3 + reconsume times (10 s,
            30 s, 1 min …).
        on_rebalance: ``fn(topic, queues)`` (sync or async), called after this member's queues of
            ``topic`` changed, with the queues it now owns; default None.
    """

    def __init__(self, namesrv_addr: str | list[str], group: str, *,
                 handler: MessageHandler | None = None, batch_handler: BatchMessageHandler | None = None,
                 orderly: bool = False,
                 message_model: MessageModel = MessageModel.CLUSTERING,
                 consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                 consume_timestamp: int | None = None,
                 allocate_strategy: str | AllocateStrategy = "AVG",
                 instance_name: str = "DEFAULT", client_ip: str | None = None,
                 consume_concurrency: int = 20, consume_batch_size: int = 1, pull_batch_size: int = 32,
                 pull_interval: float = 0.0, pull_threshold_for_queue: int = 1000,
                 pull_threshold_size_for_queue: int = 100, consume_concurrently_max_span: int = 2000,
                 max_reconsume_times: int | None = None, suspend_current_queue_time: float = 1.0,
                 offset_store_dir: str | None = None, iterator_buffer: int = 256,
                 delay_level_when_next_consume: int = 0,
                 on_rebalance=None) -> None:
        super().__init__(namesrv_addr, group, message_model=message_model,
                         consume_from_where=consume_from_where, consume_timestamp=consume_timestamp,
                         allocate_strategy=allocate_strategy, instance_name=instance_name,
                         client_ip=client_ip, pull_batch_size=pull_batch_size,
                         offset_store_dir=offset_store_dir, on_rebalance=on_rebalance)
        if handler is not None and batch_handler is not None:
            raise ClientError("give either handler or batch_handler, not both")
        for name, fn in (("handler", handler), ("batch_handler", batch_handler)):
            if fn is not None and not callable(fn):
                raise ClientError(f"{name} must be callable")
        _check_range("consume_concurrency", consume_concurrency, 1, 1000)
        _check_range("consume_batch_size", consume_batch_size, 1, 1024)
        _check_range("pull_threshold_for_queue", pull_threshold_for_queue, 1, 65535)
        _check_range("pull_threshold_size_for_queue", pull_threshold_size_for_queue, 1, 1024)
        _check_range("consume_concurrently_max_span", consume_concurrently_max_span, 1, 65535)
        _check_range("pull_interval (ms)", int(pull_interval * 1000), 0, 65535)
        _check_range("iterator_buffer", iterator_buffer, 1, 1_000_000)
        if handler is not None and consume_batch_size != 1:
            raise ClientError("consume_batch_size > 1 needs a batch_handler")
        self.handler = handler
        self.batch_handler = batch_handler
        self.orderly = orderly
        self.consume_concurrency = consume_concurrency
        self.consume_batch_size = consume_batch_size
        self.pull_interval = pull_interval
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue * 1024 * 1024
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = (max_reconsume_times if max_reconsume_times is not None
                                    else (-1 if orderly else 16))
        self.suspend_current_queue_time = suspend_current_queue_time
        _check_range("delay_level_when_next_consume", delay_level_when_next_consume, 0, 18)
        self.delay_level_when_next_consume = delay_level_when_next_consume
        self._consume_queue: asyncio.Queue[Any] = asyncio.Queue(
            maxsize=0 if self._has_handler else iterator_buffer)
        self._tasks = BackgroundTasks(f"group {group}", log)
        self._resume = asyncio.Event()
        self._resume.set()
        self._current: _ConsumeRequest | None = None    # iterator mode: the message being handled
        self._busy = 0                  # handler calls in progress (close() waits for them)
        self._relock_task: asyncio.Task | None = None
        self._idle = asyncio.Event()
        self._flow_control_times = 0
        self.stats = {"pulled": 0, "consumed_ok": 0, "consumed_failed": 0, "sent_back": 0,
                      "local_retries": 0, "pull_errors": 0, "flow_controlled": 0}

    @property
    def _has_handler(self) -> bool:
        return self.handler is not None or self.batch_handler is not None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Join the group and start pulling. Raises ClientError without subscriptions."""
        if not self.subscriptions:
            raise ClientError("subscribe to at least one topic before start()")
        await self._start_base()
        if self._has_handler and not self.orderly:
            for i in range(self.consume_concurrency):
                self._spawn(self._consume_worker(), f"consume-{i}")
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            self._spawn(self._lock_renewer(), "lock-renew")

    async def close(self, timeout: float = 10.0) -> None:
        """Stop pulling, let the handler calls in progress finish (up to ``timeout`` seconds,
        default 10; unfinished ones are cancelled and their messages redelivered later), persist
        offsets, leave the group. Idempotent.

        In iterator mode the message last returned by ``async for`` is *not* acknowledged by
        ``close()`` (it is redelivered later); leaving ``async with`` without an exception
        acknowledges it."""
        if self._state != "RUNNING":
            self._state = "CLOSED"
            return
        self._state = "CLOSING"
        pulls = [pq.pull_task for pq in self.process_queue_table.values() if pq.pull_task is not None]
        for t in pulls:
            t.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        if self._busy:
            self._idle.clear()
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except asyncio.TimeoutError:
                log.warning("group %s: %d handler call(s) still running after %.1f s; cancelling them",
                            self.group, self._busy, timeout)
        await self._stop_base()
        await self._tasks.close()
        self._wake_iterators()
        self._state = "CLOSED"

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        # In iterator mode the message the loop body was handling is acknowledged only when the
        # body finished without an error.
        if self._current is not None and exc_type is None:
            self._ack_current()
        self._current = None
        await self.close()

    def _spawn(self, coro, name: str) -> asyncio.Task:
        return self._tasks.spawn(coro, f"rmq-{name}-{self.group}")

    # ---------------------------------------------------------------- pause / resume

    def pause(self) -> None:
        """Stop pulling (cached messages are still consumed)."""
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    # ---------------------------------------------------------------- iterator mode

    def __aiter__(self) -> PushConsumer:
        if self._has_handler:
            raise ClientError("this consumer has a handler; iterate only a consumer without one")
        return self

    async def __anext__(self) -> MessageExt:
        if self._current is not None:
            self._ack_current()
            self._current = None
        while True:
            if self._state not in ("RUNNING",) and self._consume_queue.empty():
                raise StopAsyncIteration
            req = await self._consume_queue.get()
            if req is _STOP:
                raise StopAsyncIteration
            if req.pq.dropped:
                continue
            self._current = req
            return req.msgs[0]

    async def getone(self) -> MessageExt:
        """Iterator mode: the next message (the previous one counts as consumed)."""
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise IllegalStateError("consumer is closed") from None

    def _ack_current(self) -> None:
        req = self._current
        if req is None:
            return
        self.stats["consumed_ok"] += len(req.msgs)
        self._commit_consumed(req.pq, req.msgs)

    def _wake_iterators(self) -> None:
        try:
            self._consume_queue.put_nowait(_STOP)
        except asyncio.QueueFull:
            pass

    # ---------------------------------------------------------------- queues

    def _start_queue(self, pq: ProcessQueue) -> None:
        pq.pull_task = self._spawn(self._pull_loop(pq), f"pull-{pq.mq}")

    async def _lock_new_queue(self, mq: MessageQueue) -> bool:
        if not (self.orderly and self.message_model is MessageModel.CLUSTERING):
            return True
        if mq in await self._lock_batch([mq]):
            return True
        # The previous owner has not unlocked it yet (it does so right after its own rebalance).
        # Try again in a moment rather than at the next 20 s rebalance.
        if self._relock_task is None or self._relock_task.done():
            self._relock_task = self._spawn(self._rebalance_soon(), "relock")
        return False

    async def _rebalance_soon(self) -> None:
        await asyncio.sleep(RELOCK_DELAY)
        if self._state == "RUNNING" and self._instance is not None:
            self._instance.rebalance_immediately()

    async def _lock_batch(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        inst = self._instance
        assert inst is not None
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        ok: set[MessageQueue] = set()
        for broker, group in by_broker.items():
            addr = inst.find_broker_address_in_publish(broker)
            if addr is None:
                continue
            try:
                locked = await inst.api.lock_batch_mq(addr, self.group, inst.client_id, group)
            except RMQError as e:
                log.warning("group %s: LOCK_BATCH_MQ on %s failed: %r", self.group, broker, e)
                continue
            ok |= locked
        now = time.monotonic()
        for mq in mqs:
            pq = self.process_queue_table.get(mq)
            if pq is None:
                continue
            if mq in ok:
                pq.locked = True
                pq.last_lock_time = now
            else:
                pq.locked = False
        return ok

    async def _lock_renewer(self) -> None:
        """Orderly clustering: renew the broker locks of all our queues every 20 s."""
        while True:
            await asyncio.sleep(LOCK_RENEW_INTERVAL)
            mqs = [mq for mq, pq in self.process_queue_table.items() if not pq.dropped]
            if mqs:
                await self._lock_batch(mqs)

    async def _remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if self.orderly and self.message_model is MessageModel.CLUSTERING:
            # Do not give the queue away while a handler runs on it: the next owner could
            # otherwise consume the same message concurrently. Retried at the next rebalance.
            try:
                await asyncio.wait_for(pq.consume_lock.acquire(), 1.0)
            except asyncio.TimeoutError:
                return False
            try:
                await super()._remove_unnecessary_queue(mq, pq)
                await self._unlock([mq])
                return True
            finally:
                pq.consume_lock.release()
        return await super()._remove_unnecessary_queue(mq, pq)

    async def _on_queues_removed(self, mqs: list[MessageQueue]) -> None:
        if self.orderly and self.message_model is MessageModel.CLUSTERING and mqs:
            await self._unlock(mqs)

    async def _unlock(self, mqs: list[MessageQueue]) -> None:
        inst = self._instance
        assert inst is not None
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, group in by_broker.items():
            addr = inst.find_broker_address_in_publish(broker)
            if addr is None:
                continue
            try:
                await inst.api.unlock_batch_mq(addr, self.group, inst.client_id, group)
            except RMQError as e:
                log.info("group %s: UNLOCK_BATCH_MQ on %s failed: %r", self.group, broker, e)

    # ---------------------------------------------------------------- the pull loop

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        """Pull ``pq.mq`` until the queue is dropped: flow control first, then a long-polling pull,
        then hand the messages to consumption. Errors wait 3 s and try again (a broker restart is
        survived this way: the next pull reconnects)."""
        mq = pq.mq
        assert self.offset_store is not None
        while not pq.dropped:
            if not self._resume.is_set():
                try:
                    await asyncio.wait_for(self._resume.wait(), PAUSED_DELAY)
                except asyncio.TimeoutError:
                    pass
                continue
            if (pq.msg_count > self.pull_threshold_for_queue
                    or pq.msg_size > self.pull_threshold_size_for_queue
                    or not self.orderly and pq.max_span > self.consume_concurrently_max_span):
                self._flow_control_times += 1
                self.stats["flow_controlled"] += 1
                if self._flow_control_times % 1000 == 1:
                    log.info("group %s: flow control on %s: %d msgs, %d bytes, span %d", self.group, mq,
                             pq.msg_count, pq.msg_size, pq.max_span)
                pq.wakeup.clear()
                try:
                    await asyncio.wait_for(pq.wakeup.wait(), FLOW_CONTROL_DELAY)
                except asyncio.TimeoutError:
                    pass
                continue
            if self.orderly and self.message_model is MessageModel.CLUSTERING:
                if not pq.locked or pq.lock_expired():
                    if mq not in await self._lock_batch([mq]):
                        await asyncio.sleep(LOCK_RETRY_DELAY)
                        continue
                if not pq.lock_first_done:
                    # the previous owner may have committed more since we computed the offset
                    try:
                        pq.next_offset = await self.compute_pull_from_where(mq)
                    except RMQError as e:
                        log.warning("group %s: offset of %s unknown: %r", self.group, mq, e)
                        await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                        continue
                    pq.lock_first_done = True
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            commit_offset = 0
            if self.message_model is MessageModel.CLUSTERING:
                commit_offset = max(await self.offset_store.read(mq, ReadOffsetType.READ_FROM_MEMORY), 0)
            pq.last_pull_time = time.monotonic()
            try:
                result = await self._pull(mq, pq.next_offset, sub, max_nums=self.pull_batch_size,
                                          suspend=True, commit_offset=commit_offset)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure: wait and pull again
                self.stats["pull_errors"] += 1
                _rlog.warning(f"pull-failed:{self.group}", "group %s: pull of %s at %d failed: %s", self.group, mq,
                              pq.next_offset, clip(repr(e)))
                await self._on_pull_error(mq, e)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            if pq.dropped:
                break
            status = result.status
            if status is PullStatus.FOUND:
                pq.next_offset = result.next_begin_offset
                if result.messages:
                    self.stats["pulled"] += len(result.messages)
                    pq.put_messages(result.messages)
                    await self._submit(pq, result.messages)
                elif not pq.msgs and not pq.consuming_msgs:
                    self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
                if self.pull_interval:
                    await asyncio.sleep(self.pull_interval)
            elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                pq.next_offset = result.next_begin_offset
                if not pq.msgs and not pq.consuming_msgs:
                    # nothing cached: what we skipped (filtered or nothing) is consumed
                    self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
            else:  # OFFSET_ILLEGAL
                log.warning("group %s: offset %d of %s is illegal (min %d, max %d); moving to %d",
                            self.group, pq.next_offset, mq, result.min_offset, result.max_offset,
                            result.next_begin_offset)
                pq.clear()
                pq.next_offset = result.next_begin_offset
                self.offset_store.update(mq, result.next_begin_offset, increase_only=False)
                await self.offset_store.persist(mq)

    async def _submit(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self.orderly and self._has_handler:
            if not pq.consuming:
                pq.consuming = True
                self._spawn(self._consume_orderly(pq), f"orderly-{pq.mq}")
            return
        if not self._has_handler:
            # iterator mode: one message per item; ``put`` waits when the loop lags (back-pressure)
            for m in msgs:
                await self._consume_queue.put(_ConsumeRequest([m], pq))
            return
        n = self.consume_batch_size
        for i in range(0, len(msgs), n):
            self._consume_queue.put_nowait(_ConsumeRequest(msgs[i:i + n], pq))

    # ---------------------------------------------------------------- concurrent consumption

    async def _consume_worker(self) -> None:
        while True:
            req = await self._consume_queue.get()
            if req is _STOP:
                return
            if req.pq.dropped or self._state != "RUNNING":
                continue    # closing: start nothing new; it is redelivered from the offset
            await self._consume_concurrently(req)

    async def _call_handler(self, msgs: list[MessageExt]) -> bool:
        self._busy += 1
        try:
            return await self._call_handler_inner(msgs)
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()

    async def _call_handler_inner(self, msgs: list[MessageExt]) -> bool:
        try:
            if self.batch_handler is not None:
                result = self.batch_handler(msgs)
            else:
                result = self.handler(msgs[0])  # type: ignore[misc]
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - "consume later"
            log.warning("group %s: handler raised on %s@%d: %r (will consume later)", self.group,
                        msgs[0].topic, msgs[0].queue_offset, e, exc_info=True)
            return False
        if result is None or result is ConsumeResult.SUCCESS:
            return True
        if isinstance(result, ConsumeResult):
            return False
        log.warning("group %s: handler returned %r; treating as RECONSUME_LATER", self.group, result)
        return False

    async def _consume_concurrently(self, req: _ConsumeRequest) -> None:
        ok = await self._call_handler(req.msgs)
        pq = req.pq
        if pq.dropped:
            return      # the queue moved to another member: it will redeliver from the offset
        if ok:
            self.stats["consumed_ok"] += len(req.msgs)
            self._commit_consumed(pq, req.msgs)
            return
        await self._consume_failed(req)

    async def _consume_failed(self, req: _ConsumeRequest) -> None:
        """Concurrent mode: send the messages back to the broker; those it could not take are
        consumed again here after 5 s. Broadcasting: log and drop (as Java does)."""
        pq = req.pq
        self.stats["consumed_failed"] += len(req.msgs)
        if self.message_model is MessageModel.BROADCASTING:
            for m in req.msgs:
                log.warning("group %s: BROADCASTING consume failed, dropped: %s@%d", self.group, m.topic,
                            m.queue_offset)
            self._commit_consumed(pq, req.msgs)
            return
        failed_back: list[MessageExt] = []
        for m in req.msgs:
            if not await self.send_message_back(m, self.delay_level_when_next_consume):
                failed_back.append(dataclasses.replace(m, reconsume_times=m.reconsume_times + 1))
        done = [m for m in req.msgs if m.queue_offset not in {f.queue_offset for f in failed_back}]
        if done:
            self._commit_consumed(pq, done)
        if failed_back:
            self.stats["local_retries"] += len(failed_back)
            for m in failed_back:
                pq.replace(m)
            self._spawn(self._retry_later(_ConsumeRequest(failed_back, pq)), "local-retry")

    async def _retry_later(self, req: _ConsumeRequest) -> None:
        await asyncio.sleep(LOCAL_RETRY_DELAY)
        if not req.pq.dropped:
            if self._has_handler:
                self._consume_queue.put_nowait(req)
            else:
                for m in req.msgs:      # iterator mode: one message per item, bounded buffer
                    await self._consume_queue.put(_ConsumeRequest([m], req.pq))

    async def reconsume_later(self, msg: MessageExt | None = None) -> None:
        """Iterator mode: do not acknowledge the message ``async for`` returned last; hand it
        back instead (``%RETRY%group`` via the broker, or locally after 5 s; BROADCASTING: drop
        it), and go on with the next one.

        Raises ClientError if there is no current message or ``msg`` is not it."""
        req = self._current
        if req is None or (msg is not None and msg is not req.msgs[0]):
            raise ClientError("reconsume_later() applies to the message async for returned last")
        if self.orderly:
            raise ClientError("an orderly consumer cannot skip a message: handle it again, or leave "
                              "the loop with an exception to have it redelivered")
        self._current = None
        await self._consume_failed(req)

    def _commit_consumed(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self.offset_store is not None
        if self.orderly and self._has_handler:
            return
        offset = pq.remove_messages(msgs)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update(pq.mq, offset, increase_only=True)

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker puts a copy in ``%RETRY%group`` (delay level
        3 + reconsume times when ``delay_level`` is 0) or in ``%DLQ%group`` after
        ``max_reconsume_times``. Returns False when it failed (the caller retries locally)."""
        inst = self._instance
        assert inst is not None
        addr = inst.find_broker_address_in_publish(msg.broker_name) or msg.store_host
        try:
            await inst.api.consumer_send_msg_back(
                addr, group=self.group, commit_log_offset=msg.commit_log_offset,
                delay_level=delay_level, origin_msg_id=msg.msg_id, origin_topic=msg.topic,
                max_reconsume_times=self.max_reconsume_times if self.max_reconsume_times >= 0 else 16)
        except RMQError as e:
            log.warning("group %s: send back of %s failed, retrying locally in %.0f s: %r", self.group,
                        msg.msg_id, LOCAL_RETRY_DELAY, e)
            return False
        self.stats["sent_back"] += 1
        return True

    # ---------------------------------------------------------------- orderly consumption

    async def _consume_orderly(self, pq: ProcessQueue) -> None:
        """Consume one queue in order while we hold its lock; stops when the queue is empty and is
        restarted by the pull loop when new messages arrive."""
        assert self.offset_store is not None
        clustering = self.message_model is MessageModel.CLUSTERING
        try:
            while not pq.dropped and self._state == "RUNNING":
                if clustering and (not pq.locked or pq.lock_expired()):
                    if pq.mq not in await self._lock_batch([pq.mq]):
                        await asyncio.sleep(LOCK_RETRY_DELAY if not pq.dropped else 0)
                        continue
                async with pq.consume_lock:
                    if pq.dropped:
                        return
                    msgs = pq.take_messages(self.consume_batch_size)
                    if not msgs:
                        return
                    ok = await self._call_handler(msgs)
                    if pq.dropped:
                        return
                    if ok:
                        self.stats["consumed_ok"] += len(msgs)
                        offset = pq.commit()
                        if offset >= 0:
                            self.offset_store.update(pq.mq, offset, increase_only=False)
                        continue
                    self.stats["consumed_failed"] += len(msgs)
                    if self._exceeds_max_reconsume(msgs):
                        # give up on these: to the DLQ via the broker, then go on
                        if all([await self.send_message_back(m, 0) for m in msgs]):
                            offset = pq.commit()
                            if offset >= 0:
                                self.offset_store.update(pq.mq, offset, increase_only=False)
                            continue
                    pq.make_messages_consume_again(
                        [dataclasses.replace(m, reconsume_times=m.reconsume_times + 1) for m in msgs])
                await asyncio.sleep(self.suspend_current_queue_time)
        finally:
            pq.consuming = False
            if pq.msgs and not pq.dropped and self._state == "RUNNING":
                pq.consuming = True
                self._spawn(self._consume_orderly(pq), f"orderly-{pq.mq}")

    def _exceeds_max_reconsume(self, msgs: list[MessageExt]) -> bool:
        return self.max_reconsume_times >= 0 and any(m.reconsume_times >= self.max_reconsume_times
                                                     for m in msgs)

    # ---------------------------------------------------------------- broker → client requests

    def running_info(self) -> dict:
        info = super().running_info()
        info["properties"]["PROP_THREADPOOL_CORE_SIZE"] = str(self.consume_concurrency)
        info["statusTable"] = {t: dict(self.stats) for t in self.subscriptions}
        return info

    async def consume_message_directly(self, msg: MessageExt) -> dict:
        """CONSUME_MESSAGE_DIRECTLY (from an admin tool): run the handler on ``msg`` now."""
        if not self._has_handler:
            raise ClientError("consume directly needs a handler (iterator-mode consumer)")
        start = time.monotonic()
        ok = await self._call_handler([msg])
        return {"order": self.orderly, "autoCommit": True,
                "consumeResult": "CR_SUCCESS" if ok else "CR_LATER",
                "remark": None, "spentTimeMills": int((time.monotonic() - start) * 1000)}
