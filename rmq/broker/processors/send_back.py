"""CONSUMER_SEND_MSG_BACK (36) and the message semantics of the SEND path (Java ``SendMessageProcessor``).

Send-back, as Java ``asyncConsumerSendMsgBack``:

1. the group must exist (SUBSCRIPTION_GROUP_NOT_EXIST) and the broker be writable;
2. the original is looked up by its CommitLog offset (the header's ``offset``); not found →
   SYSTEM_ERROR (1), on which ali-ons falls back to re-sending through its inner producer;
3. ``maxReconsumeTimes`` is the header's value or the group's ``retryMaxTimes`` (16); when
   the original's reconsumeTimes ≥ it, or ``delayLevel`` < 0, the copy goes to
   ``%DLQ%<group>`` (1 queue, created on demand);
4. otherwise to ``%RETRY%<group>`` (``retryQueueNums`` queues, 1 by default) with delay level
   ``delayLevel`` or, when 0, ``3 + reconsumeTimes`` (10 s, 30 s, 1 m, …);
5. the copy keeps body, flag, sysFlag, born time and host and every property, adds
   ``RETRY_TOPIC`` (the original topic, if not set yet) and ``ORIGIN_MESSAGE_ID`` (kept from
   the original, else its offsetMsgId), and has reconsumeTimes + 1.

:func:`before_store` is the SEND path's hook (``SendMessageProcessor._before_store``), run on
the message the broker is about to store, in Java's order: a SEND into ``%RETRY%<group>`` with
reconsumeTimes above the max goes to ``%DLQ%<group>``; a ``TRAN_MSG`` message becomes a half
message; a ``DELAY`` level parks the message in ``SCHEDULE_TOPIC_XXXX``.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from rmq.broker.acl import refuse_acl
from rmq.broker.message_copy import copy_to_inner
from rmq.broker.processors.common import FAQ, bad_request
from rmq.broker.timer import TIMER_MARKS, has_timer_properties, rewrite_if_timer
from rmq.common.constants import MixAll, PermName, TopicValidator
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import MessageConst, properties_to_string, string_to_properties
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import ConsumerSendMsgBackRequestHeader
from rmq.store import MessageInner

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker.retry")
_rlog = RateLimitedLog(log)

DLQ_NUMS_PER_GROUP = 1
_RW = PermName.PERM_READ | PermName.PERM_WRITE

# Keys whose presence in a SEND's properties string means before_store has work to do.
_MARKS = (MessageConst.DELAY_TIME_LEVEL + "\x01", MessageConst.TRANSACTION_PREPARED + "\x01", *TIMER_MARKS)


def retry_topic(group: str) -> str:
    return MixAll.RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return MixAll.DLQ_GROUP_TOPIC_PREFIX + group


def _create_system_topic(
    controller: BrokerContext, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
) -> Any:
    tc, created = controller.topic_config_manager.create_topic_in_send_message_back_method(
        topic, queue_nums, perm, topic_sys_flag
    )
    if created:
        controller.register_broker_soon((topic,))  # route it, so a consumer of the topic finds it
    return tc


def _group_not_exist(cmd: RemotingCommand, group: str) -> RemotingCommand:
    return cmd.response(
        ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {clip_remark(group)} {FAQ}", {}
    )


def before_store(
    controller: BrokerContext, conn: Connection, cmd: RemotingCommand, header: Any, tc: Any, msg: MessageInner
) -> RemotingCommand | None:
    """Apply retry → DLQ, transactions and delay levels to ``msg`` in place.

    Returns None to store ``msg`` (possibly rewritten), or the response to send instead.
    Batches are stored as they are (Java refuses delays on batches in the store; retry
    batches are refused before this hook).
    """
    if cmd.code == RequestCode.SEND_BATCH_MESSAGE or bool(getattr(header, "batch", False)):
        if has_timer_properties(msg.properties_str):
            # Java refuses a delayed batch (CommitLog.asyncPutMessages); a timer batch likewise
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support timer messages", {})
        return None
    topic = msg.topic
    props_str = msg.properties_str
    is_retry = topic.startswith(MixAll.RETRY_GROUP_TOPIC_PREFIX)
    if not is_retry and (props_str is None or not any(m in props_str for m in _MARKS)):
        return None  # the common case: a plain message
    props = string_to_properties(props_str) if props_str is not None else dict(msg.properties)
    changed = False

    if is_retry:
        group = topic[len(MixAll.RETRY_GROUP_TOPIC_PREFIX) :]
        sgc = controller.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return _group_not_exist(cmd, group)
        max_times = header.max_reconsume_times if header.max_reconsume_times is not None else sgc.retry_max_times
        reconsume = header.reconsume_times or 0
        # Strictly above the max (ali-ons' fallback sends
        # reconsumeTimes + 1 with maxReconsumeTimes + 1).
        if reconsume > max_times:
            dlq = dlq_topic(group)
            if _create_system_topic(controller, dlq, DLQ_NUMS_PER_GROUP, _RW) is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic[{clip_remark(dlq)}] not exist", {})
            log.info("message for %s reconsumed %d times (max %d): to %s", topic, reconsume, max_times, dlq)
            msg.topic = dlq
            msg.queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            props[MessageConst.DELAY_TIME_LEVEL] = "0"
            changed = True

    if props.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true" and not (
        msg.reconsume_times > 0 and _level(props) > 0
    ):
        if getattr(controller.broker_config, "reject_transaction_message", False):
            return cmd.response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{controller.broker_config.broker_ip1}] sending transaction message is forbidden",
                {},
            )
        controller.transaction_service.prepare(msg, props)
        return None  # a half message is delayed, if at all, when it is committed

    if changed:
        msg.properties = props
        msg.properties_str = properties_to_string(props, trailing_separator=False)
    refusal = rewrite_if_timer(controller, msg)  # timer properties (rmq.broker.timer)
    if refusal is not None:
        return cmd.response(refusal[0], refusal[1], {})
    controller.schedule_service.rewrite_if_delayed(msg)
    return None


def _level(props: dict[str, str]) -> int:
    try:
        return int(props.get(MessageConst.DELAY_TIME_LEVEL) or 0)
    except ValueError:
        return 0


class ConsumerSendMsgBackProcessor:
    """Handles code 36 (async: the copy is a store put)."""

    codes = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(self, controller: BrokerContext):
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            header = ConsumerSendMsgBackRequestHeader.from_ext_fields(cmd.ext_fields)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        c = self.controller
        group = header.group
        who = getattr(conn, "remote_addr", "?")
        if TopicValidator.check_topic(retry_topic(group)) is not None:
            return bad_request(
                conn, cmd, RemotingCommandError(f"CONSUMER_SEND_MSG_BACK: illegal group name {clip_remark(group)}")
            )
        sgc = c.subscription_group_manager.find_subscription_group_config(group)
        if sgc is None:
            return _group_not_exist(cmd, group)
        if not PermName.is_writeable(c.broker_config.broker_permission):
            return cmd.response(
                ResponseCode.NO_PERMISSION, f"the broker[{c.broker_config.broker_ip1}] sending message is forbidden", {}
            )
        if sgc.retry_queue_nums <= 0:
            return cmd.response(ResponseCode.SUCCESS, None, {})
        new_topic = retry_topic(group)
        tc = _create_system_topic(c, new_topic, sgc.retry_queue_nums, _RW, 2 if header.unit_mode else 0)
        if tc is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic[{clip_remark(new_topic)}] not exist", {})
        # The topic's own count: retryQueueNums may exceed the cap the topic was created with.
        queue_id = random.randrange(max(1, tc.write_queue_nums))
        if not PermName.is_writeable(tc.perm):
            return cmd.response(
                ResponseCode.NO_PERMISSION, f"the topic[{clip_remark(new_topic)}] sending message is forbidden", {}
            )
        ext = c.started_store.look_message_by_offset(header.offset)
        if ext is None:
            _rlog.warning(
                "send-back-no-message",
                "send-back from %s (group %s): no message at CommitLog offset %d",
                who,
                clip(group),
                header.offset,
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}", {})
        if c.acl is not None and not getattr(conn, "acl_checked", False):
            # (the gRPC endpoint's channel: its own signature check named the topics already)
            # The request names a CommitLog offset, not a topic: Java copies whatever message is
            # there into the group's retry topic, where the account can then pull it. Here the
            # account must be able to SUB the message's topic (a consumer sends back what it
            # consumed: its topic or its group's %RETRY% topic); docs/design.md "ACL".
            refusal = c.acl.may_read(cmd, who.rpartition(":")[0], ext.topic)
            if refusal is not None:
                refuse_acl(conn, cmd, refusal)
                return None

        props = dict(ext.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, ext.topic)
        delay_level = header.delay_level
        max_times = header.max_reconsume_times if header.max_reconsume_times is not None else sgc.retry_max_times
        if ext.reconsume_times >= max_times or delay_level < 0:
            new_topic = dlq_topic(group)
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            if _create_system_topic(c, new_topic, DLQ_NUMS_PER_GROUP, _RW) is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"topic[{clip_remark(new_topic)}] not exist", {})
            props[MessageConst.DELAY_TIME_LEVEL] = "0"
            log.info(
                "message %s of group %s reconsumed %d times (max %d, delay level %d): to %s",
                ext.msg_id,
                group,
                ext.reconsume_times,
                max_times,
                delay_level,
                new_topic,
            )
        else:
            if delay_level == 0:
                delay_level = 3 + ext.reconsume_times
            props[MessageConst.DELAY_TIME_LEVEL] = str(delay_level)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = ext.msg_id
        inner = copy_to_inner(ext, new_topic, queue_id, props, reconsume_times=ext.reconsume_times + 1)
        c.schedule_service.rewrite_if_delayed(inner)
        try:
            result = await c.started_store.put_message(inner)
        except Exception as e:  # noqa: BLE001 - the consumer must hear about it (it retries locally)
            _rlog.error(
                "send-back-failed", "send-back of %s into %s failed", ext.msg_id, clip(new_topic), exc_info=True
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"store error: {e}", {})
        if not result.is_ok:
            status = getattr(result.status, "name", str(result.status))
            _rlog.warning("send-back-status", "send-back of %s into %s failed: %s", ext.msg_id, clip(new_topic), status)
            return cmd.response(ResponseCode.SYSTEM_ERROR, status, {})
        c.stats.on_put(new_topic, 1, len(ext.body or b""))
        c.stats.on_send_back(group, ext.topic)
        return cmd.response(ResponseCode.SUCCESS, None, {})
