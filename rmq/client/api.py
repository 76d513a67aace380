"""Typed calls a client makes over the remoting layer (Java ``MQClientAPIImpl``).

Each call is build → invoke → parse: the request comes from a pure builder of
:mod:`rmq.protocol.requests` (every wire name from the typed headers), the answer is read by the
matching pure parser there (the Spark connector's blocking transport shares both).

Every method takes a timeout in seconds, raises :class:`rmq.errors.BrokerResponseError`
(subclass chosen by the response code, ``retriable`` set) for a non-success answer that is not a
normal outcome, and :class:`rmq.errors.RemotingError` for transport failures.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from rmq.common.route import MASTER_ID, BrokerData, QueueData, TopicRouteData
from rmq.errors import RemotingCommandError
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader
from rmq.protocol.headers.message import EndTransactionRequestHeader, SendMessageRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.client import check_client_config, heart_beat, parse_heart_beat, unregister_client
from rmq.protocol.requests.consumer import (
    consumer_send_msg_back,
    get_consumer_list_by_group,
    get_max_offset,
    get_min_offset,
    lock_batch_mq,
    parse_consumer_list,
    parse_lock_batch_mq,
    parse_offset,
    parse_pull,
    parse_query_consumer_offset,
    pull_message,
    query_consumer_offset,
    search_offset,
    unlock_batch_mq,
    update_consumer_offset,
)
from rmq.protocol.requests.message import end_transaction, parse_send, send_message
from rmq.protocol.requests.namesrv import get_route_info, parse_topic_route
from rmq.remoting import RemotingClient
from rmq.types import MessageQueue, PullResult, PullStatus, SendResult

from ._codec import decode_messages

__all__ = ["MASTER_ID", "BrokerData", "ClientAPI", "QueueData", "TopicRouteData"]

log = logging.getLogger("rmq.client")


def _typed(header_cls: Any, header: Any) -> Any:
    """A typed header as is; a dict of camelCase wire names read into one (older call sites)."""
    return header if isinstance(header, header_cls) else header_cls.from_ext_fields(dict(header))


def _send_header(header: SendMessageRequestHeader | Mapping[str, Any], batch: bool) -> SendMessageRequestHeader:
    h: SendMessageRequestHeader = _typed(SendMessageRequestHeader, header)
    if h.batch != batch:
        h = copy.copy(h)  # the caller's header stays as it was
        h.batch = batch
    return h


class ClientAPI:
    """The request/response vocabulary of a client, over one :class:`RemotingClient`."""

    def __init__(self, remoting: RemotingClient) -> None:
        self.remoting = remoting

    async def _invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        resp: RemotingCommand = await self.remoting.invoke(addr, cmd, timeout=timeout)
        return resp

    # ---------------------------------------------------------------- name server

    async def get_topic_route(self, topic: str, timeout: float = 3.0) -> TopicRouteData | None:
        """Route of ``topic``; None when the name server does not know it (code 17)."""
        resp = await self.remoting.invoke_namesrv(get_route_info(topic), timeout=timeout)
        try:
            return parse_topic_route(resp)
        except RemotingCommandError as e:
            log.warning("route of %s from the name server is malformed: %s", topic, e)
            e.add_note(f"route of topic {topic}")
            raise

    # ---------------------------------------------------------------- producer

    async def send_message(
        self,
        addr: str,
        mq: MessageQueue,
        header: SendMessageRequestHeader | Mapping[str, Any],
        body: bytes,
        *,
        batch: bool,
        uniq_id: str,
        timeout: float,
        code: int | None = None,
    ) -> SendResult:
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE, or ``code``: SEND_REPLY_MESSAGE_V2 for a
        reply); ``uniq_id`` becomes ``SendResult.msg_id``."""
        resp = await self._invoke(addr, send_message(_send_header(header, batch), body, code=code), timeout)
        return parse_send(resp, mq, uniq_id)

    async def send_message_oneway(
        self, addr: str, header: SendMessageRequestHeader | Mapping[str, Any], body: bytes, *, batch: bool
    ) -> None:
        await self.remoting.invoke_oneway(addr, send_message(_send_header(header, batch), body, oneway=True))

    @staticmethod
    def process_send_response(mq: MessageQueue, uniq: str, resp: RemotingCommand) -> SendResult:
        """See :func:`rmq.protocol.requests.message.parse_send`."""
        return parse_send(resp, mq, uniq)

    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader | Mapping[str, Any], remark: str | None
    ) -> None:
        await self.remoting.invoke_oneway(addr, end_transaction(_typed(EndTransactionRequestHeader, header), remark))

    # ---------------------------------------------------------------- consumer

    async def pull_message(
        self, addr: str, header: PullMessageRequestHeader | Mapping[str, Any], broker_name: str, timeout: float
    ) -> PullResult:
        """One PULL_MESSAGE; statuses for 0/19/20/21, an exception for anything else."""
        h = _typed(PullMessageRequestHeader, header)
        reply = parse_pull(await self._invoke(addr, pull_message(h), timeout))
        msgs = []
        if reply.status is PullStatus.FOUND:
            try:
                msgs = decode_messages(reply.body, broker_name)
            except ValueError as e:
                log.warning("pull of %s#%s from %s returned an undecodable body: %s", h.topic, h.queue_id, addr, e)
                raise RemotingCommandError(f"undecodable pull body from {addr}: {e}") from e
        return PullResult(
            status=reply.status,
            next_begin_offset=reply.next_begin_offset,
            min_offset=reply.min_offset,
            max_offset=reply.max_offset,
            messages=msgs,
            suggest_which_broker_id=reply.suggest_which_broker_id,
        )

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        """The stored offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
        resp = await self._invoke(addr, query_consumer_offset(group, mq.topic, mq.queue_id), timeout)
        offset = parse_query_consumer_offset(resp)
        return -1 if offset is None else offset

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, timeout: float = 3.0
    ) -> None:
        check_success(await self._invoke(addr, update_consumer_offset(group, mq.topic, mq.queue_id, offset), timeout))

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        return parse_offset(await self._invoke(addr, get_max_offset(mq.topic, mq.queue_id), timeout))

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float = 3.0) -> int:
        return parse_offset(await self._invoke(addr, get_min_offset(mq.topic, mq.queue_id), timeout))

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float = 3.0) -> int:
        return parse_offset(await self._invoke(addr, search_offset(mq.topic, mq.queue_id, timestamp_ms), timeout))

    async def get_consumer_id_list(self, addr: str, group: str, timeout: float = 3.0) -> list[str]:
        return parse_consumer_list(await self._invoke(addr, get_consumer_list_by_group(group), timeout))

    async def consumer_send_msg_back(
        self,
        addr: str,
        *,
        group: str,
        commit_log_offset: int,
        delay_level: int,
        origin_msg_id: str,
        origin_topic: str,
        max_reconsume_times: int,
        timeout: float = 3.0,
    ) -> None:
        header = ConsumerSendMsgBackRequestHeader(
            offset=commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=origin_msg_id,
            origin_topic=origin_topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
        )
        check_success(await self._invoke(addr, consumer_send_msg_back(header), timeout))

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout: float = 1.0
    ) -> set[MessageQueue]:
        return parse_lock_batch_mq(await self._invoke(addr, lock_batch_mq(group, client_id, mqs), timeout))

    async def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout: float = 1.0
    ) -> None:
        check_success(await self._invoke(addr, unlock_batch_mq(group, client_id, mqs), timeout))

    # ---------------------------------------------------------------- both

    async def send_heartbeat(self, addr: str, heartbeat: Mapping[str, Any], timeout: float = 3.0) -> int:
        """HEART_BEAT; returns the broker's version from the reply header."""
        return parse_heart_beat(await self._invoke(addr, heart_beat(heartbeat), timeout))

    async def check_client_config(
        self, addr: str, client_id: str, group: str, subscription: Mapping[str, Any], timeout: float = 3.0
    ) -> None:
        """CHECK_CLIENT_CONFIG: raises the broker's refusal (SubscriptionParseFailedError for a
        bad expression, SystemError... when the broker does not filter by its type)."""
        check_success(await self._invoke(addr, check_client_config(client_id, group, subscription), timeout))

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None, timeout: float = 3.0
    ) -> None:
        check_success(await self._invoke(addr, unregister_client(client_id, producer_group, consumer_group), timeout))
