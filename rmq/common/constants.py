"""RocketMQ's names and constant tables, one copy for every layer.

Java keeps these in ``common.topic.TopicValidator``, ``common.MixAll`` and
``common.constant.PermName``; the names and values here are theirs (4.9.8).
"""

from __future__ import annotations

from typing import Final

__all__ = ["ExpressionType", "MixAll", "PermName", "TopicValidator"]


class PermName:
    """Permission bits of a topic or a broker (Java ``PermName``).

    ``perm`` on the wire is a small int: 6 = read + write, 4 = read only, 2 = write only.
    """

    PERM_PRIORITY: Final = 0x1 << 3
    PERM_READ: Final = 0x1 << 2
    PERM_WRITE: Final = 0x1 << 1
    PERM_INHERIT: Final = 0x1 << 0
    #: every bit Java defines; a perm outside ``0..ALL`` is refused on input.
    ALL: Final = PERM_PRIORITY | PERM_READ | PERM_WRITE | PERM_INHERIT
    READ_WRITE: Final = PERM_READ | PERM_WRITE

    @staticmethod
    def is_readable(perm: int) -> bool:
        return (perm & PermName.PERM_READ) == PermName.PERM_READ

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return (perm & PermName.PERM_WRITE) == PermName.PERM_WRITE

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return (perm & PermName.PERM_INHERIT) == PermName.PERM_INHERIT

    @staticmethod
    def is_valid(perm: int) -> bool:
        """True for a perm made only of Java's bits (0..15)."""
        return 0 <= perm <= PermName.ALL

    @staticmethod
    def perm_to_string(perm: int) -> str:
        """Java ``PermName.perm2String``: ``"RW-"`` style (read, write, inherit)."""
        return (
            ("R" if PermName.is_readable(perm) else "-")
            + ("W" if PermName.is_writeable(perm) else "-")
            + ("X" if PermName.is_inherited(perm) else "-")
        )


class ExpressionType:
    """How a subscription's expression is read (Java ``ExpressionType``)."""

    TAG: Final = "TAG"
    SQL92: Final = "SQL92"


class MixAll:
    """Group and topic names and prefixes shared by brokers and clients (Java ``MixAll``)."""

    MASTER_ID: Final = 0
    #: The environment variable Java's tools and clients read when no name server is given.
    NAMESRV_ADDR_ENV: Final = "NAMESRV_ADDR"
    RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
    DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
    SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
    CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"
    DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
    DEFAULT_CONSUMER_GROUP: Final = "DEFAULT_CONSUMER"
    TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
    FILTERSRV_CONSUMER_GROUP: Final = "FILTERSRV_CONSUMER"
    MONITOR_CONSUMER_GROUP: Final = "__MONITOR_CONSUMER"
    CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
    SELF_TEST_PRODUCER_GROUP: Final = "SELF_TEST_P_GROUP"
    SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
    CID_ONSAPI_PERMISSION_GROUP: Final = "CID_ONSAPI_PERMISSION"
    CID_ONSAPI_OWNER_GROUP: Final = "CID_ONSAPI_OWNER"
    CID_ONSAPI_PULL_GROUP: Final = "CID_ONSAPI_PULL"
    #: the transaction service's own consumer group (its progress in the half/op queues).
    CID_SYS_RMQ_TRANS: Final = "CID_RMQ_SYS_TRANS"
    REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
    #: the MSG_TYPE of a reply message (Java ``MixAll.REPLY_MESSAGE_FLAG``)
    REPLY_MESSAGE_FLAG: Final = "reply"
    UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"

    @staticmethod
    def get_retry_topic(group: str) -> str:
        return MixAll.RETRY_GROUP_TOPIC_PREFIX + group

    @staticmethod
    def broker_vip_channel(is_change: bool, broker_addr: str) -> str:
        """Java ``MixAll.brokerVIPChannel``: ``host:port-2`` (the broker's fast remoting
        server) when ``is_change``, else ``broker_addr`` as it is."""
        if not is_change:
            return broker_addr
        host, sep, port = broker_addr.rpartition(":")
        if not sep or not port.isdigit():
            return broker_addr
        return f"{host}:{int(port) - 2}"

    @staticmethod
    def get_dlq_topic(group: str) -> str:
        return MixAll.DLQ_GROUP_TOPIC_PREFIX + group

    @staticmethod
    def get_reply_topic(cluster_name: str) -> str:
        return f"{cluster_name}_{MixAll.REPLY_TOPIC_POSTFIX}"

    @staticmethod
    def is_retry_topic(topic: str) -> bool:
        return topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)

    @staticmethod
    def is_dlq_topic(topic: str) -> bool:
        return topic.startswith(MixAll.DLQ_GROUP_TOPIC_PREFIX)

    @staticmethod
    def is_sys_consumer_group(group: str) -> bool:
        return group.startswith(MixAll.CID_RMQ_SYS_PREFIX)


class TopicValidator:
    """Topic names: the system topics, who may send to them, and what a legal name is
    (Java ``TopicValidator``). Groups follow the same character rule."""

    AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
    RMQ_SYS_SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
    RMQ_SYS_BENCHMARK_TOPIC: Final = "BenchmarkTest"
    RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
    RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
    RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
    RMQ_SYS_SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
    RMQ_SYS_OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
    # Java 5 TimerMessageStore.TIMER_TOPIC: timer messages wait here (rmq.store.timer)
    RMQ_SYS_WHEEL_TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
    SYSTEM_TOPIC_PREFIX: Final = MixAll.SYSTEM_TOPIC_PREFIX
    TOPIC_MAX_LENGTH: Final = 127
    #: Java validates names with this pattern; :meth:`is_topic_or_group_illegal` is its test.
    VALID_PATTERN_STR: Final = "^[%|a-zA-Z0-9_-]+$"

    SYSTEM_TOPIC_SET: Final = frozenset(
        {
            AUTO_CREATE_TOPIC_KEY_TOPIC,
            RMQ_SYS_SCHEDULE_TOPIC,
            RMQ_SYS_BENCHMARK_TOPIC,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRACE_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            RMQ_SYS_SELF_TEST_TOPIC,
            RMQ_SYS_OFFSET_MOVED_EVENT,
            RMQ_SYS_WHEEL_TIMER_TOPIC,
        }
    )
    #: topics a producer may not write into (the broker writes them itself).
    NOT_ALLOWED_SEND_TOPIC_SET: Final = frozenset(
        {
            RMQ_SYS_SCHEDULE_TOPIC,
            RMQ_SYS_TRANS_HALF_TOPIC,
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
            RMQ_SYS_SELF_TEST_TOPIC,
            RMQ_SYS_OFFSET_MOVED_EVENT,
        }
    )

    _VALID_CHARS: Final = frozenset("%|-_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

    @staticmethod
    def is_topic_or_group_illegal(name: str) -> bool:
        """True when ``name`` has a character outside ``[%|a-zA-Z0-9_-]``."""
        return not TopicValidator._VALID_CHARS.issuperset(name)

    @staticmethod
    def check_topic(topic: str | None) -> str | None:
        """``None`` for a legal topic name, else Java's remark for the refusal
        (``TopicValidator.validateTopic``: blank, illegal characters, longer than 127)."""
        if topic is None or not topic.strip():
            return "The specified topic is blank."
        if TopicValidator.is_topic_or_group_illegal(topic):
            return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        if len(topic) > TopicValidator.TOPIC_MAX_LENGTH:
            return "The specified topic is longer than topic max length."
        return None

    @staticmethod
    def validate_topic(topic: str | None) -> None:
        """Raise ``ValueError`` with :meth:`check_topic`'s reason when ``topic`` is not legal."""
        reason = TopicValidator.check_topic(topic)
        if reason is not None:
            raise ValueError(reason)

    @staticmethod
    def is_system_topic(topic: str) -> bool:
        return topic in TopicValidator.SYSTEM_TOPIC_SET or topic.startswith(TopicValidator.SYSTEM_TOPIC_PREFIX)

    @staticmethod
    def system_topic_remark(topic: str) -> str:
        """Java's remark when a request names a system topic it may not touch."""
        return f"The topic[{topic}] is conflict with system topic."

    @staticmethod
    def is_not_allowed_send_topic(topic: str) -> bool:
        return topic in TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET

    @staticmethod
    def not_allowed_send_remark(topic: str) -> str:
        """Java's remark (with NO_PERMISSION) for a send into a broker-only topic."""
        return f"Sending message to topic[{topic}] is forbidden."
