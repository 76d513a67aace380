"""POP consumption on the client side (RocketMQ 5): what :class:`rmq.SimpleConsumer` and a
:class:`rmq.PushConsumer` in ``ConsumeMode.POP`` share.

There is no client rebalance: a POP consumer asks every broker of a subscribed topic for
messages with queue id -1 (the broker picks the queue, and also serves the group's retry
topic), as Java 5's SimpleConsumer and Java's push consumer with ``setClientRebalance(false)``
do. Each message arrives with an ack handle (Java ``ExtraInfoUtil``'s string in the ``POP_CK``
property, :attr:`rmq.MessageExt.receipt_handle`); the message stays invisible to the group
until acked (ACK_MESSAGE) or until its invisible time passes, then the broker delivers it
again through the group's retry topic with ``reconsume_times`` counted. CHANGE_MESSAGE_
INVISIBLETIME moves that moment and answers a new handle.

The broker holds a POP up to its poll time (long polling, as PULL's suspend); the client waits
that long plus :data:`POLL_TIMEOUT_MARGIN` for the answer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from rmq.client.api import PopResult
from rmq.common.constants import ExpressionType, MixAll, PermName
from rmq.common.message import MessageConst
from rmq.errors import ClientError, RouteError
from rmq.protocol.headers.pop import INIT_MODE_MAX, INIT_MODE_MIN, PopMessageRequestHeader
from rmq.protocol.requests.pop import ExtraInfo
from rmq.types import ConsumeFromWhere, MessageExt, MessageQueue

if TYPE_CHECKING:
    from .base import ConsumerBase, SubscriptionData

__all__ = [
    "POLL_TIMEOUT_MARGIN",
    "POP_DELAY_LEVELS",
    "POP_QUEUE_ID",
    "PopCalls",
    "init_mode",
    "pop_queues",
    "pop_retry_delay",
]

log = logging.getLogger("rmq.client")

#: The queue id of a POP that lets the broker choose the queue (and serve the retry topic too).
POP_QUEUE_ID = -1
#: The client waits for a long-polling POP this much longer than the broker may hold it (the
#: Python 5.x client's ``request_timeout`` on top of ``await_duration``).
POLL_TIMEOUT_MARGIN = 3.0
#: Seconds a message failed by the push consumer stays invisible, by its reconsume times (Java
#: ``DefaultMQPushConsumerImpl.popDelayLevel``).
POP_DELAY_LEVELS: tuple[float, ...] = (
    10,
    30,
    60,
    120,
    180,
    240,
    300,
    360,
    420,
    480,
    540,
    600,
    1200,
    1800,
    3600,
    7200,
)


def init_mode(consume_from_where: ConsumeFromWhere) -> int:
    """Java ``RebalancePushImpl.getConsumeInitMode``: MIN (the queue's first message) for
    ``CONSUME_FROM_FIRST_OFFSET``, else MAX (new messages only)."""
    return INIT_MODE_MIN if consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET else INIT_MODE_MAX


def pop_retry_delay(delays: tuple[float, ...], reconsume_times: int) -> float:
    """Seconds to keep a failed message invisible (Java
    ``ConsumeMessagePopConcurrentlyService.changePopInvisibleTime`` with delay level 0: the
    reconsume times index the table, the last entry past its end)."""
    return delays[min(max(reconsume_times, 0), len(delays) - 1)]


def pop_queues(consumer: ConsumerBase, topic: str) -> list[MessageQueue]:
    """One POP target per broker with a readable queue of ``topic`` and a known master:
    ``MessageQueue(topic, broker, -1)``, sorted by broker name."""
    inst = consumer._instance
    assert inst is not None
    route = inst.topic_route_table.get(topic)
    if route is None:
        return []
    readable = {qd.broker_name for qd in route.queue_datas if PermName.is_readable(qd.perm) and qd.read_queue_nums > 0}
    return [
        MessageQueue(topic, name, POP_QUEUE_ID)
        for name in sorted(readable)
        if inst.find_broker_address_in_publish(name) is not None
    ]


class PopCalls:
    """POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME for one consumer (Java
    ``PullAPIWrapper.popAsync``, ``DefaultMQPushConsumerImpl.ackAsync`` /
    ``changePopInvisibleTimeAsync``). Topic names are the wire names (with the namespace)."""

    __slots__ = ("consumer",)

    def __init__(self, consumer: ConsumerBase) -> None:
        self.consumer = consumer

    async def pop(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        *,
        max_nums: int,
        invisible_time: float,
        poll_time: float,
        order: bool = False,
    ) -> PopResult:
        """One long-polling POP of ``mq`` (queue id -1: any queue of the broker) from the
        broker's master. Messages that do not match the subscription's tags are acked and left
        out (Java ``DefaultMQPushConsumerImpl.processPopResult``)."""
        c = self.consumer
        inst = c._instance
        assert inst is not None
        addr = inst.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            await inst.update_topic_route(mq.topic)
            addr = inst.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise RouteError(f"the broker {mq.broker_name} of {mq.topic} has no master in the route")
        header = PopMessageRequestHeader(
            consumer_group=c.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            max_msg_nums=max_nums,
            invisible_time=int(invisible_time * 1000),
            poll_time=int(poll_time * 1000),
            born_time=int(time.time() * 1000),
            init_mode=init_mode(c.consume_from_where),
            exp_type=sub.expression_type,
            exp=sub.sub_string,
            order=order,
        )
        result = await inst.api.pop_message(addr, header, mq.broker_name, poll_time + POLL_TIMEOUT_MARGIN)
        if result.messages and sub.expression_type == ExpressionType.TAG and sub.tags_set:
            kept = [m for m in result.messages if sub.matches(m.tags)]
            if len(kept) != len(result.messages):
                for m in result.messages:
                    if not sub.matches(m.tags):
                        await self.ack_quietly(m)
                result.messages = kept
        return result

    def _handle(self, msg: MessageExt) -> tuple[str, ExtraInfo]:
        handle = msg.receipt_handle
        if not handle:
            raise ClientError("the message has no receipt handle (it was not received by POP)")
        try:
            return handle, ExtraInfo.parse(handle)
        except ValueError as e:
            raise ClientError(f"not a receipt handle: {e}") from None

    async def _addr(self, topic: str, broker_name: str) -> str:
        # Java: findBrokerAddressInSubscribe(brokerName, MASTER_ID, true), refreshing the route once
        inst = self.consumer._instance
        assert inst is not None
        addr = inst.find_broker_address_in_publish(broker_name)
        if addr is None:
            await inst.update_topic_route(topic)
            addr = inst.find_broker_address_in_publish(broker_name)
        if addr is None:
            raise RouteError(f"the broker {broker_name} is not in the route of {topic}")
        return addr

    async def ack(self, msg: MessageExt, *, timeout: float = 3.0) -> None:
        """ACK_MESSAGE of ``msg`` (wire topic). Raises the broker's refusal or a transport error."""
        handle, info = self._handle(msg)
        c = self.consumer
        topic = _original_topic(msg, c.group)
        addr = await self._addr(topic, info.broker_name)
        inst = c._instance
        assert inst is not None
        await inst.api.ack_message(addr, c.group, topic, handle, timeout)

    async def ack_batch(self, msgs: list[MessageExt], *, timeout: float = 3.0) -> None:
        """BATCH_ACK_MESSAGE of ``msgs`` (wire topics), one request per (broker, topic); raises
        the first failure."""
        c = self.consumer
        inst = c._instance
        assert inst is not None
        groups: dict[tuple[str, str], list[str]] = {}
        for m in msgs:
            handle, info = self._handle(m)
            groups.setdefault((info.broker_name, _original_topic(m, c.group)), []).append(handle)
        for (broker, topic), handles in groups.items():
            addr = await self._addr(topic, broker)
            await inst.api.batch_ack_message(addr, c.group, topic, handles, broker, timeout)

    async def ack_quietly(self, msg: MessageExt) -> bool:
        """:meth:`ack`, logging a failure instead of raising (the message comes back after its
        invisible time); True when acked."""
        try:
            await self.ack(msg)
        except Exception as e:  # noqa: BLE001 - logged; the broker redelivers what was not acked
            log.warning("group %s: ack of %s failed: %r", self.consumer.group, msg.msg_id, e)
            return False
        return True

    async def change_invisible_time(self, msg: MessageExt, seconds: float, *, timeout: float = 3.0) -> MessageExt:
        """CHANGE_MESSAGE_INVISIBLETIME of ``msg`` (wire topic): visible again ``seconds`` from
        now. Returns the message with its new receipt handle."""
        handle, info = self._handle(msg)
        c = self.consumer
        topic = _original_topic(msg, c.group)
        addr = await self._addr(topic, info.broker_name)
        inst = c._instance
        assert inst is not None
        new = await inst.api.change_invisible_time(addr, c.group, topic, handle, int(seconds * 1000), timeout)
        props = dict(msg.properties)
        props[MessageConst.POP_CK] = new
        return dataclasses.replace(msg, properties=props)


def _original_topic(msg: MessageExt, group: str) -> str:
    """The topic a popped message belongs to: the handle's retry mark names the retry topic it
    was popped from, so ACK and CHANGE_MESSAGE_INVISIBLETIME carry the original (the decoder
    already maps a retry topic back through ``RETRY_TOPIC``; without that property the POP
    retry topic's own prefix, Java ``KeyBuilder.buildPopRetryTopicV1/V2``, is taken off)."""
    topic = msg.topic
    if MixAll.is_retry_topic(topic):
        original = msg.properties.get(MessageConst.RETRY_TOPIC)
        if original:
            return original
        for sep in ("_", "+"):
            prefix = f"{MixAll.RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
            if topic.startswith(prefix):
                return topic[len(prefix) :]
    return topic
