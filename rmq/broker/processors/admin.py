"""Admin and offset-lookup codes (B5, B9).

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351, Java 5),
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
GET_BROKER_RUNTIME_INFO (28), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29),
GET_EARLIEST_MSG_STORETIME (32), GET_BROKER_CONFIG (26).

Replies are Java's JSON (``TopicConfigSerializeWrapper``, ``KVTable``, ``TopicStatsTable``,
``ConsumeStats``). The last two are ``Map<MessageQueue, …>`` in Java, which fastjson writes
with JSON objects as keys; we write the same bytes so Java's admin tools read them (see
``rmq.protocol.body._mq.dumps_mq_map``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from rmq import __version__
from rmq.broker.managers.subscription_group import (
    SubscriptionGroupConfig,
    check_group_name,
)
from rmq.broker.managers.topic_config import TopicConfig
from rmq.broker.processors.common import (
    bad_request,
    parse_json_body,
    to_json_bytes,
)
from rmq.broker.stats import StatsItem, human_bytes
from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.topic_attributes import MESSAGE_TYPE, TopicAttributeError, alter_attributes, parse_attributes
from rmq.config import ConfigError, ConfigUpdateRefused, parse_properties
from rmq.errors import RemotingCommandError
from rmq.protocol.body.ops import KVTable
from rmq.protocol.body.stats import BrokerStatsData, BrokerStatsItem, ConsumeStats, ConsumeStatsList, OffsetWrapper
from rmq.protocol.body.topic import TopicOffset, TopicStatsTable
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.broker import GetConsumeStatsInBrokerHeader, ViewBrokerStatsDataRequestHeader
from rmq.protocol.headers.consumer import (
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    SearchOffsetRequestHeader,
)
from rmq.protocol.headers.topic import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from rmq.types import MessageQueue

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

# Java's MQVersion.CURRENT_VERSION for 4.9.8 (brokerVersion in GET_BROKER_RUNTIME_INFO).
BROKER_VERSION = 409


class AdminBrokerProcessor:
    """The admin codes. Async (a topic change re-registers with the name servers)."""

    def __init__(self, controller: BrokerContext):
        self.controller = controller
        # keyed by int: a command's code is a plain int (RequestCode is an IntEnum, same hash)
        self._handlers: dict[int, Callable[[Any, RemotingCommand], Any]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
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
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            RequestCode.GET_TIMER_METRICS: self.get_timer_metrics,
        }

    codes = property(lambda self: list(self._handlers))
    #: the codes that change a table (and wait for the name-server registration).
    WRITE_CODES = frozenset(
        {
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            RequestCode.DELETE_TOPIC_IN_BROKER,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        }
    )

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        handler = self._handlers[cmd.code]
        try:
            result = handler(conn, cmd)
            if hasattr(result, "__await__"):
                result = await result
            return cast(RemotingCommand, result)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    # -- topics ---------------------------------------------------------------------------

    async def update_and_create_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
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
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"the topic[{clip_remark(h.topic)}] is conflict with system reserved words.",
                {},
            )
        cap = c.topic_config_manager.max_queue_nums
        if not (0 <= h.read_queue_nums <= cap and 0 <= h.write_queue_nums <= cap):
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"queue numbers must be between 0 and {cap} "
                f"(maxTopicQueueNums), not read {h.read_queue_nums} write {h.write_queue_nums}",
                {},
            )
        # Java 5 AdminBrokerProcessor.updateAndCreateTopic and
        # TopicConfigManager.updateSingleTopicConfigWithoutPersist: the signed attribute changes
        # applied to the topic's current attributes (AttributeUtil.alterCurrentAttributes); a
        # refusal is SYSTEM_ERROR with Java's words, MIXED needs enableMixedMessageType.
        try:
            changes = parse_attributes(h.attributes)
        except TopicAttributeError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(str(e)), {})
        if not c.broker_config.enable_mixed_message_type and changes.get("+" + MESSAGE_TYPE) == "MIXED":
            return cmd.response(ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.", {})
        old = c.topic_config_manager.select_topic_config(h.topic)
        try:
            attributes = alter_attributes(old is None, old.attributes if old is not None else {}, changes)
        except TopicAttributeError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, clip_remark(str(e)), {})
        tc = TopicConfig(
            h.topic,
            h.read_queue_nums,
            h.write_queue_nums,
            h.perm,
            h.topic_filter_type or "SINGLE_TAG",
            h.topic_sys_flag or 0,
            bool(h.order),
            attributes,
        )
        c.topic_config_manager.update_topic_config(tc)
        # Java AdminBrokerProcessor.updateAndCreateTopic: registerIncrementBrokerData, then answer.
        await c.register_topics_now((h.topic,))
        return cmd.response(ResponseCode.SUCCESS, None, {})

    async def delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        c = self.controller
        h = DeleteTopicRequestHeader.from_ext_fields(cmd.ext_fields)
        _rlog.info("delete-topic", "deleteTopic called by %s: %s", conn.remote_addr, clip(h.topic))
        if c.topic_config_manager.is_system_topic(h.topic):
            return cmd.response(
                ResponseCode.NO_PERMISSION,
                f"the topic[{clip_remark(h.topic)}] is a system topic and cannot be deleted",
                {},
            )
        c.topic_config_manager.delete_topic_config(h.topic)
        c.stats.on_topic_deleted(h.topic)
        c.consumer_offset_manager.remove_topic(h.topic)
        try:
            await _maybe_await(c.started_store.delete_topics({h.topic}))
        except Exception as e:
            log.exception("store failed to delete topic %s", clip(h.topic))
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic config deleted but the store failed: {e}", {})
        await c.register_broker_now()
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def get_all_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(
            ResponseCode.SUCCESS, None, {}, to_json_bytes(self.controller.topic_config_manager.serialize_wrapper())
        )

    def get_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java 5 AdminBrokerProcessor.getTopicConfig: the topic's TopicConfig JSON
        (TopicConfigAndQueueMapping without a mapping), TOPIC_NOT_EXIST when it is not here."""
        h = GetTopicConfigRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = self.controller.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {clip_remark(h.topic)}", {}
            )
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(tc.to_json()))

    # -- subscription groups --------------------------------------------------------------

    def update_and_create_subscription_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
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
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"retryQueueNums {cfg.retry_queue_nums} is out of range 0..{cap} (maxTopicQueueNums)",
                {},
            )
        _rlog.info(
            "update-group", "updateAndCreateSubscriptionGroup called by %s: %s", conn.remote_addr, cfg.group_name
        )
        self.controller.subscription_group_manager.update_subscription_group_config(cfg)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def get_all_subscription_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        sgm = self.controller.subscription_group_manager
        body = {
            "subscriptionGroupTable": {g: s.to_json() for g, s in sorted(sgm.subscription_group_table.items())},
            "dataVersion": sgm.data_version.to_json(),
        }
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(body))

    # -- runtime info and stats -----------------------------------------------------------

    def get_broker_runtime_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(ResponseCode.SUCCESS, None, {}, KVTable(self.runtime_info()).encode())

    # -- timer messages (Java 5 AdminBrokerProcessor.getTimerCheckPoint / getTimerMetrics) --

    def get_timer_check_point(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """The timer store's last checkpoint, Java ``TimerCheckpoint.encode``'s 56 bytes."""
        timer = self.controller.timer_message_store
        if timer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "The checkpoint is null", {})
        return cmd.response(ResponseCode.SUCCESS, None, {}, timer.checkpoint.to_wire())

    def get_timer_metrics(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Pending timers per real topic, Java ``TimerMetrics.encode``'s JSON."""
        timer = self.controller.timer_message_store
        if timer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "The timer message store is null", {})
        return cmd.response(ResponseCode.SUCCESS, None, {}, timer.metrics_json().encode())

    def _queue(self, topic: str, queue_id: int) -> dict[str, Any]:
        return {"brokerName": self.controller.broker_config.broker_name, "queueId": queue_id, "topic": topic}

    def get_topic_stats_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        c = self.controller
        h = GetTopicStatsInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        tc = c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{clip_remark(h.topic)}] not exist", {})
        store = c.started_store
        broker_name = c.broker_config.broker_name
        table = {}
        for qid in range(tc.write_queue_nums):
            max_off = store.get_max_offset_in_queue(h.topic, qid)
            min_off = max(0, store.get_min_offset_in_queue(h.topic, qid))
            last = store.get_message_store_timestamp(h.topic, qid, max_off - 1) if max_off > 0 else 0
            table[MessageQueue(h.topic, broker_name, qid)] = TopicOffset(min_off, max_off, last)
        # fastjson's MessageQueue object keys, which Java's tools and rmq.Admin read
        return cmd.response(ResponseCode.SUCCESS, None, {}, TopicStatsTable(table).to_body())

    def get_consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        c = self.controller
        h = GetConsumeStatsRequestHeader.from_ext_fields(cmd.ext_fields)
        topics = [h.topic] if h.topic else sorted(c.consumer_offset_manager.which_topic_by_consumer(h.consumer_group))
        table: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for topic in topics:
            part = self._consume_stats(h.consumer_group, topic, order_only=False, read_queues=True)
            if part is not None:
                table.update(part.offset_table)
                tps += part.consume_tps
        body = ConsumeStats(table, tps).encode()
        return cmd.response(ResponseCode.SUCCESS, None, {}, body.encode())

    def get_broker_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        # Java getBrokerConfig: every property (broker and store), and the config's data version
        configuration = self.controller.configuration
        return cmd.response(
            ResponseCode.SUCCESS, None, {"version": configuration.version_json()}, configuration.format().encode()
        )

    # -- offsets --------------------------------------------------------------------------

    def get_max_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.started_store.get_max_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_min_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.started_store.get_min_offset_in_queue(h.topic, h.queue_id)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def search_offset_by_timestamp(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        offset = self.controller.started_store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp)
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})

    def get_earliest_msg_storetime(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        store = self.controller.started_store
        min_off = store.get_min_offset_in_queue(h.topic, h.queue_id)
        ts = -1
        if store.get_max_offset_in_queue(h.topic, h.queue_id) > min_off:
            ts = store.get_message_store_timestamp(h.topic, h.queue_id, min_off)
        return cmd.response(ResponseCode.SUCCESS, None, {"timestamp": str(ts)})

    # -- stats -------------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table (Java AdminBrokerProcessor.prepareRuntimeInfo): the
        store's figures, the statistics (rmq.broker.stats), and the broker's."""
        c = self.controller
        store = c.started_store
        table: dict[str, str] = {}
        try:
            # Java prints booleans true/false
            table.update(
                {
                    str(k): {"True": "true", "False": "false"}.get(str(v), str(v))
                    for k, v in store.runtime_info().items()
                }
            )
        except Exception:  # stats are best effort
            log.exception("store runtime info failed")
        table.update(c.stats.runtime_info())
        # Java prepareRuntimeInfo's timer keys (zeros while no timer store runs, as Java's)
        timer = c.timer_message_store
        table.update(
            timer.runtime_info()
            if timer is not None
            else {
                "timerReadBehind": "0",
                "timerOffsetBehind": "0",
                "timerCongestNum": "0",
                "timerEnqueueTps": "0.0",
                "timerDequeueTps": "0.0",
                "timerEnqueuedTotal": "0",
                "timerDequeuedTotal": "0",
            }
        )
        ratio = table.get("commitLogDiskRatio", "0")
        root = c.store_config.store_path_root_dir
        try:
            fs = os.statvfs(root)
            capacity = (
                f"Total : {human_bytes(fs.f_blocks * fs.f_frsize)}, Free : {human_bytes(fs.f_bavail * fs.f_frsize)}."
            )
        except OSError:
            capacity = ""
        try:
            to_flush = max(0, store.commit_log.max_offset - store.commit_log.flushed_offset)
            earliest = store.get_earliest_message_time()
        except Exception:  # noqa: BLE001 - best effort, as the store's part
            to_flush, earliest = 0, -1
        # No thread-pool queues: requests run on the event loop (the dispatcher's pool is
        # what waits); the sizes are 0 and the capacities Java's defaults.
        table.update(
            {
                # Java MQVersion.getVersionDesc: tools print and compare it (clusterList's #Version)
                "brokerVersionDesc": "V4_9_8",
                "rmqVersion": __version__,
                "brokerVersion": str(BROKER_VERSION),
                "sendThreadPoolQueueSize": "0",
                "sendThreadPoolQueueCapacity": "10000",
                "pullThreadPoolQueueSize": "0",
                "pullThreadPoolQueueCapacity": "100000",
                "queryThreadPoolQueueSize": "0",
                "queryThreadPoolQueueCapacity": "20000",
                "EndTransactionQueueSize": "0",
                "EndTransactionThreadPoolQueueCapacity": "100000",
                "sendThreadPoolQueueHeadWaitTimeMills": "0",
                "pullThreadPoolQueueHeadWaitTimeMills": "0",
                "queryThreadPoolQueueHeadWaitTimeMills": "0",
                "pageCacheLockTimeMills": "0",
                "earliestMessageTimeStamp": str(earliest),
                "startAcceptSendRequestTimeStamp": "0",
                "remainTransientStoreBufferNumbs": str(2**31 - 1),
                "remainHowManyDataToFlush": human_bytes(to_flush),
                "commitLogDiskRatio": ratio,
                f"commitLogDiskRatio_{c.store_config.commitlog_dir}": ratio,
                "consumeQueueDiskRatio": ratio,
                "commitLogDirCapacity": capacity,
                "brokerRole": c.store_role,
                "brokerActive": "true",
                "pullHoldRequestCount": str(hold.held_count if (hold := c.pull_request_hold_service) else 0),
            }
        )
        if c.is_slave:  # what the slave copies from its master (rmq.broker.slave_sync)
            table.update(c.slave_synchronize.runtime_info())
        if c.replicas is not None:  # controller mode: id, epoch, SyncStateSet (rmq.broker.replicas)
            table.update(c.replicas.runtime_info())
        table.update(c.pop_service.runtime_info())  # POP checkpoints, held POPs, revived messages
        return table

    def _consume_stats(
        self, group: str, topic: str, *, order_only: bool, read_queues: bool = False
    ) -> ConsumeStats | None:
        """One group's ConsumeStats on one topic (Java getConsumeStats' loop body, over the read
        queues; fetchAllConsumeStatsInBroker's, over the write queues), or None when Java skips
        the topic (no config; not orderly when asked; not subscribed while the group subscribes
        to others)."""
        c = self.controller
        tc = c.topic_config_manager.select_topic_config(topic)
        if tc is None or (order_only and not tc.order):
            return None
        cgi = c.consumer_manager.get_consumer_group_info(group)
        if cgi is not None and cgi.find_subscription_data(topic) is None and cgi.subscriptions:
            return None
        store = c.started_store
        offsets = c.consumer_offset_manager.query_offsets(group, topic)
        name = c.broker_config.broker_name
        table = {}
        for qid in range(tc.read_queue_nums if read_queues else tc.write_queue_nums):
            broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
            consumer_offset = max(0, offsets.get(qid, 0))
            last = 0
            if consumer_offset > 0:
                last = max(0, store.get_message_store_timestamp(topic, qid, consumer_offset - 1))
            table[MessageQueue(topic, name, qid)] = OffsetWrapper(broker_offset, consumer_offset, last)
        return ConsumeStats(table, c.stats.tps_group_get_nums(group, topic))

    def view_broker_stats_data(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_ext_fields(cmd.ext_fields)
        item = self.controller.stats.get_stats_item(h.stats_name, h.stats_key)
        if item is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{clip_remark(h.stats_name)}> <{clip_remark(h.stats_key)}> not exist",
                {},
            )
        data = BrokerStatsData(*(BrokerStatsItem(*StatsItem.compute(w)) for w in (item.minute, item.hour, item.day)))
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(data.to_json()))

    def get_broker_consume_stats(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java fetchAllConsumeStatsInBroker: every subscription group, each topic it has
        offsets on."""
        c = self.controller
        h = GetConsumeStatsInBrokerHeader.from_ext_fields(cmd.ext_fields)
        entries = []
        total_diff = 0
        for group in list(c.subscription_group_manager.subscription_group_table):
            stats = []
            for topic in sorted(c.consumer_offset_manager.which_topic_by_consumer(group)):
                cs = self._consume_stats(group, topic, order_only=h.is_order)
                if cs is not None:
                    total_diff += cs.compute_total_diff()
                    stats.append(cs)
            entries.append({group: stats})
        body = ConsumeStatsList(c.broker_addr, total_diff, entries).encode()
        return cmd.response(ResponseCode.SUCCESS, None, {}, body.encode())

    async def update_broker_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        _rlog.info("update-broker-config", "updateBrokerConfig called by %s", conn.remote_addr)
        try:
            props = parse_properties(cmd.body_bytes() or b"")
        except ConfigError as e:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {clip(e)}", {})
        if not props:  # Java answers SUCCESS for an empty body
            return cmd.response(ResponseCode.SUCCESS, None, {})
        try:
            await self.controller.configuration.update(props)
        except ConfigUpdateRefused as e:
            code = ResponseCode.NO_PERMISSION if e.black_list else ResponseCode.SYSTEM_ERROR
            return cmd.response(code, clip(str(e), 2000), {})
        except OSError as e:
            log.exception("updateBrokerConfig: the config file could not be written")
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"applied, but the config file could not be written: {e}", {}
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})


async def _maybe_await(x: Any) -> Any:
    if hasattr(x, "__await__"):
        return await x
    return x
