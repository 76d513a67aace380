"""Consumer groups and connections: progress, connections, status, offset resets (Java
``DefaultMQAdminExt`` examineConsumeStats, examineConsumerConnectionInfo,
examineProducerConnectionInfo, getConsumerRunningInfo, consumeMessageDirectly,
resetOffsetByTimestamp, resetOffsetByTimestampOld, getConsumeStatus, updateConsumeOffset,
getAllSubscriptionGroup)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rmq.common.constants import MixAll
from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.common.message import decode_offset_msg_id
from rmq.common.route import TopicRouteData
from rmq.protocol.body import json_object
from rmq.protocol.body.conns import (
    ConnectionInfo,
    ConsumeMessageDirectlyResult,
    ConsumerConnection,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    ProducerConnection,
    ProducerTableInfo,
    ResetOffsetBody,
    connections_of,
)
from rmq.protocol.body.stats import ConsumeStats, OffsetWrapper
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import parse_body
from rmq.protocol.requests.assignment import parse_query_assignment, query_assignment, set_message_request_mode
from rmq.protocol.requests.client import (
    consume_message_directly,
    get_all_producer_info,
    get_consumer_connection_list,
    get_consumer_running_info,
    get_producer_connection_list,
    parse_all_producer_info,
)
from rmq.protocol.requests.consumer import (
    get_consume_stats,
    get_max_offset,
    get_min_offset,
    invoke_broker_to_get_consumer_status,
    invoke_broker_to_reset_offset,
    parse_offset,
    search_offset,
    update_consumer_offset,
)
from rmq.types import MessageQueue

from ._base import AdminBase, AdminError

_T = TypeVar("_T")


@lazy_dataclass(frozen=True, slots=True)
class RollbackStats:
    """One queue of an offset reset done by the admin itself (Java ``RollbackStats``): the
    offsets before, the one the timestamp gives, and the one set."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def _parse_consume_stats(resp: RemotingCommand) -> ConsumeStats:
    return parse_body(resp, "ConsumeStats", ConsumeStats.decode)


def _parser(what: str, decode: Callable[[bytes], _T]) -> Callable[[RemotingCommand], _T]:
    return functools.partial(parse_body, what=what, decode=decode)


def _broker_addrs(route: TopicRouteData) -> list[str]:
    """Each broker of a route once, its master when it has one (Java ``BrokerData.selectBrokerAddr``
    picks the master, else any)."""
    return [addr for bd in route.broker_datas if (addr := bd.select_broker_addr())]


class ConsumerAdmin(AdminBase):
    """Consumer and connection operations of :class:`rmq.client.admin.Admin`."""

    async def set_message_request_mode(
        self, addr: str, topic: str, group: str, mode: str, pop_share_queue_num: int = 0
    ) -> None:
        """SET_MESSAGE_REQUEST_MODE on the broker ``addr`` (Java ``setMessageRequestMode``):
        the (topic, group)'s ``mode`` PULL or POP, and ``pop_share_queue_num`` (default 0: in POP
        mode every consumer pops every queue), which QUERY_ASSIGNMENT answers Java 5 push
        consumers with."""
        await self._call_ok(addr, set_message_request_mode(topic, group, mode, pop_share_queue_num))

    async def query_assignment(
        self,
        addr: str,
        topic: str,
        group: str,
        client_id: str,
        strategy_name: str = "AVG",
        message_model: str = "CLUSTERING",
    ) -> list[tuple[MessageQueue, str]] | None:
        """QUERY_ASSIGNMENT on the broker ``addr`` as a Java 5 push consumer asks it (Java
        ``MQClientAPIImpl.queryAssignment``): the queues ``client_id`` of ``group`` gets for
        ``topic`` and the mode of each (PULL or POP); None when the broker has no answer. With
        ``message_model`` BROADCASTING the broker answers every queue of the topic, member or
        not (Java ``QueryAssignmentProcessor.doLoadBalance``): how a tool reads the mode."""
        return await self._call(
            addr, query_assignment(topic, group, client_id, strategy_name, message_model), parse_query_assignment
        )

    async def _group_brokers(self, group: str) -> list[str]:
        """The brokers a group is on: those of its retry topic's route (as Java's admin)."""
        return _broker_addrs(await self.examine_topic_route_info(MixAll.get_retry_topic(group)))

    async def examine_consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS on every broker of the group (its ``%RETRY%`` topic's route),
        merged; ``topic`` None means every topic the group has offsets for."""
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for addr in await self._group_brokers(group):
            stats = await self._call(addr, get_consume_stats(group, topic), _parse_consume_stats)
            table.update(stats.offset_table)
            tps += stats.consume_tps
        if not table:
            raise AdminError(
                f"Not found the consumer group consume stats, because return offset table is empty, "
                f"maybe the consumer not consume any message (group {group})"
            )
        return ConsumeStats(table, tps)

    async def examine_consumer_connection_info(
        self,
        group: str,
        broker_addr: str | None = None,
    ) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST on every broker of the group (or only ``broker_addr``),
        the connections merged; AdminError with code CONSUMER_NOT_ONLINE (206) when no member
        is connected anywhere."""
        merged: ConsumerConnection | None = None
        conns: list[ConnectionInfo] = []
        for addr in [broker_addr] if broker_addr else await self._group_brokers(group):
            try:
                cc = await self._call(
                    addr, get_consumer_connection_list(group), _parser("ConsumerConnection", ConsumerConnection.decode)
                )
            except AdminError as e:
                if e.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    continue
                raise
            merged = cc
            conns.extend(cc.connection_set)
        if merged is None or not conns:
            raise AdminError(f"the consumer group[{group}] not online", code=ResponseCode.CONSUMER_NOT_ONLINE)
        return ConsumerConnection(
            connections_of(set(conns)),
            merged.subscription_table,
            merged.consume_type,
            merged.message_model,
            merged.consume_from_where,
        )

    async def examine_producer_connection_info(self, group: str, topic: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST on every broker of ``topic``, merged (the brokers a
        producer of the topic sends heartbeats to)."""
        conns: list[ConnectionInfo] = []
        for addr in _broker_addrs(await self.examine_topic_route_info(topic)):
            pc = await self._call(
                addr, get_producer_connection_list(group), _parser("ProducerConnection", ProducerConnection.decode)
            )
            conns.extend(pc.connection_set)
        return ProducerConnection(connections_of(set(conns)))

    async def get_all_producer_info(self, addr: str) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO: every producer connection of the broker at ``addr``, by group
        (Java ``DefaultMQAdminExt.getAllProducerInfo``, mqadmin producer)."""
        return await self._call(addr, get_all_producer_info(), parse_all_producer_info)

    async def get_consumer_running_info(
        self, group: str, client_id: str, jstack: bool = False, broker_addr: str | None = None
    ) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO through ``broker_addr`` (default None: the first broker of
        the group), which relays it to the client (its settings, subscriptions, per-queue state
        and consume statistics)."""
        addrs = [broker_addr] if broker_addr else await self._group_brokers(group)
        if not addrs:
            raise AdminError(f"no broker serves the consumer group {group}")
        return await self._call(
            addrs[0],
            get_consumer_running_info(group, client_id, jstack),
            _parser("ConsumerRunningInfo", ConsumerRunningInfo.decode),
        )

    async def consume_message_directly(self, group: str, client_id: str, msg_id: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: the broker that stored ``msg_id`` (an offset message id,
        which names it) hands the message to the client's handler; its outcome."""
        try:
            host, port, _ = decode_offset_msg_id(msg_id)
        except ValueError:
            raise AdminError(f"{msg_id!r} is not an offset message id (32 hex digits)") from None
        return await self._call(
            f"{host}:{port}",
            consume_message_directly(group, client_id, msg_id),
            _parser("ConsumeMessageDirectlyResult", ConsumeMessageDirectlyResult.decode),
        )

    async def reset_offset_by_timestamp(
        self,
        topic: str,
        group: str,
        timestamp_ms: int,
        force: bool = True,
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every broker of ``topic``: each moves the group's
        offsets to the timestamp (-1: the end; backwards only unless ``force``, default True)
        and tells the online members; the offsets set. AdminError with code
        CONSUMER_NOT_ONLINE (206) when no member is online (see
        :meth:`reset_offset_by_timestamp_old`)."""
        table: dict[MessageQueue, int] = {}
        for addr in _broker_addrs(await self.examine_topic_route_info(topic)):
            body = await self._call(
                addr,
                invoke_broker_to_reset_offset(topic, group, timestamp_ms, force),
                _parser("ResetOffsetBody", ResetOffsetBody.decode),
            )
            table.update(body.offset_table)
        return table

    async def reset_offset_by_timestamp_old(
        self,
        group: str,
        topic: str,
        timestamp_ms: int,
        force: bool = True,
    ) -> list[RollbackStats]:
        """The admin resets the offsets itself (Java ``resetOffsetByTimestampOld``, for a group
        with no member online): per queue the offset at the timestamp (-1: the max offset),
        set with UPDATE_CONSUMER_OFFSET when ``force`` or behind the current one."""
        route = await self.examine_topic_route_info(topic)
        read_queues = {qd.broker_name: qd.read_queue_nums for qd in route.queue_datas}
        out: list[RollbackStats] = []
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            offsets: dict[int, tuple[int, int]] = {}  # qid -> (broker offset, consumer offset)
            try:
                stats = await self._call(addr, get_consume_stats(group, topic), _parse_consume_stats)
                offsets = {
                    mq.queue_id: (w.broker_offset, w.consumer_offset)
                    for mq, w in stats.offset_table.items()
                    if mq.topic == topic
                }
            except AdminError:
                pass
            if not offsets:  # never consumed: from the queues' own min and max
                for qid in range(read_queues.get(bd.broker_name, 0)):
                    hi = await self._call(addr, get_max_offset(topic, qid), parse_offset)
                    lo = await self._call(addr, get_min_offset(topic, qid), parse_offset)
                    offsets[qid] = (hi, lo)
            for qid, (broker_offset, consumer_offset) in sorted(offsets.items()):
                if timestamp_ms == -1:
                    target = await self._call(addr, get_max_offset(topic, qid), parse_offset)
                else:
                    target = await self._call(addr, search_offset(topic, qid, timestamp_ms), parse_offset)
                rollback = consumer_offset
                if force or target <= consumer_offset:
                    rollback = target
                    await self.update_consume_offset(addr, group, MessageQueue(topic, bd.broker_name, qid), target)
                out.append(RollbackStats(bd.broker_name, qid, broker_offset, consumer_offset, target, rollback))
        return out

    async def update_consume_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET: set ``group``'s offset of ``mq`` on the broker at ``addr``."""
        await self._call_ok(addr, update_consumer_offset(group, mq.topic, mq.queue_id, offset))

    async def get_consume_status(
        self,
        topic: str,
        group: str,
        client_id: str = "",
    ) -> dict[str, dict[MessageQueue, int]]:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS on every broker of ``topic``: each online
        member's offsets (``client_id`` names one), ``{client id: {queue: offset}}``."""
        out: dict[str, dict[MessageQueue, int]] = {}
        for addr in _broker_addrs(await self.examine_topic_route_info(topic)):
            body = await self._call(
                addr,
                invoke_broker_to_get_consumer_status(topic, group, client_id or None),
                _parser("GetConsumerStatusBody", GetConsumerStatusBody.decode),
            )
            for cid, table in body.consumer_table.items():
                out.setdefault(cid, {}).update(table)
        return out

    async def clone_group_offset(self, src_group: str, dest_group: str, topic: str | None = None) -> int:
        """Copy ``src_group``'s committed offsets (of ``topic``, else of every topic) to
        ``dest_group`` with UPDATE_CONSUMER_OFFSET (as mqadmin cloneGroupOffset); returns how
        many queues were set."""
        stats = await self.examine_consume_stats(src_group, topic)
        n = 0
        routes: dict[str, Mapping[str, str]] = {}
        for mq, w in sorted(stats.offset_table.items()):
            if w.consumer_offset < 0:
                continue
            if mq.topic not in routes:
                route = await self.examine_topic_route_info(mq.topic)
                routes[mq.topic] = {
                    bd.broker_name: (bd.broker_addrs.get(MixAll.MASTER_ID) or next(iter(bd.broker_addrs.values()), ""))
                    for bd in route.broker_datas
                }
            addr = routes[mq.topic].get(mq.broker_name)
            if addr:
                await self.update_consume_offset(addr, dest_group, mq, w.consumer_offset)
                n += 1
        return n

    async def get_all_subscription_group(self, addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every subscription group of the broker at ``addr``,
        ``{group: config}`` with Java ``SubscriptionGroupConfig``'s wire names (Java
        ``DefaultMQAdminExt.getAllSubscriptionGroup``)."""
        return await self._call(addr, _get_all_subscription_groups(), _parse_subscription_groups)

    async def get_consumer_config(self, group: str) -> list[ConsumerConfigInfo]:
        """A subscription group's configuration on every broker that has it (mqadmin
        getConsumerConfig: GET_ALL_SUBSCRIPTIONGROUP_CONFIG from each broker's master, the
        group picked out), in broker-name order."""
        info = await self.examine_broker_cluster_info()
        out = []
        for name, bd in sorted(info.broker_addr_table.items()):
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            table = await self._call(addr, _get_all_subscription_groups(), _parse_subscription_groups)
            config = table.get(group)
            if config is None:
                continue
            cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), "")
            out.append(ConsumerConfigInfo(cluster, name, config))
        return out


@lazy_dataclass(frozen=True, slots=True)
class ConsumerConfigInfo:
    """One broker's copy of a subscription group's configuration: Java
    ``SubscriptionGroupConfig``'s fields by their wire names (``groupName``, ``consumeEnable``,
    ``retryQueueNums``, ``retryMaxTimes``, ``brokerId``…)."""

    cluster_name: str
    broker_name: str
    config: dict[str, Any]


def _get_all_subscription_groups() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None)


def _subscription_groups(body: bytes) -> dict[str, dict[str, Any]]:
    table = json_object(body, "SubscriptionGroupWrapper").get("subscriptionGroupTable") or {}
    return {str(g): dict(c) for g, c in table.items() if isinstance(c, Mapping)}


_parse_subscription_groups = _parser("SubscriptionGroupWrapper", _subscription_groups)
