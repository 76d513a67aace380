"""Who is connected, what a consumer is doing, and moving a group's offsets (Java
AdminBrokerProcessor's getConsumerConnectionList, getProducerConnectionList,
getConsumerRunningInfo, consumeMessageDirectly, resetOffset, getConsumerStatus, and
Broker2Client's resetOffset / getConsumeStatus / callClient).

GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO
(328, mqadmin producer): read the consumer and producer tables the heartbeats keep.

GET_CONSUMER_RUNNING_INFO (307), CONSUME_MESSAGE_DIRECTLY (309): relayed to the named client's
connection (309 with the message, looked up by its offset message id, as the body); the
client's answer is the answer. The relay waits ``callClientTimeoutMills`` (10 s, as Java).

INVOKE_BROKER_TO_RESET_OFFSET (222): per queue of the topic here, the offset at the timestamp
(-1: the max offset), used when it is behind the group's offset or ``isForce``; the broker's
own offsets are set to it and every online member gets RESET_CONSUMER_CLIENT_OFFSET (220,
oneway) with the table (a C++ member in Java's ``ResetOffsetBodyForC`` list form, the form its
parser reads). A member that ignores 220 (ali-ons has no handler) is moved on its next pull of
each queue: see :class:`rmq.broker.offset_reset.PendingResets`. No member online: CONSUMER_NOT_ONLINE with
Java's remark (mqadmin then sets the offsets itself with UPDATE_CONSUMER_OFFSET).

INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): GET_CONSUMER_STATUS_FROM_CLIENT (221) to every
member (or the one named), their offset tables collected.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rmq.broker.context import BrokerContext
from rmq.broker.long_polling import ANY_OFFSET
from rmq.broker.managers.consumer import ClientChannelInfo
from rmq.broker.processors.common import bad_request, to_json_bytes
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.message import decode_offset_msg_id
from rmq.errors import RemotingCommandError, RemotingTimeoutError
from rmq.protocol.body.conns import (
    V3_0_7_SNAPSHOT,
    V3_1_8_SNAPSHOT,
    ConnectionInfo,
    ConsumerConnection,
    GetConsumerStatusBody,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    ResetOffsetBody,
    SubscriptionInfo,
    connections_of,
    version_desc,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from rmq.protocol.headers.consumer import ResetOffsetRequestHeader
from rmq.types import MessageQueue

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)


def _sub_info(sub: Any) -> SubscriptionInfo:
    return SubscriptionInfo(
        sub.topic, sub.sub_string, tuple(sub.tags_set), (), sub.sub_version, sub.expression_type, False
    )


def _conn_info(ch: ClientChannelInfo) -> ConnectionInfo:
    return ConnectionInfo(ch.client_id, ch.remote_addr, ch.language, ch.version)


#: Seconds GET_ALL_PRODUCER_INFO's encoded answer is reused while the producer table is unchanged.
PRODUCER_INFO_REUSE = 1.0


class ConnsAdminProcessor:
    """Codes 203, 204, 222, 223, 307 and 309 (async: some wait for a client's answer)."""

    CODES = (
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.GET_ALL_PRODUCER_INFO,
    )

    def __init__(self, controller: BrokerContext) -> None:
        self.controller = controller
        self._handlers: dict[int, Callable[[Any, RemotingCommand], Awaitable[RemotingCommand]]] = {
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }
        # GET_ALL_PRODUCER_INFO's last answer: (table version, time.monotonic() built, body)
        self._producer_info: tuple[int, float, bytes] | None = None

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        try:
            return await self._handlers[cmd.code](conn, cmd)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    @property
    def _call_timeout(self) -> float:
        return float(self.controller.broker_config.call_client_timeout_mills) / 1000.0

    # -- connections ------------------------------------------------------------------------

    async def get_consumer_connection_list(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self.controller.consumer_manager.get_consumer_group_info(h.consumer_group)
        if info is None:
            return cmd.response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{clip_remark(h.consumer_group)}] not online", {}
            )
        body = ConsumerConnection(
            connections_of(_conn_info(ch) for ch in info.channels.values()),
            {t: _sub_info(s) for t, s in info.subscriptions.items()},
            info.consume_type.name,
            info.message_model.name,
            info.consume_from_where.name,
        )
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(body.to_json()))

    async def get_producer_connection_list(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = GetProducerConnectionListRequestHeader.from_ext_fields(cmd.ext_fields)
        chans = self.controller.producer_manager.group_channel_table.get(h.producer_group)
        if chans is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{clip_remark(h.producer_group)}] not exist", {}
            )
        body = ProducerConnection(connections_of(_conn_info(ch) for ch in chans.values()))
        return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes(body.to_json()))

    async def get_all_producer_info(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        """Java getAllProducerInfo (ProducerManager.getProducerTable): every group's producer
        connections, the address as Netty prints it (``/ip:port``), the last heartbeat in ms.

        The table holds up to maxProducerGroups x maxProducersPerGroup connections and any
        client may ask: the encoded answer is reused while the table is unchanged
        (``ProducerManager.table_version``) for up to :data:`PRODUCER_INFO_REUSE` seconds, so a flood
        of requests costs one encoding per second, not one per request (a heartbeat's refresh
        shows up within that second; clients beat every 30 s)."""
        pm = self.controller.producer_manager
        now_wall, now_mono = time.time(), time.monotonic()
        reused = self._producer_info
        if reused is not None and reused[0] == pm.table_version and now_mono - reused[1] < PRODUCER_INFO_REUSE:
            return cmd.response(ResponseCode.SUCCESS, None, {}, reused[2])
        data = {
            group: [
                ProducerInfo(
                    ch.client_id,
                    f"/{ch.remote_addr}",
                    ch.language,
                    ch.version,
                    int((now_wall - (now_mono - ch.last_update)) * 1000),
                )
                for ch in chans.values()
            ]
            for group, chans in pm.group_channel_table.items()
        }
        body = ProducerTableInfo(data).encode()
        self._producer_info = (pm.table_version, now_mono, body)
        return cmd.response(ResponseCode.SUCCESS, None, {}, body)

    # -- relays to one client ---------------------------------------------------------------

    def _find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.controller.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return None
        return next((ch for ch in info.channels.values() if ch.client_id == client_id), None)

    async def _call_consumer(
        self, code: int, cmd: RemotingCommand, group: str, client_id: str, body: bytes | None
    ) -> RemotingCommand:
        """Java AdminBrokerProcessor.callConsumer: the same header and body to the client's
        connection, its answer returned as ours (with our opaque)."""
        ch = self._find_channel(group, client_id)
        if ch is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{clip_remark(group)}> <{clip_remark(client_id)}> not online",
                {},
            )
        if ch.version < V3_1_8_SNAPSHOT:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{clip_remark(client_id)}> Version <{version_desc(ch.version)}> "
                f"too low to finish, please upgrade it to V3_1_8_SNAPSHOT",
                {},
            )
        fields = {k: v for k, v in (cmd.ext_fields or {}).items()}
        relay = RemotingCommand.request(code, fields, body)
        try:
            answer = await ch.conn.invoke(relay, timeout=self._call_timeout)
        except (RemotingTimeoutError, TimeoutError) as e:
            return cmd.response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer <{clip_remark(group)}> <{clip_remark(client_id)}> Timeout: {clip_remark(e)}",
                {},
            )
        except Exception as e:  # noqa: BLE001 - a closed connection or a refused write, answered as Java's
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{clip_remark(group)}> <{clip_remark(client_id)}> Exception: "
                f"{type(e).__name__}: {clip_remark(e)}",
                {},
            )
        return cmd.response(answer.code, answer.remark, dict(answer.ext_fields or {}), answer.body_bytes() or None)

    async def get_consumer_running_info(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerRunningInfoRequestHeader.from_ext_fields(cmd.ext_fields)
        return await self._call_consumer(
            RequestCode.GET_CONSUMER_RUNNING_INFO, cmd, h.consumer_group, h.client_id, None
        )

    async def consume_message_directly(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        # Java puts its own broker name in the header for the client to decode the message with.
        cmd.ext_fields = dict(cmd.ext_fields or {})
        cmd.ext_fields["brokerName"] = c.broker_config.broker_name
        record = self._record_of(h.msg_id or "")
        if record is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"no message with id {clip_remark(h.msg_id)} in this broker", {}
            )
        return await self._call_consumer(
            RequestCode.CONSUME_MESSAGE_DIRECTLY, cmd, h.consumer_group, h.client_id or "", record
        )

    def _record_of(self, msg_id: str) -> bytes | None:
        """The stored CommitLog record an offset message id names (None when not here)."""
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
        except ValueError:
            return None
        data: bytes | None = self.controller.started_store.select_one_message_by_offset(offset)
        return data

    # -- offset reset and status (Java Broker2Client) ---------------------------------------

    async def reset_offset(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = ResetOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        _rlog.info(
            "reset-offset",
            "[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%d, isForce=%s",
            conn.remote_addr,
            clip(h.topic),
            clip(h.group),
            h.timestamp,
            h.is_force,
        )
        tc = c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={clip_remark(h.topic)}",
                {},
            )
        store = c.started_store
        com = c.consumer_offset_manager
        known = com.query_offsets(h.group, h.topic)
        if not known:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{clip_remark(h.group)}> not exist", {})
        broker_name = c.broker_config.broker_name
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            # a queue the group never committed on counts as consumed to the end
            consumer_offset = known.get(qid, max_offset)
            if h.timestamp == -1:
                target = max_offset
            else:
                target = store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp)
            target = max(0, target)
            table[MessageQueue(h.topic, broker_name, qid)] = (
                target if h.is_force or target < consumer_offset else consumer_offset
            )
        info = c.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channels:
            remark = (
                f"Consumer not online, so can not reset offset, Group: {clip_remark(h.group)} "
                f"Topic: {clip_remark(h.topic)} Timestamp: {h.timestamp}"
            )
            _rlog.warning("reset-offset-offline", "%s", remark)
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, remark, {})
        old = [ch for ch in info.channels.values() if ch.version < V3_0_7_SNAPSHOT]
        if old:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                "the client does not support this feature. version=" + version_desc(old[0].version),
                {},
            )
        for mq, offset in table.items():
            com.commit_offset(conn.remote_addr, h.group, h.topic, mq.queue_id, offset)
        c.pending_resets.add(h.group, h.topic, {mq.queue_id: off for mq, off in table.items()})
        body = ResetOffsetBody(table)
        java_body, c_body = body.encode(), body.encode_for_c()
        fields = ResetOffsetRequestHeader(
            topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=h.is_force
        ).to_ext_fields()
        for ch in list(info.channels.values()):
            request = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                dict(fields),
                c_body if ch.language == "CPP" else java_body,
                oneway=True,
            )
            try:
                ch.conn.invoke_oneway(request)
            except Exception as e:  # noqa: BLE001 - a closing connection: the others still get theirs
                _rlog.warning(
                    "reset-offset-send",
                    "[reset-offset] reset offset exception. topic=%s, group=%s, client=%s, error=%r",
                    clip(h.topic),
                    clip(h.group),
                    clip(ch.client_id),
                    e,
                )
        # Held pulls of the topic are re-run now (any offset counts as arrived), so a member
        # long-polling at its old offset is moved at once instead of after its hold time.
        hold = getattr(c, "pull_request_hold_service", None)
        if hold is not None:
            for qid in range(tc.write_queue_nums):
                hold.notify_message_arriving(h.topic, qid, ANY_OFFSET)
        return cmd.response(ResponseCode.SUCCESS, None, {}, java_body)

    async def get_consumer_status(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerStatusRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        info = c.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channels:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{clip_remark(h.group)}]", {}
            )
        targets = [ch for ch in info.channels.values() if not h.client_addr or ch.client_id == h.client_addr]
        old = [ch for ch in targets if ch.version < V3_0_7_SNAPSHOT]
        if old:
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                "the client does not support this feature. version=" + version_desc(old[0].version),
                {},
            )
        fields = GetConsumerStatusRequestHeader(topic=h.topic, group=h.group).to_ext_fields()

        async def ask(ch: ClientChannelInfo) -> tuple[str, dict[MessageQueue, int] | None]:
            try:
                answer = await ch.conn.invoke(
                    RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, dict(fields)),
                    timeout=self._call_timeout,
                )
                if answer.code == ResponseCode.SUCCESS and answer.body_bytes():
                    return ch.client_id, GetConsumerStatusBody.decode(answer.body_bytes()).message_queue_table
            except Exception as e:  # noqa: BLE001 - Java logs and leaves the client out
                _rlog.warning(
                    "consumer-status",
                    "[get-consumer-status] get consumer status exception. topic=%s, group=%s, client=%s, error=%r",
                    clip(h.topic),
                    clip(h.group),
                    clip(ch.client_id),
                    e,
                )
            return ch.client_id, None

        answers = await asyncio.gather(*(ask(ch) for ch in targets))
        body = GetConsumerStatusBody({}, {cid: t for cid, t in answers if t is not None})
        return cmd.response(ResponseCode.SUCCESS, None, {}, body.encode())
