"""Request builders and reply parsers of messages: send (plain, batch, reply), transactions, query and
view by key or offset.

Pure functions over :class:`~rmq.protocol.command.RemotingCommand` (see
:mod:`rmq.protocol.requests`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import (
    EndTransactionRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    ViewMessageRequestHeader,
)
from rmq.protocol.requests import LANGUAGE, _request, check_success, raise_for
from rmq.types import MessageQueue, SendResult, SendStatus

__all__ = [
    "QueryMessageReply",
    "end_transaction",
    "parse_query_message",
    "parse_send",
    "parse_view_message",
    "push_reply_message",
    "query_message",
    "send_message",
    "send_reply_message",
    "view_message",
]


def send_message(
    header: SendMessageRequestHeader,
    body: bytes | memoryview | list[Any],
    *,
    code: int | None = None,
    oneway: bool = False,
) -> RemotingCommand:
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


# Admin builders and parsers: QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33, QUERY_TOPIC_CONSUME_BY_WHO 300.
# (the index engineer adds here)


@dataclass
class QueryMessageReply:
    """A QUERY_MESSAGE answer: the records back to back (undecoded) and where the broker's
    index ended (QueryMessageResponseHeader)."""

    body: bytes
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


def query_message(header: QueryMessageRequestHeader, *, unique_key: bool = False) -> RemotingCommand:
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
    h = QueryMessageResponseHeader.from_ext_fields(resp.ext_fields)
    return QueryMessageReply(resp.body_bytes(), h.index_last_update_timestamp, h.index_last_update_phyoffset)


def view_message(offset: int) -> RemotingCommand:
    """VIEW_MESSAGE_BY_ID (33): the record at CommitLog ``offset``."""
    return _request(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(offset=offset))


def parse_view_message(resp: RemotingCommand) -> bytes:
    """The record (raise when the broker has none: SYSTEM_ERROR "can not find message ...")."""
    check_success(resp)
    return resp.body_bytes()


def send_reply_message(header: SendMessageRequestHeader, body: bytes, *, v2: bool = True) -> RemotingCommand:
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


def push_reply_message(header: ReplyMessageRequestHeader, body: bytes) -> RemotingCommand:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → client (Java
    ``ReplyMessageProcessor.pushReplyMessage``); the client answers SUCCESS or SYSTEM_ERROR."""
    return RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, body)
