"""Bodies of the broker statistics requests (Java ``org.apache.rocketmq.common.protocol.body``:
``BrokerStatsData`` / ``BrokerStatsItem`` of VIEW_BROKER_STATS_DATA, ``ConsumeStats`` /
``OffsetWrapper`` of GET_CONSUME_STATS and ``ConsumeStatsList`` of GET_BROKER_CONSUME_STATS).
GET_BROKER_RUNTIME_INFO's ``KVTable`` is :class:`rmq.protocol.body.ops.KVTable`; the properties
text of GET/UPDATE_BROKER_CONFIG is :func:`rmq.config.format_properties` /
:func:`~rmq.config.parse_properties`.

``ConsumeStats.offsetTable`` is a Java ``Map<MessageQueue, OffsetWrapper>``, which fastjson
writes with JSON objects as keys (``{{"brokerName":"b","queueId":0,"topic":"T"}:{…}}``):
:meth:`ConsumeStats.encode` writes that and :func:`rmq.common.fastjson.loads` reads it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import json_object
from rmq.protocol.body._mq import dumps_mq_map, mq_of
from rmq.types import MessageQueue

__all__ = [
    "BrokerStatsData",
    "BrokerStatsItem",
    "ConsumeStats",
    "ConsumeStatsList",
    "OffsetWrapper",
]


def _num(d: Mapping[str, Any], key: str, kind: type = int) -> Any:
    v = d.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{key} is not a number: {str(v)[:100]!r}")
    return kind(v)


@lazy_dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of a stats item (Java ``BrokerStatsItem``): the sum over the window, its rate
    per second and the average per call (``avgpt``)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BrokerStatsItem:
        return cls(_num(d, "sum"), _num(d, "tps", float), _num(d, "avgpt", float))


@lazy_dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA's answer (Java ``BrokerStatsData``): the minute, hour and day
    windows of one stats item."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def to_json(self) -> dict[str, Any]:
        return {
            "statsDay": self.stats_day.to_json(),
            "statsHour": self.stats_hour.to_json(),
            "statsMinute": self.stats_minute.to_json(),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> BrokerStatsData:
        def item(key: str) -> BrokerStatsItem:
            v = d.get(key) or {}
            if not isinstance(v, Mapping):
                raise ValueError(f"{key} is not an object")
            return BrokerStatsItem.from_json(v)

        return cls(item("statsMinute"), item("statsHour"), item("statsDay"))

    def sum_24h(self) -> int:
        """Java ``StatsAllSubCommand.compute24HourSum``: the day's sum, else the hour's, else
        the minute's."""
        for w in (self.stats_day, self.stats_hour, self.stats_minute):
            if w.sum != 0:
                return w.sum
        return 0


@lazy_dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue's offsets in ConsumeStats (Java ``OffsetWrapper``)."""

    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0

    @property
    def diff(self) -> int:
        """Messages not consumed yet."""
        return self.broker_offset - self.consumer_offset

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OffsetWrapper:
        return cls(_num(d, "brokerOffset"), _num(d, "consumerOffset"), _num(d, "lastTimestamp"))


@lazy_dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A group's progress on one broker (Java ``ConsumeStats``): per queue offsets, and the
    group's pull rate over the last minute (``consumeTps``, Java's GROUP_GET_NUMS tps)."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        """Java ``computeTotalDiff``: broker offset minus consumer offset over every queue."""
        return sum(o.broker_offset - o.consumer_offset for o in self.offset_table.values())

    def encode(self) -> str:
        """The fastjson text (object keys), as Java's broker writes it."""
        table = dumps_mq_map(self.offset_table, OffsetWrapper.to_json, sort=False)
        return f'{{"consumeTps":{json.dumps(self.consume_tps)},"offsetTable":{table}}}'

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConsumeStats:
        """From :func:`rmq.common.fastjson.loads` output."""
        raw = d.get("offsetTable") or {}
        if not isinstance(raw, Mapping):
            raise ValueError("offsetTable is not an object")
        table = {mq_of(k): OffsetWrapper.from_json(v) for k, v in raw.items()}
        return cls(table, _num(d, "consumeTps", float))

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> ConsumeStats:
        d = json_object(body, "ConsumeStats")
        return cls.from_json(d)


@lazy_dataclass(frozen=True, slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS's answer (Java ``ConsumeStatsList``): for every subscription
    group of the broker, one ConsumeStats per topic it has offsets on; ``total_diff`` sums
    their backlogs."""

    broker_addr: str = ""
    total_diff: int = 0
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)

    def encode(self) -> str:
        groups = ",".join(
            "{"
            + ",".join(json.dumps(g) + ":[" + ",".join(cs.encode() for cs in lst) + "]" for g, lst in entry.items())
            + "}"
            for entry in self.consume_stats_list
        )
        return (
            f'{{"brokerAddr":{json.dumps(self.broker_addr)},"consumeStatsList":[{groups}],'
            f'"totalDiff":{self.total_diff}}}'
        )

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> ConsumeStatsList:
        d = json_object(body, "ConsumeStatsList")
        entries = d.get("consumeStatsList") or []
        if not isinstance(entries, list):
            raise ValueError("consumeStatsList is not a list")
        out: list[dict[str, list[ConsumeStats]]] = []
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise ValueError("a consumeStatsList entry is not an object")
            out.append({str(g): [ConsumeStats.from_json(cs) for cs in (lst or [])] for g, lst in entry.items()})
        return cls(str(d.get("brokerAddr") or ""), _num(d, "totalDiff"), out)

    def groups(self) -> dict[str, list[ConsumeStats]]:
        """``{group: [ConsumeStats, ...]}`` over every entry."""
        out: dict[str, list[ConsumeStats]] = {}
        for entry in self.consume_stats_list:
            for g, lst in entry.items():
                out.setdefault(g, []).extend(lst)
        return out
