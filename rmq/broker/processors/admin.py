"""Admin and offset-lookup codes (B5, B9).

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
GET_BROKER_RUNTIME_INFO (28), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32), GET_BROKER_CONFIG (26).

Replies are Java's JSON (``TopicConfigSerializeWrapper``, ``KVTable``, ``TopicStatsTable``,
``ConsumeStats``). The last two are ``Map<MessageQueue, …>`` in Java, which fastjson writes
with JSON objects as keys; we write the same bytes so Java's admin tools read them (see
``fastjson_object_key_map``).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmq import __version__
from rmq.broker.managers.subscription_group import (
    SubscriptionGroupConfig,
    check_group_name,
)
from rmq.broker.managers.topic_config import TopicConfig
from rmq.broker.processors.common import (
    bad_request,
    fastjson_object_key_map,
    parse_json_body,
    to_json_bytes,
)
from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.config import describe
from rmq.errors import RemotingCommandError
from rmq.remoting.body.topic import TopicOffset, TopicStatsTable
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.remoting.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetTopicStatsInfoRequestHeader,
    SearchOffsetRequestHeader,
)
from rmq.types import MessageQueue

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

# Java's MQVersion.CURRENT_VERSION for 4.9.8 (brokerVersion in GET_BROKER_RUNTIME_INFO).
BROKER_VERSION = 409


class AdminBrokerProcessor:
    """The admin codes. Async (a topic change re-registers with the name servers)."""

    def __init__(self, controller):
        self.controller = controller
        # keyed by int: a command's code is a plain int (RequestCode is an IntEnum, same hash)
        self._handlers: dict[int, Callable[[Any, RemotingCommand], Any]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
        }

    codes = property(lambda self: list(self._handlers))
    #: the codes that change a table (and wait for the name-server registration).
    WRITE_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
                             RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP})

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        handler = self._handlers[cmd.code]
        try:
            result = handler(conn, cmd)
            if hasattr(result, "__await__"):
                result = await result
            return result
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    # -- topics ---------------------------------------------------------------------------

    async def update_and_create_topic(self, conn, cmd):
        c = self.controller
        h = CreateTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        _rlog.info("update-topic", "updateAndCreateTopic called by %s: %s", conn.remote_addr, clip(cmd.ext_fields))
        # Java AdminBrokerProcessor.updateAndCreateTopic: a legal name, not a system topic.
        problem = TopicValidator.check_topic(h.topic)
        if problem is not None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, problem, {})
        if TopicValidator.is_system_topic(h.topic):
            return cmd.response(ResponseCode.SYSTEM_ERROR, TopicValidator.system_topic_remark(h.topic), {})
        if h.topic == c.broker_config.broker_cluster_name:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"the topic[{clip_remark(h.topic)}] is conflict with system reserved words.", {})
        cap = c.topic_config_manager.max_queue_nums
        if not (0 <= h.read_queue_nums <= cap and 0 <= h.write_queue_nums <= cap):
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"queue numbers must be between 0 and {cap} "
                                f"(maxTopicQueueNums), not read {h.read_queue_nums} write {h.write_queue_nums}", {})
        tc = TopicConfig(
            h.topic,
            h.read_queue_nums,
            h.write_queue_nums,
            h.perm,
            h.topic_filter_type or "SINGLE_TAG",
            h.topic_sys_flag or 0,
            bool(h.order),
        )
        c.topic_config_manager.update_topic_config(tc)
        await c.register_broker_now()
        return cmd.response(ResponseCode.SUCCESS, None, {})

    async def delete_topic(self, conn, cmd):
        c = self.controller
        h = DeleteTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        _rlog.info("delete-topic", "deleteTopic called by %s: %s", conn.remote_addr, clip(h.topic))
        if c.topic_config_manager.is_system_topic(h.topic):
            return cmd.response(ResponseCode.NO_PERMISSION,
                                f"the topic[{clip_remark(h.topic)}] is a system topic and cannot be deleted", {})
        c.topic_config_manager.delete_topic_config(h.topic)
        c.consumer_offset_manager.remove_topic(h.topic)
        try:
            await _maybe_await(c.message_store.delete_topics({h.topic}))
        except Exception as e:
            log.exception("store failed to delete topic %s", clip(h.topic))
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic config deleted but the store failed: {e}", {})
        await c.register_broker_now()
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def get_all_topic_config(self, conn, cmd):
        return cmd.response(ResponseCode.SUCCESS, None, {},
                            to_json_bytes(self.controller.topic_config_manager.serialize_wrapper()))

    # -- subscription groups --------------------------------------------------------------

    def update_and_create_subscription_group(self, conn, cmd):
        data = parse_json_body(cmd, "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP")
        try:
            cfg = SubscriptionGroupConfig.from_json(data)
        except (ValueError, TypeError, OverflowError) as e:
            raise RemotingCommandError(f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {clip(e)}") from None
        problem = check_group_name(cfg.group_name)
        if problem is not None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, problem, {})
        cap = self.controller.topic_config_manager.max_queue_nums
        if not 0 <= cfg.retry_queue_nums <= cap:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"retryQueueNums {cfg.retry_queue_nums} is out of range "
                                f"0..{cap} (maxTopicQueueNums)", {})
        _rlog.info("update-group", "updateAndCreateSubscriptionGroup called by %s: %s", conn.remote_addr,
                   cfg.group_name)
        self.controller.subscription_group_manager.update_subscription_group_config(cfg)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def get_all_subscription_group(self, conn, cmd):
        sgm = self.controller.subscription_group_manager
        body = {
            "subscriptionGroupTable": {g: s.to_json() for g, s in sorted(sgm.subscription_group_table.items())},
            "dataVersion": sgm.data_version.to_json(),
        }
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(body))

    # -- runtime info and stats -----------------------------------------------------------

    def get_broker_runtime_info(self, conn, cmd):
        c = self.controller
        table: dict[str, str] = {}
        try:
            table.update({str(k): str(v) for k, v in c.message_store.runtime_info().items()})
        except Exception:  # stats are best effort
            log.exception("store runtime info failed")
        stats = c.stats
        table.update(
            {
                "brokerVersionDesc": f"rmq {__version__} (V4_9_8 compatible)",
                "brokerVersion": str(BROKER_VERSION),
                "bootTimestamp": str(stats.boot_timestamp),
                "msgPutTotalTodayNow": str(stats.put_nums),
                "msgGetTotalTodayNow": str(stats.get_nums),
                "msgPutTotalYesterdayMorning": "0",
                "msgGetTotalYesterdayMorning": "0",
                "msgPutTotalTodayMorning": "0",
                "msgGetTotalTodayMorning": "0",
                "putTps": stats.tps_string("put"),
                "getTransferedTps": stats.tps_string("get"),
                "brokerRole": c.store_role,
                "brokerActive": "true",
                "pullHoldRequestCount": str(c.pull_request_hold_service.held_count),
            }
        )
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes({"table": table}))

    def _queue(self, topic: str, queue_id: int) -> dict:
        return {"brokerName": self.controller.broker_config.broker_name, "queueId": queue_id, "topic": topic}

    def get_topic_stats_info(self, conn, cmd):
        c = self.controller
        h = GetTopicStatsInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{clip_remark(h.topic)}] not exist", {})
        store = c.message_store
        broker_name = c.broker_config.broker_name
        table = {}
        for qid in range(tc.write_queue_nums):
            max_off = store.get_max_offset_in_queue(h.topic, qid)
            min_off = max(0, store.get_min_offset_in_queue(h.topic, qid))
            last = store.get_message_store_timestamp(h.topic, qid, max_off - 1) if max_off > 0 else 0
            table[MessageQueue(h.topic, broker_name, qid)] = TopicOffset(min_off, max_off, last)
        # fastjson's MessageQueue object keys, which Java's tools and rmq.Admin read
        return cmd.response(ResponseCode.SUCCESS, None, {}, TopicStatsTable(table).to_body())

    def get_consume_stats(self, conn, cmd):
        c = self.controller
        h = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
        topics = [h.topic] if h.topic else sorted(c.consumer_offset_manager.which_topic_by_consumer(h.consumer_group))
        store = c.message_store
        entries = []
        for topic in topics:
            tc = c.topic_config_manager.select_topic_config(topic)
            if tc is None:
                continue
            # Java skips topics the group neither subscribes to nor has offsets for.
            cgi = c.consumer_manager.get_consumer_group_info(h.consumer_group)
            subscribed = cgi is not None and cgi.find_subscription_data(topic) is not None
            offsets = c.consumer_offset_manager.query_offsets(h.consumer_group, topic)
            if not subscribed and not offsets:
                continue
            for qid in range(tc.write_queue_nums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
                consumer_offset = offsets.get(qid, 0)
                last = 0
                if consumer_offset > 0:
                    last = store.get_message_store_timestamp(topic, qid, consumer_offset - 1)
                entries.append(
                    (
                        self._queue(topic, qid),
                        {"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last},
                    )
                )
        body = '{"consumeTps":0.0,"offsetTable":' + fastjson_object_key_map(entries) + "}"
        return cmd.response(ResponseCode.SUCCESS, None, {}, body.encode())

    def get_broker_config(self, conn, cmd):
        c = self.controller
        lines = [f"{k}={'' if v is None else v}" for k, v in describe(c.broker_config).items()]
        return cmd.response(
            ResponseCode.SUCCESS, None, {"version": str(c.topic_config_manager.data_version.to_json())},
            "\n".join(lines).encode()
        )

    # -- offsets --------------------------------------------------------------------------

    def get_max_offset(self, conn, cmd):
        h = GetMaxOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.message_store.get_max_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_min_offset(self, conn, cmd):
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.message_store.get_min_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def search_offset_by_timestamp(self, conn, cmd):
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.message_store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_earliest_msg_storetime(self, conn, cmd):
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        store = self.controller.message_store
        min_off = store.get_min_offset_in_queue(h.topic, h.queue_id)
        ts = -1
        if store.get_max_offset_in_queue(h.topic, h.queue_id) > min_off:
            ts = store.get_message_store_timestamp(h.topic, h.queue_id, min_off)
        return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})


async def _maybe_await(x):
    if hasattr(x, "__await__"):
        return await x
    return x


