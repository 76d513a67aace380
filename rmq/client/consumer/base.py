"""What push and lite-pull consumers share: subscriptions, rebalance, offsets, pulling one queue.

Rebalance (Java ``RebalanceImpl``): for each subscribed topic, take all readable queues and, in
clustering mode, all member client ids of the group (from a broker), sort both, and let the
allocation strategy pick this member's share. Queues that left the share are dropped (their
offset persisted first, so the next owner starts where we stopped); new ones get a
:class:`ProcessQueue` and a pull task starting at the offset computed from the store or
``consume_from_where``.
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import inspect
import logging
import time
import warnings
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rmq.client.arguments import Namespace, check_namesrv_addr
from rmq.client.instance import ClientInstance, get_client_instance
from rmq.client.producer import validate_group, validate_topic
from rmq.client.selector import MessageSelector
from rmq.common.constants import ExpressionType, MixAll
from rmq.common.log import clip
from rmq.common.message import PullSysFlag, java_string_hash
from rmq.errors import (
    BrokerResponseError,
    ClientError,
    IllegalStateError,
    NoPermissionError,
    RemotingConnectError,
    RMQError,
    RouteError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
)
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.types import ConsumeFromWhere, MessageExt, MessageModel, MessageQueue, PullResult, ServiceState

from .allocate import AllocateStrategy
from .offset_store import LocalFileOffsetStore, OffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from .options import ConsumerOptions, ConsumerRebalanceListener, resolve_allocate_strategy
from .process_queue import ProcessQueue

__all__ = ["ConsumerBase", "ConsumerFacade", "SubscriptionData", "needs_application"]

log = logging.getLogger("rmq.client")

#: Long polling: the broker holds a pull up to 15 s; we wait 30 s for its answer (Java
#: brokerSuspendMaxTimeMillis / consumerTimeoutMillisWhenSuspend).
BROKER_SUSPEND_MAX_TIME = 15.0
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
#: After a failed pull, wait before the next (Java PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION).
PULL_DELAY_WHEN_EXCEPTION = 3.0

#: Failures that do not heal by retrying alone: someone must create the group or the topic, or
#: grant permission. After ``error_retries`` of them in a row the application is told.
_NEEDS_APPLICATION = (SubscriptionGroupNotExistError, TopicNotExistError, NoPermissionError, RouteError)


def needs_application(exc: BaseException) -> bool:
    """True for the failures reported to the application after ``error_retries`` in a row."""
    return isinstance(exc, _NEEDS_APPLICATION)


@dataclass(slots=True)
class SubscriptionData:
    """A topic and its expression: tags (``"TagA || TagB"``; ``"*"`` or empty for all) or a
    SQL92 selector the broker evaluates (``expression_type`` ``"SQL92"``)."""

    topic: str
    sub_string: str = "*"
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    expression_type: str = ExpressionType.TAG

    @classmethod
    def build(cls, topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
        """Parse a tag expression (a string or ``MessageSelector.tag``) or take a SQL92 one
        as is (Java ``FilterAPI.build``); ClientError when a tag expression names no tag."""
        if isinstance(expression, MessageSelector):
            if expression.expression_type != ExpressionType.TAG:
                return cls(topic, expression.expression, expression_type=expression.expression_type)
            expression = expression.expression
        expr = (expression or "").strip()
        if not expr or expr == "*":
            return cls(topic, "*")
        tags = {t.strip() for t in expr.split("||") if t.strip()}
        if not tags:
            raise ClientError(f"subscription expression {expression!r} has no tag")
        return cls(topic, expr, tags, {java_string_hash(t) for t in tags})

    def matches(self, tags: str | None) -> bool:
        """True when a message with ``tags`` passes this subscription's filter."""
        return not self.tags_set or (tags is not None and tags in self.tags_set)

    def to_json(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }


class ConsumerBase(abc.ABC):
    """What the push and lite pull consumers share (Java ``RebalanceImpl`` plus the common parts of
    ``DefaultMQPushConsumerImpl`` / ``DefaultLitePullConsumerImpl``).

    This is the consumer the :class:`~rmq.client.instance.ClientInstance` registers and talks to
    (heartbeats, rebalance, offsets, the broker's requests); applications use the facades
    :class:`rmq.PushConsumer` and :class:`rmq.PullConsumer`, which hold one.
    """

    consume_type = "CONSUME_PASSIVELY"
    orderly = False
    #: POP consumers (RocketMQ 5): the broker serves the group's retry topic with every pop, so
    #: the consumer does not subscribe to ``%RETRY%group`` itself.
    pop_mode = False

    def __init__(self, namesrv_addr: str | list[str], group: str, options: ConsumerOptions) -> None:
        check_namesrv_addr(namesrv_addr)
        validate_group(group, reserved=MixAll.DEFAULT_CONSUMER_GROUP)
        self.namesrv_addr = namesrv_addr
        #: Java's client namespace: wraps topic and group names on the wire
        self.ns = Namespace(options.namespace)
        #: the group as the broker knows it (with the namespace); ``user_group`` without
        self.group = self.ns.wrap(group)
        self.user_group = group
        self.options = options
        #: failure kind → (failures in a row, the last one); see note_failure
        self._failures: dict[str, tuple[int, RMQError]] = {}
        self.message_model = options.message_model
        self.consume_from_where = options.consume_from_where
        # Java's default: half an hour before start.
        self.consume_timestamp = (
            options.consume_timestamp
            if options.consume_timestamp is not None
            else int(time.time() * 1000) - 30 * 60 * 1000
        )
        self.allocate_strategy: AllocateStrategy = resolve_allocate_strategy(options.allocate_strategy)
        self.pull_batch_size = options.pull_batch_size
        self.on_rebalance = options.on_rebalance
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        #: broker id to pull each queue from next (the broker's suggestWhichBrokerId)
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self.offset_store: OffsetStore | None = None
        self._instance: ClientInstance | None = None
        self._rebalance_lock = asyncio.Lock()
        self._early_rebalance: asyncio.TimerHandle | None = None
        self._early_backoff = 1.0
        self.state = ServiceState.CREATE_JUST
        #: set when close() begins: RUNNING but starting no new work
        self.closing = False
        self._start_time = 0

    @property
    def active(self) -> bool:
        """Running and not closing: new pulls, rebalances and handler calls may start."""
        return self.state is ServiceState.RUNNING and not self.closing

    def check_running(self) -> ClientInstance:
        """The client instance; IllegalStateError unless running."""
        if self.state is not ServiceState.RUNNING or self._instance is None or self.closing:
            raise IllegalStateError(f"consumer {self.group} is not running ({self.state.name})")
        return self._instance

    # ---------------------------------------------------------------- subscription

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"TagA"``, ``"TagA || TagB"``)
        or a :class:`~rmq.MessageSelector`.

        May be called before or after start; a later call for the same topic replaces the
        expression. A SQL92 selector is checked by a broker of the topic (CHECK_CLIENT_CONFIG)
        at start; one added while running is checked in the background and dropped, with an
        ERROR line, when the broker refuses it."""
        if not MixAll.is_retry_topic(topic):
            validate_topic(topic, for_send=False)
        topic = self.ns.wrap(topic)
        self.subscriptions[topic] = SubscriptionData.build(topic, expression)
        if self._instance is not None and self.active:
            self.spawn(self._after_subscription_change(), "subscribe")

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``; its queues are dropped at the next rebalance (at once when
        running)."""
        self.subscriptions.pop(self.ns.wrap(topic), None)
        if self._instance is not None and self.active:
            self._instance.rebalance_immediately()

    async def _after_subscription_change(self) -> None:
        inst = self._instance
        if inst is None:
            return
        try:
            await inst.update_all_topic_routes()
            try:
                await self.check_client_config()
            except BrokerResponseError as e:
                log.error("group %s: the broker refuses a subscription, dropped: %s", self.group, clip(e))
            await inst.send_heartbeat_to_all_brokers()
        except RMQError as e:
            log.warning("group %s: refresh after subscribe failed: %r", self.group, e)
        inst.rebalance_immediately()

    def subscribed_topics(self) -> set[str]:
        return set(self.subscriptions)

    def has_subscribe_info(self, topic: str) -> bool:
        return bool(self.topic_subscribe_info.get(topic))

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self.subscriptions:
            self.topic_subscribe_info[topic] = set(mqs)

    def heartbeat_data(self) -> dict[str, Any]:
        return {
            "groupName": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value,
            "subscriptionDataSet": [s.to_json() for s in self.subscriptions.values()],
            "unitMode": False,
        }

    # ---------------------------------------------------------------- lifecycle helpers

    @property
    def client_id(self) -> str | None:
        """``ip@pid#instance_name`` once started, else None."""
        return self._instance.client_id if self._instance else None

    @abc.abstractmethod
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned by this consumer (cancelled by close())."""

    def check_startable(self) -> None:
        """IllegalStateError unless never started (Java: "maybe started once")."""
        if self.state is not ServiceState.CREATE_JUST:
            raise IllegalStateError(
                f"consumer {self.group} is {self.state.name}; only a new consumer can be started (create another one)"
            )

    async def _start_base(self) -> None:
        self.check_startable()
        try:
            await self._start_base_inner()
        except BaseException:
            self.state = ServiceState.START_FAILED
            inst, self._instance = self._instance, None
            if inst is not None:
                await inst.unregister_consumer(self.group)
            raise

    async def _start_base_inner(self) -> None:
        if (
            self.message_model is MessageModel.CLUSTERING
            and self.consume_type == "CONSUME_PASSIVELY"
            and not self.pop_mode
        ):
            retry = MixAll.get_retry_topic(self.group)
            self.subscriptions.setdefault(retry, SubscriptionData.build(retry, "*"))
        inst = get_client_instance(
            self.namesrv_addr,
            instance_name=self.options.instance_name,
            client_ip=self.options.client_ip,
            credentials=self.options.credentials,
            tls=self.options.tls,
            change_instance_name_to_pid=self.message_model is MessageModel.CLUSTERING,
        )
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.options.offset_store_dir, inst.client_id, self.group)
        else:
            self.offset_store = RemoteBrokerOffsetStore(inst, self.group)
        await self.offset_store.load()
        await inst.register_consumer(self.group, self)
        self._instance = inst
        self.state = ServiceState.RUNNING
        self._start_time = int(time.time() * 1000)
        # Routes first (so heartbeats know the brokers), then a heartbeat (so the broker lists us
        # as a member), then rebalance at once rather than after 20 s.
        await inst.update_all_topic_routes()
        await self.check_client_config()
        await inst.send_heartbeat_to_all_brokers()
        inst.rebalance_immediately()

    async def check_client_config(self) -> None:
        """Ask a broker of each non-TAG subscription's topic whether it can filter by it (Java
        ``MQClientInstance.checkClientInBroker``, called when a consumer starts). A refused
        subscription is removed and the broker's error raised (SubscriptionParseFailedError for
        a bad expression, a SYSTEM_ERROR one when ``enablePropertyFilter`` is off); a broker that
        cannot be reached is skipped for the next one of the route."""
        inst = self._instance
        assert inst is not None
        for topic, sub in list(self.subscriptions.items()):
            if sub.expression_type == ExpressionType.TAG:
                continue
            route = inst.topic_route_table.get(topic)
            names = [bd.broker_name for bd in route.broker_datas] if route else []
            for name in names:
                addr = inst.find_broker_addr_in_admin(name)
                if addr is None:
                    continue
                try:
                    await inst.api.check_client_config(addr, inst.client_id, self.group, sub.to_json())
                except BrokerResponseError as e:
                    if self.subscriptions.get(topic) is sub:
                        del self.subscriptions[topic]
                    e.add_note(
                        f"subscription of group {self.group} to {topic}: {sub.expression_type} {sub.sub_string!r}"
                    )
                    raise
                except RMQError as e:
                    log.warning("group %s: CHECK_CLIENT_CONFIG to %s failed: %s", self.group, addr, clip(repr(e)))
                    continue
                break

    async def _stop_base(self) -> None:
        """Drop every queue (persisting its offset), then leave the group."""
        inst = self._instance
        if self._early_rebalance is not None:
            self._early_rebalance.cancel()
            self._early_rebalance = None
        async with self._rebalance_lock:
            pqs = list(self.process_queue_table.items())
            for _mq, pq in pqs:
                pq.dropped = True
                if pq.pull_task is not None:
                    pq.pull_task.cancel()
            await asyncio.gather(*(pq.pull_task for _, pq in pqs if pq.pull_task is not None), return_exceptions=True)
            await self.persist_consumer_offset()
            await self._on_queues_removed([mq for mq, _ in pqs])
            self.process_queue_table.clear()
        if inst is not None:
            await inst.unregister_consumer(self.group)

    async def _on_queues_removed(self, mqs: list[MessageQueue]) -> None:
        """Hook: orderly consumers unlock the queues."""

    async def persist_consumer_offset(self) -> None:
        """Write the offsets of the queues we own to the offset store's backing (every 5 s from
        the client instance, and on close)."""
        if self.offset_store is None or self.state is not ServiceState.RUNNING:
            return
        await self.offset_store.persist_all(list(self.process_queue_table))

    # ---------------------------------------------------------------- rebalance

    async def do_rebalance(self) -> None:
        """Recompute this member's queues of every subscribed topic (Java ``RebalanceImpl.doRebalance``)."""
        if not self.active:
            return
        async with self._rebalance_lock:
            if not self.active:
                return
            missing = False
            for topic in list(self.subscriptions):
                try:
                    if not await self._rebalance_by_topic(topic):
                        missing = missing or not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
                except RMQError as e:
                    missing = True
                    log.warning("group %s: rebalance of %s failed: %r", self.group, topic, e)
            self._schedule_early_rebalance(missing)
            # queues of topics no longer subscribed
            for mq in [mq for mq in self.process_queue_table if mq.topic not in self.subscriptions]:
                pq = self.process_queue_table[mq]
                pq.dropped = True
                if await self._remove_unnecessary_queue(mq, pq):
                    del self.process_queue_table[mq]

    async def _rebalance_by_topic(self, topic: str) -> bool:
        """Rebalance one topic; False when its route or member list is not known yet."""
        inst = self._instance
        assert inst is not None
        mqs = self.topic_subscribe_info.get(topic)
        if not mqs:
            await inst.update_topic_route(topic)
            mqs = self.topic_subscribe_info.get(topic)
        if not mqs:
            if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                log.warning("group %s: no route for subscribed topic %s yet", self.group, topic)
                self.note_failure(
                    f"route:{topic}", TopicNotExistError(17, f"No route info of this topic: {self.ns.unwrap(topic)}")
                )
            return False
        self.note_success(f"route:{topic}")
        known = True
        if self.message_model is MessageModel.BROADCASTING:
            mine = set(mqs)
        else:
            cids = await inst.find_consumer_id_list(topic, self.group)
            if not cids:
                log.warning("group %s: the broker lists no member for topic %s", self.group, topic)
                return False
            if inst.client_id not in cids:
                log.info("group %s: %s not yet in the member list %s", self.group, inst.client_id, cids)
                known = False
            mine = set(self.allocate_strategy(self.group, inst.client_id, sorted(mqs), sorted(set(cids))))
        before = {mq for mq in self.process_queue_table if mq.topic == topic}
        if isinstance(self.on_rebalance, ConsumerRebalanceListener):
            revoked = {mq for mq in before if mq not in mine or self.process_queue_table[mq].dropped}
            if revoked:
                await self._tell_listener(self.on_rebalance.on_queues_revoked, revoked)
        changed = await self._update_process_queue_table(topic, mine)
        if changed:
            log.info(
                "group %s: rebalanced %s → %s", self.group, topic, sorted(f"{m.broker_name}#{m.queue_id}" for m in mine)
            )
            await self._on_message_queue_changed(topic, mine)
            if isinstance(self.on_rebalance, ConsumerRebalanceListener):
                assigned = {mq for mq in self.process_queue_table if mq.topic == topic} - before
                if assigned:
                    await self._tell_listener(self.on_rebalance.on_queues_assigned, assigned)
            elif self.on_rebalance is not None:
                listener = self.on_rebalance
                user_topic = self.ns.unwrap(topic)
                await self._tell_listener(lambda mqs: listener(user_topic, mqs), set(mine))
        return known

    async def _tell_listener(self, fn: Any, mqs: set[MessageQueue]) -> None:
        """Call a rebalance listener with the queues as the application names them; its
        exception is logged (a listener cannot stop the rebalance)."""
        try:
            res = fn(self.ns.unwrap_mqs(mqs))
            if inspect.isawaitable(res):
                await res
        except Exception:
            log.exception("group %s: on_rebalance listener raised", self.group)

    def app_messages(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """The messages as the application sees them: topics without the namespace (Java
        ``DefaultMQPushConsumerImpl.resetRetryAndNamespace``), carrying the consumer's
        ``value_deserializer`` for ``message.value``."""
        if self.ns:
            msgs = [dataclasses.replace(m, topic=self.ns.unwrap(m.topic)) for m in msgs]
        fn = self.options.value_deserializer
        if fn is not None:
            for m in msgs:  # (frozen: set as the dataclass's own __init__ does)
                object.__setattr__(m, "value_deserializer", fn)
        return msgs

    # ---------------------------------------------------------------- errors the application must see

    def note_failure(self, kind: str, exc: BaseException) -> None:
        """Count a failure of ``kind`` (``"pull:T"``, ``"route:T"``); after ``error_retries``
        in a row of one that needs the application (:func:`needs_application`), report it with
        :meth:`report_error` and count again from zero."""
        if not isinstance(exc, RMQError) or not needs_application(exc):
            return
        count = self._failures.get(kind, (0, exc))[0] + 1
        if count < self.options.error_retries:
            self._failures[kind] = (count, exc)
            return
        self._failures.pop(kind, None)
        exc.add_note(
            f"consumer group {self.user_group}: {count} failure(s) in a row ({kind.split(':')[0]} of "
            f"{self.ns.unwrap(kind.partition(':')[2])})"
        )
        self.report_error(exc)

    def note_success(self, kind: str) -> None:
        """A call of ``kind`` worked: its failures no longer count."""
        if self._failures:
            self._failures.pop(kind, None)

    def report_error(self, exc: RMQError) -> None:
        """Hand a persistent failure to the application (push: ``on_error``; pull: the next
        ``poll`` raises it)."""
        log.error("group %s: %s", self.group, clip(str(exc)))

    def _schedule_early_rebalance(self, needed: bool) -> None:
        """A subscribed topic had no route (or no member list) yet: rebalance again after 1 s,
        2 s, 4 s … up to the regular 20 s, instead of waiting a whole period (a consumer started
        before the first message of an auto-created topic starts consuming within seconds)."""
        if self._early_rebalance is not None:
            self._early_rebalance.cancel()
            self._early_rebalance = None
        if not needed:
            self._early_backoff = 1.0
            return
        inst = self._instance
        if inst is None or not self.active:
            return
        self._early_rebalance = asyncio.get_running_loop().call_later(self._early_backoff, inst.rebalance_immediately)
        self._early_backoff = min(self._early_backoff * 2, 16.0)

    async def _on_message_queue_changed(self, topic: str, mine: set[MessageQueue]) -> None:
        """Hook after the queue set of a topic changed."""

    async def _update_process_queue_table(self, topic: str, mine: set[MessageQueue]) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            # drop queues no longer ours, and retry dropping ones an earlier round could not
            # remove yet (so a queue that came back gets a fresh ProcessQueue below)
            if mq.topic != topic or (mq in mine and (not pq.dropped or pq.offset_fix_pending)):
                continue
            pq.dropped = True
            if await self._remove_unnecessary_queue(mq, pq):
                self.process_queue_table.pop(mq, None)
                changed = True
        for mq in sorted(mine - set(self.process_queue_table)):
            if not await self._lock_new_queue(mq):
                continue
            assert self.offset_store is not None
            self.offset_store.remove(mq)
            try:
                offset = await self.compute_pull_from_where(mq)
            except RMQError as e:
                log.warning("group %s: cannot compute the start offset of %s yet: %r", self.group, mq, e)
                continue
            if offset < 0:
                continue
            pq = ProcessQueue(mq, offset)
            self.process_queue_table[mq] = pq
            self._start_queue(pq)
            changed = True
        return changed

    async def _lock_new_queue(self, mq: MessageQueue) -> bool:
        """Hook: orderly clustering consumers lock a queue on the broker before taking it."""
        return True

    async def _remove_unnecessary_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Stop pulling ``mq``, persist its offset and forget it. False = try again later."""
        if pq.pull_task is not None:
            pq.pull_task.cancel()
        assert self.offset_store is not None
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)
        return True

    @abc.abstractmethod
    def _start_queue(self, pq: ProcessQueue) -> None:
        """Begin pulling a newly assigned queue (push: a pull loop task; lite pull: a fetch task)."""

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        """Where a newly assigned queue starts (Java ``computePullFromWhereWithException``):
        the stored offset if any, else per ``consume_from_where``; retry queues from 0."""
        assert self.offset_store is not None and self._instance is not None
        last = await self.offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        is_retry = mq.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
        cfw = self.consume_from_where
        if cfw is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET or (
            is_retry and (cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        ):
            return 0
        addr = await self._admin_addr(mq)
        if cfw is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET or is_retry:
            return await self._instance.api.get_max_offset(addr, mq)
        return await self._instance.api.search_offset(addr, mq, self.consume_timestamp)

    async def _admin_addr(self, mq: MessageQueue) -> str:
        inst = self._instance
        assert inst is not None
        addr = await inst.find_broker_addr_refreshing(mq, publish=False)
        if addr is None:
            raise ClientError(f"the broker {mq.broker_name} is not in any route")
        return addr

    # ---------------------------------------------------------------- pulling

    async def _pull(
        self,
        mq: MessageQueue,
        offset: int,
        sub: SubscriptionData | None,
        *,
        max_nums: int,
        suspend: bool,
        commit_offset: int = 0,
        post_subscription: bool = True,
    ) -> PullResult:
        """One PULL_MESSAGE to the node suggested last time (master by default), long-polling when
        ``suspend``; returned messages are filtered by the subscription's tags.

        ``post_subscription`` False (the push consumer without ``post_subscription_when_pull``,
        Java ``DefaultMQPushConsumerImpl.pullMessage``) sends no expression and no subscription
        flag, only the subscription's version and type: the broker then filters by what the
        group's last heartbeat registered and refuses a pull whose version is newer
        (SUBSCRIPTION_NOT_LATEST). The lite pull consumer always posts it, as Java's does."""
        inst = self._instance
        assert inst is not None
        found = inst.find_broker_address_in_subscribe(mq.broker_name, self.pull_from_which_node.get(mq, 0))
        if found is None:
            await inst.update_topic_route(mq.topic)
            found = inst.find_broker_address_in_subscribe(mq.broker_name, self.pull_from_which_node.get(mq, 0))
        if found is None:
            raise RouteError(f"the broker {mq.broker_name} of {mq} is not in any route")
        addr, is_slave = found
        commit = commit_offset > 0 and not is_slave and self.message_model is MessageModel.CLUSTERING
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PullSysFlag.build(commit, suspend, sub is not None and post_subscription),
            commit_offset=commit_offset if commit else 0,
            suspend_timeout_millis=int(BROKER_SUSPEND_MAX_TIME * 1000) if suspend else 0,
            subscription=(sub.sub_string if post_subscription else None) if sub is not None else "*",
            sub_version=sub.sub_version if sub is not None else 0,
            expression_type=sub.expression_type if sub is not None else ExpressionType.TAG,
        )
        timeout = CONSUMER_TIMEOUT_WHEN_SUSPEND if suspend else 10.0
        result = await inst.api.pull_message(addr, header, mq.broker_name, timeout)
        if result.suggest_which_broker_id != self.pull_from_which_node.get(mq, 0):
            log.info(
                "group %s: broker suggests pulling %s from node %d", self.group, mq, result.suggest_which_broker_id
            )
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        if result.messages and sub is not None and sub.tags_set:
            kept = [m for m in result.messages if sub.matches(m.tags)]
            if len(kept) != len(result.messages):
                result = PullResult(
                    result.status,
                    result.next_begin_offset,
                    result.min_offset,
                    result.max_offset,
                    kept,
                    result.suggest_which_broker_id,
                )
        return result

    async def _on_pull_error(self, mq: MessageQueue, exc: BaseException) -> None:
        """After a failed pull: go back to the master (a suggested slave may be the one that is
        down) and, when the broker could not be reached, refresh the route (it may have moved)."""
        self.pull_from_which_node.pop(mq, None)
        if isinstance(exc, RemotingConnectError) and self._instance is not None:
            try:
                await self._instance.update_topic_route(mq.topic)
            except RMQError as e:
                log.debug("group %s: route refresh after a pull error failed: %r", self.group, e)

    # ---------------------------------------------------------------- broker → client requests

    def offset_table_json(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: this member's offsets of ``topic`` (every topic when
        empty)."""
        assert self.offset_store is not None
        return dict(self.offset_store.clone_table(topic or None))

    def running_info(self) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO: Java ``ConsumerRunningInfo``'s parts (``mqTable`` keyed by
        MessageQueue; the client instance encodes it as Java's fastjson does)."""
        assert self.offset_store is not None
        props: dict[str, Any] = {
            "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
            "PROP_CONSUME_TYPE": self.consume_type,
            "PROP_CONSUMER_START_TIMESTAMP": str(self._start_time),
            "consumerGroup": self.group,
            "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value,
        }
        mq_table: dict[MessageQueue, dict[str, Any]] = {}
        for mq, pq in self.process_queue_table.items():
            info = pq.info()
            info["commitOffset"] = self.offset_store.offset_table.get(mq, -1)
            mq_table[mq] = info
        return {
            "properties": props,
            "subscriptionSet": [s.to_json() for s in self.subscriptions.values()],
            "mqTable": mq_table,
            "statusTable": {},
            "jstack": "",
        }

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: stop the queues, set the offsets, start them again."""
        assert self.offset_store is not None
        async with self._rebalance_lock:
            for mq, off in table.items():
                pq = self.process_queue_table.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    if pq.pull_task is not None:
                        pq.pull_task.cancel()
                    pq.clear()
                self.offset_store.update(mq, off, increase_only=False)
            await self.offset_store.persist_all(table)
            for mq in table:
                self.offset_store.remove(mq)
        log.info("group %s: offsets of %s reset to %s", self.group, topic, {str(m): o for m, o in table.items()})
        if self._instance is not None:
            self._instance.rebalance_immediately()

    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: only a push consumer with a handler can."""
        raise ClientError("this consumer cannot consume directly")


_ImplT = TypeVar("_ImplT", bound=ConsumerBase)


class ConsumerFacade(Generic[_ImplT]):
    """What the public consumers share (Java ``DefaultMQPushConsumer`` / ``DefaultLitePullConsumer``
    over their ``…Impl``): the implementation they front, their group, state and client id, and
    the warning for a consumer dropped while running."""

    _impl: _ImplT

    def __del__(self, _warn: Any = warnings.warn) -> None:
        impl = getattr(self, "_impl", None)
        if impl is not None and impl.state is ServiceState.RUNNING and not impl.closing:
            _warn(f"consumer {impl.group!r} was not closed", ResourceWarning, source=self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} group={self.group!r} {self.state.name}>"

    @property
    def group(self) -> str:
        """The consumer group (without the namespace)."""
        return self._impl.user_group

    @property
    def namespace(self) -> str | None:
        """The client namespace (Java ``ClientConfig.namespace``), or None."""
        return self._impl.ns.name

    @property
    def state(self) -> ServiceState:
        """CREATE_JUST → RUNNING → SHUTDOWN_ALREADY (or START_FAILED)."""
        return self._impl.state

    @property
    def client_id(self) -> str | None:
        """``ip@pid#instance_name`` once started, else None."""
        return self._impl.client_id
