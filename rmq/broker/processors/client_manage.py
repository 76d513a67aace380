"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15).

Heartbeats register producers and consumers (Java ClientManageProcessor.heartBeat). For each consumer group the
broker makes sure ``%RETRY%<group>`` exists (1 queue, read + write, as Java does on
heartbeat) and, when it had to create it, re-registers with the name servers before
answering, so the client's next route lookup for ``%RETRY%<group>`` succeeds. New groups and
topics only mark their tables dirty (written off the loop) and one registration carries
them all, so a heartbeat naming thousands of new groups costs O(groups).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from rmq.broker.filter import CompileBusy, ConsumerFilterManager, is_tag_type, unsupported_remark
from rmq.broker.managers.consumer import (
    ClientChannelInfo,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    parse_enum,
)
from rmq.broker.managers.subscription_group import check_group_name
from rmq.broker.processors.common import bad_request, parse_json_body, to_json_bytes
from rmq.common.constants import MixAll, PermName
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.sql92 import SelectorError
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import UnregisterClientRequestHeader
from rmq.protocol.headers.consumer import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.config import BrokerConfig
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

_GROUPS_PER_SLICE = 50  # consumer groups of one heartbeat handled between two yields to the loop


class ClientManageProcessor:
    """Codes 34 and 35 (async: a heartbeat may wait for a name-server registration)."""

    def __init__(self, controller: BrokerContext):
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        if cmd.code == RequestCode.HEART_BEAT:
            return await self.heart_beat(conn, cmd)
        return self.unregister_client(conn, cmd)

    async def heart_beat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            data = parse_json_body(cmd, "HEART_BEAT")
            if not isinstance(data, dict):
                raise RemotingCommandError("HEART_BEAT: body is not a JSON object")
            return await self._heart_beat(conn, cmd, data)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        except (TypeError, ValueError, AttributeError) as e:
            return bad_request(conn, cmd, RemotingCommandError(f"HEART_BEAT: malformed heartbeat data ({e})"))

    def _over_bounds(self, conn: Connection, consumer_set: Any, producer_set: Any) -> str | None:
        """Why this heartbeat would take ``conn`` past its bounds (BrokerConfig
        ``maxGroupsPerHeartbeat``, ``maxClientsPerConnection``, ``maxSubscriptionsPerConnection``),
        else None. Java has no such limits; they keep one connection's share of the consumer
        and producer tables bounded. Checked before anything is registered."""
        bc = self.controller.broker_config
        n = len(consumer_set) + len(producer_set)
        if n > bc.max_groups_per_heartbeat:
            return f"it names {n} groups, at most {bc.max_groups_per_heartbeat} (maxGroupsPerHeartbeat)"
        declared: dict[str, Any] = {}  # consumer group -> subscriptions declared (illegal names counted too)
        for cd in consumer_set:
            if isinstance(cd, dict) and isinstance(cd.get("groupName"), str) and cd["groupName"]:
                declared[cd["groupName"]] = sum(
                    1 for s in (cd.get("subscriptionDataSet") or ()) if isinstance(s, dict) and s.get("topic")
                )
        producers = {str(pd["groupName"]) for pd in producer_set if isinstance(pd, dict) and pd.get("groupName")}
        held = self.controller.consumer_manager.memberships(conn)
        clients = len(held.keys() | declared.keys()) + len(self.controller.producer_manager.groups_of(conn) | producers)
        if clients > bc.max_clients_per_connection:
            return (
                f"the connection would be a member of {clients} groups, at most "
                f"{bc.max_clients_per_connection} (maxClientsPerConnection)"
            )
        subs = sum(v for g, v in held.items() if g not in declared) + sum(declared.values())
        if subs > bc.max_subscriptions_per_connection:
            return (
                f"the connection would hold {subs} subscriptions, at most "
                f"{bc.max_subscriptions_per_connection} (maxSubscriptionsPerConnection)"
            )
        return None

    async def _heart_beat(self, conn: Connection, cmd: RemotingCommand, data: dict[str, Any]) -> RemotingCommand:
        c = self.controller
        client_id = str(data.get("clientID") or conn.remote_addr)
        consumer_set, producer_set = data.get("consumerDataSet") or (), data.get("producerDataSet") or ()
        # anything but an array holds no group (tolerated, as the entries that are not objects)
        consumer_set = consumer_set if isinstance(consumer_set, list) else ()
        producer_set = producer_set if isinstance(producer_set, list) else ()
        why = self._over_bounds(conn, consumer_set, producer_set)
        if why is not None:
            _rlog.warning(
                "heartbeat-refused", "heartbeat from %s (%s) refused: %s", conn.remote_addr, clip(client_id), why
            )
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"HEART_BEAT refused: {why}", {})
        new_topics: list[str] = []
        for n, cd in enumerate(consumer_set):
            if not isinstance(cd, dict):
                continue
            if n and n % _GROUPS_PER_SLICE == 0:
                # Java runs heartbeats on a thread pool; here one heartbeat naming thousands of
                # groups yields between slices so other connections are served meanwhile.
                await asyncio.sleep(0)
            group = cd.get("groupName")
            if not group:  # ONS's unit test sends groupless entries: skip, still answer 0
                continue
            if check_group_name(group) is not None:
                _rlog.warning(
                    "heartbeat-bad-group",
                    "heartbeat from %s: illegal consumer group name %s skipped",
                    conn.remote_addr,
                    clip(group),
                )
                continue
            sgc = c.subscription_group_manager.find_subscription_group_config(group)
            notify = True
            if sgc is not None:
                notify = sgc.notify_consumer_ids_changed_enable and c.broker_config.notify_consumer_ids_changed_enable
                topic_sys_flag = 2 if cd.get("unitMode") in (True, "true", 1, "1") else 0
                _, created = c.topic_config_manager.create_topic_in_send_message_back_method(
                    MixAll.get_retry_topic(group),
                    sgc.retry_queue_nums,
                    PermName.PERM_READ | PermName.PERM_WRITE,
                    topic_sys_flag,
                )
                if created:
                    new_topics.append(MixAll.get_retry_topic(group))
            subs = [
                SubscriptionData.from_json(s)
                for s in (cd.get("subscriptionDataSet") or ())
                if isinstance(s, dict) and s.get("topic")
            ]
            c.consumer_manager.register_consumer(
                group,
                ClientChannelInfo(conn, client_id, str(cmd.language), int(cmd.version or 0)),
                parse_enum(ConsumeType, cd.get("consumeType"), ConsumeType.CONSUME_PASSIVELY),
                parse_enum(MessageModel, cd.get("messageModel"), MessageModel.CLUSTERING),
                parse_enum(ConsumeFromWhere, cd.get("consumeFromWhere"), ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
                subs,
                notify,
            )
        for pd in producer_set:
            if isinstance(pd, dict) and pd.get("groupName"):
                c.producer_manager.register_producer(
                    str(pd["groupName"]), ClientChannelInfo(conn, client_id, str(cmd.language), int(cmd.version or 0))
                )
        if new_topics:
            # Route %RETRY%<group> before the client asks for it (Java registers inline too),
            # with only the new topics.
            await c.register_topics_now(new_topics)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def unregister_client(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        c = self.controller
        try:
            h = UnregisterClientRequestHeader.from_ext_fields(cmd.ext_fields)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        if h.producer_group:
            c.producer_manager.unregister_producer(h.producer_group, conn)
        if h.consumer_group:
            sgc = c.subscription_group_manager.subscription_group_table.get(h.consumer_group)
            notify = sgc.notify_consumer_ids_changed_enable if sgc else True
            c.consumer_manager.unregister_consumer(h.consumer_group, conn, notify)
        return cmd.response(ResponseCode.SUCCESS, None, {})


class ConsumerManageProcessor:
    """Codes 38, 14 and 15 (synchronous: memory lookups only)."""

    def __init__(self, controller: BrokerContext):
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        code = cmd.code
        try:
            if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
                return self.get_consumer_list_by_group(conn, cmd)
            if code == RequestCode.UPDATE_CONSUMER_OFFSET:
                return self.update_consumer_offset(conn, cmd)
            return self.query_consumer_offset(conn, cmd)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    def get_consumer_list_by_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        h = GetConsumerListByGroupRequestHeader.from_ext_fields(cmd.ext_fields)
        info = self.controller.consumer_manager.get_consumer_group_info(h.consumer_group)
        if info is not None:
            ids = info.all_client_ids()
            if ids:
                return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes({"consumerIdList": ids}))
            _rlog.warning("get-client-ids", "getAllClientId failed, %s %s", clip(h.consumer_group), conn.remote_addr)
        else:
            _rlog.warning(
                "get-group-info", "getConsumerGroupInfo failed, %s %s", clip(h.consumer_group), conn.remote_addr
            )
        return cmd.response(
            ResponseCode.SYSTEM_ERROR, "no consumer for this group, " + clip_remark(h.consumer_group), {}
        )

    def update_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Only for a known group (auto-created when ``autoCreateSubscriptionGroup`` allows, as
        a pull would), an existing topic and a queue of it (Java
        ConsumerManageProcessor.updateConsumerOffset): junk keys never reach the table."""
        h = UpdateConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        if c.subscription_group_manager.find_subscription_group_config(h.consumer_group) is None:
            return cmd.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {clip_remark(h.consumer_group)} not exist!", {}
            )
        tc = c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {clip_remark(h.topic)} not exist!", {})
        if not 0 <= h.queue_id < max(tc.read_queue_nums, tc.write_queue_nums):
            return cmd.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{clip_remark(h.topic)}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
                {},
            )
        if not c.consumer_offset_manager.commit_offset(
            conn.remote_addr, h.consumer_group, h.topic, h.queue_id, h.commit_offset
        ):
            return cmd.response(
                ResponseCode.SYSTEM_BUSY, "the consumer offset table is full (maxConsumerOffsetKeys)", {}
            )
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def query_consumer_offset(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """Java 4.9.8 ``queryConsumerOffset``: a group with no stored offset gets 0 while the
        queue still starts at 0, else QUERY_NOT_FOUND."""
        h = QueryConsumerOffsetRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        offset = c.consumer_offset_manager.query_offset(h.consumer_group, h.topic, h.queue_id)
        if offset >= 0:
            return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(offset)})
        min_offset = c.started_store.get_min_offset_in_queue(h.topic, h.queue_id)
        if min_offset <= 0:
            return cmd.response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return cmd.response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first", {}
        )


class CheckClientConfigProcessor:
    """CHECK_CLIENT_CONFIG (46, Java ``ClientManageProcessor.checkClientConfig``): is this
    subscription's expression usable here? The expression
    is looked up in, or compiled off the loop into, the pull's ``ConsumerFilterManager``.

    Args:
        broker_config: the live ``BrokerConfig`` (``enablePropertyFilter`` is read per request).
        filters: the pull processor's ``ConsumerFilterManager`` (one cache of compiled
            expressions for both codes).
    """

    def __init__(self, broker_config: BrokerConfig, filters: ConsumerFilterManager) -> None:
        self.broker_config = broker_config
        self.filters = filters

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | Awaitable[RemotingCommand]:
        try:
            body = parse_json_body(cmd, "CHECK_CLIENT_CONFIG") if cmd.body_bytes() else None
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(sub, dict):
            return cmd.response(ResponseCode.SUCCESS, None, {})
        expression_type = str(sub.get("expressionType") or "")
        if is_tag_type(expression_type):
            return cmd.response(ResponseCode.SUCCESS, None, {})
        if not self.broker_config.enable_property_filter:
            return cmd.response(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type), {})
        raw = sub.get("subString")
        expression = raw if isinstance(raw, str) else ""
        manager = self.filters
        try:
            if manager.lookup(expression_type, expression) is not None:
                return cmd.response(ResponseCode.SUCCESS, None, {})
            compiling = manager.start(conn, expression_type, expression)
        except SelectorError as e:
            return self._failed(cmd, body, expression, e)
        except CompileBusy as e:
            return cmd.response(ResponseCode.SYSTEM_BUSY, str(e), {})
        return self._compile(cmd, body, compiling, expression)

    async def _compile(
        self, cmd: RemotingCommand, body: dict[str, Any], compiling: asyncio.Future[Any], expression: str
    ) -> RemotingCommand:
        try:
            await ConsumerFilterManager.wait(compiling)
        except SelectorError as e:
            return self._failed(cmd, body, expression, e)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    @staticmethod
    def _failed(cmd: RemotingCommand, body: dict[str, Any], expression: str, e: SelectorError) -> RemotingCommand:
        _rlog.warning(
            "check-client-config",
            "Client %s@%s filter message, but failed to compile expression! sub=%s, error=%s",
            clip(body.get("clientId")),
            clip(body.get("group")),
            clip(expression),
            clip(e),
        )
        return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, clip_remark(str(e)), {})
