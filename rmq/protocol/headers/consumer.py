"""Typed headers of consumers and their groups: pull, offsets, send-back, queue locks, subscription
groups, consume statistics, offset resets (Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "ConsumerSendMsgBackRequestHeader",
    "DeleteSubscriptionGroupRequestHeader",
    "GetConsumeStatsRequestHeader",
    "GetConsumerListByGroupRequestHeader",
    "GetMaxOffsetRequestHeader",
    "GetMaxOffsetResponseHeader",
    "GetMinOffsetRequestHeader",
    "GetMinOffsetResponseHeader",
    "PullMessageRequestHeader",
    "PullMessageResponseHeader",
    "QueryConsumerOffsetRequestHeader",
    "QueryConsumerOffsetResponseHeader",
    "ResetOffsetRequestHeader",
    "SearchOffsetRequestHeader",
    "SearchOffsetResponseHeader",
    "UpdateConsumerOffsetRequestHeader",
]


@header
class PullMessageRequestHeader(Header):
    """PULL_MESSAGE (11). ``sys_flag``: 1 commit offset, 2 suspend, 4 subscription, 8 class filter."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    queue_offset: int = w("queueOffset", int64=True)
    max_msg_nums: int = w("maxMsgNums")
    sys_flag: int = w("sysFlag")
    commit_offset: int = w("commitOffset", default=0, int64=True)
    suspend_timeout_millis: int = w("suspendTimeoutMillis", default=0, int64=True)
    subscription: str | None = w("subscription", default=None)
    sub_version: int = w("subVersion", default=0, int64=True)
    expression_type: str | None = w("expressionType", default=None)


@header
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int = w("suggestWhichBrokerId", int64=True)
    next_begin_offset: int = w("nextBeginOffset", int64=True)
    min_offset: int = w("minOffset", int64=True)
    max_offset: int = w("maxOffset", int64=True)


@header
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class QueryConsumerOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    commit_offset: int = w("commitOffset", int64=True)


@header
class GetMaxOffsetRequestHeader(Header):
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class GetMaxOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class GetMinOffsetRequestHeader(Header):
    topic: str = w("topic")
    queue_id: int = w("queueId")


@header
class GetMinOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class SearchOffsetRequestHeader(Header):
    """SEARCH_OFFSET_BY_TIMESTAMP (29); ``timestamp`` in ms."""

    topic: str = w("topic")
    queue_id: int = w("queueId")
    timestamp: int = w("timestamp", int64=True)


@header
class SearchOffsetResponseHeader(Header):
    offset: int = w("offset", int64=True)


@header
class GetConsumerListByGroupRequestHeader(Header):
    consumer_group: str = w("consumerGroup")


@header
class ConsumerSendMsgBackRequestHeader(Header):
    """CONSUMER_SEND_MSG_BACK (36); ``offset`` is the message's commit-log offset."""

    offset: int = w("offset", int64=True)
    group: str = w("group")
    delay_level: int = w("delayLevel", default=0)
    origin_msg_id: str | None = w("originMsgId", default=None)
    origin_topic: str | None = w("originTopic", default=None)
    unit_mode: bool = w("unitMode", default=False)
    max_reconsume_times: int | None = w("maxReconsumeTimes", default=None)


@header
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    topic: str | None = w("topic", default=None)


@header
class ResetOffsetRequestHeader(Header):
    """RESET_CONSUMER_CLIENT_OFFSET (220) / INVOKE_BROKER_TO_RESET_OFFSET (222)."""

    topic: str = w("topic")
    group: str = w("group")
    timestamp: int = w("timestamp", int64=True)
    is_force: bool = w("isForce", default=False)


@header
class DeleteSubscriptionGroupRequestHeader(Header):
    """DELETE_SUBSCRIPTIONGROUP (207): ``remove_offset`` also drops the group's committed
    offsets (Java 4.9.8's field; default false)."""

    group_name: str = w("groupName")
    remove_offset: bool = w("removeOffset", default=False)
