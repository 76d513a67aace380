"""Typed calls a client makes over the remoting layer (Java ``MQClientAPIImpl``).

Every method takes a timeout in seconds, raises :class:`rmq.errors.BrokerResponseError`
(subclass chosen by the response code, ``retriable`` set) for a non-success answer that is not a
normal outcome, and :class:`rmq.errors.RemotingError` for transport failures. Request
``extFields`` are built here with the camelCase wire names, every value a string.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

from rmq.common.route import MASTER_ID, BrokerData, QueueData, loads_fastjson
from rmq.errors import ClientError, RemotingCommandError, for_code
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.types import MessageQueue, PullResult, PullStatus, SendResult, SendStatus

from ._codec import decode_messages

__all__ = ["ClientAPI", "TopicRouteData", "QueueData", "BrokerData", "PERM_READ", "PERM_WRITE", "MASTER_ID"]

log = logging.getLogger("rmq.client")

PERM_READ = 0x4
PERM_WRITE = 0x2

#: The language our requests declare. The broker replies in JSON whatever it is.
LANGUAGE = "PYTHON"


def _raise_for(resp: RemotingCommand) -> None:
    raise for_code(resp.code)(resp.code, resp.remark)


def _ext(resp: RemotingCommand) -> dict:
    return resp.ext_fields or {}


def _int(ext: dict, name: str, default: int | None = None) -> int:
    v = ext.get(name)
    if v is None or v == "":
        if default is None:
            raise ClientError(f"response lacks the field {name!r}")
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ClientError(f"response field {name!r} is not a number: {v!r}") from None


# ---------------------------------------------------------------------------------------------
# Route data (reply body of GET_ROUTEINFO_BY_TOPIC, wire-contract §4)

@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_body(cls, body: bytes) -> TopicRouteData:
        d = loads_fastjson(body)
        qds = [QueueData.from_json(q) for q in d.get("queueDatas") or []]
        bds = [BrokerData.from_json(b) for b in d.get("brokerDatas") or []]
        qds.sort(key=lambda q: q.broker_name)
        bds.sort(key=lambda b: b.broker_name)
        return cls(qds, bds, d.get("orderTopicConf"), d)

    def same_as(self, other: TopicRouteData | None) -> bool:
        return other is not None and (self.queue_datas, self.broker_datas, self.order_topic_conf) == (
            other.queue_datas, other.broker_datas, other.order_topic_conf)


# ---------------------------------------------------------------------------------------------

class ClientAPI:
    """The request/response vocabulary of a client, over one :class:`RemotingClient`."""

    def __init__(self, remoting: RemotingClient) -> None:
        self.remoting = remoting

    @staticmethod
    def _request(code: int, ext: dict[str, Any] | None = None, body: bytes | None = None) -> RemotingCommand:
        cmd = RemotingCommand.request(code, {k: str(v) for k, v in (ext or {}).items() if v is not None}, body)
        cmd.language = LANGUAGE
        return cmd

    async def _invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        return await self.remoting.invoke(addr, cmd, timeout=timeout)

    # ---------------------------------------------------------------- name server

    async def get_topic_route(self, topic: str, timeout: float = 3.0) -> TopicRouteData | None:
        """Route of ``topic``; None when the name server does not know it (code 17)."""
        cmd = self._request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        resp = await self.remoting.invoke_namesrv(cmd, timeout=timeout)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        body = resp.body_bytes()
        if not body:
            return None
        try:
            return TopicRouteData.from_body(body)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("route of %s from the name server is malformed: %r", topic, e)
            raise RemotingCommandError(f"malformed route data for topic {topic}: {e!r}") from e

    # ---------------------------------------------------------------- producer

    async def send_message(self, addr: str, mq: MessageQueue, header: dict[str, Any], body: bytes,
                           *, batch: bool, uniq_id: str, timeout: float) -> SendResult:
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE); ``uniq_id`` becomes ``SendResult.msg_id``."""
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        resp = await self._invoke(addr, self._request(code, _v2(header), body), timeout)
        return self.process_send_response(mq, uniq_id, resp)

    async def send_message_oneway(self, addr: str, header: dict[str, Any], body: bytes, *, batch: bool) -> None:
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        cmd = self._request(code, _v2(header), body)
        await self.remoting.invoke_oneway(addr, cmd)

    @staticmethod
    def process_send_response(mq: MessageQueue, uniq: str, resp: RemotingCommand) -> SendResult:
        status = _SEND_STATUS.get(resp.code)
        if status is None:
            _raise_for(resp)
        ext = _ext(resp)
        offset_msg_id = str(ext.get("msgId", ""))
        return SendResult(
            status=status,
            msg_id=uniq or offset_msg_id,
            offset_msg_id=offset_msg_id,
            message_queue=MessageQueue(mq.topic, mq.broker_name, _int(ext, "queueId", mq.queue_id)),
            queue_offset=_int(ext, "queueOffset", -1),
            transaction_id=ext.get("transactionId") or None,
        )

    async def end_transaction_oneway(self, addr: str, header: dict[str, Any], remark: str | None) -> None:
        cmd = self._request(RequestCode.END_TRANSACTION, header)
        cmd.remark = remark
        await self.remoting.invoke_oneway(addr, cmd)

    # ---------------------------------------------------------------- consumer

    async def pull_message(self, addr: str, header: dict[str, Any], broker_name: str,
                           timeout: float) -> PullResult:
        """One PULL_MESSAGE; statuses for 0/19/20/21, an exception for anything else."""
        resp = await self._invoke(addr, self._request(RequestCode.PULL_MESSAGE, header), timeout)
        status = _PULL_STATUS.get(resp.code)
        if status is None:
            _raise_for(resp)
        ext = _ext(resp)
        msgs = []
        if status is PullStatus.FOUND:
            try:
                msgs = decode_messages(resp.body_bytes(), broker_name)
            except ValueError as e:
                log.warning("pull of %s#%s from %s returned an undecodable body: %s", header.get("topic"),
                            header.get("queueId"), addr, e)
                raise RemotingCommandError(f"undecodable pull body from {addr}: {e}") from e
        return PullResult(status=status,
                          next_begin_offset=_int(ext, "nextBeginOffset", int(header.get("queueOffset", 0))),
                          min_offset=_int(ext, "minOffset", 0),
                          max_offset=_int(ext, "maxOffset", 0),
                          messages=msgs,
                          suggest_which_broker_id=_int(ext, "suggestWhichBrokerId", 0))

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        """The stored offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
        resp = await self._invoke(addr, self._request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id}), timeout)
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        return _int(_ext(resp), "offset")

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int,
                                     timeout: float = 3.0) -> None:
        resp = await self._invoke(addr, self._request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id,
            "commitOffset": offset}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)

    async def _offset_call(self, code: int, addr: str, ext: dict, timeout: float) -> int:
        resp = await self._invoke(addr, self._request(code, ext), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        return _int(_ext(resp), "offset")

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        return await self._offset_call(RequestCode.GET_MAX_OFFSET, addr,
                                       {"topic": mq.topic, "queueId": mq.queue_id}, timeout)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        return await self._offset_call(RequestCode.GET_MIN_OFFSET, addr,
                                       {"topic": mq.topic, "queueId": mq.queue_id}, timeout)

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float = 3.0) -> int:
        return await self._offset_call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr,
                                       {"topic": mq.topic, "queueId": mq.queue_id,
                                        "timestamp": timestamp_ms}, timeout)

    async def get_consumer_id_list(self, addr: str, group: str, timeout: float = 3.0) -> list[str]:
        resp = await self._invoke(addr, self._request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                      {"consumerGroup": group}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        body = resp.body_bytes()
        if not body:
            return []
        try:
            return [str(c) for c in json.loads(body).get("consumerIdList") or []]
        except (ValueError, AttributeError, TypeError) as e:
            raise RemotingCommandError(f"malformed consumer list from {addr}: {e!r}") from e

    async def consumer_send_msg_back(self, addr: str, *, group: str, commit_log_offset: int,
                                     delay_level: int, origin_msg_id: str, origin_topic: str,
                                     max_reconsume_times: int, timeout: float = 3.0) -> None:
        resp = await self._invoke(addr, self._request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": commit_log_offset, "group": group, "delayLevel": delay_level,
            "originMsgId": origin_msg_id, "originTopic": origin_topic, "unitMode": "false",
            "maxReconsumeTimes": max_reconsume_times}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue],
                            timeout: float = 1.0) -> set[MessageQueue]:
        body = json.dumps({"consumerGroup": group, "clientId": client_id,
                           "mqSet": [mq.to_json() for mq in mqs]}).encode()
        resp = await self._invoke(addr, self._request(RequestCode.LOCK_BATCH_MQ, None, body), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        try:
            data = json.loads(resp.body_bytes() or b"{}")
            return {MessageQueue.from_json(d) for d in data.get("lockOKMQSet") or []}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise RemotingCommandError(f"malformed LOCK_BATCH_MQ answer from {addr}: {e!r}") from e

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue],
                              timeout: float = 1.0) -> None:
        body = json.dumps({"consumerGroup": group, "clientId": client_id,
                           "mqSet": [mq.to_json() for mq in mqs]}).encode()
        resp = await self._invoke(addr, self._request(RequestCode.UNLOCK_BATCH_MQ, None, body), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)

    # ---------------------------------------------------------------- both

    async def send_heartbeat(self, addr: str, heartbeat: dict, timeout: float = 3.0) -> int:
        """HEART_BEAT; returns the broker's version from the reply header."""
        resp = await self._invoke(addr, self._request(RequestCode.HEART_BEAT, None,
                                                      json.dumps(heartbeat).encode()), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)
        return resp.version

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout: float = 3.0) -> None:
        resp = await self._invoke(addr, self._request(RequestCode.UNREGISTER_CLIENT, {
            "clientID": client_id, "producerGroup": producer_group,
            "consumerGroup": consumer_group}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(resp)


_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}

# SendMessageRequestHeaderV2: single-letter names keep the header small (Java's "smart" send).
_V2_NAMES = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d",
    "queueId": "e", "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i",
    "reconsumeTimes": "j", "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m",
}


def _v2(header: dict[str, Any]) -> dict[str, Any]:
    return {_V2_NAMES[k]: v for k, v in header.items() if k in _V2_NAMES}

