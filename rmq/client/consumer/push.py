"""The push consumer: long-poll pulls per queue, delivered to a handler or ``async for``.

Example::

    c = rmq.PushConsumer(namesrv_addr="127.0.0.1:9876", group="CG")
    c.subscribe("T", "TagA || TagB")
    async with c:
        async for msg in c:
            print(msg.topic, msg.queue_offset, msg.body)

:class:`PushConsumer` is the application's object (Java ``DefaultMQPushConsumer``); it holds a
:class:`PushConsumerImpl` (Java ``DefaultMQPushConsumerImpl``), which the client instance
drives. Each assigned queue has one pull task (the asyncio form of Java's PullRequest on the
PullMessageService queue). It long-polls the broker, puts what it gets into the queue's
:class:`ProcessQueue` and hands it to the consume service chosen at construction (see
:mod:`rmq.client.consumer.consume_service`): concurrently, orderly, or to ``async for``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import ssl
import time
from collections.abc import Callable, Coroutine, Iterable
from types import TracebackType
from typing import Any

from rmq.client.hooks import ConsumeMessageHook, close_hooks
from rmq.client.selector import MessageSelector
from rmq.common.log import RateLimitedLog, clip
from rmq.common.tasks import BackgroundTasks, wait_event
from rmq.errors import ClientError, IllegalStateError, RMQError, TopicNotExistError
from rmq.protocol.requests.pop import PopStatus
from rmq.types import ConsumeFromWhere, ConsumeMode, MessageExt, MessageModel, MessageQueue, PullStatus, ServiceState

from .allocate import AllocateStrategy
from .base import BROKER_SUSPEND_MAX_TIME, PULL_DELAY_WHEN_EXCEPTION, ConsumerBase, ConsumerFacade
from .consume_service import (
    LOCK_RETRY_DELAY,
    BatchMessageHandler,
    ConsumeMessageConcurrentlyService,
    ConsumeMessageIteratorService,
    ConsumeMessageOrderlyService,
    ConsumeMessageService,
    Handlers,
    MessageHandler,
)
from .offset_store import ReadOffsetType
from .options import ErrorHandler, PushConsumerOptions, RebalanceListener, build_options
from .pop import POP_DELAY_LEVELS, PopCalls, pop_queues
from .pop_service import ConsumeMessagePopConcurrentlyService, ConsumeMessagePopOrderlyService
from .process_queue import ProcessQueue
from .stats import ConsumerStatsManager

__all__ = ["PushConsumer", "PushConsumerImpl", "MessageHandler", "BatchMessageHandler"]

log = logging.getLogger("rmq.client")
# per-request failures repeat during an outage: one line per kind per 10 s, with a count
_rlog = RateLimitedLog(log)

#: Flow control back-off (Java PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL) and the wait while the
#: consumer is paused (resume() wakes it at once).
FLOW_CONTROL_DELAY = 0.05
PAUSED_DELAY = 3.0
#: OFFSET_ILLEGAL: the queue is dropped at once and its corrected offset persisted (and the queue
#: removed, to be taken again by the next rebalance) this many seconds later (Java
#: ``DefaultMQPushConsumerImpl.pullMessage``'s ``executeTaskLater(..., 10000)``).
OFFSET_ILLEGAL_FIX_DELAY = 10.0
#: Orderly: rebalance again this soon when a newly assigned queue is still locked by its
#: previous owner.
RELOCK_DELAY = 1.0
#: Orderly: renew every queue lock this often (Java REBALANCE_LOCK_INTERVAL).
LOCK_RENEW_INTERVAL = 20.0


def _stats() -> dict[str, int]:
    return {
        "pulled": 0,
        "consumed_ok": 0,
        "consumed_failed": 0,
        "sent_back": 0,
        "local_retries": 0,
        "pull_errors": 0,
        "flow_controlled": 0,
        "consume_timeouts": 0,
    }


class PushConsumerImpl(ConsumerBase):
    """The push consumer's machinery: rebalance (with queue locks when orderly and clustering),
    one pull loop per queue, and a :class:`ConsumeMessageService`."""

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        options: PushConsumerOptions,
        *,
        handler: MessageHandler | None,
        batch_handler: BatchMessageHandler | None,
        orderly: bool,
    ) -> None:
        super().__init__(namesrv_addr, group, options)
        if handler is not None and batch_handler is not None:
            raise ClientError("give either handler or batch_handler, not both")
        for name, fn in (("handler", handler), ("batch_handler", batch_handler)):
            if fn is not None and not callable(fn):
                raise ClientError(f"{name} must be callable")
        if handler is not None and options.consume_batch_size != 1:
            raise ClientError("consume_batch_size > 1 needs a batch_handler")
        self.options: PushConsumerOptions = options
        self.orderly = orderly
        #: orderly clustering: a queue is consumed only under its broker lock (LOCK_BATCH_MQ)
        self.locks_queues = orderly and self.message_model is MessageModel.CLUSTERING
        self.max_reconsume_times = (
            options.max_reconsume_times if options.max_reconsume_times is not None else (-1 if orderly else 16)
        )
        self.stats = _stats()
        #: Java ConsumerStatsManager: pull and consume RT/TPS per topic (running info's statusTable)
        self.consume_stats = ConsumerStatsManager()
        self._tasks = BackgroundTasks(f"group {group}", log)
        self._resume = asyncio.Event()
        self._resume.set()
        #: queues paused one by one (``pause(queues)``), wire names
        self._paused_queues: set[MessageQueue] = set()
        self._relock_task: asyncio.Task[Any] | None = None
        self._flow_control_times = 0
        #: per-queue flow-control thresholds (messages, MiB); the topic thresholds replace them
        #: after each rebalance that changed the queues (Java RebalancePushImpl.messageQueueChanged)
        self.pull_threshold_for_queue = options.pull_threshold_for_queue
        self.pull_threshold_size_for_queue = options.pull_threshold_size_for_queue
        #: ConsumeMessageHooks (PushConsumer.add_consume_hook), called by the consume service
        self.consume_hooks: list[ConsumeMessageHook] = []
        self.consume_service: ConsumeMessageService
        #: POP mode (RocketMQ 5): no client rebalance, one pop loop per broker
        self.pop_mode = options.consume_mode is ConsumeMode.POP
        self.pops: PopCalls | None = PopCalls(self) if self.pop_mode else None
        if self.pop_mode:
            # orderly POP is the broker's: it hands one queue's messages to one member at a time
            self.locks_queues = False
            if handler is None and batch_handler is None:
                raise ClientError("consume_mode=POP needs a handler or a batch_handler (no async for)")
            handlers = Handlers(handler, batch_handler)
            if orderly:
                self.consume_service = ConsumeMessagePopOrderlyService(self, handlers)
            else:
                self.consume_service = ConsumeMessagePopConcurrentlyService(self, handlers)
        elif handler is None and batch_handler is None:
            self.consume_service = ConsumeMessageIteratorService(self, orderly=orderly)
        else:
            handlers = Handlers(handler, batch_handler)
            if orderly:
                self.consume_service = ConsumeMessageOrderlyService(self, handlers)
            else:
                self.consume_service = ConsumeMessageConcurrentlyService(self, handlers)

    @property
    def iterator(self) -> ConsumeMessageIteratorService:
        """The iterator service; ClientError for a consumer with a handler."""
        svc = self.consume_service
        if not isinstance(svc, ConsumeMessageIteratorService):
            raise ClientError("this consumer has a handler; iterate only a consumer without one")
        return svc

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        self.check_startable()
        if not self.subscriptions:
            raise ClientError("subscribe to at least one topic before start()")
        await self._start_base()
        if self.locks_queues:
            # Java ConsumeMessageOrderlyService.start → lockMQPeriodically; also for the
            # orderly iterator, which pulls only queues it holds
            self.spawn(self.lock_all_periodically(), "lock-renew")
        self.consume_service.start()

    async def close(self, timeout: float) -> None:
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return
        if self.closing:
            return
        self.closing = True
        pulls = [pq.pull_task for pq in self.process_queue_table.values() if pq.pull_task is not None]
        for t in pulls:
            t.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        await self.consume_service.wait_idle(timeout)
        await close_hooks(self.consume_hooks)
        await self._stop_base()
        await self._tasks.close()
        self.consume_service.stop()
        self.state = ServiceState.SHUTDOWN_ALREADY

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, f"rmq-{name}-{self.group}")

    # ---------------------------------------------------------------- pause / resume

    def pause(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Stop pulling every queue (``mqs`` None) or these queues (wire names)."""
        if mqs is None:
            self._resume.clear()
        else:
            self._paused_queues |= set(mqs)

    def resume(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Pull again: every queue (``mqs`` None: also those paused one by one) or these."""
        if mqs is None:
            self._paused_queues.clear()
            self._resume.set()
        else:
            self._paused_queues -= set(mqs)
        for pq in self.process_queue_table.values():
            pq.wakeup.set()  # a paused pull loop waits on it

    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    def report_error(self, exc: RMQError) -> None:
        """``on_error(exc)`` in a task of this consumer; without it, one error line per 10 s."""
        handler = self.options.on_error
        if handler is None:
            _rlog.warning(
                f"needs-application:{self.group}",
                "group %s: %s (no on_error handler; retrying)",
                self.group,
                clip(str(exc)),
            )
            return
        self.spawn(self._call_on_error(handler, exc), "on-error")

    async def _call_on_error(self, handler: ErrorHandler, exc: RMQError) -> None:
        try:
            res = handler(exc)
            if inspect.isawaitable(res):
                await res
        except Exception:
            log.exception("group %s: on_error handler raised", self.group)

    # ---------------------------------------------------------------- queues

    def _start_queue(self, pq: ProcessQueue) -> None:
        if self.pop_mode:
            pq.pull_task = self.spawn(self._pop_loop(pq), f"pop-{pq.mq.topic}@{pq.mq.broker_name}")
            return
        pq.pull_task = self.spawn(self._pull_loop(pq), f"pull-{pq.mq}")

    # ---------------------------------------------------------------- POP mode

    async def _rebalance_by_topic(self, topic: str) -> bool:
        """POP mode: no client rebalance (Java ``RebalanceImpl`` with clientRebalance false):
        this member pops every broker of the topic, queue id -1. PULL mode: Java's rebalance."""
        if not self.pop_mode:
            return await super()._rebalance_by_topic(topic)
        inst = self._instance
        assert inst is not None
        mine = set(pop_queues(self, topic))
        if not mine:
            await inst.update_topic_route(topic)
            mine = set(pop_queues(self, topic))
        if not mine:
            log.warning("group %s: no route for subscribed topic %s yet", self.group, topic)
            self.note_failure(
                f"route:{topic}", TopicNotExistError(17, f"No route info of this topic: {self.ns.unwrap(topic)}")
            )
            return False
        self.note_success(f"route:{topic}")
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic == topic and mq not in mine:
                pq.dropped = True
                if pq.pull_task is not None:
                    pq.pull_task.cancel()
                del self.process_queue_table[mq]
        added = sorted(mine - set(self.process_queue_table))
        for mq in added:
            pq = ProcessQueue(mq, 0)
            self.process_queue_table[mq] = pq
            self._start_queue(pq)
        if added:
            log.info("group %s: popping %s from %s", self.group, topic, sorted(m.broker_name for m in mine))
        return True

    async def _pop_loop(self, pq: ProcessQueue) -> None:
        """Pop one broker until dropped (Java ``DefaultMQPushConsumerImpl.popMessage``): flow
        control on the messages in flight, a long-polling POP, the messages to the consume
        service. Errors wait 3 s and try again."""
        mq = pq.mq
        opts = self.options
        pops = self.pops
        assert pops is not None
        while not pq.dropped:
            if not self._resume.is_set():
                await wait_event(self._resume, PAUSED_DELAY)
                continue
            if mq in self._paused_queues:
                pq.wakeup.clear()
                await wait_event(pq.wakeup, PAUSED_DELAY)
                continue
            if pq.pop_inflight > opts.pop_threshold_for_queue:
                self._flow_control_times += 1
                self.stats["flow_controlled"] += 1
                pq.wakeup.clear()
                await wait_event(pq.wakeup, FLOW_CONTROL_DELAY)
                continue
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            pq.last_pull_time = began = time.monotonic()
            try:
                result = await pops.pop(
                    mq,
                    sub,
                    max_nums=opts.pop_batch_size,
                    invisible_time=opts.pop_invisible_time,
                    poll_time=BROKER_SUSPEND_MAX_TIME,
                    order=self.orderly,
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure: wait and pop again
                self.stats["pull_errors"] += 1
                _rlog.warning(
                    f"pop-failed:{self.group}",
                    "group %s: pop of %s from %s failed: %s",
                    self.group,
                    mq.topic,
                    mq.broker_name,
                    clip(repr(e)),
                )
                await self._on_pull_error(mq, e)  # a broker that cannot be reached: fresh route
                self.note_failure(f"pull:{mq.topic}", e)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            self.note_success(f"pull:{mq.topic}")
            if pq.dropped:
                break  # what we popped comes back after its invisible time
            if result.status is PopStatus.FOUND:
                self.consume_stats.inc_pull_rt(mq.topic, (time.monotonic() - began) * 1000)
                if result.messages:
                    self.stats["pulled"] += len(result.messages)
                    self.consume_stats.inc_pull_tps(mq.topic, len(result.messages))
                    await self.consume_service.submit(pq, result.messages)
                if opts.pull_interval:
                    await asyncio.sleep(opts.pull_interval)
            elif result.status is PopStatus.POLLING_FULL:
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)

    async def _on_message_queue_changed(self, topic: str, mine: set[MessageQueue]) -> None:
        """Java ``RebalancePushImpl.messageQueueChanged``: with a topic threshold, each queue
        may cache ``max(1, threshold // queues owned)`` (every topic's queues, the retry
        topic's included, as Java counts its processQueueTable)."""
        count = len(self.process_queue_table)
        if count == 0:
            return
        opts = self.options
        if opts.pull_threshold_for_topic != -1:
            self.pull_threshold_for_queue = max(1, opts.pull_threshold_for_topic // count)
        if opts.pull_threshold_size_for_topic != -1:
            self.pull_threshold_size_for_queue = max(1, opts.pull_threshold_size_for_topic // count)

    async def _lock_new_queue(self, mq: MessageQueue) -> bool:
        if not self.locks_queues:
            return True
        if mq in await self.lock_batch([mq]):
            return True
        # The previous owner has not unlocked it yet (it does so right after its own rebalance).
        # Try again in a moment rather than at the next 20 s rebalance.
        if self._relock_task is None or self._relock_task.done():
            self._relock_task = self.spawn(self._rebalance_soon(), "relock")
        return False

    async def _rebalance_soon(self) -> None:
        await asyncio.sleep(RELOCK_DELAY)
        if self.active and self._instance is not None:
            self._instance.rebalance_immediately()

    async def lock_batch(self, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ on each queue's master; marks our ProcessQueues; returns the locked ones."""
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

    async def lock_all_periodically(self) -> None:
        """Orderly clustering: renew the broker locks of all our queues every 20 s (Java
        ``ConsumeMessageOrderlyService.lockMQPeriodically`` → ``RebalanceImpl.lockAll``)."""
        while True:
            await asyncio.sleep(LOCK_RENEW_INTERVAL)
            mqs = [mq for mq, pq in self.process_queue_table.items() if not pq.dropped]
            if mqs:
                await self.lock_batch(mqs)

    async def _remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if self.locks_queues:
            # Do not give the queue away while a handler runs on it: the next owner could
            # otherwise consume the same message concurrently. Retried at the next rebalance.
            try:
                async with asyncio.timeout(1.0):
                    await pq.consume_lock.acquire()
            except TimeoutError:
                return False
            try:
                await super()._remove_unnecessary_queue(mq, pq)
                await self._unlock([mq])
                return True
            finally:
                pq.consume_lock.release()
        return await super()._remove_unnecessary_queue(mq, pq)

    async def _on_queues_removed(self, mqs: list[MessageQueue]) -> None:
        if self.locks_queues and mqs:
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
        opts = self.options
        assert self.offset_store is not None
        while not pq.dropped:
            if not self._resume.is_set():
                await wait_event(self._resume, PAUSED_DELAY)
                continue
            if mq in self._paused_queues:
                pq.wakeup.clear()
                await wait_event(pq.wakeup, PAUSED_DELAY)
                continue
            if (
                pq.msg_count > self.pull_threshold_for_queue
                or pq.msg_size // (1024 * 1024) > self.pull_threshold_size_for_queue
                or (not self.orderly and pq.max_span > opts.consume_concurrently_max_span)
            ):
                self._flow_control_times += 1
                self.stats["flow_controlled"] += 1
                if self._flow_control_times % 1000 == 1:
                    log.info(
                        "group %s: flow control on %s: %d msgs, %d bytes, span %d",
                        self.group,
                        mq,
                        pq.msg_count,
                        pq.msg_size,
                        pq.max_span,
                    )
                pq.wakeup.clear()
                await wait_event(pq.wakeup, FLOW_CONTROL_DELAY)
                continue
            if self.locks_queues:
                if (not pq.locked or pq.lock_expired()) and mq not in await self.lock_batch([mq]):
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
            pq.last_pull_time = began = time.monotonic()
            try:
                result = await self._pull(
                    mq,
                    pq.next_offset,
                    sub,
                    max_nums=self.pull_batch_size,
                    suspend=True,
                    commit_offset=commit_offset,
                    post_subscription=opts.post_subscription_when_pull,
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any failure: wait and pull again
                self.stats["pull_errors"] += 1
                _rlog.warning(
                    f"pull-failed:{self.group}",
                    "group %s: pull of %s at %d failed: %s",
                    self.group,
                    mq,
                    pq.next_offset,
                    clip(repr(e)),
                )
                await self._on_pull_error(mq, e)
                self.note_failure(f"pull:{mq.topic}", e)
                await asyncio.sleep(PULL_DELAY_WHEN_EXCEPTION)
                continue
            self.note_success(f"pull:{mq.topic}")
            if pq.dropped:
                break
            status = result.status
            if status is PullStatus.FOUND:
                pq.next_offset = result.next_begin_offset
                # Java PullCallback.onSuccess: pull RT of every FOUND pull, TPS of what it found
                self.consume_stats.inc_pull_rt(mq.topic, (time.monotonic() - began) * 1000)
                if result.messages:
                    self.stats["pulled"] += len(result.messages)
                    self.consume_stats.inc_pull_tps(mq.topic, len(result.messages))
                    pq.put_messages(result.messages)
                    await self.consume_service.submit(pq, result.messages)
                elif not pq.msgs and not pq.consuming_msgs:
                    self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
                if opts.pull_interval:
                    await asyncio.sleep(opts.pull_interval)
            elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                pq.next_offset = result.next_begin_offset
                if not pq.msgs and not pq.consuming_msgs:
                    # nothing cached: what we skipped (filtered or nothing) is consumed
                    self.offset_store.update(mq, result.next_begin_offset, increase_only=True)
            else:  # OFFSET_ILLEGAL
                log.warning(
                    "group %s: offset %d of %s is illegal (min %d, max %d); dropping the queue, "
                    "its offset becomes %d in %.0f s",
                    self.group,
                    pq.next_offset,
                    mq,
                    result.min_offset,
                    result.max_offset,
                    result.next_begin_offset,
                    OFFSET_ILLEGAL_FIX_DELAY,
                )
                # Java: set the next offset, drop the process queue, and 10 s later persist the
                # offset and remove the queue (the next rebalance takes it again from there)
                pq.next_offset = result.next_begin_offset
                pq.dropped = True
                pq.offset_fix_pending = True
                self.spawn(self._fix_illegal_offset(pq), f"fix-offset-{mq}")
                return

    async def _fix_illegal_offset(self, pq: ProcessQueue) -> None:
        """The delayed half of OFFSET_ILLEGAL (Java ``pullMessage``'s ``executeTaskLater``):
        store and persist the corrected offset, then remove the queue so that a rebalance
        starts it again at that offset. Java's waits for the next 20 s rebalance; we ask for
        one at once."""
        await asyncio.sleep(OFFSET_ILLEGAL_FIX_DELAY)
        mq = pq.mq
        assert self.offset_store is not None
        try:
            self.offset_store.update(mq, pq.next_offset, increase_only=False)
            await self.offset_store.persist(mq)
        except RMQError as e:
            log.warning("group %s: persisting the corrected offset of %s failed: %r", self.group, mq, e)
        pq.offset_fix_pending = False
        if self.process_queue_table.get(mq) is pq:
            # Java RebalanceImpl.removeProcessQueue → removeUnnecessaryMessageQueue
            del self.process_queue_table[mq]
            pq.clear()
            await self._remove_unnecessary_queue(mq, pq)
            log.warning("group %s: fixed the pull offset of %s to %d", self.group, mq, pq.next_offset)
        if self.active and self._instance is not None:
            self._instance.rebalance_immediately()

    # ---------------------------------------------------------------- send back

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0) -> bool:
        """CONSUMER_SEND_MSG_BACK: the broker puts a copy in ``%RETRY%group`` (delay level
        3 + reconsume times when ``delay_level`` is 0) or in ``%DLQ%group`` after
        ``max_reconsume_times``. Returns False when it failed (the caller retries locally)."""
        inst = self._instance
        assert inst is not None
        addr = inst.find_broker_address_in_publish(msg.broker_name) or msg.store_host
        try:
            await inst.api.consumer_send_msg_back(
                addr,
                group=self.group,
                commit_log_offset=msg.commit_log_offset,
                delay_level=delay_level,
                origin_msg_id=msg.msg_id,
                origin_topic=msg.topic,
                max_reconsume_times=self.max_reconsume_times if self.max_reconsume_times >= 0 else 16,
            )
        except RMQError as e:
            # per failed message: one line per group per 10 s with a count
            _rlog.warning(
                f"send-back-failed:{self.group}",
                "group %s: send back of %s failed, retrying locally: %r",
                self.group,
                msg.msg_id,
                e,
            )
            return False
        self.stats["sent_back"] += 1
        return True

    # ---------------------------------------------------------------- broker → client requests

    def running_info(self) -> dict[str, Any]:
        info = super().running_info()
        info["properties"]["PROP_THREADPOOL_CORE_SIZE"] = str(self.options.consume_threads)
        # Java DefaultMQPushConsumerImpl.consumerRunningInfo: ConsumeStatus per subscribed topic
        info["statusTable"] = {t: self.consume_stats.consume_status(t) for t in self.subscriptions}
        return info

    def count_consumed(self, topic: str, msgs: int, ok: bool) -> None:
        """``msgs`` messages of ``topic`` (the pulled queue's) were consumed (``ok``) or failed:
        the counters and Java's consume OK / failed TPS (``processConsumeResult``)."""
        if ok:
            self.stats["consumed_ok"] += msgs
            self.consume_stats.inc_consume_ok(topic, msgs)
        else:
            self.stats["consumed_failed"] += msgs
            self.consume_stats.inc_consume_failed(topic, msgs)

    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY (from an admin tool): run the handler on ``msg`` now."""
        return await self.consume_service.consume_message_directly(msg)


class PushConsumer(ConsumerFacade[PushConsumerImpl]):
    """An asyncio push consumer (Java ``DefaultMQPushConsumer``).

    Args:
        namesrv_addr: name server address(es), ``"host:port"``, ``"a:1;b:2"`` or a list.
        group: consumer group (``^[%|a-zA-Z0-9_-]+$``, ≤ 255 chars, not ``DEFAULT_CONSUMER``).
        handler: ``async def handler(msg) -> ConsumeResult | None`` (a plain function works
            too); ``None``/``SUCCESS`` acks, ``RECONSUME_LATER`` or an exception means "consume
            later". Default None: iterate the consumer with ``async for`` instead.
        batch_handler: like ``handler`` but receives a list of up to ``consume_batch_size``
            messages of one queue. Give at most one of the two.
        orderly: consume each queue in order, one message at a time per queue, under a broker
            lock (LOCK_BATCH_MQ) in clustering mode; default False (concurrently).
        options: a :class:`PushConsumerOptions` with all the settings below; give either it or
            the keyword arguments. Default None: built from the keyword arguments.
        message_model: ``CLUSTERING`` (default) or ``BROADCASTING``.
        consume_from_where: where a group with no stored offset starts; default
            ``CONSUME_FROM_LAST_OFFSET``.
        consume_timestamp: ms since the epoch for ``CONSUME_FROM_TIMESTAMP``; default 30 min ago.
        allocate_strategy: ``"AVG"`` (default), ``"AVG_BY_CIRCLE"``, ``"CONSISTENT_HASH"`` or a
            callable ``(group, cid, mqs, cids) -> list[MessageQueue]``.
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``,
            which clustering turns into ``pid#nanotime`` (Java ``changeInstanceNameToPID``:
            client id ``ip@pid#nanotime``, an instance of its own). Two consumers of one group
            in one process need different names unless DEFAULT.
        client_ip: address in the client id; default: the one used to reach the name server.
        consume_concurrency: handler tasks running at once, [1, 1000]; default 20.
        consume_thread_min: Java ``consumeThreadMin``, [1, 1000]; given, the number of handler
            tasks instead of ``consume_concurrency``. Default None.
        consume_thread_max: Java ``consumeThreadMax``, [1, 1000], not below the minimum;
            checked only (Java's pool never grows past its core size). Default None.
        pull_threshold_for_topic: cached messages per topic, [1, 6553500] or -1 (default: none);
            set, each queue's threshold becomes ``max(1, it // queues owned)`` after a
            rebalance that changed the queues (Java ``pullThresholdForTopic``).
        pull_threshold_size_for_topic: cached MiB per topic, [1, 102400] or -1 (default),
            divided over the queues the same way (Java ``pullThresholdSizeForTopic``).
        post_subscription_when_pull: send the subscription with every pull (Java
            ``postSubscriptionWhenPull``); default False: the broker filters by the heartbeat's
            subscription and answers SUBSCRIPTION_NOT_LATEST until a newer one arrives.
        consume_batch_size: messages per handler call, [1, 1024]; default 1.
        pull_batch_size: messages per pull, [1, 1024]; default 32.
        pull_interval: seconds between pulls of a queue, [0, 65.535]; default 0.
        pull_threshold_for_queue: cached messages per queue before pulling pauses, [1, 65535];
            default 1000.
        pull_threshold_size_for_queue: cached MiB per queue, [1, 1024]; default 100.
        consume_concurrently_max_span: largest offset span cached per queue (concurrently),
            [1, 65535]; default 2000.
        max_reconsume_times: deliveries before a message goes to ``%DLQ%group``; default None =
            16 concurrently, -1 (retry in place forever) orderly.
        suspend_current_queue_time: orderly: pause after a failure, seconds, [0, 60]; default 1.0.
        offset_store_dir: broadcasting: directory of the local offset file; default
            ``$RMQ_CLIENT_OFFSET_DIR`` or ``~/.rmq_offsets``.
        iterator_buffer: iterator mode: messages handed to ``async for`` ahead of it; default 256.
        delay_level_when_next_consume: delay level (1..18) of a message sent back after a failed
            concurrent consumption; default 0 = the broker's choice, 3 + reconsume times (10 s,
            30 s, 1 min …).
        on_rebalance: ``fn(topic, queues)`` (sync or async), called after this member's queues of
            ``topic`` changed, with the queues it now owns; or a
            :class:`rmq.ConsumerRebalanceListener`, told the revoked queues before they are
            dropped and the assigned ones after they started. Default None.
        consume_timeout: seconds a handler call may run (Java ``consumeTimeout``), (0, 86400];
            default 900 (15 min). Past it the call is cancelled and counts as failed: its
            messages go back to the broker with delay level 3 (Java
            ``ProcessQueue.cleanExpiredMsg``), with a warning. Orderly consumers have none (as
            in Java), nor does ``async for``.
        on_error: ``fn(error)`` (sync or async), called with the :class:`rmq.errors.RMQError`
            after ``error_retries`` failures in a row that need the application
            (SubscriptionGroupNotExistError, TopicNotExistError, NoPermissionError, RouteError);
            the consumer keeps retrying. Default None: an error line per 10 s.
        error_retries: failures in a row before ``on_error``, [1, 1000]; default 5.
        namespace: Java's client namespace: the broker sees ``namespace%topic`` and
            ``namespace%group`` (retry topic ``%RETRY%namespace%group``); messages, queues and
            ``group`` carry the plain names. Default None.
        access_key: ACL accessKey; every request is then signed as Java's ``AclClientRPCHook``
            does (brokers with ``aclEnable=true``); default None = unsigned.
        secret_key: the account's secretKey, given together with ``access_key``; default None.
        security_token: optional ``SecurityToken`` sent with each signed request; default None.
        tls: ``True`` to connect over TLS, verifying the servers' certificates against the
            system's trust store; an ``ssl.SSLContext`` for your own CA or a client certificate
            (``rmq.remoting.tls.client_context(trust_cert_path=...)``); default None = plain TCP
            (Java ``useTLS``).
        trace: record SubBefore/SubAfter message traces of each consumption in the trace topic
            (Java's ``enableMsgTrace``), batched off the consume path; default False.
        trace_topic: the trace topic; default ``RMQ_SYS_TRACE_TOPIC``.
        value_deserializer: ``fn(body: bytes) -> value`` (aiokafka's); ``message.value`` calls
            it once, on first access (its failure raises :class:`rmq.errors.SerializationError`
            there; in a handler, a failed consumption: retried, then the DLQ). Default None:
            ``message.value`` is the body.
        consume_mode: ``ConsumeMode.PULL`` (default; 4.x: the members split the queues, pulls
            from offsets) or ``ConsumeMode.POP`` (RocketMQ 5, Java ``setClientRebalance(false)``:
            every member pops every broker and the broker assigns each message; more members
            than queues all get messages). POP needs a handler and clustering; a consumed
            message is acked, a failed one kept invisible for ``pop_retry_delays`` and
            delivered again; ``orderly=True`` pops orderly (the broker holds a queue's next
            messages until these are acked).
        pop_invisible_time: POP: seconds a popped message stays invisible while the handler
            runs, [5, 300]; default 60 (Java ``popInvisibleTime``).
        pop_batch_size: POP: messages per pop, [1, 32]; default 32 (Java ``popBatchNums``).
        pop_threshold_for_queue: POP: messages of one broker in flight before popping pauses,
            [1, 65535]; default 96 (Java ``popThresholdForQueue``).
        pop_retry_delays: POP: seconds a failed message stays invisible, by its reconsume times;
            default Java's ``popDelayLevel`` (10, 30, 60, 120 … 7200).

    Raises:
        rmq.errors.ConfigError: a setting out of range or a bad group name or name server
            address (a ClientError and a ValueError naming the argument and its allowed values).
        rmq.errors.ClientError: both handlers, or ``options=`` together with keyword settings.
    """

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        *,
        handler: MessageHandler | None = None,
        batch_handler: BatchMessageHandler | None = None,
        orderly: bool = False,
        options: PushConsumerOptions | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        allocate_strategy: str | AllocateStrategy = "AVG",
        instance_name: str = "DEFAULT",
        client_ip: str | None = None,
        consume_concurrency: int = 20,
        consume_thread_min: int | None = None,
        consume_thread_max: int | None = None,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic: int = -1,
        post_subscription_when_pull: bool = False,
        consume_batch_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval: float = 0.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int | None = None,
        suspend_current_queue_time: float = 1.0,
        offset_store_dir: str | None = None,
        iterator_buffer: int = 256,
        delay_level_when_next_consume: int = 0,
        on_rebalance: RebalanceListener | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        consume_timeout: float = 900.0,
        on_error: ErrorHandler | None = None,
        error_retries: int = 5,
        namespace: str | None = None,
        trace: bool = False,
        trace_topic: str | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
        consume_mode: ConsumeMode = ConsumeMode.PULL,
        pop_invisible_time: float = 60.0,
        pop_batch_size: int = 32,
        pop_threshold_for_queue: int = 96,
        pop_retry_delays: tuple[float, ...] = POP_DELAY_LEVELS,
    ) -> None:
        opts = build_options(
            PushConsumerOptions,
            options,
            dict(
                value_deserializer=value_deserializer,
                consume_mode=consume_mode,
                pop_invisible_time=pop_invisible_time,
                pop_batch_size=pop_batch_size,
                pop_threshold_for_queue=pop_threshold_for_queue,
                pop_retry_delays=pop_retry_delays,
                consume_timeout=consume_timeout,
                on_error=on_error,
                error_retries=error_retries,
                namespace=namespace,
                message_model=message_model,
                consume_from_where=consume_from_where,
                consume_timestamp=consume_timestamp,
                allocate_strategy=allocate_strategy,
                instance_name=instance_name,
                client_ip=client_ip,
                pull_batch_size=pull_batch_size,
                offset_store_dir=offset_store_dir,
                on_rebalance=on_rebalance,
                consume_concurrency=consume_concurrency,
                consume_thread_min=consume_thread_min,
                consume_thread_max=consume_thread_max,
                pull_threshold_for_topic=pull_threshold_for_topic,
                pull_threshold_size_for_topic=pull_threshold_size_for_topic,
                post_subscription_when_pull=post_subscription_when_pull,
                consume_batch_size=consume_batch_size,
                pull_interval=pull_interval,
                pull_threshold_for_queue=pull_threshold_for_queue,
                pull_threshold_size_for_queue=pull_threshold_size_for_queue,
                consume_concurrently_max_span=consume_concurrently_max_span,
                max_reconsume_times=max_reconsume_times,
                suspend_current_queue_time=suspend_current_queue_time,
                iterator_buffer=iterator_buffer,
                delay_level_when_next_consume=delay_level_when_next_consume,
                access_key=access_key,
                secret_key=secret_key,
                security_token=security_token,
                tls=tls,
                trace=trace,
                trace_topic=trace_topic,
            ),
        )
        self._impl = PushConsumerImpl(
            namesrv_addr, group, opts, handler=handler, batch_handler=batch_handler, orderly=orderly
        )
        if opts.trace:
            from rmq.client.producer import Producer
            from rmq.client.trace import ConsumeMessageTraceHook, TraceDispatcher

            self.add_consume_hook(
                ConsumeMessageTraceHook(
                    TraceDispatcher(
                        namesrv_addr,
                        group,
                        "CONSUMER",
                        opts.trace_topic,
                        instance_name=opts.instance_name,
                        credentials=opts.credentials,
                        tls=opts.tls,
                        producer_factory=Producer,
                    )
                )
            )

    def add_consume_hook(self, hook: ConsumeMessageHook) -> None:
        """Call ``hook.consume_message_before(ctx)`` / ``consume_message_after(ctx)`` around
        every handler call, or around each message of ``async for`` (Java
        ``registerConsumeMessageHook``); see :mod:`rmq.client.hooks`. An exception in a hook is
        logged and does not affect the consumption."""
        if not (
            callable(getattr(hook, "consume_message_before", None))
            and callable(getattr(hook, "consume_message_after", None))
        ):
            raise ClientError("a consume hook needs consume_message_before(ctx) and consume_message_after(ctx)")
        self._impl.consume_hooks.append(hook)

    # ---------------------------------------------------------------- properties

    @property
    def options(self) -> PushConsumerOptions:
        """The settings (frozen)."""
        return self._impl.options

    @property
    def stats(self) -> dict[str, int]:
        """Counters: pulled, consumed_ok, consumed_failed, sent_back, local_retries, pull_errors,
        flow_controlled, consume_timeouts (a live dict; read, do not write)."""
        return self._impl.stats

    @property
    def paused(self) -> bool:
        """True between :meth:`pause` and :meth:`resume`."""
        return self._impl.paused

    # ---------------------------------------------------------------- subscription / lifecycle

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe to ``topic`` (without the namespace) with a tag expression (``"*"``,
        ``"TagA"``, ``"TagA || TagB"``) or a :class:`~rmq.MessageSelector`.

        May be called before or after start; a later call for the same topic replaces the
        expression. Raises ClientError for an illegal topic name or an empty expression."""
        self._impl.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (its queues are dropped at once when running)."""
        self._impl.unsubscribe(topic)

    async def start(self) -> None:
        """Join the group and start pulling.

        Raises:
            rmq.errors.ClientError: no subscription yet.
            rmq.errors.IllegalStateError: started before (a consumer starts once; after
                :meth:`close` or a failed start, create a new one).
        """
        await self._impl.start()

    async def close(self, timeout: float = 10.0) -> None:
        """Stop pulling, let the handler calls in progress finish (up to ``timeout`` seconds,
        default 10; unfinished ones are cancelled and their messages redelivered later), persist
        offsets, leave the group. Idempotent.

        In iterator mode the message last returned by ``async for`` is *not* acknowledged by
        ``close()`` (it is redelivered later); leaving ``async with`` without an exception
        acknowledges it."""
        await self._impl.close(timeout)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # In iterator mode the message the loop body was handling is acknowledged only when the
        # body finished without an error.
        svc = self._impl.consume_service
        if isinstance(svc, ConsumeMessageIteratorService):
            if exc_type is None:
                svc.ack_current()
            else:
                svc.forget_current()
        await self.close()

    # ---------------------------------------------------------------- pause / resume

    def pause(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Stop pulling every queue, or only ``queues`` (messages already pulled are still
        consumed; rebalance keeps the queues owned)."""
        self._impl.pause(None if queues is None else [self._impl.ns.wrap_mq(q) for q in queues])

    def resume(self, queues: Iterable[MessageQueue] | None = None) -> None:
        """Pull again after :meth:`pause`: every queue (also those paused one by one), or only
        ``queues``."""
        self._impl.resume(None if queues is None else [self._impl.ns.wrap_mq(q) for q in queues])

    def paused_queues(self) -> set[MessageQueue]:
        """The queues paused one by one (:meth:`pause` with queues)."""
        return self._impl.ns.unwrap_mqs(self._impl._paused_queues)

    def assignment(self) -> set[MessageQueue]:
        """The queues this member pulls now."""
        return self._impl.ns.unwrap_mqs(self._impl.process_queue_table)

    # ---------------------------------------------------------------- iterator mode

    def __aiter__(self) -> PushConsumer:
        """Iterator mode (a consumer without a handler); ClientError otherwise."""
        _ = self._impl.iterator  # raises for a consumer with a handler
        return self

    async def __anext__(self) -> MessageExt:
        return await self._impl.iterator.next()

    async def getone(self) -> MessageExt:
        """Iterator mode: the next message (the previous one counts as consumed).

        Raises IllegalStateError once the consumer is closed, ClientError if it has a handler."""
        try:
            return await self._impl.iterator.next()
        except StopAsyncIteration:
            raise IllegalStateError("consumer is closed") from None

    async def reconsume_later(self, msg: MessageExt | None = None) -> None:
        """Iterator mode: do not acknowledge the message ``async for`` returned last; hand it
        back instead (``%RETRY%group`` via the broker, or locally after 5 s; BROADCASTING: drop
        it), and go on with the next one.

        Raises ClientError if there is no current message, ``msg`` is not it, or the consumer
        is orderly (an orderly consumer cannot skip a message)."""
        await self._impl.iterator.reconsume_later(msg)
