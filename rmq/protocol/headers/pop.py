"""Typed headers of RocketMQ 5 POP consumption: pop, ack, change invisible time, notification,
polling info (Java 5.3.3 ``remoting/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's. The request headers
of 5.x extend ``TopicQueueRequestHeader`` → ``RpcRequestHeader``, whose ``bname`` (the broker
name a proxy addresses) is kept here as an optional field; ``ns``/``nsd``/``oway``/``lo`` are
ignored as unknown keys.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "INIT_MODE_MAX",
    "INIT_MODE_MIN",
    "AckMessageRequestHeader",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "NotificationRequestHeader",
    "NotificationResponseHeader",
    "PollingInfoRequestHeader",
    "PollingInfoResponseHeader",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
]

#: Java ``ConsumeInitMode``: where a group with no POP offset starts on a queue (the
#: ``initMode`` of PopMessageRequestHeader). MIN = the queue's first message, MAX = its end.
INIT_MODE_MIN, INIT_MODE_MAX = 0, 1


@header
class PopMessageRequestHeader(Header):
    """POP_MESSAGE (200050). ``queue_id`` -1 pops any queue; ``invisible_time`` and
    ``poll_time`` (how long the broker may hold the request) in ms; ``born_time`` the client's
    clock (ms); ``init_mode`` INIT_MODE_MIN (0) = from the queue's first message,
    INIT_MODE_MAX (1) = from its end (Java ``ConsumeInitMode``); ``exp_type`` TAG (default) or
    SQL92; ``order`` orderly POP."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    max_msg_nums: int = w("maxMsgNums")
    invisible_time: int = w("invisibleTime", int64=True)
    poll_time: int = w("pollTime", int64=True)
    born_time: int = w("bornTime", int64=True)
    init_mode: int = w("initMode")
    exp_type: str | None = w("expType", default=None)
    exp: str | None = w("exp", default=None)
    order: bool = w("order", default=False)
    attempt_id: str | None = w("attemptId", default=None)
    bname: str | None = w("bname", default=None)


@header
class PopMessageResponseHeader(Header):
    """The POP_MESSAGE answer. ``start_offset_info``/``msg_offset_info``/``order_count_info``
    are Java ``ExtraInfoUtil``'s strings (``rmq.protocol.requests.pop``)."""

    pop_time: int = w("popTime", int64=True)
    invisible_time: int = w("invisibleTime", int64=True)
    revive_qid: int = w("reviveQid")
    rest_num: int = w("restNum", int64=True)
    start_offset_info: str | None = w("startOffsetInfo", default=None)
    msg_offset_info: str | None = w("msgOffsetInfo", default=None)
    order_count_info: str | None = w("orderCountInfo", default=None)


@header
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE (200051): ``extra_info`` is the message's POP_CK handle, ``offset`` its queue
    offset."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    extra_info: str = w("extraInfo")
    offset: int = w("offset", int64=True)
    bname: str | None = w("bname", default=None)


@header
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message becomes visible ``invisible_time`` ms
    from now; the answer carries the new handle's parts."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    extra_info: str = w("extraInfo")
    offset: int = w("offset", int64=True)
    invisible_time: int = w("invisibleTime", int64=True)
    bname: str | None = w("bname", default=None)


@header
class ChangeInvisibleTimeResponseHeader(Header):
    pop_time: int = w("popTime", int64=True)
    invisible_time: int = w("invisibleTime", int64=True)
    revive_qid: int = w("reviveQid")


@header
class NotificationRequestHeader(Header):
    """NOTIFICATION (200054): long-poll up to ``poll_time`` ms for "is there a message"."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    poll_time: int = w("pollTime", int64=True)
    born_time: int = w("bornTime", int64=True)
    order: bool = w("order", default=False)
    attempt_id: str | None = w("attemptId", default=None)
    bname: str | None = w("bname", default=None)


@header
class NotificationResponseHeader(Header):
    has_msg: bool = w("hasMsg", default=False)
    polling_full: bool = w("pollingFull", default=False)


@header
class PollingInfoRequestHeader(Header):
    """POLLING_INFO (200055): how many POP/NOTIFICATION requests the broker holds for the group
    on the topic's queue."""

    consumer_group: str = w("consumerGroup")
    topic: str = w("topic")
    queue_id: int = w("queueId")
    bname: str | None = w("bname", default=None)


@header
class PollingInfoResponseHeader(Header):
    polling_num: int = w("pollingNum")
