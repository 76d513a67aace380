"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

The checks run in Java's order (``AbstractSendMessageProcessor.msgCheck`` then
``SendMessageProcessor.sendMessage``): broker writable, topic name legal and not reserved,
topic config (created from TBW102 when allowed, or the group's ``%RETRY%`` topic), queue id
in range, then the store's verdict. Each failure has RocketMQ's response code and a remark a
user can act on. A SEND never requires a prior heartbeat.

Bodies are stored exactly as sent (a compressed body stays compressed, sysFlag bit 0 tells
the consumer). The reply carries ``msgId`` = offsetMsgId of the stored record (store host +
physical offset; for a batch the comma-joined list), ``queueId`` and ``queueOffset``, then
``TRACE_ON`` and ``MSG_REGION`` as Java's broker adds them, all as strings (the C++ client reads
reply fields only when they are), in the request's serialization (JSON or ROCKETMQ binary).

Retry and dead-letter handling (``%RETRY%`` topics past ``maxReconsumeTimes`` → ``%DLQ%``),
delay levels and transactional half messages plug in at ``_before_store`` below
(``rmq.broker.processors.send_back.before_store``).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rmq.broker.processors.common import FAQ, bad_request, split_host
from rmq.broker.processors.send_back import before_store
from rmq.broker.processors.send_fast import bind_store, make_fast_path
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import MessageConst, properties_to_string, string_to_properties
from rmq.common.topic_attributes import check_message_type, first_batch_item_properties, message_type_of_properties
from rmq.errors import RemotingCommandError

# (send_reply_frame: the SEND reply written straight into one frame, rmq/protocol/_codec.pyx)
from rmq.protocol._codec import send_reply_frame as _send_reply_frame
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import FLAG_ONEWAY, FLAG_RESPONSE, RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader, read_send_header
from rmq.store import MessageInner, PutMessageStatus
from rmq.store.message import host_bytes

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection
    from rmq.store import MessageStore

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

_PERM_WRITE = PermName.PERM_WRITE
_NOT_ALLOWED_SEND = TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET
_RETRY_PREFIX = MixAll.RETRY_GROUP_TOPIC_PREFIX
_DLQ_PREFIX = MixAll.DLQ_GROUP_TOPIC_PREFIX


# A request-reply request (it names the client to reply to) gets the CLUSTER property, which
# the responder's reply needs to name the reply topic (Java SendMessageProcessor.sendMessage
# puts CLUSTER into every message; here only into requests, so other sends keep their bytes).
_REPLY_TO = MessageConst.MESSAGE_REPLY_TO_CLIENT + "\x01"


def _with_cluster(properties: str, cluster: str) -> str:
    props = string_to_properties(properties)
    if MessageConst.MESSAGE_REPLY_TO_CLIENT not in props:
        return properties  # (the text was inside a value)
    props[MessageConst.CLUSTER] = cluster
    return properties_to_string(props, trailing_separator=False)


def message_of(
    header: SendMessageRequestHeader, queue_id: int, body: bytes, properties: str, born_host: tuple[str, int]
) -> MessageInner:
    """The message a SEND-shaped header describes: its topic, flag, born time, sysFlag and
    reconsume times, with ``queue_id``, ``body``, the ``properties`` text and the producer's
    address (Java SendMessageProcessor.sendMessage and
    ReplyMessageProcessor.processReplyMessageRequest fill their MessageExtBrokerInner alike)."""
    return MessageInner(
        header.topic,
        queue_id,
        body,
        header.flag,
        {},
        properties,
        header.born_timestamp,
        born_host,
        header.sys_flag,
        header.reconsume_times or 0,
    )


def type_refusal(tc: Any, topic: str, properties: str | None) -> str | None:
    """Java 5 ProducerProcessor.sendMessage's type check for a topic with a ``message.type``
    attribute (the SEND fast path declines what this refuses, _sendpath.pyx ``_type_ok``):
    retry and dead-letter topics and messages with TRANSFER_FLAG are not checked; else the
    remark of DefaultTopicMessageTypeValidator, or None."""
    if topic.startswith(_RETRY_PREFIX) or topic.startswith(_DLQ_PREFIX):
        return None
    declared = tc.declared_message_type
    actual = message_type_of_properties(properties)
    if declared is None or actual is None:
        return None
    return check_message_type(declared, actual)


def _born_bytes(conn: Connection) -> bytes:
    """The producer's address as the record stores it (8 bytes), once per connection."""
    b = conn.attributes.get("born_host_bytes")
    if b is None:
        b = conn.attributes["born_host_bytes"] = host_bytes(_born_host(conn))
    return b


def _born_host(conn: Connection) -> tuple[str, int]:
    """The producer's ``(ip, port)``, parsed once per connection."""
    host = conn.attributes.get("born_host")
    if host is None:
        host = conn.attributes["born_host"] = split_host(conn.remote_addr)
    return host


# PutMessageStatus name -> (response code, remark). Names, not members, so a status the store
# adds later falls through to SYSTEM_ERROR with its name instead of breaking the import.
_PUT_STATUS = {
    "PUT_OK": (ResponseCode.SUCCESS, None),
    "FLUSH_DISK_TIMEOUT": (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    "FLUSH_SLAVE_TIMEOUT": (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    "SLAVE_NOT_AVAILABLE": (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    "CREATE_MAPPED_FILE_FAILED": (ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    "CREATE_MAPEDFILE_FAILED": (ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."),
    "MESSAGE_ILLEGAL": (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max_body}, msg properties length limit 32767.",
    ),
    "PROPERTIES_SIZE_EXCEEDED": (
        ResponseCode.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit {max_body}, msg properties length limit 32767.",
    ),
    "SERVICE_NOT_AVAILABLE": (
        ResponseCode.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the broker's "
        "disk is full, messages are put to the slave, message store has been shut down, etc.",
    ),
    "OS_PAGECACHE_BUSY": (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    "UNKNOWN_ERROR": (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    # Java 5 AbstractSendMessageProcessor: SYSTEM_ERROR with this remark (controller mode)
    "IN_SYNC_REPLICAS_NOT_ENOUGH": (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
}

_PUT_OK = PutMessageStatus.PUT_OK
_SUCCESS = int(ResponseCode.SUCCESS)

# Responses that still count as "sent" carry the send result header (Java sendOK).
_SENT_CODES = (
    ResponseCode.SUCCESS,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
)


class SendMessageProcessor:
    """Handles codes 10, 310 and 320 (async: the store put is awaited)."""

    def __init__(self, controller: BrokerContext):
        self.controller = controller
        self.broker_config = controller.broker_config
        self.topic_config_manager = controller.topic_config_manager
        # The plain SEND in one Cython call; None (a broker option) keeps every SEND on the
        # Python path below, which also handles whatever the fast path declines.
        self.fast = make_fast_path(controller) if getattr(controller.broker_config, "send_fast_path", True) else None

    @property
    def store(self) -> MessageStore:
        return self.controller.started_store

    def reject_request(self) -> bool:
        return False

    def frame_hook(self, pool: Any, conn: Connection) -> Any:
        """The connection's SEND frame hook (``Dispatcher.frame_hooks``): the plain SEND read
        straight from its frame bytes by ``self.fast`` (rmq/broker/processors/_sendpath.pyx ``send_frame``),
        declining while the broker is not ready or ``pool`` (the SEND pool) is full; None
        without the fast path."""
        fast = self.fast
        if fast is None:
            return None
        return fast.frame_hook(_born_bytes(conn), pool)

    def bind_store(self, store: MessageStore | None) -> None:
        """The store the fast path writes to (its appender), once the broker is ready; None
        when it stops (every SEND then takes the Python path, which answers SYSTEM_BUSY)."""
        if self.fast is not None:
            bind_store(self.fast, store.appender if store is not None else None)

    def process_request(
        self, conn: Connection, cmd: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """Synchronous: the append happens inline on the loop and the reply joins the batch of
        replies for this read (one ``writelines``). A stored message is answered with a frame
        written by ``rmq.protocol._codec.send_reply_frame`` straight to the connection (the method then
        returns None, "answered"); refusals and errors are ordinary response commands.

        SYNC_FLUSH: the reply waits for the group commit as a callback
        (``MessageStore.add_flush_callback``, no task per message); only past its bound of
        waiting callbacks does the method return an awaitable, which the dispatcher runs as a
        task of the send pool.

        A plain SEND (see rmq/broker/processors/_sendpath.pyx) is stored and answered by ``self.fast`` in one
        call; what it declines comes here unchanged."""
        fast = self.fast
        if fast is not None:
            born = conn.attributes.get("born_host_bytes")
            frame = fast.send(cmd, born if born is not None else _born_bytes(conn))
            if frame is not None:
                if frame:
                    conn.send_response_frame(frame)
                return None
        try:
            # by the request code, as the ACL check read it (Java parseRequestHeader)
            header = read_send_header(cmd.code, cmd.ext_fields)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        batch = cmd.code == RequestCode.SEND_BATCH_MESSAGE or bool(header.batch)
        return self.send_message(conn, cmd, header, batch)

    # -- checks ---------------------------------------------------------------------------

    def _msg_check(
        self, conn: Connection, cmd: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[Any, RemotingCommand | None]:
        """Java ``msgCheck``: returns ``(topic_config, None)`` or ``(None, error response)``."""
        bc = self.broker_config
        topic = header.topic
        if not bc.broker_permission & _PERM_WRITE:
            return None, cmd.response(
                ResponseCode.NO_PERMISSION, f"the broker[{bc.broker_ip1}] sending message is forbidden", {}
            )
        if topic in _NOT_ALLOWED_SEND:
            return None, cmd.response(ResponseCode.NO_PERMISSION, TopicValidator.not_allowed_send_remark(topic), {})

        tcm = self.topic_config_manager
        tc = tcm.select_topic_config(topic)
        if tc is None:
            # Names are validated before anything is created, so a topic already in the
            # table is known to be legal: the common case skips the regex.
            problem = TopicValidator.check_topic(topic)
            if problem is not None:
                return None, cmd.response(ResponseCode.SYSTEM_ERROR, problem, {})
            topic_sys_flag = 0
            if header.unit_mode:
                topic_sys_flag = 1 if not topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX) else 2
            tc, created = tcm.create_topic_in_send_message_method(
                topic,
                header.default_topic or "TBW102",
                conn.remote_addr,
                header.default_topic_queue_nums or 4,
                topic_sys_flag,
            )
            if tc is None and topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
                tc, created = tcm.create_topic_in_send_message_back_method(
                    topic, 1, PermName.PERM_READ | PermName.PERM_WRITE, topic_sys_flag
                )
            if tc is None:
                return None, cmd.response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{clip_remark(topic)}] not exist, apply first please!" + FAQ,
                    {},
                )
            if created:
                self.controller.register_broker_soon((topic,))

        if tc.type_code and bc.enable_topic_message_type_check:
            props = header.properties
            if cmd.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
                # Java 5's proxy checks a batch by its first message
                props = first_batch_item_properties(cmd.body_bytes())
            remark = type_refusal(tc, topic, props)
            if remark is not None:
                return None, cmd.response(ResponseCode.MESSAGE_ILLEGAL, remark, {})
        if not tc.perm & _PERM_WRITE:
            return None, cmd.response(
                ResponseCode.NO_PERMISSION, f"the topic[{clip_remark(topic)}] sending message is forbidden", {}
            )
        queue_id = header.queue_id
        id_valid = max(tc.write_queue_nums, tc.read_queue_nums)
        if queue_id >= id_valid:
            return None, cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, topic:[{clip_remark(topic)}] topicConfig.writeQueueNums:"
                f"[{tc.write_queue_nums}] Producer:[{conn.remote_addr}]",
                {},
            )
        return tc, None

    def _before_store(
        self, conn: Connection, cmd: RemotingCommand, header: Any, tc: Any, msg: MessageInner
    ) -> RemotingCommand | None:
        """Retry → DLQ past maxReconsumeTimes, transactions, delay levels (may rewrite ``msg``).

        Returns None to store ``msg``, or a response to send instead.
        """
        return before_store(self.controller, conn, cmd, header, tc, msg)

    # -- the send -------------------------------------------------------------------------

    def send_message(
        self, conn: Connection, cmd: RemotingCommand, header: SendMessageRequestHeader, batch: bool
    ) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
        """Check, append and answer; returns a response, or an awaitable of one (SYNC_FLUSH)."""
        tc, error = self._msg_check(conn, cmd, header)
        if error is not None:
            _rlog.warning(
                f"send-rejected-{error.code}",
                "send to %s from %s rejected: %s",
                clip(header.topic),
                conn.remote_addr,
                clip(error.remark),
            )
            return error
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        body = cmd.body
        if type(body) is not bytes:
            body = cmd.body_bytes()  # (a frame's body is bytes; other shapes are joined)
        if batch and header.topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX):
            return cmd.response(
                ResponseCode.MESSAGE_ILLEGAL,
                "batch request does not support retry group " + clip_remark(header.topic),
                {},
            )
        store = self.controller.started_store
        max_body = getattr(store.config, "max_message_size", 4 * 1024 * 1024)
        if not batch and len(body) > max_body:
            return cmd.response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(body)} is over the limit {max_body}",
                {},
            )
        properties = header.properties or ""
        if _REPLY_TO in properties:
            properties = _with_cluster(properties, self.broker_config.broker_cluster_name)
        msg = message_of(header, queue_id, body, properties, _born_host(conn))
        early = self._before_store(conn, cmd, header, tc, msg)
        if early is not None:
            return early
        t0 = time.monotonic_ns()
        try:
            result = store.append_message(msg, batch)
        except Exception as e:  # noqa: BLE001 - the store's failure must reach the producer
            _rlog.error(
                "store-put", "store failed to put a message into %s-%d", clip(header.topic), queue_id, exc_info=True
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"store error: {e}", {})
        # Java StoreStatsService.setPutMessageEntireTimeMax: the store put's duration
        put_ns = time.monotonic_ns() - t0
        self.controller.stats.store.record_put_time(put_ns // 1_000_000)
        self.controller.stats.send_latency.observe_ns(put_ns)
        if result.flush_wait:
            # SYNC_FLUSH: answered from the group commit's callback (no task per message);
            # past its bound of waiting callbacks, as a task of the send pool, which is bounded.
            # Either way the answer is the one _reply below builds, written by _answer_after_flush.
            answer = functools.partial(
                self._answer_after_flush,
                conn,
                cmd,
                functools.partial(self._reply, conn, cmd, header, queue_id, body, batch, max_body),
            )
            if store.add_flush_callback(result, answer):
                return None
            return self._answer_when_flushed(answer, result)
        return self._reply(conn, cmd, header, queue_id, body, batch, max_body, result)

    @staticmethod
    def _answer_after_flush(
        conn: Connection,
        cmd: RemotingCommand,
        reply: Callable[[Any, BaseException | None], RemotingCommand | None],
        result: Any,
        exc: BaseException | None,
    ) -> None:
        """The group commit covered ``result`` (or timed out, or failed with ``exc``): the one
        answer of a SYNC_FLUSH send, built by ``reply`` (:meth:`_reply`) and written to the
        connection (the send returned None, or the awaitable below returns None), whichever
        way it waited."""
        resp = reply(result, exc)
        if resp is not None and not cmd.flag & FLAG_ONEWAY:
            resp.opaque = cmd.opaque  # (what the dispatcher does for the replies it writes)
            resp.flag |= FLAG_RESPONSE
            resp.serialize_type = cmd.serialize_type
            conn.send_response(resp)

    async def _answer_when_flushed(self, answer: Callable[[Any, BaseException | None], None], result: Any) -> None:
        """Past the callbacks' bound: waits for the group commit as a task of the send pool,
        then answers as the callback does."""
        exc: BaseException | None = None
        try:
            result = await self.store.wait_flush(result)
        except Exception as e:  # noqa: BLE001 - an fsync error must reach the producer
            exc = e
        answer(result, exc)

    def _reply(
        self,
        conn: Connection,
        cmd: RemotingCommand,
        header: Any,
        queue_id: Any,
        body: Any,
        batch: Any,
        max_body: Any,
        result: Any,
        exc: BaseException | None = None,
    ) -> RemotingCommand | None:
        """The answer to a stored send (None when it was written as one frame, or for a oneway
        send); ``exc``: the group commit failed (SYNC_FLUSH)."""
        if exc is not None:
            _rlog.error("store-flush", "flush failed for a message in %s-%d: %s", clip(header.topic), queue_id, exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"store error: {exc}", {})
        if result.status is _PUT_OK:  # the common case, without the table
            code, remark = _SUCCESS, None
        else:
            status_name = getattr(result.status, "name", str(result.status))
            code, remark = _PUT_STATUS.get(status_name, (ResponseCode.SYSTEM_ERROR, status_name))
            if remark is not None:
                remark = remark.format(max_body=max_body)
        if result.append is None or code not in _SENT_CODES:
            status_name = getattr(result.status, "name", str(result.status))
            # the store's own reason (e.g. "disk full: 93% used") is the useful part for the producer
            detail = remark or status_name
            if result.remark:
                detail = f"{detail} ({result.remark})"
            _rlog.warning(
                f"send-failed-{code}",
                "send to %s-%d from %s failed: %s",
                clip(header.topic),
                queue_id,
                conn.remote_addr,
                clip(detail),
            )
            self.controller.stats.on_put_failed()
            return cmd.response(code, detail, {})
        append = result.append
        if batch and getattr(append, "msg_ids", None):
            msg_id = ",".join(append.msg_ids)
        else:
            msg_id = append.msg_id
        self.controller.stats.on_put(header.topic, getattr(append, "msg_num", 1) or 1, len(body))
        if cmd.flag & FLAG_ONEWAY:
            return None  # (Java sendOneway: stored, nobody waits for the answer)
        bc = self.broker_config
        if remark is None and conn.reply_frames:
            # Java SendMessageResponseHeader (msgId, queueId, queueOffset) plus TRACE_ON and
            # MSG_REGION, in the request's serialization: one bytes object, no dict, no command.
            frame = _send_reply_frame(
                cmd.serialize_type, code, cmd.opaque, msg_id, queue_id, append.logics_offset, bc.region_id, bc.trace_on
            )
            if frame is not None:
                conn.send_response_frame(frame)
                return None
        ext = {
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(append.logics_offset),
            "TRACE_ON": "true" if bc.trace_on else "false",
            "MSG_REGION": bc.region_id,
        }
        return cmd.response(code, remark, ext)
