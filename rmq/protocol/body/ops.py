"""Bodies of the operations codes: the KV table (GET_KVLIST_BY_NAMESPACE 219 and
GET_BROKER_RUNTIME_INFO 28, Java ``KVTable``), a consume
queue's units (QUERY_CONSUME_QUEUE 321, Java ``QueryConsumeQueueResponseBody`` /
``ConsumeQueueData``) and the metadata dumps a slave syncs from its master
(GET_ALL_CONSUMER_OFFSET 43, Java ``ConsumerOffsetManager.encode``; GET_ALL_DELAY_OFFSET 45,
Java ``DelayOffsetSerializeWrapper``).

Each type writes what the broker or name server sends (``to_json`` / ``encode``, Java's field
names) and reads what Java sends (``from_json`` / ``decode``; fastjson writes integer map keys
unquoted, which :func:`rmq.common.fastjson.loads` reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import dumps_json, json_object

__all__ = [
    "ConsumeQueueData",
    "ConsumerOffsetTable",
    "DelayOffsetTable",
    "KVTable",
    "QueryConsumeQueueResponseBody",
]


@lazy_dataclass(frozen=True, slots=True)
class KVTable:
    """Java ``KVTable`` (``{"table": {...}}``): one namespace of the name server's KV config
    (GET_KVLIST_BY_NAMESPACE) and the broker's runtime figures (GET_BROKER_RUNTIME_INFO).
    :meth:`decode` reads a ``null`` value as ``""``."""

    table: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps_json({"table": self.table})

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> KVTable:
        d = json_object(body, "KVTable")
        table = d.get("table") or {}
        if not isinstance(table, dict):
            raise ValueError("KVTable: table is not an object")
        return cls({str(k): "" if v is None else str(v) for k, v in table.items()})


@lazy_dataclass(frozen=True, slots=True)
class ConsumeQueueData:
    """One ConsumeQueue unit (Java ``ConsumeQueueData``): where the message is in the CommitLog
    (``physic_offset``, ``physic_size``), its tag hash (``tags_code``), and, for units with an
    extension (not written by rmq), the extension as JSON, its filter bit map, whether the
    queried group's filter matches it (``eval``) and a note (``msg``)."""

    physic_offset: int
    physic_size: int
    tags_code: int
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "eval": self.eval,
            "physicOffset": self.physic_offset,
            "physicSize": self.physic_size,
            "tagsCode": self.tags_code,
        }
        for wire, v in (("extendDataJson", self.extend_data_json), ("bitMap", self.bit_map), ("msg", self.msg)):
            if v is not None:
                d[wire] = v
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConsumeQueueData:
        def opt(k: str) -> str | None:
            v = d.get(k)
            return None if v is None else str(v)

        return cls(
            int(d.get("physicOffset", 0)),
            int(d.get("physicSize", 0)),
            int(d.get("tagsCode", 0)),
            opt("extendDataJson"),
            opt("bitMap"),
            bool(d.get("eval", False)),
            opt("msg"),
        )

    def __str__(self) -> str:
        """As Java's ``ConsumeQueueData.toString`` (what mqadmin queryCq prints)."""
        return (
            f"ConsumeQueueData{{physicOffset={self.physic_offset}, physicSize={self.physic_size}, "
            f"tagsCode={self.tags_code}, extendDataJson='{_null(self.extend_data_json)}', "
            f"bitMap='{_null(self.bit_map)}', eval={'true' if self.eval else 'false'}, msg='{_null(self.msg)}'}}"
        )


def _null(v: str | None) -> str:
    return "null" if v is None else v


@lazy_dataclass(frozen=True, slots=True)
class QueryConsumeQueueResponseBody:
    """QUERY_CONSUME_QUEUE's answer: the queue's index range and the units asked for; with a
    consumer group, the group's subscription of the topic (Java ``SubscriptionData`` JSON,
    None when the group is not online) and its filter data (text)."""

    max_queue_index: int
    min_queue_index: int
    queue_data: list[ConsumeQueueData] | None = None
    subscription_data: dict[str, Any] | None = None
    filter_data: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"maxQueueIndex": self.max_queue_index, "minQueueIndex": self.min_queue_index}
        if self.queue_data is not None:
            d["queueData"] = [u.to_json() for u in self.queue_data]
        if self.subscription_data is not None:
            d["subscriptionData"] = self.subscription_data
        if self.filter_data is not None:
            d["filterData"] = self.filter_data
        return d

    def encode(self) -> bytes:
        return dumps_json(self.to_json())

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> QueryConsumeQueueResponseBody:
        d = json_object(body, "QueryConsumeQueueResponseBody")
        try:
            units = d.get("queueData")
            sub = d.get("subscriptionData")
            return cls(
                int(d.get("maxQueueIndex", 0)),
                int(d.get("minQueueIndex", 0)),
                None if units is None else [ConsumeQueueData.from_json(u) for u in units],
                dict(sub) if isinstance(sub, dict) else None,
                None if d.get("filterData") is None else str(d["filterData"]),
            )
        except (TypeError, AttributeError) as e:
            raise ValueError(f"malformed QueryConsumeQueueResponseBody: {e}") from None


@lazy_dataclass(frozen=True, slots=True)
class ConsumerOffsetTable:
    """GET_ALL_CONSUMER_OFFSET's answer: ``{"topic@group": {queue_id: offset}}`` (Java
    ``ConsumerOffsetManager`` JSON, ``offsetTable``)."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps_json({"offsetTable": self.offset_table})

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> ConsumerOffsetTable:
        d = json_object(body, "ConsumerOffsetManager")
        try:
            return cls(
                {str(k): {int(q): int(o) for q, o in v.items()} for k, v in (d.get("offsetTable") or {}).items()}
            )
        except (TypeError, AttributeError) as e:
            raise ValueError(f"malformed ConsumerOffsetManager body: {e}") from None


@lazy_dataclass(frozen=True, slots=True)
class DelayOffsetTable:
    """GET_ALL_DELAY_OFFSET's answer: ``{delay_level: offset}`` in ``SCHEDULE_TOPIC_XXXX`` (Java
    ``DelayOffsetSerializeWrapper``, ``offsetTable``)."""

    offset_table: dict[int, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps_json({"offsetTable": self.offset_table})

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> DelayOffsetTable:
        d = json_object(body, "DelayOffsetSerializeWrapper")
        try:
            return cls({int(k): int(v) for k, v in (d.get("offsetTable") or {}).items()})
        except (TypeError, AttributeError) as e:
            raise ValueError(f"malformed DelayOffsetSerializeWrapper body: {e}") from None
