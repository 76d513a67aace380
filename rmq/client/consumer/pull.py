"""The lite pull consumer: you ``poll`` for messages, ``seek`` and ``commit`` yourself.

Example::

    c = rmq.PullConsumer(namesrv_addr="127.0.0.1:9876", group="G")
    c.subscribe("T")                      # or: c.assign([mq, ...]) after fetch_message_queues()
    async with c:
        msgs = await c.poll(timeout=1.0)
        await c.commit()

Like Java's ``DefaultLitePullConsumer``: a background task per queue pulls ahead (long
polling) into a buffer; ``poll`` takes from it and advances the consumed position of each queue;
``commit`` (or auto-commit every ``auto_commit_interval``) writes those positions to the broker
(or to a local file when broadcasting).

:class:`PullConsumer` is the application's object; it holds a :class:`PullConsumerImpl`, which
the client instance drives.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from rmq.client.instance import subscribe_queues
from rmq.client.selector import MessageSelector
from rmq.common.log import RateLimitedLog, clip
from rmq.common.tasks import BackgroundTasks, wait_event
from rmq.errors import ClientError, RMQError, TopicNotExistError
from rmq.types import ConsumeFromWhere, MessageExt, MessageModel, MessageQueue, PullStatus, ServiceState

from .allocate import AllocateStrategy
from .base import PULL_DELAY_WHEN_EXCEPTION, ConsumerBase, ConsumerFacade, SubscriptionData
from .offset_store import ReadOffsetType
from .options import PullConsumerOptions, RebalanceListener, build_options
from .process_queue import ProcessQueue

__all__ = ["PullConsumer", "PullConsumerImpl"]

log = logging.getLogger("rmq.client")
# per-request failures repeat during an outage: one line per kind per 10 s, with a count
_rlog = RateLimitedLog(log)

PAUSED_DELAY = 1.0
FLOW_CONTROL_DELAY = 0.05


class _Batch:
    __slots__ = ("pq", "msgs")

    def __init__(self, pq: ProcessQueue | None, msgs: list[MessageExt]) -> None:
        self.pq = pq
        self.msgs = msgs


class PullConsumerImpl(ConsumerBase):
    """The lite pull consumer's machinery (Java ``DefaultLitePullConsumerImpl``): subscribe or
    assign mode, one fetch task per queue into a shared buffer, consumed positions per queue."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, namesrv_addr: str | list[str], group: str, options: PullConsumerOptions) -> None:
        super().__init__(namesrv_addr, group, options)
        self.options: PullConsumerOptions = options
        self._assigned: set[MessageQueue] | None = None  # None = subscribe mode
        self._paused: set[MessageQueue] = set()
        self._resume = asyncio.Event()
        self._buffer: asyncio.Queue[_Batch] = asyncio.Queue()
        self._buffered = 0
        self._consumed: dict[MessageQueue, int] = {}  # next offset after what poll returned
        self._pending_seek: dict[MessageQueue, int] = {}
        self._held: dict[MessageQueue, list[_Batch]] = {}  # taken from the buffer while paused
        self._last_commit = time.monotonic()
        self._tasks = BackgroundTasks(f"group {group}", log)
        self._assign_subs: dict[str, SubscriptionData] = {}
        #: a persistent failure the next poll raises (see ConsumerBase.note_failure)
        self._error: RMQError | None = None

    # ---------------------------------------------------------------- subscription / assignment

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe (group-managed queues). Not combinable with :meth:`assign`."""
        if self._assigned is not None:
            raise ClientError("subscribe() and assign() cannot be mixed on one consumer")
        super().subscribe(topic, expression)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no group rebalance). Replaces the previous assignment."""
        if self.subscriptions:
            raise ClientError("subscribe() and assign() cannot be mixed on one consumer")
        self._assigned = set(mqs)
        if self.active:
            self.spawn(self._apply_assignment(), "assign")

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer currently pulls."""
        return set(self.process_queue_table)

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """All readable queues of ``topic`` (sorted)."""
        inst = self.check_running()
        await inst.update_topic_route(topic)
        route = inst.topic_route_table.get(topic)
        if route is None:
            raise TopicNotExistError(17, f"No route info of this topic: {topic}")
        return sorted(subscribe_queues(topic, route))

    def _assign_sub(self, topic: str) -> SubscriptionData:
        sub = self._assign_subs.get(topic)
        if sub is None:
            sub = self._assign_subs[topic] = SubscriptionData.build(topic, "*")
        return sub

    def subscribed_topics(self) -> set[str]:
        if self._assigned is not None:
            return {mq.topic for mq in self._assigned}
        return super().subscribed_topics()

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self.subscriptions:
            self.topic_subscribe_info[topic] = set(mqs)

    async def do_rebalance(self) -> None:
        if self._assigned is None:
            await super().do_rebalance()

    async def _apply_assignment(self) -> None:
        async with self._rebalance_lock:
            wanted = set(self._assigned or ())
            for mq in [m for m in self.process_queue_table if m not in wanted]:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                await self._remove_unnecessary_queue(mq, pq)
                self._consumed.pop(mq, None)
            for mq in sorted(wanted - set(self.process_queue_table)):
                try:
                    offset = self._pending_seek.pop(mq, None)
                    if offset is None:
                        offset = await self.compute_pull_from_where(mq)
                except RMQError as e:
                    log.warning("group %s: start offset of %s unknown: %r", self.group, mq, e)
                    continue
                pq = ProcessQueue(mq, offset)
                self.process_queue_table[mq] = pq
                self._start_queue(pq)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        await self._start_base()
        self._resume.set()
        if self._assigned is not None:
            await self._apply_assignment()

    async def close(self) -> None:
        if self.state is not ServiceState.RUNNING:
            if self.state is ServiceState.CREATE_JUST:
                self.state = ServiceState.SHUTDOWN_ALREADY
            return
        if self.closing:
            return
        if self.options.auto_commit:
            self._copy_consumed_to_store()
        self.closing = True
        await self._stop_base()
        await self._tasks.close()
        self.state = ServiceState.SHUTDOWN_ALREADY

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, f"rmq-{name}-{self.group}")

    def _start_queue(self, pq: ProcessQueue) -> None:
        pq.pull_task = self.spawn(self._pull_loop(pq), f"litepull-{pq.mq}")

    async def _remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        if self.options.auto_commit and mq in self._consumed:
            assert self.offset_store is not None
            self.offset_store.update(mq, self._consumed[mq])
        self._consumed.pop(mq, None)
        return await super()._remove_unnecessary_queue(mq, pq)

    async def persist_consumer_offset(self) -> None:
        if self.options.auto_commit:
            self._copy_consumed_to_store()
        await super().persist_consumer_offset()

    def _copy_consumed_to_store(self) -> None:
        assert self.offset_store is not None
        for mq, off in self._consumed.items():
            if mq in self.process_queue_table:
                self.offset_store.update(mq, off)

    # ---------------------------------------------------------------- pulling

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        mq = pq.mq
        while not pq.dropped:
            if mq in self._paused:
                self._resume.clear()
                await wait_event(self._resume, PAUSED_DELAY)
                continue
            if (
                pq.msg_count > self.options.pull_threshold_for_queue
                or self._buffered > self.options.pull_threshold_for_all
            ):
                pq.wakeup.clear()
                await wait_event(pq.wakeup, FLOW_CONTROL_DELAY)
                continue
            # assign mode has no group subscription: the pull carries "*" itself (subscription
            # flag set), so the broker does not look for one from our heartbeat
            sub = self.subscriptions.get(mq.topic) or self._assign_sub(mq.topic)
            try:
                result = await self._pull(mq, pq.next_offset, sub, max_nums=self.pull_batch_size, suspend=True)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - wait and pull again
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
                return
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "group %s: offset %d of %s is illegal; moving to %d",
                    self.group,
                    pq.next_offset,
                    mq,
                    result.next_begin_offset,
                )
            pq.next_offset = result.next_begin_offset
            if result.messages:
                pq.put_messages(result.messages)
                self._buffered += len(result.messages)
                self._buffer.put_nowait(_Batch(pq, result.messages))
            elif not pq.msgs and mq not in self._consumed:
                self._consumed[mq] = result.next_begin_offset

    # ---------------------------------------------------------------- poll / iterate

    async def poll(self, timeout: float | None = None, max_messages: int | None = None) -> list[MessageExt]:
        """Up to ``max_messages`` (default ``pull_batch_size``) buffered messages, waiting at most
        ``timeout`` seconds (default ``poll_timeout``) for the first; ``[]`` on timeout.

        The consumed position of each queue moves past what is returned; it reaches the broker
        on :meth:`commit` (or the next auto-commit)."""
        self.check_running()
        self._raise_error()
        limit = max_messages or self.pull_batch_size
        timeout = self.options.poll_timeout if timeout is None else timeout
        out: list[MessageExt] = []
        deadline = time.monotonic() + timeout
        while not out:
            remaining = deadline - time.monotonic()
            try:
                async with asyncio.timeout(max(remaining, 0)):
                    batch = await self._buffer.get()
            except TimeoutError:
                break
            if batch.pq is None:  # report_error's wake-up
                self._raise_error()
                continue
            self._take(batch, out, limit)
            for _ in range(self._buffer.qsize()):
                if len(out) >= limit:
                    break
                self._take(self._buffer.get_nowait(), out, limit)
        if self.options.auto_commit and time.monotonic() - self._last_commit >= self.options.auto_commit_interval:
            await self.commit()
        return out

    def report_error(self, exc: RMQError) -> None:
        """The next (or the waiting) ``poll`` raises ``exc``."""
        super().report_error(exc)
        self._error = exc
        self._buffer.put_nowait(_Batch(None, []))

    def _raise_error(self) -> None:
        exc, self._error = self._error, None
        if exc is not None:
            raise exc

    def _take(self, batch: _Batch, out: list[MessageExt], limit: int) -> None:
        self._buffered -= len(batch.msgs)
        pq = batch.pq
        if pq is None or pq.dropped:
            return
        if pq.mq in self._paused:
            # paused after pulling: hold the messages back until resume()
            self._buffered += len(batch.msgs)
            self._held.setdefault(pq.mq, []).append(batch)
            return
        room = limit - len(out)
        taken, rest = batch.msgs[:room], batch.msgs[room:]
        if rest:
            self._buffered += len(rest)
            # keep queue order: the rest must come before anything pulled later for this queue
            q = self._buffer
            items = [_Batch(pq, rest)]
            while not q.empty():
                items.append(q.get_nowait())
            for it in items:
                q.put_nowait(it)
        out.extend(self.app_messages(taken))
        offset = pq.remove_messages(taken)
        if offset >= 0:
            self._consumed[pq.mq] = offset

    async def next(self) -> MessageExt:
        """``async for``: the next message; StopAsyncIteration once closed."""
        while True:
            if not self.active:
                raise StopAsyncIteration
            msgs = await self.poll(timeout=1.0, max_messages=1)
            if msgs:
                return msgs[0]

    # ---------------------------------------------------------------- seek / commit / pause

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next (buffered messages of it are discarded).

        Raises ClientError if ``mq`` is not assigned to this consumer or ``offset`` is outside
        [min, max] of the queue."""
        inst = self.check_running()
        assigned = set(self.process_queue_table) | (self._assigned or set())
        if mq not in assigned:
            raise ClientError(f"{mq} is not assigned to this consumer; assigned: {sorted(str(m) for m in assigned)}")
        addr = await self._admin_addr(mq)
        lo, hi = await inst.api.get_min_offset(addr, mq), await inst.api.get_max_offset(addr, mq)
        if not lo <= offset <= hi:
            raise ClientError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        async with self._rebalance_lock:
            old = self.process_queue_table.get(mq)
            if old is None:
                self._pending_seek[mq] = offset
                return
            old.dropped = True
            if old.pull_task is not None:
                old.pull_task.cancel()
            pq = ProcessQueue(mq, offset)
            self.process_queue_table[mq] = pq
            self._consumed[mq] = offset
            assert self.offset_store is not None
            self.offset_store.update(mq, offset, increase_only=False)
            self._start_queue(pq)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.check_running().api.get_min_offset(await self._admin_addr(mq), mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.check_running().api.get_max_offset(await self._admin_addr(mq), mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return await self.check_running().api.search_offset(await self._admin_addr(mq), mq, timestamp_ms)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Write consumed positions to the offset store and persist them now.

        Args:
            offsets: explicit next-offsets per queue; default: the positions reached by ``poll``.
        """
        self.check_running()
        assert self.offset_store is not None
        table = dict(self._consumed) if offsets is None else dict(offsets)
        for mq, off in table.items():
            self.offset_store.update(mq, off, increase_only=False)
            if offsets is not None:
                self._consumed[mq] = off
        await self.offset_store.persist_all(list(table))
        self._last_commit = time.monotonic()

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for ``mq`` (on the broker, or the local file when broadcasting);
        -1 when none."""
        self.check_running()
        assert self.offset_store is not None
        return await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop returning and pulling messages of these queues until :meth:`resume`."""
        self._paused |= set(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            self._paused.discard(mq)
            for batch in self._held.pop(mq, []):
                self._buffer.put_nowait(batch)  # still counted in _buffered
        self._resume.set()

    def paused(self) -> set[MessageQueue]:
        return set(self._paused)


class PullConsumer(ConsumerFacade[PullConsumerImpl]):
    """An asyncio lite pull consumer (Java ``DefaultLitePullConsumer``).

    Args:
        namesrv_addr: name server address(es), ``"host:port"``, ``"a:1;b:2"`` or a list.
        group: consumer group (same rules as the push consumer).
        options: a :class:`PullConsumerOptions` with all the settings below; give either it or
            the keyword arguments. Default None: built from the keyword arguments.
        message_model: ``CLUSTERING`` (default; ``subscribe`` shares queues with the group) or
            ``BROADCASTING`` (every member gets every queue; offsets in a local file).
        consume_from_where: start of a queue without a stored offset; default
            ``CONSUME_FROM_LAST_OFFSET``.
        consume_timestamp: ms since the epoch for CONSUME_FROM_TIMESTAMP; default 30 min ago.
        allocate_strategy: as for :class:`rmq.PushConsumer`; default ``"AVG"``.
        instance_name: part of the client id ``ip@pid#instance_name``; default ``"DEFAULT"``.
        client_ip: address in the client id; default: the one used to reach the name server.
        auto_commit: commit consumed positions every ``auto_commit_interval`` s; default True.
        auto_commit_interval: seconds, >= 1; default 5.0.
        pull_batch_size: messages per pull and the default ``poll`` maximum, [1, 1024]; default 32.
        pull_threshold_for_queue: messages buffered per queue before its pulling pauses,
            [1, 65535]; default 1000.
        pull_threshold_for_all: messages buffered in total before pulling pauses, [1, 6553500];
            default 10000.
        poll_timeout: default ``poll`` timeout, seconds; default 5.0.
        offset_store_dir: broadcasting: directory of the local offset file; default
            ``$RMQ_CLIENT_OFFSET_DIR`` or ``~/.rmq_offsets``.
        on_rebalance: ``fn(topic, queues)`` (sync or async) after the queues of ``topic`` owned by
            this member changed (subscribe mode); or a :class:`rmq.ConsumerRebalanceListener`,
            told the revoked queues before they are dropped (commit them there) and the
            assigned ones after they started. Default None.
        error_retries: failures in a row that need the application (SubscriptionGroupNotExistError,
            TopicNotExistError, NoPermissionError, RouteError) before :meth:`poll` raises the
            last one, [1, 1000]; default 5. The consumer keeps retrying after it raised.
        namespace: Java's client namespace: the broker sees ``namespace%topic`` and
            ``namespace%group``; messages, queues and ``group`` carry the plain names.
            Default None.
        access_key: ACL accessKey; every request is then signed as Java's ``AclClientRPCHook``
            does (brokers with ``aclEnable=true``); default None = unsigned.
        secret_key: the account's secretKey, given together with ``access_key``; default None.
        security_token: optional ``SecurityToken`` sent with each signed request; default None.
        tls: ``True`` to connect over TLS, verifying the servers' certificates against the
            system's trust store; an ``ssl.SSLContext`` for your own CA or a client certificate
            (``rmq.remoting.tls.client_context(trust_cert_path=...)``); default None = plain TCP
            (Java ``useTLS``).
        value_deserializer: ``fn(body: bytes) -> value`` (aiokafka's); ``message.value`` calls
            it once, on first access (its failure raises :class:`rmq.errors.SerializationError`
            there). Default None: ``message.value`` is the body.

    Raises:
        rmq.errors.ConfigError: a setting out of range or a bad group name or name server
            address (a ClientError and a ValueError naming the argument and its allowed values).
        rmq.errors.ClientError: ``options=`` together with keyword settings.
    """

    def __init__(
        self,
        namesrv_addr: str | list[str],
        group: str,
        *,
        options: PullConsumerOptions | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | None = None,
        allocate_strategy: str | AllocateStrategy = "AVG",
        instance_name: str = "DEFAULT",
        client_ip: str | None = None,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_for_all: int = 10000,
        poll_timeout: float = 5.0,
        offset_store_dir: str | None = None,
        on_rebalance: RebalanceListener | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        security_token: str | None = None,
        tls: bool | ssl.SSLContext | None = None,
        error_retries: int = 5,
        namespace: str | None = None,
        value_deserializer: Callable[[bytes], Any] | None = None,
    ) -> None:
        opts = build_options(
            PullConsumerOptions,
            options,
            dict(
                value_deserializer=value_deserializer,
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
                auto_commit=auto_commit,
                auto_commit_interval=auto_commit_interval,
                pull_threshold_for_queue=pull_threshold_for_queue,
                pull_threshold_for_all=pull_threshold_for_all,
                poll_timeout=poll_timeout,
                access_key=access_key,
                secret_key=secret_key,
                security_token=security_token,
                tls=tls,
            ),
        )
        self._impl = PullConsumerImpl(namesrv_addr, group, opts)

    # ---------------------------------------------------------------- properties

    @property
    def options(self) -> PullConsumerOptions:
        """The settings (frozen)."""
        return self._impl.options

    # ---------------------------------------------------------------- subscription / assignment

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe (group-managed queues) with a tag expression (``"*"``, ``"TagA || TagB"``).
        Not combinable with :meth:`assign`."""
        self._impl.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic`` (subscribe mode)."""
        self._impl.unsubscribe(topic)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no group rebalance). Replaces the previous assignment.
        Not combinable with :meth:`subscribe`."""
        self._impl.assign([self._wrap(mq) for mq in mqs])

    def assignment(self) -> set[MessageQueue]:
        """The queues this consumer currently pulls."""
        return self._impl.ns.unwrap_mqs(self._impl.assignment())

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """All readable queues of ``topic`` (sorted). Raises TopicNotExistError without a route."""
        ns = self._impl.ns
        return [ns.unwrap_mq(mq) for mq in await self._impl.fetch_message_queues(ns.wrap(topic))]

    def _wrap(self, mq: MessageQueue) -> MessageQueue:
        return self._impl.ns.wrap_mq(mq)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Join the group (subscribe mode) or start the assigned queues.

        Raises IllegalStateError when started before (after :meth:`close` or a failed start,
        create a new consumer)."""
        await self._impl.start()

    async def close(self) -> None:
        """Commit (when auto-commit is on), stop pulling and leave the group. Idempotent."""
        await self._impl.close()

    async def __aenter__(self) -> PullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- poll / iterate

    async def poll(self, timeout: float | None = None, max_messages: int | None = None) -> list[MessageExt]:
        """Up to ``max_messages`` (default ``pull_batch_size``) buffered messages, waiting at most
        ``timeout`` seconds (default ``poll_timeout``) for the first; ``[]`` on timeout.

        The consumed position of each queue moves past what is returned; it reaches the broker
        on :meth:`commit` (or the next auto-commit).

        Raises:
            rmq.errors.IllegalStateError: not running.
            rmq.errors.RMQError: after ``error_retries`` failures in a row that need the
                application: SubscriptionGroupNotExistError, TopicNotExistError (also: no route
                for a subscribed topic), NoPermissionError, RouteError. The consumer goes on
                retrying; the next poll returns messages again once the cause is fixed.
        """
        return await self._impl.poll(timeout, max_messages)

    def __aiter__(self) -> PullConsumer:
        return self

    async def __anext__(self) -> MessageExt:
        return await self._impl.next()

    # ---------------------------------------------------------------- seek / commit / pause

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Consume ``mq`` from ``offset`` next (buffered messages of it are discarded).

        Raises ClientError if ``mq`` is not assigned to this consumer or ``offset`` is outside
        [min, max] of the queue."""
        await self._impl.seek(self._wrap(mq), offset)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        """:meth:`seek` to the queue's smallest offset."""
        await self._impl.seek_to_begin(self._wrap(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        """:meth:`seek` to the queue's largest offset (only new messages)."""
        await self._impl.seek_to_end(self._wrap(mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return await self._impl.offset_for_timestamp(self._wrap(mq), timestamp_ms)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Write consumed positions to the offset store and persist them now.

        Args:
            offsets: explicit next-offsets per queue; default: the positions reached by ``poll``.
        """
        await self._impl.commit(None if offsets is None else {self._wrap(mq): o for mq, o in offsets.items()})

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for ``mq`` (on the broker, or the local file when broadcasting);
        -1 when none."""
        return await self._impl.committed(self._wrap(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        """Stop returning and pulling messages of these queues until :meth:`resume`."""
        self._impl.pause([self._wrap(mq) for mq in mqs])

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        """Return and pull messages of these queues again."""
        self._impl.resume([self._wrap(mq) for mq in mqs])

    def paused(self) -> set[MessageQueue]:
        """The queues paused now."""
        return self._impl.ns.unwrap_mqs(self._impl.paused())
