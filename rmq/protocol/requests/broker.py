"""Request builders and reply parsers of the broker itself: configuration, runtime and statistics,
store maintenance, a slave's metadata copy.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmq.protocol.body import json_object
from rmq.protocol.body import ops as _ops_body
from rmq.protocol.body import sync as _sync_body
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.broker import (
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmq.protocol.requests import _request, parse_body

__all__ = [
    "clean_expired_consume_queue",
    "delete_expired_commit_log",
    "get_all_consumer_offset",
    "get_all_delay_offset",
    "get_all_subscription_group_config",
    "get_all_topic_config",
    "get_broker_config",
    "get_broker_consume_stats",
    "get_broker_runtime_info",
    "get_timer_check_point",
    "get_timer_metrics",
    "parse_all_consumer_offset",
    "parse_all_delay_offset",
    "parse_all_subscription_group_config",
    "parse_all_topic_config",
    "parse_broker_config",
    "parse_broker_stats_data",
    "parse_consume_stats_list",
    "parse_kv_table",
    "parse_query_consume_queue",
    "parse_timer_check_point",
    "parse_timer_metrics",
    "query_consume_queue",
    "update_broker_config",
    "view_broker_stats_data",
]


# Admin builders and parsers: broker statistics and configuration (25, 26, 28, 315, 317).


def get_broker_runtime_info() -> RemotingCommand:
    """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of runtime figures."""
    return _request(RequestCode.GET_BROKER_RUNTIME_INFO)


def parse_kv_table(resp: RemotingCommand) -> dict[str, str]:
    """A KVTable answer (GET_BROKER_RUNTIME_INFO) as ``{key: value}``."""
    from rmq.protocol.body.ops import KVTable

    return parse_body(resp, "KVTable", KVTable.decode).table


def get_broker_config() -> RemotingCommand:
    """GET_BROKER_CONFIG (26): the broker's properties as text."""
    return _request(RequestCode.GET_BROKER_CONFIG)


def parse_broker_config(resp: RemotingCommand) -> dict[str, str]:
    """GET_BROKER_CONFIG's properties text as ``{key: value}`` in the broker's order."""
    from rmq.config import parse_properties

    return parse_body(resp, "broker config", parse_properties)


def update_broker_config(properties: Mapping[str, object]) -> RemotingCommand:
    """UPDATE_BROKER_CONFIG (25): ``properties`` as properties text; answered by SUCCESS."""
    from rmq.config import format_properties

    return _request(RequestCode.UPDATE_BROKER_CONFIG, None, format_properties(properties).encode())


def view_broker_stats_data(stats_name: str, stats_key: str) -> RemotingCommand:
    """VIEW_BROKER_STATS_DATA (315): one item's minute, hour and day windows."""
    return _request(
        RequestCode.VIEW_BROKER_STATS_DATA, ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key)
    )


def parse_broker_stats_data(resp: RemotingCommand) -> Any:
    """VIEW_BROKER_STATS_DATA's :class:`rmq.protocol.body.stats.BrokerStatsData`."""
    from rmq.protocol.body.stats import BrokerStatsData

    return parse_body(
        resp, "BrokerStatsData", lambda body: BrokerStatsData.from_json(json_object(body, "BrokerStatsData"))
    )


def get_broker_consume_stats(is_order: bool = False) -> RemotingCommand:
    """GET_BROKER_CONSUME_STATS (317): every group's ConsumeStats on the broker."""
    return _request(RequestCode.GET_BROKER_CONSUME_STATS, GetConsumeStatsInBrokerHeader(is_order=is_order))


def parse_consume_stats_list(resp: RemotingCommand) -> Any:
    """GET_BROKER_CONSUME_STATS's :class:`rmq.protocol.body.stats.ConsumeStatsList`."""
    from rmq.protocol.body.stats import ConsumeStatsList

    return parse_body(resp, "ConsumeStatsList", ConsumeStatsList.decode)


# Timer messages (Java 5 GET_TIMER_CHECK_POINT 60, GET_TIMER_METRICS 61).


def get_timer_check_point() -> RemotingCommand:
    """GET_TIMER_CHECK_POINT (60): the timer store's last checkpoint."""
    return _request(RequestCode.GET_TIMER_CHECK_POINT)


_TIMER_CHECK_POINT_KEYS = (
    "lastReadTimeMs",
    "lastTimerLogFlushPos",
    "lastTimerQueueOffset",
    "masterTimerQueueOffset",
    "stateVersion",
    "timestamp",
    "counter",
)


def parse_timer_check_point(resp: RemotingCommand) -> dict[str, int]:
    """GET_TIMER_CHECK_POINT's body (Java ``TimerCheckpoint.decode``: seven big-endian longs)
    as ``{lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset, masterTimerQueueOffset,
    stateVersion, timestamp, counter}`` (the last three: its DataVersion)."""
    import struct

    def decode(body: bytes) -> dict[str, int]:
        if len(body) < 56:
            raise ValueError(f"{len(body)} bytes, 56 expected")
        return dict(zip(_TIMER_CHECK_POINT_KEYS, struct.unpack(">7q", body[:56]), strict=True))

    return parse_body(resp, "TimerCheckpoint", decode)


def get_timer_metrics() -> RemotingCommand:
    """GET_TIMER_METRICS (61): pending timers per real topic."""
    return _request(RequestCode.GET_TIMER_METRICS)


def parse_timer_metrics(resp: RemotingCommand) -> dict[str, tuple[int, int]]:
    """GET_TIMER_METRICS' JSON (Java ``TimerMetricsSerializeWrapper``) as ``{topic: (count,
    timeStamp ms)}``."""

    def decode(body: bytes) -> dict[str, tuple[int, int]]:
        table = json_object(body, "TimerMetrics").get("timingCount") or {}
        return {str(t): (int(m["count"]), int(m.get("timeStamp", 0))) for t, m in table.items()}

    return parse_body(resp, "TimerMetrics", decode)


def clean_expired_consume_queue() -> RemotingCommand:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306) to one broker; answered by SUCCESS."""
    return _request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


def delete_expired_commit_log() -> RemotingCommand:
    """DELETE_EXPIRED_COMMITLOG (329) to one broker; answered by SUCCESS (the deletion runs
    at the broker's next clean run)."""
    return _request(RequestCode.DELETE_EXPIRED_COMMITLOG)


def query_consume_queue(
    topic: str, queue_id: int, index: int, count: int, consumer_group: str | None = None
) -> RemotingCommand:
    """QUERY_CONSUME_QUEUE (321) to one broker."""
    return _request(
        RequestCode.QUERY_CONSUME_QUEUE,
        QueryConsumeQueueRequestHeader(
            topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=consumer_group
        ),
    )


def parse_query_consume_queue(resp: RemotingCommand) -> _ops_body.QueryConsumeQueueResponseBody:
    """A :class:`rmq.protocol.body.ops.QueryConsumeQueueResponseBody`; an answer without a body
    (Java: the index is past the queue's end) has no units and index range 0..0."""
    return parse_body(resp, "QueryConsumeQueueResponseBody", _ops_body.QueryConsumeQueueResponseBody.decode)


def get_all_consumer_offset() -> RemotingCommand:
    """GET_ALL_CONSUMER_OFFSET (43) to one broker (a slave syncs its master's offsets with it)."""
    return _request(RequestCode.GET_ALL_CONSUMER_OFFSET)


def parse_all_consumer_offset(resp: RemotingCommand) -> dict[str, dict[int, int]]:
    """``{"topic@group": {queue_id: offset}}``."""
    return parse_body(resp, "ConsumerOffsetManager", _ops_body.ConsumerOffsetTable.decode).offset_table


def get_all_delay_offset() -> RemotingCommand:
    """GET_ALL_DELAY_OFFSET (45) to one broker."""
    return _request(RequestCode.GET_ALL_DELAY_OFFSET)


def parse_all_delay_offset(resp: RemotingCommand) -> dict[int, int]:
    """``{delay_level: offset}`` in SCHEDULE_TOPIC_XXXX."""
    return parse_body(resp, "DelayOffsetSerializeWrapper", _ops_body.DelayOffsetTable.decode).offset_table


def get_all_topic_config() -> RemotingCommand:
    """GET_ALL_TOPIC_CONFIG (21) to one broker; parse with :func:`parse_all_topic_config`."""
    return _request(RequestCode.GET_ALL_TOPIC_CONFIG)


def parse_all_topic_config(resp: RemotingCommand) -> _sync_body.TopicConfigWrapper:
    """The broker's topic table and its data version."""
    return parse_body(resp, "TopicConfigSerializeWrapper", _sync_body.TopicConfigWrapper.decode)


def get_all_subscription_group_config() -> RemotingCommand:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) to one broker; parse with
    :func:`parse_all_subscription_group_config`."""
    return _request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)


def parse_all_subscription_group_config(resp: RemotingCommand) -> _sync_body.SubscriptionGroupWrapper:
    """The broker's subscription groups and their data version."""
    return parse_body(resp, "SubscriptionGroupWrapper", _sync_body.SubscriptionGroupWrapper.decode)
