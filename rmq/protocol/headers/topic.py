"""Typed headers of topics on a broker: create, delete, statistics, who consumes them, system and
unused topics (Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.common.constants import PermName, TopicValidator
from rmq.protocol.headers import Header, header, w

__all__ = [
    "CreateTopicRequestHeader",
    "DeleteTopicRequestHeader",
    "GetTopicConfigRequestHeader",
    "GetTopicStatsInfoRequestHeader",
    "QueryTopicConsumeByWhoRequestHeader",
]


@header
class CreateTopicRequestHeader(Header):
    """UPDATE_AND_CREATE_TOPIC (17). ``perm``: 2 write, 4 read, 6 both."""

    topic: str = w("topic")
    default_topic: str = w("defaultTopic", default=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC)
    read_queue_nums: int = w("readQueueNums")
    write_queue_nums: int = w("writeQueueNums")
    perm: int = w("perm", default=PermName.READ_WRITE, lo=0, hi=PermName.ALL)
    topic_filter_type: str = w("topicFilterType", default="SINGLE_TAG")
    topic_sys_flag: int | None = w("topicSysFlag", default=None)
    order: bool = w("order", default=False)
    # Java 5 (CreateTopicRequestHeader.attributes): "+message.type=FIFO,-reserve.time"
    # (rmq.common.topic_attributes); a 4.x frame has none
    attributes: str | None = w("attributes", default=None)


@header
class GetTopicConfigRequestHeader(Header):
    """GET_TOPIC_CONFIG (351, Java 5): one topic's TopicConfig; ``lo`` asks for the static-topic
    mapping too, which rmq does not have (none is returned)."""

    topic: str = w("topic")
    lo: bool | None = w("lo", default=None)


@header
class DeleteTopicRequestHeader(Header):
    topic: str = w("topic")


@header
class GetTopicStatsInfoRequestHeader(Header):
    topic: str = w("topic")


@header
class QueryTopicConsumeByWhoRequestHeader(Header):
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""

    topic: str = w("topic")
