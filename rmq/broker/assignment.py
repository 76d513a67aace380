"""Server-side assignment: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401).

A Java 5 push consumer with ``clientRebalance=false`` (and every Java 5 push consumer whose
group is in POP mode) does not compute its queues itself: it asks a broker with
QUERY_ASSIGNMENT and pulls or pops what the answer lists (Java ``QueryAssignmentProcessor``).
``mqadmin setConsumeMode`` stores the (topic, group)'s mode with SET_MESSAGE_REQUEST_MODE.

Bodies (fastjson, keys as Java's fields)::

    QUERY_ASSIGNMENT     {"clientId","consumerGroup","messageModel":"CLUSTERING"|"BROADCASTING",
                          "strategyName":"AVG"|"AVG_BY_CIRCLE","topic"}
    answer               {"messageQueueAssignments":[{"messageQueue":{"brokerName","queueId","topic"},
                          "mode":"PULL"|"POP"}, ...]}   (the key is left out when Java's set is null)
    SET_MESSAGE_REQUEST_MODE {"consumerGroup","mode":"PULL"|"POP","popShareQueueNum":0,"topic"}

The topic's queues come from the name servers (the topic may span brokers), through the
broker's own name-server client: :class:`TopicRouteCache` (Java ``TopicRouteInfoManager``)
keeps each answer for ``loadBalancePollNameServerInterval`` (30 s), asks once per topic at a
time, with Java's 3 s timeout, and holds at most ``MAX_TOPICS`` routes.

The mode table is persisted as Java's ``config/messageRequestMode.json``
(``{"messageRequestModeMap":{topic:{group:{...SET_MESSAGE_REQUEST_MODE body...}}}}``), written
off the loop by the broker's ``ConfigPersister`` like every table, bounded by
``maxMessageRequestModes``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq.broker.managers.config_store import ConfigManager
from rmq.broker.processors.common import bad_request, parse_json_body, to_json_bytes
from rmq.common.allocate import STRATEGIES, QueueAllocator
from rmq.common.constants import MixAll
from rmq.common.log import RateLimitedLog
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.assignment import MESSAGE_REQUEST_MODES as MODES
from rmq.protocol.requests.assignment import assignment_json
from rmq.protocol.requests.namesrv import get_route_info, parse_topic_route
from rmq.types import MessageQueue

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker.assignment")
_rl = RateLimitedLog(log)

MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
#: Java QueryAssignmentProcessor registers only these two strategies by name.
SERVER_STRATEGIES: dict[str, QueueAllocator] = {k: STRATEGIES[k] for k in ("AVG", "AVG_BY_CIRCLE")}
_LMQ_PREFIX = "%LMQ%"  # Java MixAll.LMQ_PREFIX; an LMQ has the one queue LMQ_QUEUE_ID 0
_MAX_BODY = 64 * 1024


@dataclass(slots=True, frozen=True)
class RequestMode:
    """One SET_MESSAGE_REQUEST_MODE body (Java ``SetMessageRequestModeRequestBody``)."""

    topic: str
    consumer_group: str
    mode: str = "PULL"
    pop_share_queue_num: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "consumerGroup": self.consumer_group,
            "mode": self.mode,
            "popShareQueueNum": self.pop_share_queue_num,
            "topic": self.topic,
        }

    @classmethod
    def from_json(cls, d: Any) -> RequestMode:
        """Parse and check a body; ``ValueError`` naming the field that is wrong."""
        if not isinstance(d, dict):
            raise ValueError("body must be a JSON object")
        topic, group = d.get("topic"), d.get("consumerGroup")
        if not isinstance(topic, str) or not topic:
            raise ValueError("topic is missing")
        if not isinstance(group, str) or not group:
            raise ValueError("consumerGroup is missing")
        mode = d.get("mode", "PULL")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        num = d.get("popShareQueueNum", 0)
        if isinstance(num, bool) or not isinstance(num, int) or not -(2**31) <= num < 2**31:
            raise ValueError(f"popShareQueueNum must be a 32-bit integer, not {num!r}")
        return cls(topic, group, mode, num)


class MessageRequestModeManager(ConfigManager):
    """The (topic, group) → mode table (Java ``MessageRequestModeManager``), at most
    ``max_entries`` entries; persisted as Java's JSON file rather than msgpack so that a Java
    broker's ``messageRequestMode.json`` loads as is."""

    file_name = "messageRequestMode.json"

    def __init__(self, config_dir: str, max_entries: int = 100_000) -> None:
        super().__init__(config_dir)
        self.max_entries = max_entries
        self.table: dict[str, dict[str, RequestMode]] = {}
        self._count = 0

    def get(self, topic: str, group: str) -> RequestMode | None:
        return self.table.get(topic, {}).get(group)

    def set(self, mode: RequestMode) -> bool:
        """Store ``mode``; False (nothing changed) when the table is full and the entry is new."""
        groups = self.table.get(mode.topic)
        if groups is None or mode.consumer_group not in groups:
            if self._count >= self.max_entries:
                return False
            self._count += 1
        self.table.setdefault(mode.topic, {})[mode.consumer_group] = mode
        self.mark_dirty()
        return True

    def encode(self) -> object:
        return {
            "messageRequestModeMap": {
                t: {g: m.to_json() for g, m in groups.items()} for t, groups in self.table.items()
            }
        }

    def decode(self, obj: object) -> None:
        table: dict[str, dict[str, RequestMode]] = {}
        count = 0
        raw = obj.get("messageRequestModeMap") if isinstance(obj, dict) else None
        for topic, groups in (raw or {}).items():
            for group, body in (groups or {}).items():
                m = RequestMode.from_json({"topic": topic, "consumerGroup": group, **body})
                table.setdefault(topic, {})[group] = m
                count += 1
        self.table, self._count = table, count

    # Java's ConfigManager writes JSON: the snapshot and load are JSON here, not msgpack.
    def snapshot(self) -> tuple[int, bytes]:
        data = json.dumps(self.encode(), ensure_ascii=False, sort_keys=True).encode()
        self._snapshots += 1
        self.dirty = False
        return self._snapshots, data

    def load(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return False
        try:
            self.decode(json.loads(raw))
            return True
        except Exception as e:  # noqa: BLE001 - any decode failure means a damaged file
            log.error("cannot decode %s (%s); starting with an empty mode table", self.path, e)
            return False


class TopicRouteCache:
    """The topics' readable queues from the name servers (Java ``TopicRouteInfoManager``
    ``getTopicSubscribeInfo``): cached ``ttl`` seconds, one lookup per topic at a time, at
    most ``MAX_TOPICS`` cached and ``MAX_LOOKUPS`` lookups under way."""

    MAX_TOPICS = 10_000
    MAX_LOOKUPS = 64
    TIMEOUT = 3.0  # Java GET_TOPIC_ROUTE_TIMEOUT

    def __init__(self, ctx: BrokerContext, ttl: float = 30.0) -> None:
        self.ctx = ctx
        self.ttl = ttl
        self._cache: OrderedDict[str, tuple[float, frozenset[MessageQueue]]] = OrderedDict()
        self._lookups: dict[str, asyncio.Future[frozenset[MessageQueue] | None]] = {}

    async def subscribe_info(self, topic: str) -> frozenset[MessageQueue] | None:
        """The topic's readable queues on every broker, or None (no route, or no name server answered)."""
        hit = self._cache.get(topic)
        now = time.monotonic()
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        running = self._lookups.get(topic)
        if running is not None:
            return await asyncio.shield(running)
        if len(self._lookups) >= self.MAX_LOOKUPS:
            _rl.warning("route-lookups", "route lookups for QUERY_ASSIGNMENT: %d under way, at most", self.MAX_LOOKUPS)
            return hit[1] if hit is not None else None
        fut: asyncio.Future[frozenset[MessageQueue] | None] = asyncio.get_running_loop().create_future()
        self._lookups[topic] = fut
        try:
            result = await self._lookup(topic)
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: waiters see it, nobody is warned twice
            raise
        finally:
            self._lookups.pop(topic, None)
        if result is not None:
            self._cache[topic] = (time.monotonic(), result)
            self._cache.move_to_end(topic)
            while len(self._cache) > self.MAX_TOPICS:
                self._cache.popitem(last=False)
        elif hit is not None:
            result = hit[1]  # Java keeps the last known route when the name server fails
        fut.set_result(result)
        return result

    async def _lookup(self, topic: str) -> frozenset[MessageQueue] | None:
        api = self.ctx.broker_outer_api
        for addr in api.namesrv_addrs:
            try:
                resp = await api.client.invoke(addr, get_route_info(topic), timeout=self.TIMEOUT)
                route = parse_topic_route(resp)
            except (TimeoutError, OSError, RemotingCommandError) as e:
                _rl.warning("route-lookup-" + addr, "route of %s from name server %s failed: %s", topic, addr, e)
                continue
            if route is None:
                return None
            return frozenset(MessageQueue(topic, b, q) for b, q in route.readable_queues())
        return None


class QueryAssignmentProcessor:
    """Codes 400 and 401 (Java ``QueryAssignmentProcessor``)."""

    codes = (RequestCode.QUERY_ASSIGNMENT, RequestCode.SET_MESSAGE_REQUEST_MODE)

    def __init__(self, ctx: BrokerContext, modes: MessageRequestModeManager) -> None:
        self.ctx = ctx
        self.modes = modes
        self.routes = TopicRouteCache(ctx)

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if len(cmd.body_bytes() or b"") > _MAX_BODY:
            return bad_request(conn, cmd, RemotingCommandError(f"request body over {_MAX_BODY} bytes"))
        if cmd.code == RequestCode.SET_MESSAGE_REQUEST_MODE:
            return self._set_mode(conn, cmd)
        return await self._query(conn, cmd)

    def _set_mode(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            body = RequestMode.from_json(parse_json_body(cmd, "SET_MESSAGE_REQUEST_MODE"))
        except ValueError as e:
            return bad_request(conn, cmd, RemotingCommandError(f"SET_MESSAGE_REQUEST_MODE: {e}"))
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        if body.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            return cmd.response(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode", {})
        if self.ctx.topic_config_manager.select_topic_config(body.topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{body.topic}] not exist", {})
        if self.ctx.subscription_group_manager.find_subscription_group_config(body.consumer_group) is None:
            return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist", {})
        if not self.modes.set(body):
            _rl.warning("modes-full", "message request modes: table full (%d entries)", self.modes.max_entries)
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"message request mode table is full: at most {self.modes.max_entries} (maxMessageRequestModes)",
                {},
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})

    async def _query(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            body = parse_json_body(cmd, "QUERY_ASSIGNMENT")
            if not isinstance(body, dict):
                raise RemotingCommandError("QUERY_ASSIGNMENT: body must be a JSON object")
            fields = {}
            for key in ("topic", "consumerGroup", "clientId"):
                v = body.get(key)
                if not isinstance(v, str) or not v:
                    raise RemotingCommandError(f"QUERY_ASSIGNMENT: {key} is missing")
                fields[key] = v
            model = body.get("messageModel", "CLUSTERING")
            if model not in MESSAGE_MODELS:
                raise RemotingCommandError(
                    f"QUERY_ASSIGNMENT: messageModel must be one of {', '.join(MESSAGE_MODELS)}, not {model!r}"
                )
            strategy = body.get("strategyName")
            if strategy is not None and not isinstance(strategy, str):
                raise RemotingCommandError("QUERY_ASSIGNMENT: strategyName must be a string")
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        topic, group = fields["topic"], fields["consumerGroup"]
        mode = self.modes.get(topic, group)
        if mode is None:
            bc = self.ctx.broker_config
            # Java: a retry topic is always PULL; else the broker's default mode.
            m = "PULL" if topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) else str(bc.default_message_request_mode)
            mode = RequestMode(topic, group, m, int(bc.default_pop_share_queue_num) if m == "POP" else 0)
        queues = await self._load_balance(topic, group, fields["clientId"], model, strategy or "", mode)
        out: dict[str, Any] = {}
        if queues is not None:
            out["messageQueueAssignments"] = [assignment_json(mq, mode.mode) for mq in sorted(set(queues))]
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(out))

    async def _load_balance(
        self, topic: str, group: str, client_id: str, model: str, strategy_name: str, mode: RequestMode
    ) -> list[MessageQueue] | None:
        """Java ``doLoadBalance``: None means "no valid answer" (the client keeps what it has),
        an empty list "drop every queue"."""
        if model == "BROADCASTING":
            mqs = await self.routes.subscribe_info(topic)
            if mqs is None:
                _rl.warning(
                    "qa-no-topic", "QueryLoad: no assignment for group[%s], topic[%s] does not exist", group, topic
                )
            return None if mqs is None else list(mqs)
        if topic.startswith(_LMQ_PREFIX):
            mq_set: frozenset[MessageQueue] | None = frozenset(
                {MessageQueue(topic, self.ctx.broker_config.broker_name, 0)}
            )
        else:
            mq_set = await self.routes.subscribe_info(topic)
        if mq_set is None:
            if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                _rl.warning(
                    "qa-no-topic", "QueryLoad: no assignment for group[%s], topic[%s] does not exist", group, topic
                )
            return None
        if not self.ctx.broker_config.server_load_balancer_enable:
            return list(mq_set)
        info = self.ctx.consumer_manager.get_consumer_group_info(group)
        if info is None:
            _rl.warning("qa-no-cids", "QueryLoad: no assignment for group[%s] topic[%s], no consumer ids", group, topic)
            return None
        cids = info.all_client_ids()  # sorted
        strategy = SERVER_STRATEGIES.get(strategy_name)
        if strategy is None:
            _rl.warning("qa-strategy", "QueryLoad: unsupported strategy [%s]", strategy_name)
            return None
        mq_all = sorted(mq_set)
        if mode.mode == "POP":
            if not mq_all and 0 < mode.pop_share_queue_num < len(cids) - 1:
                return None  # Java's strategies throw on no queues: "no valid answer"

            return allocate_for_pop(strategy, group, client_id, mq_all, cids, mode.pop_share_queue_num)
        if not mq_all:
            return None
        return strategy(group, client_id, mq_all, cids)


def allocate_for_pop(
    strategy: QueueAllocator,
    group: str,
    client_id: str,
    mq_all: list[MessageQueue],
    cids: list[str],
    pop_share_queue_num: int,
) -> list[MessageQueue]:
    """Java ``QueryAssignmentProcessor.allocate4Pop``.

    ``pop_share_queue_num <= 0`` or at least ``len(cids) - 1``: every client pops every
    broker's queues, each answered once per broker as queueId -1 ("any queue of that broker").
    Otherwise, with no more clients than queues, a client gets its own share plus the shares of
    the ``pop_share_queue_num`` clients after it in the sorted list; with more clients than
    queues, client i gets queue ``i % len(queues)``.
    """
    if pop_share_queue_num <= 0 or pop_share_queue_num >= len(cids) - 1:
        return [MessageQueue(mq.topic, mq.broker_name, -1) for mq in mq_all]
    if len(cids) <= len(mq_all):
        result = list(strategy(group, client_id, mq_all, cids))
        if client_id in cids:
            index = cids.index(client_id)
            for _ in range(pop_share_queue_num):
                index = (index + 1) % len(cids)
                result.extend(strategy(group, cids[index], mq_all, cids))
        return result
    if client_id not in cids:
        return []
    return [mq_all[cids.index(client_id) % len(mq_all)]]
