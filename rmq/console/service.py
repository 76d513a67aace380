"""What the console's pages show and do, as plain JSON data over :class:`rmq.client.admin.Admin`
(the Java rocketmq-dashboard's ``*ServiceImpl`` classes: ClusterServiceImpl, TopicServiceImpl,
ConsumerServiceImpl, ProducerServiceImpl, MessageServiceImpl, DlqMessageServiceImpl).

Every method returns dicts, lists and scalars with camelCase keys (what the page's script
reads). Nothing here renders HTML: the page builds its elements from text nodes, so a topic
name or a message body from a broker is never markup. Remote calls carry the admin's timeout;
fan-outs over groups or topics run ``FAN_OUT`` at a time; lists are capped (``MAX_*``).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from rmq.client.admin import Admin, AdminError
from rmq.client.trace import TraceContext, TraceType, decode_trace_data
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.log import clip
from rmq.common.message import MessageConst, java_str
from rmq.common.route import TopicRouteData
from rmq.common.topic_attributes import message_type_of_attributes
from rmq.errors import BrokerResponseError, RemotingError
from rmq.protocol.body.conns import version_desc
from rmq.protocol.body.stats import ConsumeStats
from rmq.protocol.codes import ResponseCode
from rmq.protocol.requests.acl import PlainAccessConfig
from rmq.types import MessageExt, MessageQueue

__all__ = [
    "BODY_PREVIEW_BYTES",
    "MAX_KEY_MESSAGES",
    "MAX_TIME_RANGE_MESSAGES",
    "SYSTEM_GROUPS",
    "ConsoleService",
    "first_number",
    "is_system_group",
    "topic_kind",
]

_T = TypeVar("_T")

#: Admin lookups one page request keeps in flight at once (groups' lag, topics' routes).
FAN_OUT = 8
#: The most messages a query by topic and time range returns (rocketmq-dashboard's 2000).
MAX_TIME_RANGE_MESSAGES = 2000
#: The most messages a query by key returns (mqadmin queryMsgByKey's and the dashboard's 64).
MAX_KEY_MESSAGES = 64
#: Bytes of a message body shown in its detail (the rest is counted, not sent to the page).
BODY_PREVIEW_BYTES = 64 * 1024
#: Bytes of a body shown in a message list row.
ROW_PREVIEW_BYTES = 120
#: The largest test message the console sends (a web form is no bulk loader).
MAX_TEST_BODY = 64 * 1024
#: Groups whose connections the group list looks up (beyond it: "?" online).
MAX_GROUP_LOOKUPS = 500
#: Messages a trace lookup by key shows (their traces each).
MAX_TRACE_MESSAGES = 64
#: Rows of the RocketMQ 5 tables (topic types, pending timers).
MAX_V5_ROWS = 2000


#: The groups a broker creates itself (Java ``SubscriptionGroupManager.init``) and the tools'
#: groups: rocketmq-dashboard's system groups, hidden from the group list unless asked for.
SYSTEM_GROUPS = frozenset(
    {
        MixAll.TOOLS_CONSUMER_GROUP,
        MixAll.FILTERSRV_CONSUMER_GROUP,
        MixAll.SELF_TEST_CONSUMER_GROUP,
        "CID_ONS-HTTP-PROXY",
        MixAll.CID_ONSAPI_PERMISSION_GROUP,
        MixAll.CID_ONSAPI_OWNER_GROUP,
        MixAll.CID_ONSAPI_PULL_GROUP,
        MixAll.MONITOR_CONSUMER_GROUP,
    }
)


def is_system_group(group: str) -> bool:
    """A broker's own or a tool's group (see ``SYSTEM_GROUPS``, and ``CID_RMQ_SYS_*``)."""
    return group in SYSTEM_GROUPS or MixAll.is_sys_consumer_group(group)


#: what the topic form offers for ``message.type`` (MIXED needs a broker switch; left out)
_TOPIC_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")


def topic_kind(topic: str) -> str:
    """The topic list's filter classes: ``retry``, ``dlq``, ``system`` or ``normal``."""
    if MixAll.is_retry_topic(topic):
        return "retry"
    if MixAll.is_dlq_topic(topic):
        return "dlq"
    if TopicValidator.is_system_topic(topic):
        return "system"
    return "normal"


def first_number(text: str | None) -> float:
    """The first figure of a runtime-info value (``putTps`` is ``"10.0 5.2 3.1"``: the 10 s,
    1 min and 10 min rates); 0.0 when there is none."""
    if not text:
        return 0.0
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


def body_preview(body: bytes, limit: int) -> dict[str, Any]:
    """A body as text when it is UTF-8, else base64; cut to ``limit`` bytes (``truncated``)."""
    part = body[:limit]
    try:
        text = part.decode("utf-8")
        encoding = "utf-8"
    except UnicodeDecodeError as e:
        if e.start >= len(part) - 3 and len(body) > limit:  # a character cut in two at the limit
            text = part[: e.start].decode("utf-8", "replace")
            encoding = "utf-8"
        else:
            text = base64.b64encode(part).decode("ascii")
            encoding = "base64"
    return {"text": text, "encoding": encoding, "size": len(body), "truncated": len(body) > limit}


def message_row(m: MessageExt) -> dict[str, Any]:
    """One message of a list: ids, queue, times, keys, tags and a short body preview."""
    return {
        "msgId": m.msg_id,
        "offsetMsgId": m.offset_msg_id,
        "topic": m.real_topic or m.topic,
        "brokerName": m.broker_name,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "tags": m.tags or "",
        "keys": list(m.keys),
        "storeTimestamp": m.store_timestamp,
        "bornTimestamp": m.born_timestamp,
        "bornHost": m.born_host,
        "storeHost": m.store_host,
        "reconsumeTimes": m.reconsume_times,
        "bodySize": len(m.body),
        "preview": body_preview(m.body, ROW_PREVIEW_BYTES)["text"],
    }


def _text(value: object) -> str:
    """A trace field as text: Java's encoder writes a null field as ``null``; shown empty."""
    text = java_str(value)
    return "" if text == "null" else text


def _mq(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


async def _bounded(items: Iterable[_T], fn: Callable[[_T], Awaitable[Any]], limit: int = FAN_OUT) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(item: _T) -> Any:
        async with gate:
            return await fn(item)

    return list(await asyncio.gather(*(one(i) for i in items)))


def _is_refusal(e: BaseException) -> bool:
    return isinstance(e, (AdminError, BrokerResponseError))


class ConsoleService:
    """The console's reads and writes over one :class:`Admin` (which the caller owns).

    Args:
        admin: the admin client; its per-call timeout bounds every remote call.
    """

    def __init__(self, admin: Admin) -> None:
        self.admin = admin

    # -- cluster -------------------------------------------------------------------------

    async def cluster(self) -> dict[str, Any]:
        """Clusters, their brokers (every address of each) and each reachable broker's
        version, TPS, today's totals, disk use and runtime; an unreachable broker shows its
        error instead of figures (ClusterServiceImpl.list)."""
        info = await self.admin.examine_broker_cluster_info()
        rows: list[dict[str, Any]] = []
        for cluster, names in sorted(info.cluster_addr_table.items()):
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                if bd is None:
                    continue
                for broker_id, addr in sorted(bd.broker_addrs.items()):
                    rows.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id, "addr": addr})

        async def stats(row: dict[str, Any]) -> None:
            try:
                kv = await self.admin.fetch_broker_runtime_stats(row["addr"])
            except (AdminError, BrokerResponseError, RemotingError, OSError, TimeoutError) as e:
                row["error"] = str(e) or type(e).__name__
                return
            row.update(
                {
                    "version": kv.get("brokerVersionDesc", ""),
                    "putTps": first_number(kv.get("putTps")),
                    "getTps": first_number(kv.get("getTransferedTps")),
                    "msgPutTotalTodayNow": int(first_number(kv.get("msgPutTotalTodayNow"))),
                    "msgGetTotalTodayNow": int(first_number(kv.get("msgGetTotalTodayNow"))),
                    "msgPutTotalYesterday": int(
                        first_number(kv.get("msgPutTotalTodayMorning"))
                        - first_number(kv.get("msgPutTotalYesterdayMorning"))
                    ),
                    "commitLogDiskRatio": first_number(kv.get("commitLogDiskRatio")),
                    "runtime": kv.get("runtime", ""),
                    "bootTimestamp": int(first_number(kv.get("bootTimestamp"))),
                }
            )

        await _bounded(rows, stats)
        return {"brokers": rows, "namesrvAddrs": list(self.admin.namesrv_addrs)}

    async def broker_runtime(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO of one broker, every key."""
        return dict(sorted((await self.admin.fetch_broker_runtime_stats(addr)).items()))

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG of one broker, every property (sorted by name)."""
        return dict(sorted((await self.admin.get_broker_config(addr)).items()))

    # -- topics --------------------------------------------------------------------------

    async def topics(self) -> list[dict[str, Any]]:
        """Every topic the name server knows, with its class (normal, retry, dlq, system),
        sorted by name (the name server lists cluster and broker names among topics too, as
        Java's does: they are system topics here)."""
        info = await self.admin.examine_broker_cluster_info()
        non_topics = (
            set(info.cluster_addr_table)
            | set(info.broker_addr_table)
            | {MixAll.get_reply_topic(c) for c in info.cluster_addr_table}
        )
        out = []
        for t in sorted(set(await self.admin.fetch_all_topic_list())):
            kind = "system" if t in non_topics else topic_kind(t)
            out.append({"topic": t, "kind": kind})
        return out

    async def create_or_update_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int,
        write_queue_nums: int,
        perm: int,
        order: bool = False,
        cluster: str | None = None,
        broker_addr: str | None = None,
        message_type: str | None = None,
    ) -> list[str]:
        """UPDATE_AND_CREATE_TOPIC on ``broker_addr``, else every master of ``cluster``, else
        every master; the addresses written (TopicServiceImpl.createOrUpdate). ``message_type``
        (NORMAL, FIFO, DELAY, TRANSACTION; default None: unchanged) sets the topic's Java 5
        ``message.type`` attribute."""
        if message_type is not None and message_type not in _TOPIC_TYPES:
            raise ValueError(f"messageType must be one of {', '.join(_TOPIC_TYPES)}, not {message_type[:40]!r}")
        TopicValidator.validate_topic(topic)
        if TopicValidator.is_system_topic(topic) or MixAll.is_retry_topic(topic) or MixAll.is_dlq_topic(topic):
            raise ValueError(f"the topic {topic} is a system, retry or DLQ topic; the console does not change it")
        for name, n in (("readQueueNums", read_queue_nums), ("writeQueueNums", write_queue_nums)):
            if not 1 <= n <= 1024:
                raise ValueError(f"{name} must be 1..1024, not {n}")
        if perm not in (PermName.PERM_WRITE, PermName.PERM_READ, PermName.PERM_READ | PermName.PERM_WRITE):
            raise ValueError(f"perm must be 2 (W), 4 (R) or 6 (RW), not {perm}")
        addrs = await self.admin.master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self.admin.create_and_update_topic_config(
                addr,
                topic,
                read_queue_nums=read_queue_nums,
                write_queue_nums=write_queue_nums,
                perm=perm,
                order=order,
                message_type=message_type,
            )
        return addrs

    async def topic_config(self, topic: str) -> dict[str, Any]:
        """The topic's Java 5 attributes as its first broker has them: ``messageType`` (None
        for an untyped topic, which takes every kind of message) and ``attributes``."""
        tc = await self.admin.examine_topic_config(topic)
        attrs = tc.get("attributes") if tc is not None else None
        attrs = attrs if isinstance(attrs, dict) else {}
        t = message_type_of_attributes(attrs)
        return {"messageType": t.value if t is not None else None, "attributes": attrs}

    async def delete_topic(self, topic: str) -> list[str]:
        """DELETE_TOPIC_IN_BROKER on every master of the topic's route, then
        DELETE_TOPIC_IN_NAMESRV (mqadmin deleteTopic); the broker addresses."""
        route = await self.admin.examine_topic_route_info(topic)
        addrs = [a for bd in route.broker_datas if (a := bd.master_addr) is not None]
        for addr in addrs:
            await self.admin.delete_topic_in_broker(addr, topic)
        await self.admin.delete_topic_in_namesrv(topic)
        return addrs

    async def topic_status(self, topic: str) -> list[dict[str, Any]]:
        """Per queue: min and max offsets and the last update time (TopicStatsTable)."""
        table = await self.admin.examine_topic_stats(topic)
        return [
            {
                **_mq(mq),
                "minOffset": o.min_offset,
                "maxOffset": o.max_offset,
                "lastUpdateTimestamp": o.last_update_timestamp,
            }
            for mq, o in sorted(table.offset_table.items())
        ]

    async def topic_route(self, topic: str) -> dict[str, Any]:
        """The topic's route: its brokers (addresses by id) and queue data (nums, perm)."""
        return route_json(await self.admin.examine_topic_route_info(topic))

    async def topic_consumers(self, topic: str) -> list[dict[str, Any]]:
        """The groups consuming ``topic`` with their lag on it, TPS and per-queue offsets
        (TopicServiceImpl.queryConsumeStatsListByTopicName)."""
        groups = await self.admin.query_topic_consume_by_who(topic)

        async def one(group: str) -> dict[str, Any]:
            try:
                stats = await self.admin.examine_consume_stats(group, topic)
            except AdminError as e:
                return {"group": group, "diffTotal": None, "consumeTps": 0.0, "queues": [], "error": str(e)}
            return {"group": group, **consume_stats_json(stats)}

        return await _bounded(groups, one)

    async def send_test_message(
        self, topic: str, body: str, keys: str = "", tags: str = "", message_group: str = ""
    ) -> dict[str, Any]:
        """mqadmin sendMessage: one message through a producer of the admin's own
        (``message_group``: a FIFO message of that group; default "": none)."""
        data = body.encode("utf-8")
        if len(data) > MAX_TEST_BODY:
            raise ValueError(f"the body is {len(data)} bytes; the console sends at most {MAX_TEST_BODY}")
        result = await self.admin.send_message(
            topic, data, keys=keys or None, tags=tags or None, message_group=message_group or None
        )
        return {
            "sendStatus": result.status.name,
            "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id,
            "queueOffset": result.queue_offset,
            **_mq(result.message_queue),
        }

    # -- consumer groups ------------------------------------------------------------------

    async def groups(self) -> list[dict[str, Any]]:
        """Every subscription group of every master with its lag, consume TPS, online members,
        message model and broker names (ConsumerServiceImpl.queryGroupList); system groups are
        flagged (``system``)."""
        info = await self.admin.examine_broker_cluster_info()
        masters = [
            (name, addr) for name, bd in sorted(info.broker_addr_table.items()) if (addr := bd.master_addr) is not None
        ]
        rows: dict[str, dict[str, Any]] = {}

        async def broker(item: tuple[str, str]) -> None:
            name, addr = item
            configs = await self.admin.get_all_subscription_group(addr)
            try:
                stats = await self.admin.fetch_consume_stats_in_broker(addr)
            except AdminError:
                stats = None
            for g, cfg in configs.items():
                row = rows.setdefault(
                    g,
                    {
                        "group": g,
                        "brokers": [],
                        "diffTotal": 0,
                        "consumeTps": 0.0,
                        "system": is_system_group(g),
                        "consumeEnable": bool(cfg.get("consumeEnable", True)),
                        "consumeBroadcastEnable": bool(cfg.get("consumeBroadcastEnable", False)),
                        "retryMaxTimes": cfg.get("retryMaxTimes", 16),
                    },
                )
                row["brokers"].append(name)
            if stats is None:
                return
            for entry in stats.consume_stats_list:
                for g, per_topic in entry.items():
                    row = rows.setdefault(
                        g,
                        {
                            "group": g,
                            "brokers": [name],
                            "diffTotal": 0,
                            "consumeTps": 0.0,
                            "system": is_system_group(g),
                        },
                    )
                    for cs in per_topic:
                        row["diffTotal"] += cs.compute_total_diff()
                        row["consumeTps"] += cs.consume_tps

        await _bounded(masters, broker)
        out = sorted(rows.values(), key=lambda r: r["group"])

        async def online(row: dict[str, Any]) -> None:
            try:
                cc = await self.admin.examine_consumer_connection_info(row["group"])
            except (AdminError, BrokerResponseError) as e:
                row["count"] = 0  # not online, or never used (no retry topic, so no route)
                if e.code != ResponseCode.CONSUMER_NOT_ONLINE and getattr(e, "addr", None) is not None:
                    row["countError"] = str(e)
                return
            row["count"] = len(cc.connection_set)
            row["messageModel"] = cc.message_model
            row["consumeType"] = cc.consume_type
            row["version"] = version_desc(max((c.version for c in cc.connection_set), default=0))

        await _bounded([r for r in out if not r["system"]][:MAX_GROUP_LOOKUPS], online)
        for r in out:
            r["consumeTps"] = round(r["consumeTps"], 2)
        return out

    async def group_detail(self, group: str) -> dict[str, Any]:
        """One group: its configuration on each broker, its progress per topic and queue
        (retry topic included), and its online members with their subscriptions."""
        configs = await self.admin.get_consumer_config(group)
        out: dict[str, Any] = {
            "group": group,
            "configs": [{"cluster": c.cluster_name, "brokerName": c.broker_name, "config": c.config} for c in configs],
        }
        try:
            stats = await self.admin.examine_consume_stats(group)
            out.update(consume_stats_json(stats))
        except AdminError as e:
            out.update({"diffTotal": 0, "consumeTps": 0.0, "queues": [], "statsError": str(e)})
        try:
            cc = await self.admin.examine_consumer_connection_info(group)
            out["connections"] = [
                {
                    "clientId": c.client_id,
                    "clientAddr": c.client_addr,
                    "language": c.language,
                    "version": version_desc(c.version),
                }
                for c in cc.connection_set
            ]
            out["subscriptions"] = [
                {"topic": t, "subString": s.sub_string, "expressionType": s.expression_type}
                for t, s in sorted(cc.subscription_table.items())
            ]
            out.update(
                {
                    "consumeType": cc.consume_type,
                    "messageModel": cc.message_model,
                    "consumeFromWhere": cc.consume_from_where,
                }
            )
        except (AdminError, BrokerResponseError) as e:
            out["connections"] = []
            out["subscriptions"] = []
            out["connectionError"] = str(e)
        out["topics"] = sorted(
            {q["topic"] for q in out["queues"]} | {s["topic"] for s in out["subscriptions"]},
            key=lambda t: (MixAll.is_retry_topic(t), t),
        )  # its own topics first
        return out

    async def running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO of one member: its properties, subscriptions, per-queue
        process state and consume statistics."""
        ri = await self.admin.get_consumer_running_info(group, client_id)
        return {
            "properties": dict(sorted(ri.properties.items())),
            "subscriptions": [{"topic": s.topic, "subString": s.sub_string} for s in ri.subscription_set],
            "queues": [
                {**_mq(mq), **{k: v for k, v in st.items() if isinstance(v, (int, float, str, bool))}}
                for mq, st in sorted(ri.mq_table.items())
            ],
            "status": ri.status_table,
        }

    async def create_or_update_group(
        self, group: str, config: dict[str, Any], *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on ``broker_addr``, else the masters of
        ``cluster``, else every master (ConsumerServiceImpl.createAndUpdateSubscriptionGroupConfig)."""
        if (
            not group
            or len(group) > 255
            or MixAll.is_sys_consumer_group(group)
            or TopicValidator.is_topic_or_group_illegal(group)
        ):
            raise ValueError(
                f"bad group name {group!r}: letters, digits, '%', '|', '-', '_' and at most 255 chars, "
                f"not a system group"
            )
        kwargs: dict[str, Any] = {}
        for key, name, kind in (
            ("consumeEnable", "consume_enable", bool),
            ("consumeBroadcastEnable", "consume_broadcast_enable", bool),
            ("retryQueueNums", "retry_queue_nums", int),
            ("retryMaxTimes", "retry_max_times", int),
            ("brokerId", "broker_id", int),
            ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly", int),
            ("consumeMessageOrderly", "consume_message_orderly", bool),
        ):
            if key in config:
                v = config[key]
                if kind is int and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1 << 20):
                    raise ValueError(f"{key} must be a whole number 0..{1 << 20}, not {v!r}")
                if kind is bool and not isinstance(v, bool):
                    raise ValueError(f"{key} must be true or false, not {v!r}")
                kwargs[name] = v
        addrs = await self.admin.master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self.admin.create_and_update_subscription_group_config(addr, group, **kwargs)
        return addrs

    async def delete_group(self, group: str) -> list[str]:
        """DELETE_SUBSCRIPTIONGROUP (offsets removed too) on every master holding the group."""
        info = await self.admin.examine_broker_cluster_info()
        done = []
        for c in await self.admin.get_consumer_config(group):
            bd = info.broker_addr_table.get(c.broker_name)
            addr = bd.master_addr if bd is not None else None
            if addr is not None:
                await self.admin.delete_subscription_group(addr, group, remove_offset=True)
                done.append(addr)
        if not done:
            raise AdminError(f"no master broker has the subscription group {group}")
        return done

    async def reset_offset(self, group: str, topics: list[str], timestamp_ms: int) -> list[dict[str, Any]]:
        """Move ``group``'s offsets of each topic to ``timestamp_ms`` (-1: the end, which is
        "skip accumulated"): through the brokers when a member is online (they tell it), else
        by the admin itself (ConsumerServiceImpl.resetOffset: resetOffsetByTimestamp, falling
        back to resetOffsetByTimestampOld for CONSUMER_NOT_ONLINE)."""
        if not topics:
            raise ValueError("no topic to reset")
        out: list[dict[str, Any]] = []
        for topic in topics:
            try:
                table = await self.admin.reset_offset_by_timestamp(topic, group, timestamp_ms, force=True)
                out += [{**_mq(mq), "offset": off, "how": "broker"} for mq, off in sorted(table.items())]
            except (AdminError, BrokerResponseError) as e:
                if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                rollback = await self.admin.reset_offset_by_timestamp_old(group, topic, timestamp_ms, force=True)
                out += [
                    {
                        "topic": topic,
                        "brokerName": r.broker_name,
                        "queueId": r.queue_id,
                        "offset": r.rollback_offset,
                        "how": "admin",
                    }
                    for r in rollback
                ]
        return out

    # -- producers -------------------------------------------------------------------------

    async def producers(self, topic: str, group: str) -> list[dict[str, Any]]:
        """The producers of ``group`` connected to the brokers of ``topic`` (ProducerServiceImpl)."""
        pc = await self.admin.examine_producer_connection_info(group, topic)
        return [
            {
                "clientId": c.client_id,
                "clientAddr": c.client_addr,
                "language": c.language,
                "version": version_desc(c.version),
            }
            for c in sorted(pc.connection_set, key=lambda c: c.client_id)
        ]

    # -- messages ------------------------------------------------------------------------

    async def messages_by_time(
        self, topic: str, begin_ms: int, end_ms: int, limit: int = MAX_TIME_RANGE_MESSAGES
    ) -> dict[str, Any]:
        """The messages of every readable queue of ``topic`` stored within [begin, end] ms,
        newest first, at most ``limit`` (MessageServiceImpl.queryMessageByTopic: each
        queue's offsets from SEARCH_OFFSET, then pulls)."""
        if end_ms < begin_ms:
            raise ValueError("the end of the time range is before its beginning")
        mqs = await self.admin.fetch_subscribe_message_queues(topic)
        # the newest ``limit`` rows over all queues, in a min-heap by store time: memory stays at
        # ``limit`` small rows (bodies cut to a preview at once) however many queues there are
        newest: list[tuple[int, int, int, dict[str, Any]]] = []
        seq = itertools.count()
        truncated = False

        async def one(mq: MessageQueue) -> None:
            nonlocal truncated
            lo = await self.admin.search_offset(mq, begin_ms)
            hi = await self.admin.search_offset(mq, end_ms + 1)
            hi = min(max(hi, lo), await self.admin.max_offset(mq))
            if hi - lo > limit:  # only the newest ``limit`` of this queue can be kept
                lo = hi - limit
                truncated = True
            async for result in self.admin.iter_pull(mq, lo, hi):
                for m in result.messages:
                    if begin_ms <= m.store_timestamp <= end_ms:
                        heapq.heappush(newest, (m.store_timestamp, m.queue_offset, next(seq), message_row(m)))
                        if len(newest) > limit:
                            heapq.heappop(newest)
                            truncated = True

        await _bounded(mqs, one)
        newest.sort(reverse=True)
        return {"messages": [row for *_, row in newest], "truncated": truncated, "limit": limit}

    async def messages_by_key(self, topic: str, key: str) -> dict[str, Any]:
        """The messages of ``topic`` carrying ``key`` (at most ``MAX_KEY_MESSAGES``)."""
        result = await self.admin.query_message_by_key(topic, key, max_num=MAX_KEY_MESSAGES)
        return {
            "messages": [message_row(m) for m in reversed(result.messages)],
            "truncated": False,
            "limit": MAX_KEY_MESSAGES,
        }

    async def _find(self, msg_id: str, topic: str | None) -> MessageExt:
        try:
            msg = await self.admin.view_message(msg_id, topic)
        except ValueError as e:
            raise ValueError(f"{e}") from None
        if msg is None:
            raise LookupError(f"no message with id {msg_id}" + (f" in topic {topic}" if topic else ""))
        if not msg.broker_name:  # read by offset id: name the broker from its address
            info = await self.admin.examine_broker_cluster_info()
            name = next(
                (n for n, bd in info.broker_addr_table.items() if msg.store_host in bd.broker_addrs.values()), ""
            )
            msg = dataclasses.replace(msg, broker_name=name)
        return msg

    async def message_detail(self, msg_id: str, topic: str | None) -> dict[str, Any]:
        """One message (by offset message id, or by client id within ``topic``): every
        property, the body (``BODY_PREVIEW_BYTES`` of it) and, per consuming group, whether it
        has consumed it (MessageServiceImpl.viewMessage + messageTrackDetail: CONSUMED,
        NOT_CONSUME_YET, NOT_ONLINE for a group with no member, or the lookup's error)."""
        msg = await self._find(msg_id, topic)
        real_topic = msg.real_topic or msg.topic
        out = {
            **message_row(msg),
            "properties": dict(sorted(msg.properties.items())),
            "body": body_preview(msg.body, BODY_PREVIEW_BYTES),
            "sysFlag": msg.sys_flag,
            "bodyCrc": msg.body_crc,
            "commitLogOffset": msg.commit_log_offset,
        }
        # A dead letter: its group's handler failed it maxReconsumeTimes times, and the broker
        # moved it to %DLQ%<group> (Java SendMessageProcessor.consumerSendMsgBack). The group's
        # offset on the topic is past it, which the offset test below would read as CONSUMED
        # (the dashboard's messageTrackDetail does); it was not consumed, so it reads DEAD_LETTER.
        dead: list[dict[str, Any]] = []
        owner = ""
        if real_topic.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX):
            owner = real_topic[len(MixAll.DLQ_GROUP_TOPIC_PREFIX) :]
            dead.append(
                {
                    "group": owner,
                    "status": "DEAD_LETTER",
                    "error": f"failed {msg.reconsume_times} time(s) in {owner}, then moved to {real_topic}: "
                    "not consumed (resend it to the group)",
                }
            )
        try:
            groups = await self.admin.query_topic_consume_by_who(real_topic)
        except (AdminError, BrokerResponseError) as e:
            out["tracks"] = dead or [{"group": "", "status": "UNKNOWN", "error": str(e)}]
            return out
        groups = [g for g in groups if g != owner]

        async def track(group: str) -> dict[str, Any]:
            row: dict[str, Any] = {"group": group}
            try:
                stats = await self.admin.examine_consume_stats(group, real_topic)
                w = stats.offset_table.get(MessageQueue(real_topic, msg.broker_name, msg.queue_id))
                if w is None:
                    w = next(
                        (
                            v
                            for mq, v in stats.offset_table.items()
                            if mq.topic == real_topic and mq.queue_id == msg.queue_id
                        ),
                        None,
                    )
                consumed = w is not None and w.consumer_offset > msg.queue_offset
                row["status"] = "CONSUMED" if consumed else "NOT_CONSUME_YET"
            except (AdminError, BrokerResponseError) as e:
                row["status"] = "UNKNOWN"
                row["error"] = str(e)
                return row
            try:
                cc = await self.admin.examine_consumer_connection_info(group)
                row["clients"] = sorted(c.client_id for c in cc.connection_set)
            except (AdminError, BrokerResponseError):
                row["clients"] = []
                if row["status"] != "CONSUMED":
                    row["status"] = "NOT_ONLINE"
            return row

        out["tracks"] = dead + await _bounded(groups, track)
        return out

    async def resend(
        self,
        msg_id: str,
        group: str,
        client_id: str = "",
        topic: str | None = None,
    ) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the broker that stored the message hands it to
        ``client_id`` of ``group`` (default: each online member in turn until one takes it),
        whose handler consumes it now (MessageServiceImpl.consumeMessageDirectly). The
        message is named by its offset message id; a client id needs ``topic``."""
        msg = await self._find(msg_id, topic)
        clients = [client_id] if client_id else []
        if not clients:
            try:
                cc = await self.admin.examine_consumer_connection_info(group)
            except (AdminError, BrokerResponseError) as e:
                raise AdminError(f"cannot resend to {group}: {e}", code=e.code, remark=e.remark) from None
            clients = sorted(c.client_id for c in cc.connection_set)
        last: BaseException | None = None
        for cid in clients:
            try:
                r = await self.admin.consume_message_directly(group, cid, msg.offset_msg_id)
            except (AdminError, BrokerResponseError) as e:
                last = e
                continue
            return {
                "clientId": cid,
                "consumeResult": r.consume_result,
                "remark": r.remark,
                "spentTimeMills": r.spent_time_mills,
                "msgId": msg.msg_id,
                "offsetMsgId": msg.offset_msg_id,
            }
        if last is not None:
            raise last
        raise AdminError(f"no member of {group} is online to take the message")

    async def dlq_messages(self, group: str, begin_ms: int, end_ms: int) -> dict[str, Any]:
        """The messages of ``group``'s ``%DLQ%`` topic within [begin, end] ms (DlqMessageServiceImpl)."""
        dlq = MixAll.get_dlq_topic(group)
        empty: dict[str, Any] = {"messages": [], "truncated": False, "limit": MAX_TIME_RANGE_MESSAGES}
        try:
            route = await self.admin.examine_topic_route_info(dlq)
        except AdminError:
            return {**empty, "note": f"the group {group} has no dead-letter topic (nothing has gone there yet)"}
        if not any(PermName.is_readable(q.perm) for q in route.queue_datas):
            # Java's broker creates %DLQ% topics write-only (SendMessageProcessor.consumerSendMsgBack)
            return {
                **empty,
                "note": f"{dlq} is write-only (perm {PermName.perm_to_string(route.queue_datas[0].perm)}"
                f" on the broker): make it readable (perm 6) in its topic page to browse it"
                if route.queue_datas
                else f"{dlq} has no queues",
            }
        return await self.messages_by_time(dlq, begin_ms, end_ms)

    async def dlq_resend(self, group: str, msg_ids: list[str]) -> list[dict[str, Any]]:
        """Resend dead letters to an online member of ``group``, one result per message
        (DlqMessageServiceImpl.batchResendDlqMessage); a failure is reported, not raised."""
        dlq = MixAll.get_dlq_topic(group)
        out = []
        for mid in msg_ids:
            try:
                out.append({"msgId": mid, "ok": True, **await self.resend(mid, group, topic=dlq)})
            except (AdminError, BrokerResponseError, LookupError, ValueError) as e:
                out.append({"msgId": mid, "ok": False, "error": str(e)})
        return out

    # -- message trace (the dashboard's MessageTraceServiceImpl) ------------------------------

    async def message_trace(
        self,
        *,
        msg_id: str = "",
        key: str = "",
        topic: str = "",
        trace_topic: str = TopicValidator.RMQ_SYS_TRACE_TOPIC,
    ) -> dict[str, Any]:
        """The traces of one message (``msg_id``, its client id) or of the messages with
        ``key`` (of ``topic`` when given), read from ``trace_topic`` by the broker's index (the
        trace messages are keyed by the traced message's id and keys, Java
        ``AsyncTraceDispatcher``) and decoded as ``TraceDataEncoder`` writes them (rmq's trace
        reader, :func:`rmq.client.trace.decode_trace_data`). Per message: its Pub hop, one Sub
        hop per consume attempt (a SubBefore and its SubAfter, paired by request id: the start
        is the SubBefore's time, the cost and status the SubAfter's; ``pending`` while there
        is no SubAfter), and EndTransaction hops. At most ``MAX_TRACE_MESSAGES`` messages."""
        needle = msg_id or key
        if not needle:
            raise ValueError("msgId or key is required")
        try:
            found = await self.admin.query_message_by_key(trace_topic, needle, max_num=MAX_KEY_MESSAGES, end=now_ms())
        except AdminError as e:
            if "no route for topic" not in str(e):
                raise
            raise LookupError(
                f"no trace topic {trace_topic}: no message trace was ever written there (start the broker with "
                "traceTopicEnable=true and the clients with trace=True; Java: enableMsgTrace)"
            ) from None
        by_id: dict[str, dict[str, Any]] = {}
        befores: dict[tuple[str, str], dict[str, Any]] = {}
        afters: list[tuple[str, TraceContext]] = []
        for tm in found.messages:
            host = tm.born_host.rsplit(":", 1)[0] if tm.born_host else ""
            for ctx in decode_trace_data(tm.body.decode("utf-8", "replace")):
                bean = ctx.trace_beans[0]
                mid = _text(bean.msg_id)
                if msg_id and mid != msg_id:
                    continue
                if not msg_id and needle not in (_text(bean.keys) or "").split(MessageConst.KEY_SEPARATOR):
                    continue
                if mid not in by_id:
                    if len(by_id) >= MAX_TRACE_MESSAGES:
                        continue
                    by_id[mid] = {
                        "msgId": mid,
                        "topic": "",
                        "tags": "",
                        "keys": "",
                        "pub": None,
                        "subs": [],
                        "transactions": [],
                    }
                m = by_id[mid]
                hop: dict[str, Any] = {
                    "type": ctx.trace_type,
                    "group": _text(ctx.group_name),
                    "clientHost": _text(bean.client_host) or host,
                    "timestamp": ctx.time_stamp,
                    "costTime": ctx.cost_time,
                    "status": "success" if ctx.success else "failed",
                }
                if ctx.trace_type == TraceType.PUB:
                    m.update(topic=_text(bean.topic), tags=_text(bean.tags), keys=_text(bean.keys))
                    hop.update(storeHost=_text(bean.store_host), offsetMsgId=_text(bean.offset_msg_id))
                    m["pub"] = hop
                elif ctx.trace_type == TraceType.SUB_BEFORE:
                    hop.update(type="Sub", status="pending", costTime=0, retryTimes=bean.retry_times)
                    m["subs"].append(hop)
                    befores[(mid, _text(ctx.request_id))] = hop
                elif ctx.trace_type == TraceType.SUB_AFTER:
                    afters.append((mid, ctx))
                elif ctx.trace_type == TraceType.END_TRANSACTION:
                    hop.update(transactionState=_text(bean.transaction_state))
                    m["transactions"].append(hop)
        for mid, ctx in afters:
            sub = befores.get((mid, _text(ctx.request_id)))
            if sub is None:  # its SubBefore is not (yet) indexed: a hop of its own, time unknown
                if mid in by_id:
                    by_id[mid]["subs"].append(
                        {
                            "type": "Sub",
                            "group": _text(ctx.group_name),
                            "clientHost": "",
                            "timestamp": 0,
                            "costTime": ctx.cost_time,
                            "status": "success" if ctx.success else "failed",
                            "retryTimes": 0,
                        }
                    )
                continue
            sub["costTime"] = ctx.cost_time
            sub["status"] = "success" if ctx.success else "failed"
        messages = [m for m in by_id.values() if not topic or not m["topic"] or m["topic"] == topic]
        for m in messages:
            m["subs"].sort(key=lambda h: (h["group"], h["timestamp"]))
        return {"traceTopic": trace_topic, "messages": messages, "limit": MAX_TRACE_MESSAGES}

    # -- ACL (the dashboard's AclServiceImpl, 4.x plain ACL) ---------------------------------

    async def _acl_configs(self) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
        """Each master's GET_BROKER_CLUSTER_ACL_CONFIG: ``(rows, [(addr, config)])``, a row per
        master with its error when it refuses (``aclEnable=false`` among them)."""
        info = await self.admin.examine_broker_cluster_info()
        masters = sorted(info.master_addrs().items())
        rows: list[dict[str, Any]] = []
        configs: list[tuple[str, dict[str, Any]]] = []

        async def one(item: tuple[str, str]) -> None:
            name, addr = item
            row: dict[str, Any] = {"brokerName": name, "addr": addr}
            rows.append(row)
            try:
                configs.append((addr, await self.admin.examine_broker_cluster_acl_config(addr)))
                row["aclEnabled"] = True
            except (AdminError, BrokerResponseError) as e:
                row["aclEnabled"] = False
                row["error"] = e.remark or str(e)

        await _bounded(masters, one)
        rows.sort(key=lambda r: r["brokerName"])
        return rows, configs

    async def acl(self) -> dict[str, Any]:
        """The ACL accounts and global white list of every master with ACL on (accounts merged
        by accessKey, each naming its brokers). Secret keys never leave the console: an account
        shows ``secretKey`` as a mask. ``enabled`` is False when no master has ACL on."""
        rows, configs = await self._acl_configs()
        accounts: dict[str, dict[str, Any]] = {}
        white: set[str] = set()
        for addr, cfg in configs:
            name = next((r["brokerName"] for r in rows if r["addr"] == addr), addr)
            white.update(str(a) for a in cfg.get("globalWhiteAddrs") or [])
            for a in cfg.get("plainAccessConfigs") or []:
                ak = str(a.get("accessKey", ""))
                row = accounts.setdefault(
                    ak,
                    {
                        "accessKey": ak,
                        "secretKey": "******",
                        "admin": bool(a.get("admin", False)),
                        "whiteRemoteAddress": a.get("whiteRemoteAddress") or "",
                        "defaultTopicPerm": a.get("defaultTopicPerm") or "",
                        "defaultGroupPerm": a.get("defaultGroupPerm") or "",
                        "topicPerms": list(a.get("topicPerms") or []),
                        "groupPerms": list(a.get("groupPerms") or []),
                        "brokers": [],
                    },
                )
                row["brokers"].append(name)
        return {
            "enabled": bool(configs),
            "brokers": rows,
            "accounts": sorted(accounts.values(), key=lambda r: r["accessKey"]),
            "globalWhiteAddrs": sorted(white),
        }

    async def _acl_masters(self) -> list[tuple[str, dict[str, Any]]]:
        rows, configs = await self._acl_configs()
        if not configs:
            why = "; ".join(f"{r['brokerName']}: {r.get('error', '')}" for r in rows) or "no master broker"
            raise AdminError(f"ACL is off on every broker (aclEnable=false), nothing to change ({why})")
        return configs

    async def acl_update(self, account: dict[str, Any]) -> list[str]:
        """Create or update one account on every master with ACL on (UPDATE_AND_CREATE_ACL_CONFIG,
        Java ``PlainAccessConfig``). ``secretKey`` may be left empty for an account that exists:
        its current secret is kept (the page never holds it)."""
        ak = account["accessKey"]
        configs = await self._acl_masters()
        secret = account.get("secretKey") or ""
        if not secret:
            for _, cfg in configs:
                for a in cfg.get("plainAccessConfigs") or []:
                    if a.get("accessKey") == ak and a.get("secretKey"):
                        secret = str(a["secretKey"])
            if not secret:
                raise ValueError(f"secretKey is required for a new account ({ak} is on no broker)")
        config = PlainAccessConfig(
            access_key=ak,
            secret_key=secret,
            white_remote_address=account.get("whiteRemoteAddress") or "",
            admin=bool(account.get("admin", False)),
            default_topic_perm=account.get("defaultTopicPerm") or "DENY",
            default_group_perm=account.get("defaultGroupPerm") or "DENY",
            topic_perms=list(account.get("topicPerms") or []) or None,
            group_perms=list(account.get("groupPerms") or []) or None,
        )
        done = []
        for addr, _ in configs:
            await self.admin.create_and_update_plain_access_config(addr, config)
            done.append(addr)
        return done

    async def acl_delete(self, access_key: str) -> list[str]:
        """Delete one account from every master with ACL on that has it (DELETE_ACL_CONFIG)."""
        configs = await self._acl_masters()
        done = []
        for addr, cfg in configs:
            if any(a.get("accessKey") == access_key for a in cfg.get("plainAccessConfigs") or []):
                await self.admin.delete_plain_access_config(addr, access_key)
                done.append(addr)
        if not done:
            raise LookupError(f"no broker has the ACL account {access_key}")
        return done

    async def acl_white_list(self, addrs: list[str]) -> list[str]:
        """Replace the global white list on every master with ACL on (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)."""
        configs = await self._acl_masters()
        done = []
        for addr, _ in configs:
            await self.admin.update_global_white_addr_config(addr, addrs)
            done.append(addr)
        return done

    # -- RocketMQ 5 views ---------------------------------------------------------------------

    async def v5_topic_types(self) -> list[dict[str, Any]]:
        """Each user topic of every master with its Java 5 ``message.type`` (from the topic's
        attributes; ``""`` for an untyped topic), one GET_ALL_TOPIC_CONFIG per master."""
        info = await self.admin.examine_broker_cluster_info()
        out: dict[str, dict[str, Any]] = {}

        async def one(item: tuple[str, str]) -> None:
            name, addr = item
            wrapper = await self.admin.get_user_topic_config(addr)
            for t, cfg in wrapper.topic_config_table.items():
                attrs = cfg.get("attributes") if isinstance(cfg, dict) else None
                mt = message_type_of_attributes(attrs if isinstance(attrs, dict) else None)
                row = out.setdefault(
                    t, {"topic": t, "messageType": str(mt.value) if mt is not None else "", "brokers": []}
                )
                row["brokers"].append(name)

        await _bounded(sorted(info.master_addrs().items()), one)
        return sorted(out.values(), key=lambda r: r["topic"])[:MAX_V5_ROWS]

    async def v5_timers(self) -> dict[str, Any]:
        """Pending timer messages per broker (GET_TIMER_METRICS: per real topic, count and last
        change) and the timer store's runtime figures (GET_BROKER_RUNTIME_INFO's ``timer*``
        keys, Java ``prepareRuntimeInfo``)."""
        info = await self.admin.examine_broker_cluster_info()
        brokers: list[dict[str, Any]] = []
        topics: list[dict[str, Any]] = []

        async def one(item: tuple[str, str]) -> None:
            name, addr = item
            row: dict[str, Any] = {"brokerName": name, "addr": addr}
            brokers.append(row)
            try:
                kv = await self.admin.fetch_broker_runtime_stats(addr)
                row.update({k: first_number(v) for k, v in kv.items() if k.startswith("timer")})
                metrics = await self.admin.get_timer_metrics(addr)
            except (AdminError, BrokerResponseError) as e:
                row["error"] = str(e)
                return
            for t, (count, changed) in metrics.items():
                topics.append({"brokerName": name, "topic": t, "count": count, "lastChange": changed})

        await _bounded(sorted(info.master_addrs().items()), one)
        brokers.sort(key=lambda r: r["brokerName"])
        topics.sort(key=lambda r: (-r["count"], r["topic"]))
        return {"brokers": brokers, "topics": topics[:MAX_V5_ROWS]}

    async def set_consume_mode(self, topic: str, group: str, mode: str, pop_share_queue_num: int) -> list[str]:
        """SET_MESSAGE_REQUEST_MODE on every master of ``topic``'s route (Java
        ``SetConsumeModeSubCommand``): ``mode`` PULL or POP, ``pop_share_queue_num`` 0..1024."""
        if mode not in ("PULL", "POP"):
            raise ValueError(f"mode must be PULL or POP, not {clip(mode, 20)!r}")
        if not 0 <= pop_share_queue_num <= 1024:
            raise ValueError("popShareQueueNum must be 0..1024 (0: every consumer pops every queue)")
        route = await self.admin.examine_topic_route_info(topic)
        done = []
        for bd in route.broker_datas:
            addr = bd.master_addr
            if addr:
                await self.admin.set_message_request_mode(addr, topic, group, mode, pop_share_queue_num)
                done.append(addr)
        return done

    async def consume_mode(self, topic: str, group: str) -> list[dict[str, Any]]:
        """The (topic, group)'s consume mode on each master of the topic, read with
        QUERY_ASSIGNMENT as a BROADCASTING consumer ``rmq-console`` (the broker answers every
        queue with the mode, without the console being a member of the group)."""
        route = await self.admin.examine_topic_route_info(topic)
        out = []
        for bd in route.broker_datas:
            addr = bd.master_addr
            if not addr:
                continue
            row: dict[str, Any] = {"brokerName": bd.broker_name, "addr": addr}
            try:
                assigned = await self.admin.query_assignment(
                    addr, topic, group, "rmq-console", message_model="BROADCASTING"
                )
                if assigned is None:
                    row["error"] = f"the broker has no queue of {topic}"
                else:
                    row["mode"] = ",".join(sorted({m for _, m in assigned})) or "-"
                    row["queues"] = sum(1 for mq, _ in assigned if mq.broker_name == bd.broker_name)
            except (AdminError, BrokerResponseError) as e:
                row["error"] = str(e)
            out.append(row)
        return out

    # -- dashboard samples -------------------------------------------------------------------

    async def topic_put_totals(self, topics: list[str]) -> dict[str, int]:
        """Per topic the sum of its queues' max offsets (messages stored so far): the TPS
        sampler differentiates it. A topic whose stats fail is left out."""
        totals: dict[str, int] = {}

        async def one(topic: str) -> None:
            try:
                table = await self.admin.examine_topic_stats(topic)
            except (AdminError, BrokerResponseError):
                return
            totals[topic] = sum(o.max_offset for o in table.offset_table.values())

        await _bounded(topics, one)
        return totals


def route_json(route: TopicRouteData) -> dict[str, Any]:
    """A route as the page shows it."""
    return {
        "brokerDatas": [
            {
                "cluster": b.cluster,
                "brokerName": b.broker_name,
                "brokerAddrs": {str(k): v for k, v in sorted(b.broker_addrs.items())},
            }
            for b in route.broker_datas
        ],
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums,
                "perm": q.perm,
                "permText": PermName.perm_to_string(q.perm),
                "topicSysFlag": q.topic_sys_flag,
            }
            for q in route.queue_datas
        ],
    }


def consume_stats_json(stats: ConsumeStats) -> dict[str, Any]:
    """A group's progress: total lag, TPS and per-queue offsets with lag and the last consume
    time (retry queues included when the group has offsets on them)."""
    queues = [
        {
            **_mq(mq),
            "brokerOffset": w.broker_offset,
            "consumerOffset": w.consumer_offset,
            "diff": w.diff,
            "lastTimestamp": w.last_timestamp,
            "retry": MixAll.is_retry_topic(mq.topic),
        }
        for mq, w in sorted(stats.offset_table.items())
    ]
    return {"diffTotal": stats.compute_total_diff(), "consumeTps": round(stats.consume_tps, 2), "queues": queues}


def now_ms() -> int:
    return int(time.time() * 1000)
