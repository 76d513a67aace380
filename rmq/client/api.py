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
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rmq.common.message import MessageConst
from rmq.common.route import MASTER_ID, BrokerData, QueueData, TopicRouteData
from rmq.errors import ClientError, RemotingCommandError
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader, PullMessageRequestHeader
from rmq.protocol.headers.message import EndTransactionRequestHeader, SendMessageRequestHeader
from rmq.protocol.headers.pop import PopMessageRequestHeader
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
from rmq.protocol.requests.pop import (
    BatchAck,
    PopReply,
    PopStatus,
    ack_message,
    batch_ack_message,
    change_invisible_time,
    parse_ack,
    parse_change_invisible_time,
    parse_pop,
    pop_message,
)
from rmq.remoting import RemotingClient
from rmq.types import MessageExt, MessageQueue, PullResult, PullStatus, SendResult

from ._codec import decode_messages

__all__ = ["MASTER_ID", "BrokerData", "ClientAPI", "PopResult", "QueueData", "TopicRouteData"]

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


@dataclass(slots=True)
class PopResult:
    """A POP_MESSAGE answer (Java ``PopResult``): the status, the messages (each carrying its
    ack handle in the ``POP_CK`` property, :attr:`MessageExt.receipt_handle`) and how many
    messages the popped queues still hold."""

    status: PopStatus
    messages: list[MessageExt]
    rest_num: int = 0
    pop_time: int = 0
    invisible_time: int = 0


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

    # ---------------------------------------------------------------- POP (RocketMQ 5)

    async def pop_message(
        self, addr: str, header: PopMessageRequestHeader, broker_name: str, timeout: float
    ) -> PopResult:
        """One POP_MESSAGE (Java ``MQClientAPIImpl.popMessageAsync`` / ``processPopResponse``):
        a status for SUCCESS / POLLING_FULL / POLLING_TIMEOUT / PULL_NOT_FOUND, an exception for
        anything else. Each message gets its ack handle in ``POP_CK`` (the broker's own for a
        retried message, else built from the answer's offset infos) and, for an orderly pop,
        ``reconsume_times`` from the answer's order counts."""
        reply: PopReply = parse_pop(await self._invoke(addr, pop_message(header), timeout))
        msgs: list[MessageExt] = []
        if reply.status is PopStatus.FOUND and reply.body:
            try:
                decoded = decode_messages(reply.body, broker_name)
            except ValueError as e:
                log.warning("pop of %s from %s returned an undecodable body: %s", header.topic, addr, e)
                raise RemotingCommandError(f"undecodable pop body from {addr}: {e}") from e
            for m in decoded:
                stored = m.real_topic or m.topic
                props = dict(m.properties)
                props[MessageConst.POP_CK] = reply.handle(
                    stored, m.queue_id, m.queue_offset, broker_name, props.get(MessageConst.POP_CK)
                )
                # Java processPopResponse: the pop's time when the broker set none (it sets it
                # only in the retry messages it re-encodes)
                props.setdefault(MessageConst.FIRST_POP_TIME, str(reply.pop_time))
                changes: dict[str, Any] = {"properties": props}
                if header.order:
                    count = reply.order_count(stored, m.queue_id)
                    if count > 0:
                        changes["reconsume_times"] = count
                msgs.append(dataclasses.replace(m, **changes))
        return PopResult(reply.status, msgs, reply.rest_num, reply.pop_time, reply.invisible_time)

    async def ack_message(self, addr: str, group: str, topic: str, handle: str, timeout: float = 3.0) -> None:
        """ACK_MESSAGE of one popped message by its handle (``topic``: the message's topic, not
        the retry topic: the handle says which it came from). Raises the broker's refusal
        (NoMessageError… when the handle is stale)."""
        try:
            cmd = ack_message(group, topic, handle)
        except ValueError as e:
            raise ClientError(f"not a receipt handle: {e}") from None
        parse_ack(await self._invoke(addr, cmd, timeout))

    async def batch_ack_message(
        self, addr: str, group: str, topic: str, handles: list[str], broker_name: str, timeout: float = 3.0
    ) -> None:
        """BATCH_ACK_MESSAGE of popped messages of ``topic`` (their original topic; each handle's
        retry mark says which topic it was popped from), grouped by checkpoint as Java's
        ``MQClientAPIImpl.batchAckMessageAsync`` does. The broker answers for the whole batch."""
        try:
            acks = BatchAck.of(group, topic, handles)
        except ValueError as e:
            raise ClientError(f"not a receipt handle: {e}") from None
        check_success(await self._invoke(addr, batch_ack_message(acks, broker_name), timeout))

    async def change_invisible_time(
        self, addr: str, group: str, topic: str, handle: str, invisible_ms: int, timeout: float = 3.0
    ) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME: the message becomes visible ``invisible_ms`` from now;
        returns its new handle (the old one is spent)."""
        try:
            cmd = change_invisible_time(group, topic, handle, invisible_ms)
        except ValueError as e:
            raise ClientError(f"not a receipt handle: {e}") from None
        return parse_change_invisible_time(await self._invoke(addr, cmd, timeout), handle)

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
