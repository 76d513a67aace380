"""Request builders and reply parsers of consumers and their groups: pull, offsets, send-back, queue
locks, subscription groups, consume statistics, offset resets.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rmq.errors import RemotingCommandError
from rmq.protocol.body import json_object
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import GetConsumerStatusRequestHeader
from rmq.protocol.headers.consumer import (
    ConsumerSendMsgBackRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.protocol.requests import _json_body, _request, check_success, parse_body, raise_for
from rmq.types import MessageQueue, PullStatus

__all__ = [
    "PullReply",
    "consumer_send_msg_back",
    "create_subscription_group",
    "delete_subscription_group",
    "get_consume_stats",
    "get_consumer_list_by_group",
    "get_max_offset",
    "get_min_offset",
    "invoke_broker_to_get_consumer_status",
    "invoke_broker_to_reset_offset",
    "lock_batch_mq",
    "parse_consumer_list",
    "parse_lock_batch_mq",
    "parse_offset",
    "parse_pull",
    "parse_query_consumer_offset",
    "pull_message",
    "query_consumer_offset",
    "search_offset",
    "unlock_batch_mq",
    "update_consumer_offset",
]


@dataclass(slots=True)
class PullReply:
    """A PULL_MESSAGE answer before its records are decoded (the SDK decodes them into
    ``MessageExt``; the Spark connector slices them into Arrow)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes
    remark: str | None = None


_PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def pull_message(header: PullMessageRequestHeader) -> RemotingCommand:
    """PULL_MESSAGE (11)."""
    return _request(RequestCode.PULL_MESSAGE, header)


def parse_pull(resp: RemotingCommand) -> PullReply:
    """Java ``MQClientAPIImpl.processPullResponse``: a status for 0/19/20/21, raise otherwise."""
    status = _PULL_STATUS.get(resp.code)
    if status is None:
        raise_for(resp)
    h = PullMessageResponseHeader.from_ext_fields(resp.ext_fields)
    body = resp.body
    if body is None:
        body = b""
    elif type(body) is not bytes:
        body = resp.body_bytes()
    return PullReply(
        status, h.next_begin_offset, h.min_offset, h.max_offset, h.suggest_which_broker_id, body, resp.remark
    )


def query_consumer_offset(group: str, topic: str, queue_id: int) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET (14)."""
    return _request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id),
    )


def parse_query_consumer_offset(resp: RemotingCommand) -> int | None:
    """The stored offset, or None when the broker has none for the group (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    check_success(resp)
    offset: int = QueryConsumerOffsetResponseHeader.from_ext_fields(resp.ext_fields).offset
    return offset


def update_consumer_offset(
    group: str, topic: str, queue_id: int, offset: int, *, oneway: bool = False
) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (15); answered by SUCCESS (see :func:`check_success`)."""
    return _request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset),
        oneway=oneway,
    )


def get_max_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MAX_OFFSET (30): the next queue offset to be written. Parse with :func:`parse_offset`."""
    return _request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))


def get_min_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MIN_OFFSET (31): the smallest queue offset still stored. Parse with :func:`parse_offset`."""
    return _request(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id))


def search_offset(topic: str, queue_id: int, timestamp_ms: int) -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the first offset stored at or after ``timestamp_ms``."""
    return _request(
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        SearchOffsetRequestHeader(topic=topic, queue_id=queue_id, timestamp=timestamp_ms),
    )


def parse_offset(resp: RemotingCommand) -> int:
    """The ``offset`` of a GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP reply
    (Java's three response headers are the same single required field)."""
    check_success(resp)
    offset: int = GetMaxOffsetResponseHeader.from_ext_fields(resp.ext_fields).offset
    return offset


def get_consumer_list_by_group(group: str) -> RemotingCommand:
    """GET_CONSUMER_LIST_BY_GROUP (38)."""
    return _request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(consumer_group=group))


def parse_consumer_list(resp: RemotingCommand) -> list[str]:
    """The client ids of the group's live consumers (Java ``GetConsumerListByGroupResponseBody``)."""
    check_success(resp)
    if not resp.body_bytes():
        return []
    ids = _json_body(resp, "consumer list").get("consumerIdList") or []
    if not isinstance(ids, list):
        raise RemotingCommandError(f"malformed consumer list: {type(ids).__name__}")
    return [str(c) for c in ids]


def consumer_send_msg_back(header: ConsumerSendMsgBackRequestHeader) -> RemotingCommand:
    """CONSUMER_SEND_MSG_BACK (36); answered by SUCCESS."""
    return _request(RequestCode.CONSUMER_SEND_MSG_BACK, header)


def _mq_set_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
    # Java LockBatchRequestBody / UnlockBatchRequestBody
    return json.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_json() for mq in mqs]}).encode()


def lock_batch_mq(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> RemotingCommand:
    """LOCK_BATCH_MQ (41)."""
    return _request(RequestCode.LOCK_BATCH_MQ, None, _mq_set_body(group, client_id, mqs))


def parse_lock_batch_mq(resp: RemotingCommand) -> set[MessageQueue]:
    """The queues the broker locked for us (Java ``LockBatchResponseBody.lockOKMQSet``)."""
    return parse_body(
        resp,
        "LOCK_BATCH_MQ",
        lambda body: {
            MessageQueue.from_json(d) for d in json_object(body, "LockBatchResponseBody").get("lockOKMQSet") or []
        },
    )


def unlock_batch_mq(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> RemotingCommand:
    """UNLOCK_BATCH_MQ (42); answered by SUCCESS."""
    return _request(RequestCode.UNLOCK_BATCH_MQ, None, _mq_set_body(group, client_id, mqs))


def create_subscription_group(config: Mapping[str, Any]) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with Java ``SubscriptionGroupConfig`` as the
    JSON body; answered by SUCCESS."""
    return _request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(dict(config)).encode())


def invoke_broker_to_reset_offset(topic: str, group: str, timestamp_ms: int, force: bool = True) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): ``timestamp_ms`` -1 means each queue's max offset;
    the answer's body is a ``ResetOffsetBody``, CONSUMER_NOT_ONLINE when no member is connected."""
    return _request(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms, is_force=force),
    )


def invoke_broker_to_get_consumer_status(topic: str, group: str, client_addr: str | None = None) -> RemotingCommand:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): the broker asks each member (or the one whose
    client id is ``client_addr``, Java's name for it); the answer is a ``GetConsumerStatusBody``."""
    return _request(
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        GetConsumerStatusRequestHeader(topic=topic, group=group, client_addr=client_addr),
    )


def get_consume_stats(group: str, topic: str | None = None) -> RemotingCommand:
    """GET_CONSUME_STATS (208): the group's per-queue broker and consumer offsets."""
    return _request(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(consumer_group=group, topic=topic))


def delete_subscription_group(group: str, remove_offset: bool = False) -> RemotingCommand:
    """DELETE_SUBSCRIPTIONGROUP (207) to one broker; answered by SUCCESS."""
    return _request(
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset),
    )
