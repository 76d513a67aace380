"""Request-reply (Java ``DefaultMQProducerImpl.request``, ``RequestResponseFuture``,
``RequestFutureHolder``, ``MessageUtil.createReplyMessage``, ``ClientRemotingProcessor.receiveReplyMessage``).

The requester::

    async with rmq.Producer(namesrv_addr=ns, group="PG") as p:
        reply = await p.request(rmq.Message(topic="T", body=b"ping"), timeout=3)

The responder (any consumer of ``T``; Java responders work the same way)::

    async for msg in consumer:
        await rmq.reply(msg, b"pong")

How it travels: the request is an ordinary message carrying ``CORRELATION_ID`` (a fresh UUID),
``REPLY_TO_CLIENT`` (the requester's client id) and ``TTL`` (the timeout in ms); the broker adds
``CLUSTER``. The reply goes to ``<cluster>_REPLY_TOPIC`` with those properties and
``MSG_TYPE=reply`` as SEND_REPLY_MESSAGE_V2 (325); the broker pushes it
(PUSH_REPLY_MESSAGE_TO_CLIENT, 326) over the requester's own connection, where
:class:`RequestFutureTable` completes the waiting request by its correlation id.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from rmq.common.constants import MixAll, TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import MessageConst, MessageSysFlag, inflate_body, string_to_properties
from rmq.errors import ClientError, RemotingCommandError, RemotingTooMuchRequestError, RouteError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import ReplyMessageRequestHeader, SendMessageRequestHeader
from rmq.protocol.requests.message import parse_send, send_reply_message
from rmq.types import Message, MessageExt, MessageQueue, SendResult

from ._codec import properties_to_string
from .registry import live_instances

if TYPE_CHECKING:
    from .instance import ClientInstance

__all__ = [
    "RequestFutureTable",
    "ReplyMessageClientProcessor",
    "create_reply_message",
    "reply",
    "request_properties",
    "is_reply_message",
    "DEFAULT_MAX_OUTSTANDING_REQUESTS",
]

log = logging.getLogger("rmq.client")
_rlog = RateLimitedLog(log)

#: requests one producer may have waiting for their replies at a time (``max_outstanding_requests``)
DEFAULT_MAX_OUTSTANDING_REQUESTS = 10_000


def request_properties(client_id: str, timeout: float) -> tuple[str, dict[str, str]]:
    """A fresh correlation id and the properties a request carries (Java
    ``DefaultMQProducerImpl.prepareSendRequest``)."""
    correlation_id = str(uuid.uuid4())
    return correlation_id, {
        MessageConst.CORRELATION_ID: correlation_id,
        MessageConst.MESSAGE_REPLY_TO_CLIENT: client_id,
        MessageConst.MESSAGE_TTL: str(int(timeout * 1000)),
    }


def is_reply_message(properties: str) -> bool:
    """True when an encoded properties string has ``MSG_TYPE=reply``: such a message is sent
    with SEND_REPLY_MESSAGE_V2 (Java ``MQClientAPIImpl.sendMessage``)."""
    if "MSG_TYPE\x01" not in properties:
        return False
    return string_to_properties(properties).get(MessageConst.MESSAGE_TYPE) == MixAll.REPLY_MESSAGE_FLAG


def create_reply_message(request: MessageExt, body: bytes | str) -> Message:
    """The reply to ``request`` (Java ``MessageUtil.createReplyMessage``): topic
    ``<cluster>_REPLY_TOPIC`` and the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and
    ``TTL``, with ``MSG_TYPE=reply``. Send it with any producer (``Producer.send`` uses code
    325 for it) or use :func:`reply`.

    Raises:
        rmq.errors.ClientError: ``request`` is not a request (no ``CLUSTER`` property: it was
            not sent by ``request()``, or its broker does not add the cluster).
    """
    props = request.properties
    cluster = props.get(MessageConst.CLUSTER)
    if cluster is None:
        raise ClientError(f"create reply message fail, requestMessage error, property[{MessageConst.CLUSTER}] is null.")
    reply_props = {MessageConst.MESSAGE_TYPE: MixAll.REPLY_MESSAGE_FLAG}
    for name in (MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT, MessageConst.MESSAGE_TTL):
        value = props.get(name)
        if value is not None:
            reply_props[name] = value
    return Message(
        topic=MixAll.get_reply_topic(cluster),
        body=body if isinstance(body, bytes) else body.encode(),
        properties=reply_props,
    )


class RequestFutureTable:
    """The requests of one client instance waiting for their replies, by correlation id (Java
    ``RequestFutureHolder``). Each producer may hold at most ``limit`` of them; the waiter
    removes its entry when it returns (reply, timeout or cancellation), so nothing needs a
    sweeper."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[MessageExt]] = {}
        self._owner: dict[str, object] = {}
        self._count: dict[object, int] = {}

    def __len__(self) -> int:
        return len(self._futures)

    def add(self, correlation_id: str, owner: object, limit: int) -> asyncio.Future[MessageExt]:
        n = self._count.get(owner, 0)
        if n >= limit:
            raise RemotingTooMuchRequestError(
                f"{n} requests already wait for their replies (max_outstanding_requests={limit})"
            )
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._futures[correlation_id] = fut
        self._owner[correlation_id] = owner
        self._count[owner] = n + 1
        return fut

    def remove(self, correlation_id: str) -> None:
        self._futures.pop(correlation_id, None)
        owner = self._owner.pop(correlation_id, None)
        if owner is not None:
            left = self._count[owner] - 1
            if left:
                self._count[owner] = left
            else:
                del self._count[owner]

    def complete(self, correlation_id: str | None, msg: MessageExt) -> bool:
        """Hand ``msg`` to the request waiting for it; False when none waits (late or stray)."""
        fut = self._futures.get(correlation_id or "")
        if fut is None or fut.done():
            return False
        fut.set_result(msg)
        return True


def _reply_message(h: ReplyMessageRequestHeader, body: bytes, max_body: int) -> MessageExt:
    """Java ``receiveReplyMessage``: the pushed reply as a MessageExt, ``ARRIVE_TIME`` added."""
    if h.sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        body = inflate_body(body, max_body, what="reply body", sys_flag=h.sys_flag)
    props = string_to_properties(h.properties)
    props[MessageConst.REPLY_MESSAGE_ARRIVE_TIME] = str(int(time.time() * 1000))
    keys = props.get(MessageConst.KEYS)
    return MessageExt(
        topic=h.topic,
        body=body,
        tags=props.get(MessageConst.TAGS),
        keys=tuple(k for k in keys.split(" ") if k) if keys else (),
        properties=props,
        msg_id=props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        offset_msg_id="",
        queue_id=h.queue_id,
        queue_offset=0,
        reconsume_times=h.reconsume_times or 0,
        born_timestamp=h.born_timestamp,
        store_timestamp=h.store_timestamp,
        born_host=h.born_host,
        store_host=h.store_host,
        sys_flag=h.sys_flag,
        flag=h.flag,
        real_topic=h.topic,
    )


class ReplyMessageClientProcessor:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326) on the client (Java
    ``ClientRemotingProcessor.receiveReplyMessage``): SUCCESS once read (also for a reply no
    request waits for any more, which is logged, rate-limited), SYSTEM_ERROR ``process reply
    message fail`` for one that cannot be read."""

    def __init__(self, table: RequestFutureTable, client_id: str, max_body: int = 4 * 1024 * 1024) -> None:
        self.table = table
        self.client_id = client_id
        self.max_body = max_body

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = ReplyMessageRequestHeader.from_ext_fields(cmd.ext_fields or {})
            msg = _reply_message(h, cmd.body_bytes() or b"", self.max_body)
        except (RemotingCommandError, ValueError) as e:
            _rlog.warning(
                "reply-unreadable",
                "client %s: unreadable reply message from %s: %s",
                self.client_id,
                getattr(conn, "remote_addr", "?"),
                clip(e),
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, "process reply message fail", {})
        correlation_id = msg.properties.get(MessageConst.CORRELATION_ID)
        if not self.table.complete(correlation_id, msg):
            _rlog.warning(
                "reply-unmatched",
                "client %s: receive reply message, but not matched any request, "
                "CorrelationId: %s , reply from host: %s",
                self.client_id,
                clip(correlation_id),
                clip(msg.born_host),
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})


def _pick_instance(broker_name: str) -> ClientInstance:
    live = live_instances()
    if not live:
        raise ClientError("rmq.reply needs a running producer or consumer in this event loop")
    for inst in live:
        if broker_name in inst.broker_addr_table:
            return inst
    return live[0]


async def reply(request: MessageExt, body: bytes | str, *, timeout: float = 3.0) -> SendResult:
    """Answer a request received by a consumer: the reply (:func:`create_reply_message`) goes
    as SEND_REPLY_MESSAGE_V2 to the master of the broker the request came from (it hosts the
    cluster's reply topic, and the requester is connected to it), through a running client of
    this event loop. Needs no producer.

    Args:
        request: the request message as a consumer received it.
        body: the reply's body.
        timeout: seconds to wait for the broker's answer (default 3.0). The broker answers after
            pushing the reply to the requester.

    Returns:
        The broker's SendResult (``msg_id`` is the stored reply's id, "0" when not stored).

    Raises:
        rmq.errors.ClientError: ``request`` is not a request, or no client runs in this loop.
        rmq.errors.RouteError: no broker to send the reply to (retriable once the route is
            known again).
        rmq.errors.BrokerSystemError: the broker could not push the reply: the requester is
            gone (``channel of <id> not found``), or it did not take the reply.
        rmq.errors.RemotingError: the broker could not be reached in time.
    """
    msg = create_reply_message(request, body)
    inst = _pick_instance(request.broker_name)
    addr = inst.find_broker_address_in_publish(request.broker_name)
    if addr is None:
        await inst.update_topic_route(msg.topic, timeout=timeout)
        route = inst.topic_route_table.get(msg.topic)
        names = [bd.broker_name for bd in route.broker_datas] if route else []
        addr = next((a for a in (inst.find_broker_address_in_publish(n) for n in names) if a), None)
    if addr is None:
        raise RouteError(
            f"no broker to send the reply to: {clip(request.broker_name)!r} is unknown and "
            f"{clip(msg.topic)} has no route"
        )
    props = dict(msg.properties)
    header = SendMessageRequestHeader(
        producer_group=MixAll.CLIENT_INNER_PRODUCER_GROUP,
        topic=msg.topic,
        default_topic=TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp=int(time.time() * 1000),
        flag=0,
        properties=properties_to_string(props),
        reconsume_times=0,
        unit_mode=False,
    )
    resp = await inst.remoting.invoke(addr, send_reply_message(header, msg.body), timeout=timeout)
    return parse_send(resp, MessageQueue(msg.topic, request.broker_name, 0))
