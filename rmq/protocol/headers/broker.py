"""Typed headers of the broker itself: configuration, runtime and statistics, store maintenance, a
slave's metadata copy (Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "GetConsumeStatsInBrokerHeader",
    "QueryConsumeQueueRequestHeader",
    "ViewBrokerStatsDataRequestHeader",
]


# Admin headers: broker statistics and configuration (25, 315, 317).


@header
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one stats item (``TOPIC_PUT_NUMS`` / ``topic``,
    ``GROUP_GET_NUMS`` / ``topic@group``, ...)."""

    stats_name: str = w("statsName")
    stats_key: str = w("statsKey")


@header
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317): ``isOrder`` keeps only orderly topics."""

    is_order: bool = w("isOrder", default=False)


@header
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321): ``count`` units of ``topic``/``queue_id`` from ``index``;
    ``consumer_group`` adds the group's subscription."""

    topic: str = w("topic")
    queue_id: int = w("queueId")
    index: int = w("index", int64=True)
    count: int = w("count")
    consumer_group: str | None = w("consumerGroup", default=None)
