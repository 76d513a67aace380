"""Store maintenance and metadata dumps (Java ``AdminBrokerProcessor``):

DELETE_SUBSCRIPTIONGROUP (207), CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316),
DELETE_EXPIRED_COMMITLOG (329), QUERY_CONSUME_QUEUE (321), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305,
what mqadmin exportMetadata leaves out), GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45;
with GET_ALL_TOPIC_CONFIG 21 and GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201 what a Java slave's
``SlaveSynchronize`` reads from its master).

Answers carry Java's codes, remarks and bodies (rmq.protocol.body.ops). Everything runs on the
event loop, where the store's tables change, so a dump is a consistent snapshot; the reads are
bounded (QUERY_CONSUME_QUEUE's ``count`` at :data:`MAX_QUERY_CONSUME_QUEUE_COUNT`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmq.broker.context import BrokerContext
from rmq.broker.processors.common import bad_request, to_json_bytes
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import java_string_hash
from rmq.errors import RemotingCommandError
from rmq.protocol.body.ops import ConsumeQueueData, ConsumerOffsetTable, DelayOffsetTable, QueryConsumeQueueResponseBody
from rmq.protocol.body.topic import TopicList
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.broker import QueryConsumeQueueRequestHeader
from rmq.protocol.headers.consumer import DeleteSubscriptionGroupRequestHeader

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

#: Units one QUERY_CONSUME_QUEUE may ask for (Java stops at the end of the unit's file, up to
#: 300 000 units); mqadmin queryCq asks for 10.
MAX_QUERY_CONSUME_QUEUE_COUNT = 10_000
#: Java AdminBrokerProcessor.validateSlave's remark.
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker."


class OpsAdminProcessor:
    """The operations codes of the broker (see module docstring)."""

    #: codes that change state (served by the admin write pool).
    WRITE_CODES = frozenset(
        {
            RequestCode.DELETE_SUBSCRIPTIONGROUP,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
            RequestCode.DELETE_EXPIRED_COMMITLOG,
            RequestCode.CLEAN_UNUSED_TOPIC,
        }
    )

    def __init__(self, controller: BrokerContext) -> None:
        self.controller = controller
        self._handlers: dict[int, Callable[[Any, RemotingCommand], RemotingCommand]] = {
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
        }

    @property
    def codes(self) -> list[int]:
        return list(self._handlers)

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return self._handlers[cmd.code](conn, cmd)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    # -- writes ---------------------------------------------------------------------------

    def delete_subscription_group(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java deleteSubscriptionGroup: refused on a slave; drops the group's config and, with
        ``removeOffset``, its committed offsets; SUCCESS whether or not the group existed."""
        c = self.controller
        if c.is_slave:
            return cmd.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK, {})
        h = DeleteSubscriptionGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        _rlog.info(
            "delete-group",
            "deleteSubscriptionGroup called by %s: %s removeOffset=%s",
            conn.remote_addr,
            clip(h.group_name),
            h.remove_offset,
        )
        c.subscription_group_manager.delete_subscription_group_config(h.group_name)
        c.stats.on_group_deleted(h.group_name)  # Java: brokerStatsManager.onGroupDeleted
        if h.remove_offset:
            c.consumer_offset_manager.remove_offset(h.group_name)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def clean_expired_consume_queue(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java cleanExpiredConsumeQueue (DefaultMessageStore.cleanExpiredConsumerQueue)."""
        n = self.controller.started_store.clean_expired_consumer_queue()
        _rlog.warning(
            "clean-cq", "cleanExpiredConsumeQueue called by %s: %d consume queue(s) destroyed", conn.remote_addr, n
        )
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def delete_expired_commit_log(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java deleteExpiredCommitLog: the store's next clean runs delete expired files at any
        hour; answered at once."""
        _rlog.warning("delete-commitlog", "deleteExpiredCommitLog called by %s", conn.remote_addr)
        self.controller.started_store.execute_delete_files_manually()
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def clean_unused_topic(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java cleanUnusedTopic: the store drops the consume queues of topics without a topic
        config here (DefaultMessageStore.cleanUnusedTopic), and their statistics with them."""
        c = self.controller
        dropped = c.started_store.clean_unused_topic(set(c.topic_config_manager.topic_config_table))
        for topic in dropped:
            c.stats.on_topic_deleted(topic)
        _rlog.warning(
            "clean-unused-topic",
            "cleanUnusedTopic called by %s: %d topic(s) without a config cleaned",
            conn.remote_addr,
            len(dropped),
        )
        return cmd.response(ResponseCode.SUCCESS, None, {})

    # -- reads ----------------------------------------------------------------------------

    def get_system_topic_list(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java getSystemTopicListFromBroker: TopicConfigManager's system topics (TBW102, the
        cluster and broker names, SCHEDULE_TOPIC_XXXX, ...) as a ``TopicList``."""
        topics = sorted(self.controller.topic_config_manager.system_topics)
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(TopicList(topics).to_json()))

    def query_consume_queue(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java queryConsumeQueue: SYSTEM_ERROR ``<queueId>@<topic> is not exist!`` for an
        unknown queue. An index outside the queue is answered SUCCESS with Java's remark
        ``Index <i> of <queueId>@<topic> is not exist!``; Java then sends no body, we send the
        index range (and the group's subscription) without units, which Java's admin reads too."""
        c = self.controller
        h = QueryConsumeQueueRequestHeader.from_ext_fields(cmd.ext_fields)
        if not 0 <= h.count <= MAX_QUERY_CONSUME_QUEUE_COUNT:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"count {h.count} is out of range 0..{MAX_QUERY_CONSUME_QUEUE_COUNT}", {}
            )
        cq = c.started_store.find_consume_queue(h.topic, h.queue_id, create=False)
        if cq is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{h.queue_id}@{clip_remark(h.topic)} is not exist!", {})
        subscription = filter_data = None
        if h.consumer_group is not None:
            sd = c.consumer_manager.find_subscription_data(h.consumer_group, h.topic)
            if sd is None:
                filter_data = f"{clip_remark(h.consumer_group)}@{clip_remark(h.topic)} is not online!"
            else:
                subscription = _subscription_json(sd.to_json())
                filter_data = "null"  # Java: JSON of the group's ConsumerFilterData, null for tag filters
        units: list[ConsumeQueueData] | None = None
        remark = None
        if cq.get_unit(h.index) is None:
            remark = f"Index {h.index} of {h.queue_id}@{clip_remark(h.topic)} is not exist!"
        else:
            units = []
            for i in range(h.index, h.index + h.count):
                unit = cq.get_unit(i)
                if unit is None:
                    break
                units.append(ConsumeQueueData(unit[0], unit[1], unit[2]))
        body = QueryConsumeQueueResponseBody(
            cq.get_max_offset_in_queue(), cq.get_min_offset_in_queue(), units, subscription, filter_data
        )
        return cmd.response(ResponseCode.SUCCESS, remark, {}, body.encode())

    def get_all_consumer_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java getAllConsumerOffset: ConsumerOffsetManager's JSON."""
        table = self.controller.consumer_offset_manager.offset_table
        return cmd.response(ResponseCode.SUCCESS, None, {}, ConsumerOffsetTable(table).encode())

    def get_all_delay_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java getAllDelayOffset: the schedule service's delayOffset.json content."""
        table = self.controller.schedule_service.table.offset_table
        return cmd.response(ResponseCode.SUCCESS, None, {}, DelayOffsetTable(dict(table)).encode())


def _subscription_json(d: dict[str, Any]) -> dict[str, Any]:
    """Our SubscriptionData JSON with the fields Java's has too (``classFilterMode``,
    ``codeSet``: the Java String.hashCode of each tag)."""
    out = {"classFilterMode": False, "codeSet": [java_string_hash(t) for t in d.get("tagsSet") or ()]}
    out.update(d)
    return out
