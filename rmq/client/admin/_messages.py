"""Finding and reading messages: by key, unique key, message id and offset (Java
``DefaultMQAdminExt`` queryMessage, viewMessage, queryTopicConsumeByWho)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rmq.client._codec import decode_messages
from rmq.common.constants import MixAll
from rmq.common.message import decode_offset_msg_id
from rmq.errors import BrokerResponseError, RemotingError
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.headers.message import QueryMessageRequestHeader
from rmq.protocol.requests.consumer import parse_pull, pull_message
from rmq.protocol.requests.message import parse_query_message, parse_view_message, query_message, view_message
from rmq.protocol.requests.topic import parse_group_list, query_topic_consume_by_who
from rmq.types import MessageExt

from ._base import AdminBase, AdminError

__all__ = ["MessageAdmin", "QueryResult", "LONG_MAX"]

#: Java Long.MAX_VALUE: mqadmin's end of time for a query.
LONG_MAX = (1 << 63) - 1


@dataclass
class QueryResult:
    """Java ``QueryResult``: the messages found (each a :class:`rmq.types.MessageExt`, oldest
    first) and the newest ``indexLastUpdateTimestamp`` among the brokers asked."""

    index_last_update_timestamp: int = 0
    messages: list[MessageExt] = field(default_factory=list)


class MessageAdmin(AdminBase):
    """Message lookups of :class:`rmq.client.admin.Admin`."""

    async def _query(self, topic: str, key: str, max_num: int, begin: int, end: int, unique: bool) -> QueryResult:
        """Java MQAdminImpl.queryMessage: QUERY_MESSAGE to every broker of the topic's route
        (the master, else a slave), then keep the records that really carry ``key`` (the index
        answers hash collisions too)."""
        if max_num <= 0:
            raise ValueError(f"max_num must be > 0, not {max_num}")
        route = await self.examine_topic_route_info(topic)
        addrs = [a for a in (b.select_broker_addr() for b in route.broker_datas) if a]
        if not addrs:
            raise AdminError(f"topic {topic} has no broker with an address in its route")
        header = QueryMessageRequestHeader(
            topic=topic, key=key, max_num=max_num, begin_timestamp=begin, end_timestamp=end
        )
        replies = await asyncio.gather(
            *(self._call(a, query_message(header, unique_key=unique), parse_query_message) for a in addrs)
        )
        result = QueryResult()
        for reply in replies:
            if reply is None:
                continue
            result.index_last_update_timestamp = max(
                result.index_last_update_timestamp, reply.index_last_update_timestamp
            )
            for msg in decode_messages(reply.body):
                if (msg.msg_id == key) if unique else (key in msg.keys):
                    result.messages.append(msg)
        result.messages.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return result

    async def query_message_by_key(
        self, topic: str, key: str, *, max_num: int = 64, begin: int = 0, end: int = LONG_MAX
    ) -> QueryResult:
        """The messages of ``topic`` with ``key`` among their KEYS stored within [begin, end]
        ms (defaults as mqadmin queryMsgByKey: 64, all time); each broker answers at most its
        maxMsgsNumBatch (64)."""
        return await self._query(topic, key, max_num, begin, end, False)

    async def query_message_by_unique_key(
        self, topic: str, msg_id: str, *, max_num: int = 32, begin: int = 0, end: int = LONG_MAX
    ) -> QueryResult:
        """The messages of ``topic`` whose client message id (UNIQ_KEY) is ``msg_id`` (a retry
        or resend stores it again: all of them, oldest first); each broker answers at most its
        defaultQueryMaxNum (32)."""
        return await self._query(topic, msg_id, max_num, begin, end, True)

    async def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt | None:
        """The message with offset message id ``msg_id`` (the broker address and CommitLog
        offset it encodes → VIEW_MESSAGE_BY_ID). When ``msg_id`` is not one, or that broker
        does not have it, and ``topic`` is given, a unique-key query on ``topic`` instead (as
        Java DefaultMQAdminExtImpl.viewMessage(topic, msgId)). None when not found."""
        try:
            ip, port, offset = decode_offset_msg_id(msg_id)
        except ValueError:
            ip = ""
        if ip and not (0 < port <= 65535 and offset >= 0):
            ip = ""  # e.g. a client message id of 32 hex digits
        if ip:
            try:
                data = await self._call(f"{ip}:{port}", view_message(offset), parse_view_message)
                msgs = decode_messages(data)
                if msgs:
                    return msgs[0]
            except (TimeoutError, AdminError, BrokerResponseError, RemotingError, OSError):
                if topic is None:
                    raise
        if topic is None:
            if not ip:
                # Most often the SDK's SendResult.msg_id: the client's unique key (UNIQ_KEY),
                # which names no broker; only a topic's index can find it.
                raise ValueError(
                    f"{msg_id!r} is not an offset message id (SendResult.offset_msg_id); "
                    f"a unique key (SendResult.msg_id) is looked up in a topic: "
                    f"query_message_by_unique_key(topic, msg_id), or give the topic here"
                )
            return None
        found = await self.query_message_by_unique_key(topic, msg_id)
        return found.messages[0] if found.messages else None

    async def view_message_by_queue_offset(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> MessageExt | None:
        """The message at ``offset`` of queue ``queue_id`` of ``broker_name`` (mqadmin
        queryMsgByOffset: a one-message pull as TOOLS_CONSUMER); None when there is none."""
        route = await self.examine_topic_route_info(topic)
        bd = route.broker(broker_name)
        addr = bd.select_broker_addr() if bd is not None else None
        if addr is None:
            raise AdminError(f"broker {broker_name} is not in the route of topic {topic}")
        header = PullMessageRequestHeader(
            consumer_group=MixAll.TOOLS_CONSUMER_GROUP,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=1,
            sys_flag=4,
            subscription="*",
            suspend_timeout_millis=0,
        )
        reply = await self._call(addr, pull_message(header), parse_pull)
        msgs = decode_messages(reply.body, broker_name) if reply.body else []
        return msgs[0] if msgs else None

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups that subscribe to ``topic`` or have offsets
        for it, across the brokers of its route (Java asks the first broker only)."""
        route = await self.examine_topic_route_info(topic)
        groups: set[str] = set()
        for b in route.broker_datas:
            addr = b.select_broker_addr()
            if addr:
                groups.update(await self._call(addr, query_topic_consume_by_who(topic), parse_group_list))
        return sorted(groups)
