"""The client instance shared by the producers and consumers of one process (Java ``MQClientInstance``).

One instance exists per client id (``ip@pid#instance_name``) and event loop. It owns the remoting
client (one connection per broker), the route cache, and the background timers that keep a
RocketMQ client alive:

* routes of every topic in use are refreshed from the name server every 30 s;
* a heartbeat (groups + subscriptions) goes to every known broker every 30 s;
* consumer offsets are persisted every 5 s;
* consumers rebalance every 20 s, and at once when a broker says the group changed
  (NOTIFY_CONSUMER_IDS_CHANGED).

Producers and consumers register with the instance; it starts with the first and closes its
connections when the last one leaves.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import ssl
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from rmq.common.constants import MixAll, PermName
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.route import TopicRouteData
from rmq.common.tasks import BackgroundTasks, wait_event
from rmq.errors import ClientError, RemotingCommandError, RMQError
from rmq.protocol.body.conns import ConsumerRunningInfo, GetConsumerStatusBody, ResetOffsetBody, SubscriptionInfo
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers import Header
from rmq.protocol.headers.client import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
)
from rmq.protocol.headers.consumer import ResetOffsetRequestHeader
from rmq.remoting import RemotingClient
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.tls import resolve_client_tls
from rmq.types import MessageExt, MessageQueue

from ._codec import decode_messages
from .api import ClientAPI
from .registry import forget, instances_of
from .request_reply import ReplyMessageClientProcessor, RequestFutureTable

__all__ = ["ClientInstance", "ConsumerInner", "ProducerInner", "get_client_instance", "local_ip", "subscribe_queues"]

log = logging.getLogger("rmq.client")
# per-request failures repeat during an outage: one line per kind per 10 s, with a count
_rlog = RateLimitedLog(log)

#: Java's defaults (ClientConfig): pollNameServerInterval, heartbeatBrokerInterval,
#: persistConsumerOffsetInterval, and RebalanceService's waitInterval.
POLL_NAMESRV_INTERVAL = 30.0
HEARTBEAT_INTERVAL = 30.0
PERSIST_OFFSET_INTERVAL = 5.0
REBALANCE_INTERVAL = 20.0


MASTER_ID = MixAll.MASTER_ID


class ConsumerInner(Protocol):
    """What the instance needs from a consumer (Java ``MQConsumerInner``). The consumers the
    application holds (``rmq.PushConsumer``, ``rmq.PullConsumer``) keep this side private: they
    register their inner ``PushConsumerImpl`` / ``PullConsumerImpl``."""

    @property
    def group(self) -> str: ...
    def heartbeat_data(self) -> dict[str, Any]: ...
    def subscribed_topics(self) -> set[str]: ...
    def has_subscribe_info(self, topic: str) -> bool: ...
    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    async def do_rebalance(self) -> None: ...
    async def persist_consumer_offset(self) -> None: ...
    def running_info(self) -> dict[str, Any]: ...
    def offset_table_json(self, topic: str) -> dict[MessageQueue, int]: ...
    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None: ...
    async def consume_message_directly(self, msg: MessageExt) -> dict[str, Any]: ...


class ProducerInner(Protocol):
    """What the instance needs from a producer (Java ``MQProducerInner``)."""

    @property
    def group(self) -> str: ...
    def publish_topics(self) -> set[str]: ...
    def check_transaction_state(self, broker_addr: str, ext: dict[str, Any], msg: MessageExt) -> None: ...


def local_ip(target: str | None = None) -> str:
    """The local IPv4 address used to reach ``target`` ("host:port"), else a best guess.

    A UDP ``connect`` sends nothing; it only asks the kernel which source address it would use.
    """
    host = (target or "").split(";")[0].rsplit(":", 1)[0] or "8.8.8.8"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


class _TopicPublishInfo:
    """The writable queues of a topic and the round-robin position used to pick one."""

    __slots__ = ("order_topic", "message_queues", "route", "send_which_queue")

    def __init__(self, topic: str, route: TopicRouteData) -> None:
        self.route = route
        self.order_topic = bool(route.order_topic_conf)
        mqs: list[MessageQueue] = []
        if route.order_topic_conf:
            # "broker-a:8;broker-b:8" replaces queueDatas for publishing (Java
            # MQClientInstance.topicRouteData2TopicPublishInfo, orderTopicConf)
            for item in route.order_topic_conf.split(";"):
                name, _, n = item.partition(":")
                mqs.extend(MessageQueue(topic, name, i) for i in range(int(n or 0)))
        else:
            masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
            for qd in route.queue_datas:
                if PermName.is_writeable(qd.perm) and qd.broker_name in masters:
                    mqs.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
        self.message_queues = mqs
        self.send_which_queue = random.randrange(0, 1 << 16)

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)


def subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """Readable queues of a topic."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if PermName.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }


class ClientInstance:
    """Shared state and timers of all clients with one client id on one event loop.

    Do not build it directly: producers and consumers obtain it with
    :func:`get_client_instance`.
    """

    def __init__(
        self,
        client_id: str,
        namesrv_addr: str | list[str],
        client_ip: str,
        credentials: SessionCredentials | None = None,
        tls: bool | ssl.SSLContext | None = None,
    ) -> None:
        self.client_id = client_id
        self.credentials = credentials
        self.client_ip = client_ip
        addrs = (
            namesrv_addr
            if isinstance(namesrv_addr, list)
            else [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        )
        if not addrs:
            raise ClientError("namesrv_addr is empty")
        self.namesrv_addrs = addrs
        #: the ``tls=`` its first client gave (Java: the instance's ``NettyClientConfig.useTLS``)
        self.tls = tls
        self.remoting = RemotingClient(addrs, tls=resolve_client_tls(tls))
        if credentials is not None:
            # Java MQClientInstance gets the AclClientRPCHook: every request it sends is signed.
            self.remoting.add_rpc_hook(AclClientRPCHook(credentials))
        self.api = ClientAPI(self.remoting)
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.publish_info: dict[str, _TopicPublishInfo] = {}
        #: broker name → {broker id → address}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, int] = {}
        self.start_time = int(time.time() * 1000)
        self._tasks = BackgroundTasks(f"client {client_id}", log)
        self._rebalance_wakeup = asyncio.Event()
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._started = False
        self._closed = False
        processor = _ClientRemotingProcessor(self)
        for code in (
            RequestCode.CHECK_TRANSACTION_STATE,
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
            RequestCode.GET_CONSUMER_RUNNING_INFO,
            RequestCode.CONSUME_MESSAGE_DIRECTLY,
        ):
            self.remoting.register_processor(code, processor)
        #: requests waiting for their replies (Java RequestFutureHolder), completed by the broker's
        #: PUSH_REPLY_MESSAGE_TO_CLIENT over this instance's connections
        self.request_futures = RequestFutureTable()
        self.remoting.register_processor(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, ReplyMessageClientProcessor(self.request_futures, client_id)
        )

    # ---------------------------------------------------------------- lifecycle

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._tasks.spawn(coro, f"rmq-{name}-{self.client_id}")

    def _ensure_started(self) -> None:
        if self._closed:
            raise ClientError(f"client instance {self.client_id} is closed")
        if self._started:
            return
        self._started = True
        self._spawn(self._periodic(POLL_NAMESRV_INTERVAL, self.update_all_topic_routes, 0.01), "routes")
        self._spawn(self._periodic(HEARTBEAT_INTERVAL, self._heartbeat_tick, 1.0), "heartbeat")
        self._spawn(
            self._periodic(PERSIST_OFFSET_INTERVAL, self.persist_all_consumer_offsets, PERSIST_OFFSET_INTERVAL),
            "persist",
        )
        self._spawn(self._rebalance_service(), "rebalance")

    async def _periodic(self, interval: float, fn: Callable[[], Awaitable[None]], first_delay: float) -> None:
        """Run ``fn`` every ``interval`` seconds until cancelled; a failing run is logged and the
        timer goes on (a broker or name server being down must not stop the client)."""
        await asyncio.sleep(first_delay)
        while True:
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - logged, timer keeps going
                _rlog.warning(
                    f"timer:{fn.__name__}", "client %s: %s failed: %s", self.client_id, fn.__name__, clip(repr(e))
                )
            await asyncio.sleep(interval)

    async def _heartbeat_tick(self) -> None:
        self.clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    async def _rebalance_service(self) -> None:
        """Rebalance every consumer every 20 s, or as soon as :meth:`rebalance_immediately` is
        called (a broker's NOTIFY_CONSUMER_IDS_CHANGED, a consumer starting)."""
        while True:
            await wait_event(self._rebalance_wakeup, REBALANCE_INTERVAL)
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def do_rebalance(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning(
                    "client %s: rebalance of group %s failed: %r", self.client_id, consumer.group, e, exc_info=True
                )

    async def register_producer(self, group: str, producer: ProducerInner) -> None:
        if group in self.producers:
            raise ClientError(
                f"producer group {group!r} is already registered in client {self.client_id}; "
                "use another instance_name for a second producer of the same group"
            )
        self._ensure_started()
        self.producers[group] = producer

    async def register_consumer(self, group: str, consumer: ConsumerInner) -> None:
        if group in self.consumers:
            raise ClientError(
                f"consumer group {group!r} is already registered in client {self.client_id}; "
                "use another instance_name for a second consumer of the same group"
            )
        self._ensure_started()
        self.consumers[group] = consumer

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(group, None)
        await self._maybe_close()

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(None, group)
        await self._maybe_close()

    async def _unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        """Tell every broker (masters and slaves) that this client left the group, so the others
        rebalance at once instead of after the broker's 120 s channel expiry."""
        addrs = {a for table in self.broker_addr_table.values() for a in table.values()}

        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group, timeout=3.0)
            except RMQError as e:
                log.info("client %s: unregister from %s failed: %r", self.client_id, addr, e)

        await asyncio.gather(*(one(a) for a in addrs))

    async def _maybe_close(self) -> None:
        if not self.producers and not self.consumers:
            await self.close()

    async def close(self) -> None:
        """Stop the timers and close every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        forget(self)
        await self._tasks.close()
        await self.remoting.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ---------------------------------------------------------------- routes

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for c in self.consumers.values():
            topics |= c.subscribed_topics()
        for p in self.producers.values():
            topics |= p.publish_topics()
        return topics

    async def update_all_topic_routes(self) -> None:
        for topic in self.topics_in_use():
            try:
                await self.update_topic_route(topic)
            except RMQError as e:
                _rlog.warning(
                    "route-refresh", "client %s: route of %s not refreshed: %s", self.client_id, topic, clip(repr(e))
                )

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4, timeout: float = 3.0
    ) -> bool:
        """Fetch ``topic``'s route and update the caches; True when it changed.

        With ``default_topic`` (TBW102) the default topic's route stands in for an unknown topic,
        with at most ``default_queue_nums`` write queues: the broker auto-creates the topic on the
        first send (Java ``updateTopicRouteInfoFromNameServer(topic, true, producer)``).
        """
        async with self._route_lock:
            route = await self.api.get_topic_route(default_topic or topic, timeout)
            if route is None:
                if not default_topic:
                    log.debug("client %s: no route for topic %s", self.client_id, topic)
                return False
            if default_topic:
                for qd in route.queue_datas:
                    n = min(default_queue_nums, qd.read_queue_nums)
                    qd.read_queue_nums = qd.write_queue_nums = n
            old = self.topic_route_table.get(topic)
            changed = not route.same_as(old) or (
                topic not in self.publish_info and any(topic in p.publish_topics() for p in self.producers.values())
            )
            if not changed:
                for c in self.consumers.values():
                    if topic in c.subscribed_topics() and not c.has_subscribe_info(topic):
                        changed = True
            if changed:
                new_broker = False
                for bd in route.broker_datas:
                    if self.broker_addr_table.get(bd.broker_name) != bd.broker_addrs:
                        new_broker = True
                    self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
                if new_broker and self._started and not self._closed:
                    # introduce ourselves to a new broker now, not at the next 30 s tick: it needs
                    # our channel for check-backs and our subscriptions for pulls
                    self._spawn(self.send_heartbeat_to_all_brokers(), "heartbeat-now")
                info = _TopicPublishInfo(topic, route)
                self.publish_info[topic] = info
                mqs = subscribe_queues(topic, route)
                for c in self.consumers.values():
                    if topic in c.subscribed_topics():
                        c.update_topic_subscribe_info(topic, mqs)
                self.topic_route_table[topic] = route
                log.info(
                    "client %s: route of %s is now %s",
                    self.client_id,
                    topic,
                    [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas],
                )
            return changed

    def clean_offline_brokers(self) -> None:
        """Forget brokers that no route mentions any more."""
        live = {
            (bd.broker_name, bid)
            for r in self.topic_route_table.values()
            for bd in r.broker_datas
            for bid in bd.broker_addrs
        }
        for name in list(self.broker_addr_table):
            table = self.broker_addr_table[name]
            for bid in list(table):
                if (name, bid) not in live:
                    log.info("client %s: broker %s[%d] %s left the routes", self.client_id, name, bid, table[bid])
                    del table[bid]
            if not table:
                del self.broker_addr_table[name]

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(
        self, broker_name: str, broker_id: int, only_this_broker: bool = False
    ) -> tuple[str, bool] | None:
        """(address, is_slave) for ``broker_id`` of ``broker_name``; for a slave id that is
        absent, the next one (``broker_id + 1``); else, unless ``only_this_broker``, any node of
        it, so consumers read a slave while the master is gone (Java
        ``MQClientInstance.findBrokerAddressInSubscribe``)."""
        table = self.broker_addr_table.get(broker_name)
        if not table:
            return None
        addr = table.get(broker_id)
        if addr is not None:
            return addr, broker_id != MASTER_ID
        if broker_id != MASTER_ID and (addr := table.get(broker_id + 1)) is not None:
            return addr, True
        if only_this_broker:
            return None
        bid, addr = next(iter(sorted(table.items())))
        return addr, bid != MASTER_ID

    async def find_broker_addr_refreshing(self, mq: MessageQueue, *, publish: bool) -> str | None:
        """The address of ``mq``'s broker, fetching ``mq.topic``'s route once when the cache has
        none: the master's (``publish=True``, for sends) or any (``find_broker_addr_in_admin``,
        for offsets and admin calls). None when the fresh route has none either."""
        find = self.find_broker_address_in_publish if publish else self.find_broker_addr_in_admin
        addr = find(mq.broker_name)
        if addr is None:
            await self.update_topic_route(mq.topic)
            addr = find(mq.broker_name)
        return addr

    def find_broker_addr_in_admin(self, broker_name: str) -> str | None:
        table = self.broker_addr_table.get(broker_name)
        if not table:
            return None
        return table.get(MASTER_ID) or next(iter(table.values()))

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """Members of ``group`` as a broker hosting ``topic`` knows them (any broker knows all)."""
        route = self.topic_route_table.get(topic)
        names = [bd.broker_name for bd in route.broker_datas] if route else list(self.broker_addr_table)
        random.shuffle(names)
        last: Exception | None = None
        for name in names:
            addr = self.find_broker_addr_in_admin(name)
            if addr is None:
                continue
            try:
                return await self.api.get_consumer_id_list(addr, group)
            except RMQError as e:
                last = e
        if last is not None:
            raise last
        return []

    # ---------------------------------------------------------------- heartbeats and offsets

    def heartbeat_data(self) -> dict[str, Any]:
        """The HEART_BEAT body (Java ``HeartbeatData``)."""
        return {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": g} for g in self.producers],
            "consumerDataSet": [c.heartbeat_data() for c in self.consumers.values()],
        }

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every broker we know (only masters when there are no consumers)."""
        if not self.producers and not self.consumers:
            return
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            only_masters = not self.consumers
            targets = [
                (name, bid, addr)
                for name, table in self.broker_addr_table.items()
                for bid, addr in table.items()
                if not only_masters or bid == MASTER_ID
            ]

            async def one(name: str, bid: int, addr: str) -> None:
                try:
                    self.broker_version_table[addr] = await self.api.send_heartbeat(addr, data)
                except RMQError as e:
                    _rlog.warning(
                        f"heartbeat:{addr}",
                        "client %s: heartbeat to %s[%d] %s failed: %s",
                        self.client_id,
                        name,
                        bid,
                        addr,
                        clip(repr(e)),
                    )

            await asyncio.gather(*(one(*t) for t in targets))

    async def persist_all_consumer_offsets(self) -> None:
        for c in list(self.consumers.values()):
            try:
                await c.persist_consumer_offset()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - one consumer failing must not stop the others
                log.warning("client %s: persisting offsets of %s failed: %r", self.client_id, c.group, e)


class _ClientRemotingProcessor:
    """Serves the requests a broker sends to a client (Java ClientRemotingProcessor)."""

    def __init__(self, instance: ClientInstance) -> None:
        self._instance = weakref.ref(instance)

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand] | None:
        inst = self._instance()
        if inst is None or inst.closed:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "client instance closed", {})
        code = cmd.code
        if code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                group = clip(NotifyConsumerIdsChangedRequestHeader.from_ext_fields(cmd.ext_fields or {}).consumer_group)
            except RemotingCommandError:
                group = "?"  # rebalance anyway: the broker means some group of ours changed
            log.info(
                "client %s: broker %s says the members of %s changed; rebalancing now",
                inst.client_id,
                getattr(conn, "remote_addr", "?"),
                group,
            )
            inst.rebalance_immediately()
            return None
        if code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction_state(inst, conn, cmd)  # oneway: no response
            return None
        return self._consumer_request(inst, cmd)

    def _check_transaction_state(self, inst: ClientInstance, conn: Any, cmd: RemotingCommand) -> None:
        try:
            msgs = decode_messages(cmd.body_bytes())
        except ValueError as e:
            log.warning("client %s: CHECK_TRANSACTION_STATE with an undecodable message: %s", inst.client_id, e)
            return None
        if not msgs:
            log.warning("client %s: CHECK_TRANSACTION_STATE without a message", inst.client_id)
            return None
        msg = msgs[0]
        group = msg.properties.get("PGROUP")
        producer = inst.producers.get(group or "")
        if producer is None:
            log.warning("client %s: CHECK_TRANSACTION_STATE for unknown producer group %r", inst.client_id, group)
            return None
        producer.check_transaction_state(conn.remote_addr, cmd.ext_fields or {}, msg)
        return None

    async def _consumer_request(self, inst: ClientInstance, cmd: RemotingCommand) -> RemotingCommand:
        header_cls = _CONSUMER_REQUEST_HEADERS.get(cmd.code)
        if header_cls is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"code {cmd.code} not supported", {})
        try:
            h: Any = header_cls.from_ext_fields(cmd.ext_fields or {})
        except RemotingCommandError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(e), {})
        # the group is `consumerGroup` in some of Java's headers and `group` in others
        group = h.consumer_group if hasattr(h, "consumer_group") else h.group
        consumer = inst.consumers.get(group)
        if consumer is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"the consumer group {clip_remark(group)!r} is not online in client {inst.client_id}",
                {},
            )
        try:
            if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                info = consumer.running_info()
                props = {str(k): str(v) for k, v in info.get("properties", {}).items()}
                props["PROP_NAMESERVER_ADDR"] = ";".join(inst.namesrv_addrs)
                props["PROP_CLIENT_VERSION"] = "V4_9_8"
                running = ConsumerRunningInfo(
                    props,
                    tuple(SubscriptionInfo.from_json(sd) for sd in info.get("subscriptionSet", ())),
                    dict(info.get("mqTable", {})),
                    dict(info.get("statusTable", {})),
                    str(info.get("jstack") or ""),
                )
                return cmd.response(ResponseCode.SUCCESS, None, {}, running.encode())
            if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
                status = GetConsumerStatusBody(consumer.offset_table_json(h.topic))
                return cmd.response(ResponseCode.SUCCESS, None, {}, status.encode())
            if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                # Java MQClientInstance.resetOffset: the body's table (fastjson object keys, or
                # the C++ list form), applied to this topic's queues
                try:
                    body = ResetOffsetBody.decode(cmd.body_bytes() or b"{}")
                    table = {mq: off for mq, off in body.offset_table.items() if mq.topic == h.topic}
                except ValueError as e:
                    raise ClientError(f"RESET_CONSUMER_CLIENT_OFFSET body is not understood: {e}") from None
                await consumer.reset_offset(h.topic, table)
                return cmd.response(ResponseCode.SUCCESS, None, {})
            if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                msgs = decode_messages(cmd.body_bytes(), h.broker_name or "")
                if not msgs:
                    return cmd.response(ResponseCode.SYSTEM_ERROR, "no message in the request", {})
                result = await consumer.consume_message_directly(msgs[0])
                return cmd.response(ResponseCode.SUCCESS, None, {}, json.dumps(result).encode())
        except Exception as e:
            log.warning("client %s: request %d failed: %r", inst.client_id, cmd.code, e, exc_info=True)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}", {})
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"code {cmd.code} not supported", {})


# The broker → client requests a consumer answers, each read through its typed header
# (Java ClientRemotingProcessor.processRequest).
_CONSUMER_REQUEST_HEADERS: dict[int, type[Header]] = {
    RequestCode.GET_CONSUMER_RUNNING_INFO: GetConsumerRunningInfoRequestHeader,
    RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: GetConsumerStatusRequestHeader,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: ResetOffsetRequestHeader,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: ConsumeMessageDirectlyResultRequestHeader,
}


# ---------------------------------------------------------------------------------------------
# The registry: one instance per (event loop, client id)


def get_client_instance(
    namesrv_addr: str | list[str],
    *,
    instance_name: str = "DEFAULT",
    client_ip: str | None = None,
    credentials: SessionCredentials | None = None,
    tls: bool | ssl.SSLContext | None = None,
    change_instance_name_to_pid: bool = False,
) -> ClientInstance:
    """The instance for ``ip@pid#instance_name`` on the running loop, created on first use.

    ``change_instance_name_to_pid`` (clustering consumers, as Java's call
    ``ClientConfig.changeInstanceNameToPID`` at start): an instance name of ``"DEFAULT"``
    becomes ``pid#nanotime``, so the client id is Java 4.9.8's ``ip@pid#nanotime`` and each
    such client has an instance of its own. Default False.

    Clients sharing an instance share its connections and its signer, so they must agree on
    ``tls`` and the ACL credentials.

    Raises:
        ClientError: the instance exists with other ACL credentials or another ``tls`` (give
            the client another ``instance_name``).
    """
    loop = asyncio.get_running_loop()
    first = namesrv_addr[0] if isinstance(namesrv_addr, list) else namesrv_addr
    ip = client_ip or local_ip(first)
    if change_instance_name_to_pid and instance_name == "DEFAULT":
        client_id = f"{ip}@{os.getpid()}#{time.monotonic_ns()}"
    else:
        client_id = f"{ip}@{os.getpid()}#{instance_name}"
    table = instances_of(loop)
    inst = table.get(client_id)
    if inst is None or inst.closed:
        inst = ClientInstance(client_id, namesrv_addr, ip, credentials, tls)
        table[client_id] = inst
    elif inst.credentials != credentials:
        raise ClientError(
            f"client {client_id} already runs with other ACL credentials; give this producer or "
            "consumer another instance_name"
        )
    elif not (inst.tls is tls or (not inst.tls and not tls)):
        raise ClientError(
            f"client id {client_id} already connects with tls={inst.tls!r}; a client asking "
            f"for tls={tls!r} needs another instance_name"
        )
    return inst
