"""The metadata dumps a slave copies from its master (Java ``SlaveSynchronize``):
GET_ALL_TOPIC_CONFIG 21 (Java ``TopicConfigSerializeWrapper``) and
GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201 (Java ``SubscriptionGroupWrapper``). The other two,
GET_ALL_CONSUMER_OFFSET 43 and GET_ALL_DELAY_OFFSET 45, are in :mod:`rmq.protocol.body.ops`.

The entries stay JSON objects (Java's field names): the broker's managers turn them into their
own ``TopicConfig`` / ``SubscriptionGroupConfig`` and check each one. The decoders check only
the shape: a table that is an object of objects and a ``dataVersion`` with integer
``timestamp`` and ``counter``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from rmq.common.lazy_dataclass import lazy_dataclass
from rmq.protocol.body import dumps_json, json_object

__all__ = ["DataVersionData", "SubscriptionGroupWrapper", "TopicConfigWrapper"]


@lazy_dataclass(frozen=True, slots=True)
class DataVersionData:
    """Java ``DataVersion``: the table's last change (``timestamp`` ms) and change counter."""

    timestamp: int = 0
    counter: int = 0

    def to_json(self) -> dict[str, int]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json(cls, d: object) -> DataVersionData:
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise ValueError("dataVersion is not an object")
        return cls(int(d.get("timestamp", 0)), int(d.get("counter", 0)))


def _table(d: Mapping[str, Any], key: str, what: str) -> dict[str, dict[str, Any]]:
    table = d.get(key)
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise ValueError(f"{what}.{key} is not an object")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        if not isinstance(entry, Mapping):
            raise ValueError(f"{what}.{key}[{str(name)[:80]!r}] is not an object")
        out[str(name)] = dict(entry)
    return out


@lazy_dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """GET_ALL_TOPIC_CONFIG's answer: ``{"topicConfigTable": {topic: TopicConfig JSON},
    "dataVersion": {...}}``."""

    topic_config_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_version: DataVersionData = field(default_factory=DataVersionData)

    def encode(self) -> bytes:
        return dumps_json({"dataVersion": self.data_version.to_json(), "topicConfigTable": self.topic_config_table})

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> TopicConfigWrapper:
        d = json_object(body, "TopicConfigSerializeWrapper")
        return cls(
            _table(d, "topicConfigTable", "TopicConfigSerializeWrapper"),
            DataVersionData.from_json(d.get("dataVersion")),
        )


@lazy_dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's answer: ``{"subscriptionGroupTable": {group:
    SubscriptionGroupConfig JSON}, "dataVersion": {...}}``."""

    subscription_group_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    data_version: DataVersionData = field(default_factory=DataVersionData)

    def encode(self) -> bytes:
        return dumps_json(
            {"dataVersion": self.data_version.to_json(), "subscriptionGroupTable": self.subscription_group_table}
        )

    @classmethod
    def decode(cls, body: bytes | memoryview | None) -> SubscriptionGroupWrapper:
        d = json_object(body, "SubscriptionGroupWrapper")
        return cls(
            _table(d, "subscriptionGroupTable", "SubscriptionGroupWrapper"),
            DataVersionData.from_json(d.get("dataVersion")),
        )
