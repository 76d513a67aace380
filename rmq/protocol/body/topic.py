"""Topic and cluster bodies of the admin protocol (Java ``TopicStatsTable``, ``TopicOffset``,
``TopicList``, ``GroupList``, the tools' ``RebalanceResult``, ``OffsetMovedEvent``).

``to_json()`` gives Java's field names (what our broker and name server send), ``from_json``
reads what Java's send; :meth:`TopicStatsTable.from_body` reads fastjson's ``MessageQueue``
object keys.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from rmq.common import fastjson
from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import json_object
from rmq.protocol.body._mq import dumps_mq_map, mq_of
from rmq.types import MessageQueue

__all__ = ["GroupList", "OffsetMovedEvent", "RebalanceResult", "TopicList", "TopicOffset", "TopicStatsTable"]


def _object(d: object, what: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise ValueError(f"{what} is a JSON object, not {type(d).__name__}")
    return d


@lazy_dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue's offsets (Java ``TopicOffset``): the smallest offset still stored, the next
    offset to be written, and when the last message was stored (ms, 0 when the queue is empty)."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "minOffset": self.min_offset,
            "maxOffset": self.max_offset,
            "lastUpdateTimestamp": self.last_update_timestamp,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TopicOffset:
        d = _object(d, "a TopicOffset")
        return cls(int(d.get("minOffset", 0)), int(d.get("maxOffset", 0)), int(d.get("lastUpdateTimestamp", 0)))


@lazy_dataclass(frozen=True, slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO's body (Java ``TopicStatsTable``): offsets per queue."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def to_body(self) -> bytes:
        """fastjson's bytes: the map keyed by MessageQueue objects (not standard JSON; it is what
        Java's tools parse)."""
        return ('{"offsetTable":' + dumps_mq_map(self.offset_table, TopicOffset.to_json) + "}").encode()

    @classmethod
    def from_body(cls, body: bytes | str) -> TopicStatsTable:
        """Parse fastjson's body; ValueError when it is not a TopicStatsTable."""
        d = json_object(body, "TopicStatsTable")
        table = _object(d.get("offsetTable") or {}, "offsetTable")
        try:
            return cls({mq_of(k): TopicOffset.from_json(v) for k, v in table.items()})
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed TopicStatsTable: {e!r}") from None


@lazy_dataclass(frozen=True, slots=True)
class TopicList:
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_TOPICS_BY_CLUSTER's body (Java ``TopicList``)."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"topicList": list(self.topic_list)}
        if self.broker_addr is not None:
            d["brokerAddr"] = self.broker_addr
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TopicList:
        d = _object(d, "a TopicList")
        addr = d.get("brokerAddr")
        return cls([str(t) for t in d.get("topicList") or ()], None if addr is None else str(addr))


@lazy_dataclass(frozen=True, slots=True)
class RebalanceResult:
    """What mqadmin allocateMQ prints (Java tools ``RebalanceResult``): each client ip and the
    queues AllocateMessageQueueAveragely gives it."""

    result: dict[str, list[MessageQueue]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"result": {ip: [mq.to_json() for mq in mqs] for ip, mqs in self.result.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RebalanceResult:
        d = _object(d, "a RebalanceResult")
        table: Mapping[str, Sequence[Mapping[str, Any]]] = _object(d.get("result") or {}, "result")
        return cls({str(ip): [MessageQueue.from_json(m) for m in mqs] for ip, mqs in table.items()})


@lazy_dataclass
class GroupList:
    """Java ``GroupList``: a set of consumer group names (sorted here, so replies are stable);
    QUERY_TOPIC_CONSUME_BY_WHO (300) answers with the groups consuming a topic."""

    group_list: list[str] = field(default_factory=list)

    def encode(self) -> bytes:
        return json.dumps(
            {"groupList": sorted(set(self.group_list))}, separators=(",", ":"), ensure_ascii=False
        ).encode()

    @classmethod
    def decode(cls, body: bytes | None) -> GroupList:
        """Raises ValueError when ``body`` is not a GroupList."""
        groups = json_object(body, "GroupList").get("groupList")
        if groups is None:
            groups = []
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ValueError("GroupList body: groupList must be a list of names")
        return cls(list(groups))


@lazy_dataclass(frozen=True, slots=True)
class OffsetMovedEvent:
    """What a master writes to ``OFFSET_MOVED_EVENT`` when it answers PULL_OFFSET_MOVED (Java
    ``OffsetMovedEvent``, ``PullMessageProcessor.generateOffsetMovedEvent``): the group, its
    queue, the offset it asked for and the one it was moved to."""

    consumer_group: str
    message_queue: MessageQueue
    offset_request: int
    offset_new: int

    def to_json(self) -> dict[str, Any]:
        # fastjson writes a bean's properties in alphabetical order
        mq = self.message_queue
        return {
            "consumerGroup": self.consumer_group,
            "messageQueue": {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
            "offsetNew": self.offset_new,
            "offsetRequest": self.offset_request,
        }

    def to_body(self) -> bytes:
        """The message body as Java's ``RemotingSerializable.encode`` writes it."""
        return fastjson.dumps(self.to_json())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OffsetMovedEvent:
        d = _object(d, "an OffsetMovedEvent")
        return cls(
            str(d["consumerGroup"]),
            MessageQueue.from_json(_object(d["messageQueue"], "its messageQueue")),
            int(d["offsetRequest"]),
            int(d["offsetNew"]),
        )

    @classmethod
    def from_body(cls, body: bytes | bytearray | memoryview | str) -> OffsetMovedEvent:
        return cls.from_json(json_object(body, "an OffsetMovedEvent"))
