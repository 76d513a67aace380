"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): request-reply's replies (Java
``ReplyMessageProcessor``).

A requester (Java ``DefaultMQProducer.request``, ``rmq.Producer.request``) sends an ordinary
message carrying ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL``; the SEND
path adds ``CLUSTER``. The responder builds a reply to ``<cluster>_REPLY_TOPIC`` with the same
three properties and ``MSG_TYPE=reply`` (Java ``MessageUtil.createReplyMessage``) and sends it
with code 324/325. This processor then, in Java's order:

1. checks it as a SEND (``msgCheck``: broker writable, topic legal, queue id in range);
2. pushes it (PUSH_REPLY_MESSAGE_TO_CLIENT, 326) to the connection of the client named by
   ``REPLY_TO_CLIENT``, found by client id among the producer connections, then the consumer
   connections; ``PUSH_REPLY_TIME`` is added to the pushed properties;
3. stores it in the reply topic when ``storeReplyMessageEnable`` (True, as Java).

The answer is SUCCESS when the push succeeded (``msgId`` "0" and offset 0, or the stored
record's when it was stored), else SYSTEM_ERROR with Java's remarks: ``push reply message fail,
channel of <id> not found.`` (the requester is gone), ``push reply message to <id>fail.``
(its answer was not SUCCESS, or it did not answer within ``callClientTimeoutMills``), or
``reply message properties[REPLY_TO_CLIENT] is null``.

Beyond Java (docs/design.md "Request-reply"):

* a reply must go to this cluster's ``<cluster>_REPLY_TOPIC`` (the topic Java's
  ``MessageUtil.createReplyMessage`` names); Java stores a reply into whatever topic it names.
  With ACL on, 324/325 also need PUB on that topic (rmq.broker.acl.request_resources).
* Bounds, taken when the reply arrives, before it waits for a slot of the reply pool: at most
  ``maxReplyPushesPerClient`` replies and :data:`MAX_REPLY_BYTES_PER_CLIENT` bytes of bodies
  are admitted for one requester at a time; past either the reply is refused at once
  (SYSTEM_ERROR). A requester that never answers its pushes therefore holds only its own
  share, pipelined replies cannot grow the broker past (live requesters x that share), and the
  pool (its own, as Java's ``replyMessageExecutor``) has room for thousands of waiting pushes,
  so a few silent requesters cannot hold every slot and delay other requesters' replies.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from rmq.broker.context import BrokerContext
from rmq.broker.processors.common import bad_request, split_host
from rmq.broker.processors.send import SendMessageProcessor, message_of
from rmq.common.constants import MixAll
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import MessageConst, properties_to_string, string_to_properties
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import ReplyMessageRequestHeader, SendMessageRequestHeader, read_send_header
from rmq.protocol.requests.message import push_reply_message

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

#: bytes of reply bodies admitted for one requester at a time (see the module docstring)
MAX_REPLY_BYTES_PER_CLIENT = 16 * 1024 * 1024

_STORED_OK = frozenset({"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"})


class ReplyMessageProcessor:
    """Codes 324 and 325 (async: the push waits for the requester's answer)."""

    CODES = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)

    def __init__(self, controller: BrokerContext) -> None:
        self.controller = controller
        self._send = SendMessageProcessor(controller)  # its msgCheck (one implementation)
        #: client id -> [replies admitted, body bytes admitted] for that requester
        self._in_flight: dict[str, list[int]] = {}

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Any, cmd: RemotingCommand) -> Any:
        try:
            header = read_send_header(cmd.code, cmd.ext_fields or {})
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        bc = self.controller.broker_config
        # Java adds these two to every reply of this processor, also to refusals
        extra = {"MSG_REGION": bc.region_id, "TRACE_ON": "true" if bc.trace_on else "false"}
        reply_topic = MixAll.get_reply_topic(bc.broker_cluster_name)
        if header.topic != reply_topic:
            _rlog.warning(
                "reply-topic",
                "reply from %s to topic %s refused: replies go to %s",
                conn.remote_addr,
                clip(header.topic),
                reply_topic,
            )
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"a reply message must be sent to the reply topic {reply_topic}, not {clip_remark(header.topic)}",
                dict(extra),
            )
        properties = header.properties or ""
        sender_id = string_to_properties(properties).get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        size = cmd.body_length() if cmd.body is not None else 0
        if sender_id is not None:
            held = self._in_flight.get(sender_id)
            limit = bc.max_reply_pushes_per_client
            if held is not None and (held[0] >= limit or held[1] + size > MAX_REPLY_BYTES_PER_CLIENT):
                _rlog.warning(
                    "reply-too-many",
                    "reply to %s refused: %d replies (%d bytes) already wait for its "
                    "answers (maxReplyPushesPerClient=%d, %d bytes)",
                    clip(sender_id),
                    held[0],
                    held[1],
                    limit,
                    MAX_REPLY_BYTES_PER_CLIENT,
                )
                return cmd.response(
                    ResponseCode.SYSTEM_ERROR,
                    (
                        f"push reply message to <{clip_remark(sender_id)}> refused: {held[0]} replies "
                        f"({held[1]} bytes) are already waiting for that client (maxReplyPushesPerClient={limit}, "
                        f"at most {MAX_REPLY_BYTES_PER_CLIENT} bytes)"
                    ),
                    dict(extra),
                )
            if held is None:
                self._in_flight[sender_id] = [1, size]
            else:
                held[0] += 1
                held[1] += size
        return self._admitted(conn, cmd, header, extra, sender_id, size)

    async def _admitted(
        self,
        conn: Any,
        cmd: RemotingCommand,
        header: SendMessageRequestHeader,
        extra: dict[str, str],
        sender_id: str | None,
        size: int,
    ) -> RemotingCommand:
        try:
            return await self._process(conn, cmd, header, extra)
        finally:
            if sender_id is not None:
                held = self._in_flight[sender_id]
                held[0] -= 1
                held[1] -= size
                if not held[0]:
                    del self._in_flight[sender_id]

    async def _process(
        self, conn: Any, cmd: RemotingCommand, header: SendMessageRequestHeader, extra: dict[str, str]
    ) -> RemotingCommand:
        bc = self.controller.broker_config
        tc, error = self._send._msg_check(conn, cmd, header)
        if error is not None:
            error.ext_fields = {**(error.ext_fields or {}), **extra}
            return error
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        body = cmd.body_bytes() or b""
        properties = header.properties or ""

        ok, remark = await self._push(conn, header, properties, body)
        if ok:
            resp = cmd.response(
                ResponseCode.SUCCESS, None, {**extra, "msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
            )
        else:
            resp = cmd.response(ResponseCode.SYSTEM_ERROR, remark, dict(extra))
        if bc.store_reply_message_enable:
            stored = await self._store(conn, header, queue_id, properties, body)
            if stored is not None and ok:
                resp.ext_fields = {**resp.ext_fields, "msgId": stored[0], "queueOffset": str(stored[1])}
        return resp

    async def _push(
        self, conn: Any, header: SendMessageRequestHeader, properties: str, body: bytes
    ) -> tuple[bool, str]:
        """Java ``pushReplyMessage``: (pushed, remark)."""
        props = string_to_properties(properties)
        sender_id = props.get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if sender_id is None:
            remark = f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null"
            _rlog.warning("reply-no-client", "%s (reply from %s)", remark, conn.remote_addr)
            return False, remark
        target = self.controller.producer_manager.find_channel(
            sender_id
        ) or self.controller.consumer_manager.find_channel(sender_id)
        if target is None or getattr(target, "closed", False):
            remark = f"push reply message fail, channel of <{clip_remark(sender_id)}> not found."
            _rlog.warning("reply-no-channel", "%s", clip(remark))
            return False, remark
        props[MessageConst.PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        push = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            properties=properties_to_string(props, trailing_separator=False),
            reconsume_times=header.reconsume_times,
            unit_mode=header.unit_mode,
            born_host=conn.remote_addr,
            store_host=self.controller.broker_addr,
            store_timestamp=int(time.time() * 1000),
        )
        timeout = self.controller.broker_config.call_client_timeout_mills / 1000.0
        try:
            answer = await target.invoke(push_reply_message(push, body), timeout=timeout)
        except Exception as e:  # noqa: BLE001 - a timeout, a closed connection: answered as Java
            _rlog.warning("reply-push-failed", "push reply message to <%s> fail: %s", clip(sender_id), clip(repr(e)))
            return False, f"push reply message to {clip_remark(sender_id)}fail."
        if answer.code != ResponseCode.SUCCESS:
            _rlog.warning(
                "reply-push-refused",
                "push reply message to <%s> return fail, response remark: %s",
                clip(sender_id),
                clip(answer.remark),
            )
            return False, f"push reply message to {clip_remark(sender_id)}fail."
        return True, ""

    async def _store(
        self, conn: Any, header: SendMessageRequestHeader, queue_id: int, properties: str, body: bytes
    ) -> tuple[str, int] | None:
        """Java ``handlePutMessageResult``: (msgId, queue offset) of the stored reply, or None
        (logged) when the store refused it; the answer does not change either way."""
        msg = message_of(header, queue_id, body, properties, split_host(conn.remote_addr))
        try:
            result = await self.controller.started_store.put_message(msg)
        except Exception as e:  # noqa: BLE001 - the reply was pushed (or not) already; log and go on
            _rlog.warning("reply-store", "process reply message, store failed: %s", clip(repr(e)))
            return None
        status = getattr(result.status, "name", str(result.status))
        if status not in _STORED_OK or result.append is None:
            _rlog.warning(
                "reply-store", "process reply message, store answered %s %s", status, clip(result.remark or "")
            )
            self.controller.stats.on_put_failed()
            return None
        self.controller.stats.on_put(header.topic, 1, len(body))
        return result.append.msg_id, result.append.logics_offset


__all__ = ["ReplyMessageProcessor"]
