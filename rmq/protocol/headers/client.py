"""Typed headers of clients: heartbeat, unregister, connections, running info, direct consumption,
client-side offsets and status (Java ``common/.../protocol/header``).

Built with :func:`rmq.protocol.headers.header`; wire names exactly as Java's.
"""

from rmq.protocol.headers import Header, header, w

__all__ = [
    "ConsumeMessageDirectlyResultRequestHeader",
    "GetConsumerConnectionListRequestHeader",
    "GetConsumerRunningInfoRequestHeader",
    "GetConsumerStatusRequestHeader",
    "GetProducerConnectionListRequestHeader",
    "NotifyConsumerIdsChangedRequestHeader",
    "UnregisterClientRequestHeader",
]


@header
class UnregisterClientRequestHeader(Header):
    client_id: str = w("clientID")
    producer_group: str | None = w("producerGroup", default=None)
    consumer_group: str | None = w("consumerGroup", default=None)


@header
class NotifyConsumerIdsChangedRequestHeader(Header):
    consumer_group: str = w("consumerGroup")


@header
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str = w("consumerGroup")
    client_id: str = w("clientId")
    jstack_enable: bool = w("jstackEnable", default=False)


@header
class ConsumeMessageDirectlyResultRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309)."""

    consumer_group: str = w("consumerGroup")
    client_id: str | None = w("clientId", default=None)
    msg_id: str | None = w("msgId", default=None)
    broker_name: str | None = w("brokerName", default=None)


@header
class GetConsumerStatusRequestHeader(Header):
    topic: str = w("topic")
    group: str = w("group")
    client_addr: str | None = w("clientAddr", default=None)


# Admin headers: connections, consumer status, offset resets (203, 204, 220-223, 307, 309).
# (the conns engineer adds here)


@header
class GetConsumerConnectionListRequestHeader(Header):
    """GET_CONSUMER_CONNECTION_LIST (203)."""

    consumer_group: str = w("consumerGroup")


@header
class GetProducerConnectionListRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST (204)."""

    producer_group: str = w("producerGroup")
