"""Request builders and response parsers of the client side of the protocol, as pure functions.

Java keeps this vocabulary in ``MQClientAPIImpl`` (and ``MQAdminImpl``), each method building a
``RemotingCommand`` from a typed ``*RequestHeader``, invoking it and decoding the reply. Here
the two halves without the I/O are separate functions, so the one vocabulary serves every
transport:

* the asyncio SDK (``rmq.client.api.ClientAPI``: build → ``RemotingClient.invoke`` → parse),
* the blocking transport of the Spark connector (``rmq.remoting.blocking``; Spark runs in
  plain Python workers without an event loop),
* the admin CLI and the bench harness.

Builders take plain arguments or a typed header and return a fresh :class:`RemotingCommand`
(new opaque). Every wire name comes from the typed headers of :mod:`rmq.remoting.headers`.

Parsers take the reply and return a typed result. A normal outcome is a value or a status (a
pull that found nothing, a topic without a route → None, a group without a stored offset →
None); any other non-success code raises the :class:`~rmq.errors.BrokerResponseError`
subclass for it (``retriable`` and ``refresh_route`` set by :func:`rmq.errors.for_code`), and a
malformed reply raises :class:`~rmq.errors.RemotingCommandError` (not retriable).

This module lives in ``rmq.remoting`` (not in ``rmq.client``) because the Spark connector and
the bench harness use it without the asyncio SDK; it imports only the remoting layer, the
route types of ``rmq.common`` and the value types of ``rmq.types`` (statuses and results,
which themselves import only ``rmq.common``).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from rmq.common.route import ClusterInfo, TopicRouteData
from rmq.errors import RemotingCommandError, for_code
from rmq.remoting import headers as _h
from rmq.remoting.body import json_object
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.remoting.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    Header,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.types import MessageQueue, PullStatus, SendResult, SendStatus

__all__ = [
    "LANGUAGE",
    "PullReply",
    "check_success",
    "consumer_send_msg_back",
    "create_subscription_group",
    "create_topic",
    "delete_topic_in_broker",
    "delete_topic_in_namesrv",
    "end_transaction",
    "get_all_topic_list",
    "get_broker_cluster_info",
    "get_consumer_list_by_group",
    "get_max_offset",
    "get_min_offset",
    "get_route_info",
    "heart_beat",
    "lock_batch_mq",
    "parse_cluster_info",
    "parse_consumer_list",
    "parse_heart_beat",
    "parse_lock_batch_mq",
    "parse_body",
    "parse_offset",
    "parse_pull",
    "parse_query_consumer_offset",
    "parse_send",
    "parse_topic_list",
    "parse_topic_route",
    "pull_message",
    "query_consumer_offset",
    "raise_for",
    "search_offset",
    "send_message",
    "unlock_batch_mq",
    "unregister_client",
    "update_consumer_offset",
]

#: The LanguageCode our requests declare (Java ``LanguageCode.PYTHON``); brokers answer in
#: JSON whatever it is.
LANGUAGE = "PYTHON"


def _request(code: int, header: Header | None = None, body: bytes | memoryview | list[Any] | None = None,
             *, oneway: bool = False) -> RemotingCommand:
    cmd = RemotingCommand.request(code, header.to_ext_fields() if header is not None else None, body,
                                  oneway=oneway)
    cmd.language = LANGUAGE
    return cmd


def raise_for(resp: RemotingCommand) -> NoReturn:
    """Raise the :class:`~rmq.errors.BrokerResponseError` subclass for ``resp.code``."""
    raise for_code(resp.code)(resp.code, resp.remark)


def check_success(resp: RemotingCommand) -> None:
    """The parser of calls whose only answer is SUCCESS (UPDATE_CONSUMER_OFFSET, UNREGISTER_CLIENT,
    UNLOCK_BATCH_MQ, CONSUMER_SEND_MSG_BACK, admin writes): raise for anything else."""
    if resp.code != ResponseCode.SUCCESS:
        raise_for(resp)


_T = TypeVar("_T")


def parse_body(resp: RemotingCommand, what: str, decode: Callable[[bytes], _T]) -> _T:
    """The one way a SUCCESS answer's body becomes a typed object: any other code raises (see
    :func:`raise_for`), then ``decode(body)`` (``b""`` when there is none); a body ``decode``
    refuses (ValueError, KeyError, TypeError, AttributeError) is a
    :class:`~rmq.errors.RemotingCommandError` naming ``what``."""
    check_success(resp)
    try:
        return decode(resp.body_bytes() or b"")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise RemotingCommandError(f"malformed {what} body: {e}") from None


def _json_body(resp: RemotingCommand, what: str) -> dict[str, Any]:
    """A SUCCESS answer's body that must be a JSON object (:func:`parse_body`)."""
    return parse_body(resp, what, lambda body: json_object(body, what))


# ============================================================================ name server


def get_route_info(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC (105)."""
    return _request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))


def parse_topic_route(resp: RemotingCommand) -> TopicRouteData | None:
    """The route, or None when the name server has none (TOPIC_NOT_EXIST, or an empty body)."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    check_success(resp)
    if not resp.body_bytes():
        return None
    return parse_body(resp, "route", TopicRouteData.from_body)


def get_all_topic_list() -> RemotingCommand:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
    return _request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)


def parse_topic_list(resp: RemotingCommand) -> list[str]:
    """Every topic the name server knows, sorted (Java ``TopicList.topicList``)."""
    topics = _json_body(resp, "topic list").get("topicList") or ()
    if not isinstance(topics, (list, tuple)):
        raise RemotingCommandError(f"malformed topic list: {type(topics).__name__}")
    return sorted(str(t) for t in topics)


def get_broker_cluster_info() -> RemotingCommand:
    """GET_BROKER_CLUSTER_INFO (106)."""
    return _request(RequestCode.GET_BROKER_CLUSTER_INFO)


def parse_cluster_info(resp: RemotingCommand) -> ClusterInfo:
    return parse_body(resp, "cluster info", ClusterInfo.from_body)


# ============================================================================ producer


def send_message(header: SendMessageRequestHeader, body: bytes | memoryview | list[Any], *,
                 code: int | None = None, oneway: bool = False) -> RemotingCommand:
    """A send with ``SendMessageRequestHeaderV2``'s one-letter names (Java's "smart" send).

    ``code`` defaults to SEND_BATCH_MESSAGE (320) when ``header.batch`` and SEND_MESSAGE_V2
    (310) otherwise; brokers that predate SEND_BATCH_MESSAGE take a batch as SEND_MESSAGE_V2
    with the batch flag (``m``).
    """
    if code is None:
        code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
    cmd = RemotingCommand.request(code, header.to_ext_fields_v2(), body, oneway=oneway)
    cmd.language = LANGUAGE
    return cmd


_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def parse_send(resp: RemotingCommand, mq: MessageQueue, uniq_id: str = "") -> SendResult:
    """Java ``MQClientAPIImpl.processSendResponse``: SEND_OK or a flush/replication status
    (the message is stored on the master either way); any other code raises.

    ``uniq_id`` (the client's ``UNIQ_KEY``) becomes ``msg_id``; without it the broker's
    offset message id does.
    """
    status = _SEND_STATUS.get(resp.code)
    if status is None:
        raise_for(resp)
    h = SendMessageResponseHeader.from_ext_fields(resp.ext_fields)
    return SendResult(
        status=status,
        msg_id=uniq_id or h.msg_id,
        offset_msg_id=h.msg_id,
        message_queue=MessageQueue(mq.topic, mq.broker_name, h.queue_id),
        queue_offset=h.queue_offset,
        transaction_id=h.transaction_id or None,
    )


def end_transaction(header: EndTransactionRequestHeader, remark: str | None = None) -> RemotingCommand:
    """END_TRANSACTION (37), oneway as Java's ``endTransactionOneway``."""
    cmd = _request(RequestCode.END_TRANSACTION, header, oneway=True)
    cmd.remark = remark
    return cmd


# ============================================================================ consumer


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
    return PullReply(status, h.next_begin_offset, h.min_offset, h.max_offset, h.suggest_which_broker_id,
                     body, resp.remark)


def query_consumer_offset(group: str, topic: str, queue_id: int) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET (14)."""
    return _request(RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id))


def parse_query_consumer_offset(resp: RemotingCommand) -> int | None:
    """The stored offset, or None when the broker has none for the group (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    check_success(resp)
    offset: int = QueryConsumerOffsetResponseHeader.from_ext_fields(resp.ext_fields).offset
    return offset


def update_consumer_offset(group: str, topic: str, queue_id: int, offset: int, *,
                           oneway: bool = False) -> RemotingCommand:
    """UPDATE_CONSUMER_OFFSET (15); answered by SUCCESS (see :func:`check_success`)."""
    return _request(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset), oneway=oneway)


def get_max_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MAX_OFFSET (30): the next queue offset to be written. Parse with :func:`parse_offset`."""
    return _request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id))


def get_min_offset(topic: str, queue_id: int) -> RemotingCommand:
    """GET_MIN_OFFSET (31): the smallest queue offset still stored. Parse with :func:`parse_offset`."""
    return _request(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=topic, queue_id=queue_id))


def search_offset(topic: str, queue_id: int, timestamp_ms: int) -> RemotingCommand:
    """SEARCH_OFFSET_BY_TIMESTAMP (29): the first offset stored at or after ``timestamp_ms``."""
    return _request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, SearchOffsetRequestHeader(
        topic=topic, queue_id=queue_id, timestamp=timestamp_ms))


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
    return json.dumps({"consumerGroup": group, "clientId": client_id,
                       "mqSet": [mq.to_json() for mq in mqs]}).encode()


def lock_batch_mq(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> RemotingCommand:
    """LOCK_BATCH_MQ (41)."""
    return _request(RequestCode.LOCK_BATCH_MQ, None, _mq_set_body(group, client_id, mqs))


def parse_lock_batch_mq(resp: RemotingCommand) -> set[MessageQueue]:
    """The queues the broker locked for us (Java ``LockBatchResponseBody.lockOKMQSet``)."""
    return parse_body(resp, "LOCK_BATCH_MQ", lambda body: {
        MessageQueue.from_json(d) for d in json_object(body, "LockBatchResponseBody").get("lockOKMQSet") or []})


def unlock_batch_mq(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> RemotingCommand:
    """UNLOCK_BATCH_MQ (42); answered by SUCCESS."""
    return _request(RequestCode.UNLOCK_BATCH_MQ, None, _mq_set_body(group, client_id, mqs))


# ============================================================================ both


def heart_beat(data: Mapping[str, Any]) -> RemotingCommand:
    """HEART_BEAT (34) with Java ``HeartbeatData`` as the JSON body."""
    return _request(RequestCode.HEART_BEAT, None, json.dumps(data).encode())


def parse_heart_beat(resp: RemotingCommand) -> int:
    """The broker's version (from the reply's command header)."""
    check_success(resp)
    return resp.version


def unregister_client(client_id: str, producer_group: str | None = None,
                      consumer_group: str | None = None) -> RemotingCommand:
    """UNREGISTER_CLIENT (35); answered by SUCCESS."""
    return _request(RequestCode.UNREGISTER_CLIENT, UnregisterClientRequestHeader(
        client_id=client_id, producer_group=producer_group, consumer_group=consumer_group))


# ============================================================================ admin


def create_topic(header: CreateTopicRequestHeader) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17) to one broker; answered by SUCCESS."""
    return _request(RequestCode.UPDATE_AND_CREATE_TOPIC, header)


def delete_topic_in_broker(topic: str) -> RemotingCommand:
    """DELETE_TOPIC_IN_BROKER (215); answered by SUCCESS."""
    return _request(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic=topic))


def delete_topic_in_namesrv(topic: str) -> RemotingCommand:
    """DELETE_TOPIC_IN_NAMESRV (216; Java ``DeleteTopicFromNamesrvRequestHeader``, the same
    single field); answered by SUCCESS."""
    return _request(RequestCode.DELETE_TOPIC_IN_NAMESRV, DeleteTopicRequestHeader(topic=topic))


def create_subscription_group(config: Mapping[str, Any]) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with Java ``SubscriptionGroupConfig`` as the
    JSON body; answered by SUCCESS."""
    return _request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(dict(config)).encode())


# ---------------------------------------------------------------------------- topics
# Admin builders and parsers: topics, clusters, sendMessage/consumeMessage/printMsg, allocateMQ.
# (imports here rather than in the top block, so the areas' sections merge independently)
from rmq.remoting.body.topic import TopicStatsTable  # noqa: E402


def get_topic_stats_info(topic: str) -> RemotingCommand:
    """GET_TOPIC_STATS_INFO (202): every queue's min/max offset on one broker. Parse with
    :func:`parse_topic_stats`."""
    return _request(RequestCode.GET_TOPIC_STATS_INFO, _h.GetTopicStatsInfoRequestHeader(topic=topic))


def parse_topic_stats(resp: RemotingCommand) -> TopicStatsTable:
    """Java ``TopicStatsTable`` (fastjson's MessageQueue object keys read); TOPIC_NOT_EXIST raises."""
    return parse_body(resp, "TopicStatsTable", TopicStatsTable.from_body)


def get_topics_by_cluster(cluster: str) -> RemotingCommand:
    """GET_TOPICS_BY_CLUSTER (224) to the name server. Parse with :func:`parse_topic_list`."""
    return _request(RequestCode.GET_TOPICS_BY_CLUSTER, _h.GetTopicsByClusterRequestHeader(cluster=cluster))


__all__ += ["get_topic_stats_info", "get_topics_by_cluster", "parse_topic_stats"]


# ---------------------------------------------------------------------------- index
# Admin builders and parsers: QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33, QUERY_TOPIC_CONSUME_BY_WHO 300.
# (the index engineer adds here)


@dataclass
class QueryMessageReply:
    """A QUERY_MESSAGE answer: the records back to back (undecoded) and where the broker's
    index ended (QueryMessageResponseHeader)."""

    body: bytes
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


def query_message(header: _h.QueryMessageRequestHeader, *, unique_key: bool = False) -> RemotingCommand:
    """QUERY_MESSAGE (12); ``unique_key`` sets the ``_UNIQUE_KEY_QUERY`` extField (the broker
    then answers at most its defaultQueryMaxNum)."""
    cmd = _request(RequestCode.QUERY_MESSAGE, header)
    assert cmd.ext_fields is not None
    cmd.ext_fields["_UNIQUE_KEY_QUERY"] = "true" if unique_key else "false"
    return cmd


def parse_query_message(resp: RemotingCommand) -> QueryMessageReply | None:
    """The records found, or None for QUERY_NOT_FOUND; raise for any other refusal."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    check_success(resp)
    h = _h.QueryMessageResponseHeader.from_ext_fields(resp.ext_fields)
    return QueryMessageReply(resp.body_bytes(), h.index_last_update_timestamp, h.index_last_update_phyoffset)


def view_message(offset: int) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID (33): the record at CommitLog ``offset``."""
    return _request(RequestCode.VIEW_MESSAGE_BY_ID, _h.ViewMessageRequestHeader(offset=offset))


def parse_view_message(resp: RemotingCommand) -> bytes:
    """The record (raise when the broker has none: SYSTEM_ERROR "can not find message ...")."""
    check_success(resp)
    return resp.body_bytes()


def query_topic_consume_by_who(topic: str) -> RemotingCommand:
    """QUERY_TOPIC_CONSUME_BY_WHO (300)."""
    return _request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, _h.QueryTopicConsumeByWhoRequestHeader(topic=topic))


def parse_group_list(resp: RemotingCommand) -> list[str]:
    """The group names of a GroupList answer (sorted)."""
    from rmq.remoting.body.topic import GroupList

    return sorted(parse_body(resp, "GroupList", GroupList.decode).group_list)


__all__ += ["QueryMessageReply", "parse_group_list", "parse_query_message", "parse_view_message", "query_message",
            "query_topic_consume_by_who", "view_message"]


# ---------------------------------------------------------------------------- conns
# Admin builders and parsers: connections, consumer status, offset resets (203, 204, 220-223, 307, 309).
# (the conns engineer adds here)


def get_consumer_connection_list(group: str) -> RemotingCommand:
    """GET_CONSUMER_CONNECTION_LIST (203); the answer's body is a ``ConsumerConnection``,
    CONSUMER_NOT_ONLINE when no member is connected."""
    return _request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                    _h.GetConsumerConnectionListRequestHeader(consumer_group=group))


def get_producer_connection_list(group: str) -> RemotingCommand:
    """GET_PRODUCER_CONNECTION_LIST (204); the answer's body is a ``ProducerConnection``."""
    return _request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                    _h.GetProducerConnectionListRequestHeader(producer_group=group))


def get_consumer_running_info(group: str, client_id: str, jstack: bool = False) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307), to a broker (which relays it) or from a broker to the
    client; the answer's body is a ``ConsumerRunningInfo``."""
    return _request(RequestCode.GET_CONSUMER_RUNNING_INFO, _h.GetConsumerRunningInfoRequestHeader(
        consumer_group=group, client_id=client_id, jstack_enable=jstack))


def consume_message_directly(group: str, client_id: str, msg_id: str,
                             broker_name: str | None = None) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (309) to the broker holding ``msg_id`` (an offset message id),
    which relays it with the message to the client; the answer's body is a
    ``ConsumeMessageDirectlyResult``."""
    return _request(RequestCode.CONSUME_MESSAGE_DIRECTLY, _h.ConsumeMessageDirectlyResultRequestHeader(
        consumer_group=group, client_id=client_id, msg_id=msg_id, broker_name=broker_name))


def invoke_broker_to_reset_offset(topic: str, group: str, timestamp_ms: int, force: bool = True) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): ``timestamp_ms`` -1 means each queue's max offset;
    the answer's body is a ``ResetOffsetBody``, CONSUMER_NOT_ONLINE when no member is connected."""
    return _request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, _h.ResetOffsetRequestHeader(
        topic=topic, group=group, timestamp=timestamp_ms, is_force=force))


def invoke_broker_to_get_consumer_status(topic: str, group: str, client_addr: str | None = None) -> RemotingCommand:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): the broker asks each member (or the one whose
    client id is ``client_addr``, Java's name for it); the answer is a ``GetConsumerStatusBody``."""
    return _request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, _h.GetConsumerStatusRequestHeader(
        topic=topic, group=group, client_addr=client_addr))


def get_consume_stats(group: str, topic: str | None = None) -> RemotingCommand:
    """GET_CONSUME_STATS (208): the group's per-queue broker and consumer offsets."""
    return _request(RequestCode.GET_CONSUME_STATS, _h.GetConsumeStatsRequestHeader(consumer_group=group, topic=topic))


def body_of(resp: RemotingCommand) -> bytes:
    """A SUCCESS answer's body (raises the BrokerResponseError of any other code)."""
    check_success(resp)
    return resp.body_bytes() or b""


__all__ += ["body_of", "consume_message_directly", "get_consume_stats",
            "get_consumer_connection_list", "get_consumer_running_info", "get_producer_connection_list",
            "invoke_broker_to_get_consumer_status", "invoke_broker_to_reset_offset"]


# ---------------------------------------------------------------------------- stats
# Admin builders and parsers: broker statistics and configuration (25, 26, 28, 315, 317).


def get_broker_runtime_info() -> RemotingCommand:
    """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of runtime figures."""
    return _request(RequestCode.GET_BROKER_RUNTIME_INFO)


def parse_kv_table(resp: RemotingCommand) -> dict[str, str]:
    """A KVTable answer (GET_BROKER_RUNTIME_INFO) as ``{key: value}``."""
    from rmq.remoting.body.ops import KVTable
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
    return _request(RequestCode.VIEW_BROKER_STATS_DATA,
                    _h.ViewBrokerStatsDataRequestHeader(stats_name=stats_name, stats_key=stats_key))


def parse_broker_stats_data(resp: RemotingCommand) -> Any:
    """VIEW_BROKER_STATS_DATA's :class:`rmq.remoting.body.stats.BrokerStatsData`."""
    from rmq.remoting.body.stats import BrokerStatsData
    return parse_body(resp, "BrokerStatsData",
                      lambda body: BrokerStatsData.from_json(json_object(body, "BrokerStatsData")))


def get_broker_consume_stats(is_order: bool = False) -> RemotingCommand:
    """GET_BROKER_CONSUME_STATS (317): every group's ConsumeStats on the broker."""
    return _request(RequestCode.GET_BROKER_CONSUME_STATS, _h.GetConsumeStatsInBrokerHeader(is_order=is_order))


def parse_consume_stats_list(resp: RemotingCommand) -> Any:
    """GET_BROKER_CONSUME_STATS's :class:`rmq.remoting.body.stats.ConsumeStatsList`."""
    from rmq.remoting.body.stats import ConsumeStatsList
    return parse_body(resp, "ConsumeStatsList", ConsumeStatsList.decode)


__all__ += ["get_broker_config", "get_broker_consume_stats", "get_broker_runtime_info", "parse_broker_config",
            "parse_broker_stats_data", "parse_consume_stats_list", "parse_kv_table", "update_broker_config",
            "view_broker_stats_data"]


# ---------------------------------------------------------------------------- ops
# Admin builders and parsers: name-server config, write perm, KV config, store maintenance
# (43, 45, 100-102, 205, 207, 306, 318, 319, 321, 327, 329).
# (the ops engineer adds here)
from rmq.remoting.body import ops as _ops_body  # noqa: E402  (this section's bodies)


def get_namesrv_config() -> RemotingCommand:
    """GET_NAMESRV_CONFIG (319) to one name server."""
    return _request(RequestCode.GET_NAMESRV_CONFIG)


def parse_namesrv_config(resp: RemotingCommand) -> dict[str, str]:
    """The name server's configuration as ``{key: value}`` (Java properties text)."""
    from rmq.config import parse_properties
    return parse_body(resp, "name server config", parse_properties)


def update_namesrv_config(props: Mapping[str, str]) -> RemotingCommand:
    """UPDATE_NAMESRV_CONFIG (318) with ``props`` as properties text; answered by SUCCESS."""
    from rmq.config import format_properties
    return _request(RequestCode.UPDATE_NAMESRV_CONFIG, None, format_properties(props).encode())


def wipe_write_perm_of_broker(broker_name: str) -> RemotingCommand:
    """WIPE_WRITE_PERM_OF_BROKER (205) to one name server."""
    return _request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                    _h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name))


def parse_wipe_write_perm(resp: RemotingCommand) -> int:
    """``wipeTopicCount``: the topics of that broker that lost write permission."""
    check_success(resp)
    return _h.WipeWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).wipe_topic_count


def add_write_perm_of_broker(broker_name: str) -> RemotingCommand:
    """ADD_WRITE_PERM_OF_BROKER (327) to one name server."""
    return _request(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                    _h.WipeWritePermOfBrokerRequestHeader(broker_name=broker_name))


def parse_add_write_perm(resp: RemotingCommand) -> int:
    """``addTopicCount``: the topics of that broker made read + write again."""
    check_success(resp)
    return _h.AddWritePermOfBrokerResponseHeader.from_ext_fields(resp.ext_fields).add_topic_count


def put_kv_config(namespace: str, key: str, value: str) -> RemotingCommand:
    """PUT_KV_CONFIG (100); answered by SUCCESS."""
    return _request(RequestCode.PUT_KV_CONFIG, _h.PutKVConfigRequestHeader(namespace=namespace, key=key, value=value))


def get_kv_config(namespace: str, key: str) -> RemotingCommand:
    """GET_KV_CONFIG (101)."""
    return _request(RequestCode.GET_KV_CONFIG, _h.GetKVConfigRequestHeader(namespace=namespace, key=key))


def parse_kv_config(resp: RemotingCommand) -> str | None:
    """The value, or None when the name server has no such item (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    check_success(resp)
    value = resp.ext_fields.get("value")
    return None if value is None else str(value)


def delete_kv_config(namespace: str, key: str) -> RemotingCommand:
    """DELETE_KV_CONFIG (102; Java ``DeleteKVConfigRequestHeader``, namespace and key);
    answered by SUCCESS whether or not the item existed."""
    return _request(RequestCode.DELETE_KV_CONFIG, _h.GetKVConfigRequestHeader(namespace=namespace, key=key))


def get_kv_list_by_namespace(namespace: str) -> RemotingCommand:
    """GET_KVLIST_BY_NAMESPACE (219; the header's only field is ``namespace``)."""
    cmd = _request(RequestCode.GET_KVLIST_BY_NAMESPACE)
    cmd.ext_fields = {"namespace": namespace}
    return cmd


def parse_kv_list(resp: RemotingCommand) -> dict[str, str]:
    """The namespace's ``{key: value}``; empty when the name server has none (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return {}
    return parse_body(resp, "KVTable", _ops_body.KVTable.decode).table


def delete_subscription_group(group: str, remove_offset: bool = False) -> RemotingCommand:
    """DELETE_SUBSCRIPTIONGROUP (207) to one broker; answered by SUCCESS."""
    return _request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                    _h.DeleteSubscriptionGroupRequestHeader(group_name=group, remove_offset=remove_offset))


def clean_expired_consume_queue() -> RemotingCommand:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306) to one broker; answered by SUCCESS."""
    return _request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)


def delete_expired_commit_log() -> RemotingCommand:
    """DELETE_EXPIRED_COMMITLOG (329) to one broker; answered by SUCCESS (the deletion runs
    at the broker's next clean run)."""
    return _request(RequestCode.DELETE_EXPIRED_COMMITLOG)


def query_consume_queue(topic: str, queue_id: int, index: int, count: int,
                        consumer_group: str | None = None) -> RemotingCommand:
    """QUERY_CONSUME_QUEUE (321) to one broker."""
    return _request(RequestCode.QUERY_CONSUME_QUEUE, _h.QueryConsumeQueueRequestHeader(
        topic=topic, queue_id=queue_id, index=index, count=count, consumer_group=consumer_group))


def parse_query_consume_queue(resp: RemotingCommand) -> _ops_body.QueryConsumeQueueResponseBody:
    """A :class:`rmq.remoting.body.ops.QueryConsumeQueueResponseBody`; an answer without a body
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


from rmq.remoting.body import conns as _conns_body  # noqa: E402  (GET_ALL_PRODUCER_INFO's body)


def clean_unused_topic() -> RemotingCommand:
    """CLEAN_UNUSED_TOPIC (316) to one broker: it drops the consume queues of topics it has no
    config for; answered by SUCCESS."""
    return _request(RequestCode.CLEAN_UNUSED_TOPIC)


def get_system_topic_list_from_broker() -> RemotingCommand:
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) to one broker; parse with
    :func:`parse_topic_list` (Java ``TopicList``)."""
    return _request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)


def get_all_producer_info() -> RemotingCommand:
    """GET_ALL_PRODUCER_INFO (328) to one broker: its producer connections by group."""
    return _request(RequestCode.GET_ALL_PRODUCER_INFO)


def parse_all_producer_info(resp: RemotingCommand) -> _conns_body.ProducerTableInfo:
    """A :class:`rmq.remoting.body.conns.ProducerTableInfo`."""
    return parse_body(resp, "ProducerTableInfo", _conns_body.ProducerTableInfo.decode)


__all__ += ["clean_unused_topic", "get_all_producer_info", "get_system_topic_list_from_broker",
            "parse_all_producer_info"]


__all__ += ["add_write_perm_of_broker", "clean_expired_consume_queue", "delete_expired_commit_log",
            "delete_kv_config", "delete_subscription_group", "get_all_consumer_offset", "get_all_delay_offset",
            "get_kv_config", "get_kv_list_by_namespace", "get_namesrv_config", "parse_add_write_perm",
            "parse_all_consumer_offset", "parse_all_delay_offset", "parse_kv_config", "parse_kv_list",
            "parse_namesrv_config", "parse_query_consume_queue", "parse_wipe_write_perm", "put_kv_config",
            "query_consume_queue", "update_namesrv_config", "wipe_write_perm_of_broker"]


# ---------------------------------------------------------------------------- acl
# ACL admin builders and parsers: 50-54 (Java MQClientAPIImpl.createPlainAccessConfig,
# deletePlainAccessConfig, getBrokerClusterAclInfo, updateGlobalWhiteAddrsConfig,
# getBrokerClusterConfig).


def update_acl_config(access_key: str, secret_key: str, *, white_remote_address: str | None = None,
                      admin: bool = False, default_topic_perm: str | None = None,
                      default_group_perm: str | None = None, topic_perms: Iterable[str] | None = None,
                      group_perms: Iterable[str] | None = None) -> RemotingCommand:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): create or update one account (perm items ``Res=PUB|SUB``)."""
    return _request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, _h.CreateAccessConfigRequestHeader(
        access_key=access_key, secret_key=secret_key, white_remote_address=white_remote_address, admin=admin,
        default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
        topic_perms=None if topic_perms is None else ",".join(topic_perms),
        group_perms=None if group_perms is None else ",".join(group_perms)))


def delete_acl_config(access_key: str) -> RemotingCommand:
    """DELETE_ACL_CONFIG (51)."""
    return _request(RequestCode.DELETE_ACL_CONFIG, _h.DeleteAccessConfigRequestHeader(access_key=access_key))


def get_broker_acl_info() -> RemotingCommand:
    """GET_BROKER_CLUSTER_ACL_INFO (52); parse with :func:`parse_broker_acl_info`."""
    return _request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)


def parse_broker_acl_info(resp: RemotingCommand) -> dict[str, Any]:
    """``{"version": {...}, "allAclFileVersion": {file: {...}}, "brokerName", "brokerAddr",
    "clusterName"}`` from a GET_BROKER_CLUSTER_ACL_INFO reply."""
    check_success(resp)
    h = resp.decode_header(_h.GetBrokerAclConfigResponseHeader)
    try:
        return {"version": json.loads(h.version), "allAclFileVersion": json.loads(h.all_acl_file_version or "{}"),
                "brokerName": h.broker_name, "brokerAddr": h.broker_addr, "clusterName": h.cluster_name}
    except ValueError as e:
        raise RemotingCommandError(f"malformed GET_BROKER_CLUSTER_ACL_INFO reply: {e}") from e


def update_global_white_addrs(addrs: Iterable[str], acl_file_full_path: str | None = None) -> RemotingCommand:
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace the global white list of one ACL file
    (the broker's default plain_acl.yml when None)."""
    return _request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, _h.UpdateGlobalWhiteAddrsConfigRequestHeader(
        global_white_addrs=",".join(addrs), acl_file_full_path=acl_file_full_path))


def get_broker_acl_config() -> RemotingCommand:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54); parse with :func:`parse_broker_acl_config`."""
    return _request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)


def parse_broker_acl_config(resp: RemotingCommand) -> dict[str, Any]:
    """``{"globalWhiteAddrs": [...], "plainAccessConfigs": [{accessKey, secretKey, ...}]}``."""
    check_success(resp)
    return _json_body(resp, "GET_BROKER_CLUSTER_ACL_CONFIG")


# ---------------------------------------------------------------------------- ha


# ---------------------------------------------------------------------------- slave
# What a slave reads from its master every 10 s (Java BrokerOuterAPI.getAllTopicConfig,
# getAllSubscriptionGroupConfig; offsets and delay offsets: get_all_consumer_offset and
# get_all_delay_offset above).
from rmq.remoting.body import sync as _sync_body  # noqa: E402  (this section's bodies)


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


__all__ += ["get_all_subscription_group_config", "get_all_topic_config", "parse_all_subscription_group_config",
            "parse_all_topic_config"]


# ---------------------------------------------------------------------------- sql92
def check_client_config(client_id: str, group: str, subscription: Mapping[str, Any]) -> RemotingCommand:
    """CHECK_CLIENT_CONFIG (46) with Java ``CheckClientRequestBody``: can the broker filter by
    this subscription (a SubscriptionData JSON object)? SUCCESS, or SUBSCRIPTION_PARSE_FAILED /
    SYSTEM_ERROR with the broker's reason; :func:`check_success` raises for those."""
    return _request(RequestCode.CHECK_CLIENT_CONFIG, None, json.dumps(
        {"clientId": client_id, "group": group, "subscriptionData": dict(subscription)}).encode())


__all__ += ["check_client_config"]


# ---------------------------------------------------------------------------- reqreply


def send_reply_message(header: _h.SendMessageRequestHeader, body: bytes, *, v2: bool = True) -> RemotingCommand:
    """SEND_REPLY_MESSAGE_V2 (325, the one-letter names) or SEND_REPLY_MESSAGE (324): a reply
    message, which the broker pushes to the requesting client (Java
    ``MQClientAPIImpl.sendMessage`` picks these codes when ``MSG_TYPE`` is ``reply``). The
    answer is a SEND answer (:func:`parse_send`)."""
    if v2:
        cmd = RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE_V2, header.to_ext_fields_v2(), body)
    else:
        cmd = RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE, header.to_ext_fields(), body)
    cmd.language = LANGUAGE
    return cmd


def push_reply_message(header: _h.ReplyMessageRequestHeader, body: bytes) -> RemotingCommand:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → client (Java
    ``ReplyMessageProcessor.pushReplyMessage``); the client answers SUCCESS or SYSTEM_ERROR."""
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, body)


__all__ += ["send_reply_message", "push_reply_message"]


# ---------------------------------------------------------------------------- sdk


# ---------------------------------------------------------------------------- metrics


# ---------------------------------------------------------------------------- console


# ---------------------------------------------------------------------------- sendpath
