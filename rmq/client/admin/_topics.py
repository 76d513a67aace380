"""Topics, subscription groups, clusters and the message tools (Java ``DefaultMQAdminExt``
createAndUpdateTopicConfig, deleteTopic…, createAndUpdateSubscriptionGroupConfig,
fetchAllTopicList, fetchTopicsByCLuster, examineTopicStats, queryTopicConsumeByWho,
getTopicClusterList, minOffset/maxOffset/searchOffset, and the tools' sendMessage,
consumeMessage, printMsg, allocateMQ and checkMsgSendRT).

The message tools run inside the admin: sends go through :class:`rmq.client.Producer` (route
choice, message ids, retries, exactly as an application's send), pulls are plain
PULL_MESSAGE requests on the admin's own connections (as Java's ``DefaultMQPullConsumer``
does: no heartbeat, no rebalance, no offset commits, so an admin read leaves no trace in any
consumer group).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from rmq.client._codec import decode_messages
from rmq.client.consumer.allocate import allocate_averagely
from rmq.client.producer import MessageQueueSelector, Producer
from rmq.common.constants import ExpressionType, MixAll, PermName
from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.common.message import PullSysFlag
from rmq.common.route import TopicRouteData
from rmq.common.topic_attributes import (
    MESSAGE_TYPE,
    TopicMessageType,
    attributes_to_string,
    message_type_of_attributes,
)
from rmq.errors import RMQError
from rmq.protocol.body.topic import RebalanceResult, TopicOffset, TopicStatsTable
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.broker import get_all_topic_config, parse_all_topic_config
from rmq.protocol.requests.consumer import (
    create_subscription_group,
    get_max_offset,
    get_min_offset,
    parse_offset,
    parse_pull,
    pull_message,
    search_offset,
)
from rmq.protocol.requests.namesrv import (
    delete_topic_in_namesrv,
    get_all_topic_list,
    get_topics_by_cluster,
    parse_topic_list,
)
from rmq.protocol.requests.topic import create_topic, delete_topic_in_broker, get_topic_stats_info, parse_topic_stats
from rmq.types import Message, MessageQueue, PullResult, PullStatus, SendResult

from ._base import AdminError
from ._messages import MessageAdmin

__all__ = ["ClusterRT", "MsgSendRT", "SendRT", "TopicConsumers", "TopicPermUpdate", "TopicAdmin", "topic_sys_flag"]

#: How many route / QUERY_TOPIC_CONSUME_BY_WHO lookups topicList -c keeps in flight at once.
TOPIC_LOOKUP_CONCURRENCY = 8
#: Messages per PULL_MESSAGE when walking a queue (Java printMsg's 32).
PULL_BATCH = 32
#: The most messages one pull may ask for (the broker caps a pull at 32 by default anyway).
MAX_PULL_NUMS = 1024


def topic_sys_flag(unit: bool = False, has_unit_sub: bool = False) -> int:
    """Java ``TopicSysFlag.buildSysFlag``: bit 0 a unit topic, bit 1 one with unit subscribers."""
    return (1 if unit else 0) | (2 if has_unit_sub else 0)


@lazy_dataclass(frozen=True, slots=True)
class TopicConsumers:
    """One row group of ``topicList -c``: a topic, the cluster its first broker belongs to
    (``""`` when its route or cluster is unknown, as mqadmin) and the groups consuming it.
    ``groups_known`` is False when the broker could not answer QUERY_TOPIC_CONSUME_BY_WHO
    (for example an older broker answering REQUEST_CODE_NOT_SUPPORTED)."""

    cluster: str
    topic: str
    groups: tuple[str, ...]
    groups_known: bool = True


@lazy_dataclass(frozen=True, slots=True)
class TopicPermUpdate:
    """What updateTopicPerm did on one broker: the perm before and after; ``changed`` False
    when the new perm equalled the old one and nothing was sent (mqadmin's "new perm equals
    to the old one!")."""

    addr: str
    old_perm: int
    new_perm: int
    changed: bool


@lazy_dataclass(frozen=True, slots=True)
class SendRT:
    """One send of checkMsgSendRT: where it went, whether it succeeded, how long it took (ms)."""

    broker_name: str
    queue_id: int
    ok: bool
    rt_ms: float


@lazy_dataclass(frozen=True, slots=True)
class MsgSendRT:
    """checkMsgSendRT's result: every send and the average RT (ms) of all but the first (the
    first pays for the route lookup and the connection, as Java's tool leaves it out)."""

    sends: tuple[SendRT, ...]
    avg_rt_ms: float


@lazy_dataclass(frozen=True, slots=True)
class ClusterRT:
    """One broker's line of clusterRT: the average send RT (ms, all sends but the first) to the
    topic named after the broker, and how many sends succeeded and failed."""

    cluster: str
    broker_name: str
    rt_ms: float
    success_count: int
    fail_count: int


def _average_but_first(rts: Sequence[float]) -> float:
    # Java's tools leave the first send out (it pays for the route lookup and the connection)
    # and divide by amount - 1; with a single send there is nothing left to average.
    rest = list(itertools.islice(rts, 1, None))
    return sum(rest) / len(rest) if rest else 0.0


async def _timed_send(
    producer: Producer, msg: Message, selector: MessageQueueSelector | None = None, sharding_key: object = None
) -> tuple[bool, float]:
    """One send and its time in ms; a failure is a False, not an exception."""
    start = time.perf_counter()
    try:
        await producer.send(msg, selector=selector, sharding_key=sharding_key)
        ok = True
    except (RMQError, OSError):
        ok = False
    return ok, (time.perf_counter() - start) * 1000


class TopicAdmin(MessageAdmin):
    """Topic, subscription-group, cluster and message-tool operations of
    :class:`rmq.client.admin.Admin`."""

    # -- topics ----------------------------------------------------------------------------

    async def fetch_all_topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server knows (it lists
        cluster and broker names among them, as Java's does)."""
        return await self._call_namesrv(get_all_topic_list(), parse_topic_list)

    async def fetch_topics_by_cluster(self, cluster: str) -> list[str]:
        """GET_TOPICS_BY_CLUSTER: the topics on the brokers of ``cluster``, sorted."""
        return await self._call_namesrv(get_topics_by_cluster(cluster), parse_topic_list)

    async def create_and_update_topic_config(
        self,
        addr: str,
        topic: str,
        *,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        order: bool = False,
        topic_sys_flag: int = 0,
        attributes: str | Mapping[str, str] | None = None,
        message_type: str | TopicMessageType | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker at ``addr`` (defaults as mqadmin updateTopic:
        8 read and 8 write queues, perm 6 = read + write, not orderly, sys flag 0; see
        :func:`topic_sys_flag` for updateTopic's ``-u``/``-s``).

        ``attributes`` (default none) are Java 5's attribute changes, as text
        (``"+message.type=FIFO,-reserve.time"``, mqadmin updateTopic ``-a``) or as a map of
        signed keys (``{"+message.type": "FIFO"}``); ``message_type`` (default None) adds
        ``+message.type=<type>`` (NORMAL, FIFO, DELAY, TRANSACTION, MIXED). The broker refuses
        an unknown attribute or value (AdminError with its reason)."""
        text = attributes if isinstance(attributes, str) or attributes is None else attributes_to_string(attributes)
        if message_type is not None:
            value = message_type.value if isinstance(message_type, TopicMessageType) else str(message_type)
            item = f"+{MESSAGE_TYPE}={value}"
            text = f"{text},{item}" if text else item
        header = CreateTopicRequestHeader(
            topic=topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            order=order,
            topic_sys_flag=topic_sys_flag,
            attributes=text or None,
        )
        await self._call_ok(addr, create_topic(header))

    async def examine_topic_config(self, topic: str) -> dict[str, Any] | None:
        """The topic's config (TopicConfig JSON: queue counts, perm, ``attributes``) as the
        first broker of its route that has it answers GET_ALL_TOPIC_CONFIG; None when none
        does."""
        route = await self.examine_topic_route_info(topic)
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            wrapper = await self._call(addr, get_all_topic_config(), parse_all_topic_config)
            tc = wrapper.topic_config_table.get(topic)
            if tc is not None:
                return tc
        return None

    async def topic_message_type(self, topic: str) -> TopicMessageType | None:
        """The topic's ``message.type`` attribute (Java 5 typed topics); None when it has none
        (an untyped topic, which Java 5 treats as NORMAL) or no broker has it."""
        tc = await self.examine_topic_config(topic)
        attrs = tc.get("attributes") if tc is not None else None
        return message_type_of_attributes(attrs if isinstance(attrs, dict) else None)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER on the broker at ``addr``."""
        await self._call_ok(addr, delete_topic_in_broker(topic))

    async def delete_topic_in_namesrv(self, topic: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV on every name server."""
        await self._call_each_namesrv(lambda: delete_topic_in_namesrv(topic), check_success)

    async def examine_topic_stats(self, topic: str) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO on every broker of the topic's route (its master, else a
        slave), merged (Java ``examineTopicStats``); AdminError when no broker has the topic."""
        route = await self.examine_topic_route_info(topic)
        table: dict[MessageQueue, TopicOffset] = {}
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                stats = await self._call(addr, get_topic_stats_info(topic), parse_topic_stats)
                table.update(stats.offset_table)
        if not table:
            raise AdminError(f"no broker has stats for topic {topic}")
        return TopicStatsTable(dict(sorted(table.items())))

    async def get_topic_cluster_list(self, topic: str) -> list[str]:
        """The clusters holding the topic's first broker (Java ``getTopicClusterList``), sorted."""
        info = await self.examine_broker_cluster_info()
        route = await self.examine_topic_route_info(topic)
        if not route.broker_datas:
            return []
        first = route.broker_datas[0].broker_name
        return sorted(c for c, names in info.cluster_addr_table.items() if first in names)

    async def examine_topic_consumers(self) -> list[TopicConsumers]:
        """mqadmin ``topicList -c``: every topic but retry and DLQ topics, with its cluster and
        consuming groups. A topic without a route (a cluster or broker name the name server
        lists among topics) gets ``""`` for both, as mqadmin; a broker that refuses
        QUERY_TOPIC_CONSUME_BY_WHO gives ``groups_known=False``. Lookups run
        ``TOPIC_LOOKUP_CONCURRENCY`` (8) at a time."""
        info = await self.examine_broker_cluster_info()
        topics = [
            t
            for t in await self.fetch_all_topic_list()
            if not t.startswith((MixAll.RETRY_GROUP_TOPIC_PREFIX, MixAll.DLQ_GROUP_TOPIC_PREFIX))
        ]
        gate = asyncio.Semaphore(TOPIC_LOOKUP_CONCURRENCY)

        async def one(topic: str) -> TopicConsumers:
            async with gate:
                try:
                    route = await self.examine_topic_route_info(topic)
                except AdminError:
                    return TopicConsumers("", topic, ())
                first = route.broker_datas[0].broker_name if route.broker_datas else None
                cluster = next((c for c, names in sorted(info.cluster_addr_table.items()) if first in names), "")
                try:
                    groups = await self.query_topic_consume_by_who(topic)
                except (AdminError, RMQError, OSError):
                    return TopicConsumers(cluster, topic, (), groups_known=False)
                return TopicConsumers(cluster, topic, tuple(groups))

        return list(await asyncio.gather(*(one(t) for t in topics)))

    async def update_topic_perm(
        self, topic: str, perm: int, *, broker_addr: str | None = None, cluster: str | None = None
    ) -> list[TopicPermUpdate]:
        """mqadmin updateTopicPerm: re-send the topic's config (queue counts and sys flag from
        its route) with ``perm`` to the master at ``broker_addr``, or to every master of
        ``cluster`` (one of the two is required). On one broker, an unchanged perm sends
        nothing (``changed=False``); a ``broker_addr`` that is no master of the topic raises
        AdminError."""
        if not PermName.is_valid(perm):
            raise ValueError(f"perm must be made of PermName's bits (2 write, 4 read, 6 both), not {perm}")
        if (broker_addr is None) == (cluster is None):
            raise ValueError("give exactly one of broker_addr (-b) and cluster (-c)")
        route = await self.examine_topic_route_info(topic)
        if not route.queue_datas:
            raise AdminError(f"topic {topic} has no queues in its route")
        first = route.queue_datas[0]

        async def send(addr: str) -> None:
            await self.create_and_update_topic_config(
                addr,
                topic,
                read_queue_nums=first.read_queue_nums,
                write_queue_nums=first.write_queue_nums,
                perm=perm,
                topic_sys_flag=first.topic_sys_flag,
            )

        if broker_addr is not None:
            name = next((b.broker_name for b in route.broker_datas if b.master_addr == broker_addr), None)
            if name is None:
                raise AdminError(
                    f"updateTopicPerm error broker not exit or broker is not master!: {broker_addr} "
                    f"is not the master of a broker of topic {topic}"
                )
            qd = next((q for q in route.queue_datas if q.broker_name == name), first)
            if qd.perm == perm:
                return [TopicPermUpdate(broker_addr, qd.perm, perm, False)]
            await send(broker_addr)
            return [TopicPermUpdate(broker_addr, qd.perm, perm, True)]
        out = []
        for addr in await self.master_addrs(cluster):
            await send(addr)
            out.append(TopicPermUpdate(addr, first.perm, perm, True))
        return out

    # -- subscription groups ----------------------------------------------------------------

    async def create_and_update_subscription_group_config(
        self,
        addr: str,
        group: str,
        *,
        consume_enable: bool = True,
        consume_broadcast_enable: bool = True,
        retry_max_times: int = 16,
        consume_from_min_enable: bool = True,
        retry_queue_nums: int = 1,
        broker_id: int = MixAll.MASTER_ID,
        which_broker_when_consume_slowly: int = 1,
        notify_consumer_ids_changed_enable: bool = True,
        consume_message_orderly: bool | None = None,
        **extra: object,
    ) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on the broker at ``addr`` with Java's
        SubscriptionGroupConfig fields (mqadmin updateSubGroup's defaults: consume enabled,
        consume from the min offset, broadcast enabled, 16 retries, 1 retry queue, consume
        from broker id 0, broker 1 when consuming slowly, notify consumer id changes);
        ``consume_message_orderly`` is Java 5's ``consumeMessageOrderly`` (default None: not
        sent, which a broker reads as false); ``extra`` adds or overrides wire fields by their
        camelCase names."""
        config: dict[str, object] = {
            "groupName": group,
            "consumeEnable": consume_enable,
            "consumeFromMinEnable": consume_from_min_enable,
            "consumeBroadcastEnable": consume_broadcast_enable,
            "retryQueueNums": retry_queue_nums,
            "retryMaxTimes": retry_max_times,
            "brokerId": broker_id,
            "whichBrokerWhenConsumeSlowly": which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": notify_consumer_ids_changed_enable,
        }
        if consume_message_orderly is not None:
            config["consumeMessageOrderly"] = consume_message_orderly
        config.update(extra)
        await self._call_ok(addr, create_subscription_group(config))

    # -- queues and offsets -----------------------------------------------------------------

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted (Java ``fetchSubscribeMessageQueues``)."""
        route = await self.examine_topic_route_info(topic)
        return _readable_queues(topic, route)

    async def allocate_mq(self, topic: str, ip_list: Sequence[str]) -> RebalanceResult:
        """mqadmin allocateMQ: how AllocateMessageQueueAveragely shares the topic's readable
        queues among ``ip_list`` (in the order given; the queues sorted)."""
        ips = [ip for ip in ip_list if ip]
        if not ips:
            raise ValueError("ip_list names no client")
        mqs = await self.fetch_subscribe_message_queues(topic)
        return RebalanceResult({ip: allocate_averagely("aa", ip, mqs, ips) for ip in ips})

    async def _queue_addr(self, mq: MessageQueue) -> str:
        route = await self.examine_topic_route_info(mq.topic)
        bd = route.broker(mq.broker_name)
        addr = None if bd is None else bd.select_broker_addr()
        if addr is None:
            raise AdminError(f"broker {mq.broker_name} of topic {mq.topic} is not in its route")
        return addr

    async def min_offset(self, mq: MessageQueue) -> int:
        """GET_MIN_OFFSET: the smallest offset of ``mq`` still stored."""
        return await self._call(await self._queue_addr(mq), get_min_offset(mq.topic, mq.queue_id), parse_offset)

    async def max_offset(self, mq: MessageQueue) -> int:
        """GET_MAX_OFFSET: the offset the next message of ``mq`` will get."""
        return await self._call(await self._queue_addr(mq), get_max_offset(mq.topic, mq.queue_id), parse_offset)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of ``mq`` stored at or after ``timestamp_ms``."""
        return await self._call(
            await self._queue_addr(mq), search_offset(mq.topic, mq.queue_id, timestamp_ms), parse_offset
        )

    # -- messages ---------------------------------------------------------------------------

    async def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = PULL_BATCH,
        *,
        expression: str = "*",
        group: str = MixAll.TOOLS_CONSUMER_GROUP,
    ) -> PullResult:
        """One PULL_MESSAGE of up to ``max_nums`` (1..1024, default 32) messages of ``mq`` from
        ``offset``, filtered by the tag ``expression`` (default ``*``), as group
        ``TOOLS_CONSUMER`` (Java ``DefaultMQPullConsumer.pull``): no long polling, no offset
        commit. The status says FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL."""
        if not 1 <= max_nums <= MAX_PULL_NUMS:
            raise ValueError(f"max_nums must be in 1..{MAX_PULL_NUMS}, not {max_nums}")
        # here, not at the top: the consumers' module costs every `rmq admin` run its import
        # (docs/design.md "Start-up time")
        from rmq.client.consumer.base import SubscriptionData

        sub = SubscriptionData.build(mq.topic, expression)
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=max(0, offset),
            max_msg_nums=max_nums,
            sys_flag=PullSysFlag.build(False, False, True),
            subscription=sub.sub_string,
            sub_version=0,
            expression_type=ExpressionType.TAG,
        )
        reply = await self._call(await self._queue_addr(mq), pull_message(header), parse_pull)
        msgs = []
        if reply.status is PullStatus.FOUND:
            try:
                msgs = [m for m in decode_messages(reply.body, mq.broker_name) if sub.matches(m.tags)]
            except ValueError as e:
                raise AdminError(f"undecodable pull body for {mq}: {e}") from None
        return PullResult(
            reply.status,
            reply.next_begin_offset,
            reply.min_offset,
            reply.max_offset,
            msgs,
            reply.suggest_which_broker_id,
        )

    async def iter_pull(
        self,
        mq: MessageQueue,
        begin: int,
        end: int,
        *,
        expression: str = "*",
        batch: int = PULL_BATCH,
        group: str = MixAll.TOOLS_CONSUMER_GROUP,
    ) -> AsyncIterator[PullResult]:
        """Pull ``mq`` from ``begin`` up to (not including) ``end``, ``batch`` (default 32) at a
        time, yielding each pull (Java printMsg's loop): it stops at ``end``, on NO_NEW_MSG or
        OFFSET_ILLEGAL, and when a pull makes no progress. A pull may return messages past
        ``end`` (the broker answers whole batches); callers cut them."""
        offset = begin
        while offset < end:
            result = await self.pull(mq, offset, min(batch, end - offset), expression=expression, group=group)
            yield result
            if (
                result.status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL)
                or result.next_begin_offset <= offset
            ):
                return
            offset = result.next_begin_offset

    def _producer(self, group: str | None = None) -> Producer:
        # A fresh group per admin call, as Java's tools name it by the clock; the admin's
        # credentials and TLS, as Java's tools hand their RPCHook to the producer they make.
        ms = int(time.time() * 1000)
        creds = self._credentials
        return Producer(
            self.namesrv_addrs,
            group or f"rmq_admin_{ms}",
            instance_name=f"rmq_admin_{id(self)}_{ms}",
            send_timeout=self.timeout,
            access_key=creds.access_key if creds is not None else None,
            secret_key=creds.secret_key if creds is not None else None,
            tls=self._tls,
        )

    def tools_producer(self, group: str | None = None) -> Producer:
        """A producer of its own for a tool's sends (not started; use ``async with``), in
        ``group`` (default a fresh ``rmq_admin_<ms>``), with this admin's name servers,
        timeout, ACL credentials and TLS (mqadmin sendMsgStatus uses group ``PID_SMSC``)."""
        return self._producer(group)

    async def send_message(
        self,
        topic: str,
        body: bytes | str,
        *,
        keys: str | Sequence[str] | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
        message_group: str | None = None,
    ) -> SendResult:
        """mqadmin sendMessage: send one message with a producer of its own (a fresh group),
        to ``broker_name``'s queue ``queue_id`` when both are given (a queue id needs a broker
        name, ValueError otherwise), else to the queue the producer chooses; ``message_group``
        (default None) makes it a FIFO message of that group (``Message.message_group``)."""
        if queue_id is not None and broker_name is None:
            raise ValueError("Broker name must be set if the queue is chosen")
        data = body.encode() if isinstance(body, str) else bytes(body)
        key_tuple = tuple(k for k in keys.split(" ") if k) if isinstance(keys, str) else tuple(keys or ())
        msg = Message(topic, data, tags=tags, keys=key_tuple, message_group=message_group)
        queue = MessageQueue(topic, broker_name, queue_id) if broker_name is not None and queue_id is not None else None
        async with self._producer() as producer:
            return await producer.send(msg, queue=queue)

    async def check_msg_send_rt(self, topic: str, *, amount: int = 100, size: int = 128) -> MsgSendRT:
        """mqadmin checkMsgSendRT: send ``amount`` (default 100) messages of ``size`` bytes
        (default 128) round-robin over the topic's queues, one at a time, timing each. A failed
        send is recorded (``ok=False``), not raised."""
        if amount < 1 or size < 0:
            raise ValueError(f"amount must be >= 1 and size >= 0, not {amount} and {size}")
        msg = Message(topic, b"a" * size)
        picked: list[MessageQueue] = []

        def round_robin(mqs: Sequence[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
            mq = mqs[int(str(arg)) % len(mqs)]
            picked.append(mq)
            return mq

        sends = []
        async with self._producer() as producer:
            for i in range(amount):
                ok, rt = await _timed_send(producer, msg, selector=round_robin, sharding_key=i)
                last = picked[-1] if picked else MessageQueue(topic, "", 0)
                sends.append(SendRT(last.broker_name, last.queue_id, ok, rt))
        return MsgSendRT(tuple(sends), _average_but_first([s.rt_ms for s in sends]))

    async def cluster_send_msg_rt(
        self, cluster: str | None = None, *, amount: int = 100, size: int = 128
    ) -> list[ClusterRT]:
        """One round of mqadmin clusterRT: for every broker of ``cluster`` (default every
        cluster), send ``amount`` (default 100) messages of ``size`` bytes (default 128) to the
        topic named after the broker, one at a time; AdminError for an unknown cluster."""
        if amount < 1 or size < 0:
            raise ValueError(f"amount must be >= 1 and size >= 0, not {amount} and {size}")
        info = await self.examine_broker_cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise AdminError(f"cluster [{cluster}] not exist")
        clusters = [cluster] if cluster is not None else sorted(info.cluster_addr_table)
        out = []
        async with self._producer() as producer:
            for c in clusters:
                for broker in sorted(info.cluster_addr_table[c]):
                    msg = Message(broker, b"a" * size)
                    results = [await _timed_send(producer, msg) for _ in range(amount)]
                    ok = sum(1 for good, _ in results if good)
                    out.append(ClusterRT(c, broker, _average_but_first([rt for _, rt in results]), ok, amount - ok))
        return out


def _readable_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    # Java MQClientInstance.topicRouteData2TopicSubscribeInfo: every readable queue, master or not
    return sorted(
        MessageQueue(topic, q.broker_name, i)
        for q in route.queue_datas
        if PermName.is_readable(q.perm)
        for i in range(q.read_queue_nums)
    )
