"""Request builders and reply parsers of clients: heartbeat, unregister, connections, running info,
direct consumption, client-side offsets and status.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rmq.protocol.body import conns as _conns_body
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    UnregisterClientRequestHeader,
)
from rmq.protocol.requests import _request, check_success, parse_body

__all__ = [
    "check_client_config",
    "consume_message_directly",
    "get_all_producer_info",
    "get_consumer_connection_list",
    "get_consumer_running_info",
    "get_producer_connection_list",
    "heart_beat",
    "parse_all_producer_info",
    "parse_heart_beat",
    "unregister_client",
]


def heart_beat(data: Mapping[str, Any]) -> RemotingCommand:
    """HEART_BEAT (34) with Java ``HeartbeatData`` as the JSON body."""
    return _request(RequestCode.HEART_BEAT, None, json.dumps(data).encode())


def parse_heart_beat(resp: RemotingCommand) -> int:
    """The broker's version (from the reply's command header)."""
    check_success(resp)
    return resp.version


def unregister_client(
    client_id: str, producer_group: str | None = None, consumer_group: str | None = None
) -> RemotingCommand:
    """UNREGISTER_CLIENT (35); answered by SUCCESS."""
    return _request(
        RequestCode.UNREGISTER_CLIENT,
        UnregisterClientRequestHeader(
            client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
        ),
    )


# Admin builders and parsers: connections, consumer status, offset resets (203, 204, 220-223, 307, 309).
# (the conns engineer adds here)


def get_consumer_connection_list(group: str) -> RemotingCommand:
    """GET_CONSUMER_CONNECTION_LIST (203); the answer's body is a ``ConsumerConnection``,
    CONSUMER_NOT_ONLINE when no member is connected."""
    return _request(
        RequestCode.GET_CONSUMER_CONNECTION_LIST, GetConsumerConnectionListRequestHeader(consumer_group=group)
    )


def get_producer_connection_list(group: str) -> RemotingCommand:
    """GET_PRODUCER_CONNECTION_LIST (204); the answer's body is a ``ProducerConnection``."""
    return _request(
        RequestCode.GET_PRODUCER_CONNECTION_LIST, GetProducerConnectionListRequestHeader(producer_group=group)
    )


def get_consumer_running_info(group: str, client_id: str, jstack: bool = False) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307), to a broker (which relays it) or from a broker to the
    client; the answer's body is a ``ConsumerRunningInfo``."""
    return _request(
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=client_id, jstack_enable=jstack),
    )


def consume_message_directly(
    group: str, client_id: str, msg_id: str, broker_name: str | None = None
) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (309) to the broker holding ``msg_id`` (an offset message id),
    which relays it with the message to the client; the answer's body is a
    ``ConsumeMessageDirectlyResult``."""
    return _request(
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        ConsumeMessageDirectlyResultRequestHeader(
            consumer_group=group, client_id=client_id, msg_id=msg_id, broker_name=broker_name
        ),
    )


def get_all_producer_info() -> RemotingCommand:
    """GET_ALL_PRODUCER_INFO (328) to one broker: its producer connections by group."""
    return _request(RequestCode.GET_ALL_PRODUCER_INFO)


def parse_all_producer_info(resp: RemotingCommand) -> _conns_body.ProducerTableInfo:
    """A :class:`rmq.protocol.body.conns.ProducerTableInfo`."""
    return parse_body(resp, "ProducerTableInfo", _conns_body.ProducerTableInfo.decode)


def check_client_config(client_id: str, group: str, subscription: Mapping[str, Any]) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG (46) with Java ``CheckClientRequestBody``: can the broker filter by
    this subscription (a SubscriptionData JSON object)? SUCCESS, or SUBSCRIPTION_PARSE_FAILED /
    SYSTEM_ERROR with the broker's reason; :func:`check_success` raises for those."""
    return _request(
        RequestCode.CHECK_CLIENT_CONFIG,
        None,
        json.dumps({"clientId": client_id, "group": group, "subscriptionData": dict(subscription)}).encode(),
    )
