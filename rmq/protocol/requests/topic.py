"""Request builders and reply parsers of topics on a broker: create, delete, statistics, who consumes
them, system and unused topics.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

from rmq.protocol.body.topic import TopicStatsTable
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.topic import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rmq.protocol.requests import _request, parse_body

__all__ = [
    "clean_unused_topic",
    "create_topic",
    "delete_topic_in_broker",
    "get_system_topic_list_from_broker",
    "get_topic_stats_info",
    "parse_group_list",
    "parse_topic_stats",
    "query_topic_consume_by_who",
]


def create_topic(header: CreateTopicRequestHeader) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17) to one broker; answered by SUCCESS."""
    return _request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)


def delete_topic_in_broker(topic: str) -> RemotingCommand:
    """DELETE_TOPIC_IN_BROKER (215); answered by SUCCESS."""
    return _request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic))


def get_topic_stats_info(topic: str) -> RemotingCommand:
    """GET_TOPIC_STATS_INFO (202): every queue's min/max offset on one broker. Parse with
    :func:`parse_topic_stats`."""
    return _request(RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=topic))


def parse_topic_stats(resp: RemotingCommand) -> TopicStatsTable:
    """Java ``TopicStatsTable`` (fastjson's MessageQueue object keys read); TOPIC_NOT_EXIST raises."""
    return parse_body(resp, "TopicStatsTable", TopicStatsTable.from_body)


def query_topic_consume_by_who(topic: str) -> RemotingCommand:
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""
    return _request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, QueryTopicConsumeByWhoRequestHeader(topic=topic))


def parse_group_list(resp: RemotingCommand) -> list[str]:
    """The group names of a GroupList answer (sorted)."""
    from rmq.protocol.body.topic import GroupList

    return sorted(parse_body(resp, "GroupList", GroupList.decode).group_list)


def clean_unused_topic() -> RemotingCommand:
    """CLEAN_UNUSED_TOPIC (316) to one broker: it drops the consume queues of topics it has no
    config for; answered by SUCCESS."""
    return _request(RequestCode.CLEAN_UNUSED_TOPIC)


def get_system_topic_list_from_broker() -> RemotingCommand:
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) to one broker; parse with
    :func:`parse_topic_list` (Java ``TopicList``)."""
    return _request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
