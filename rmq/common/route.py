"""Route data as the name server sends it for GET_ROUTEINFO_BY_TOPIC (Java ``TopicRouteData``,
``QueueData``, ``BrokerData``): built by the name server, read by the SDK.

(The Spark connector keeps its own frozen, string-keyed route types: its workers are
synchronous and only ever read routes.)
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MASTER_ID", "QueueData", "BrokerData", "loads_fastjson"]

MASTER_ID = 0   # MixAll.MASTER_ID: the broker id of a master

_UNQUOTED_INT_KEY = re.compile(r'([{,])\s*(-?\d+)\s*:')


def loads_fastjson(text: str | bytes) -> object:
    """``json.loads`` that also reads fastjson's integer map keys, which Java writes unquoted
    (``{"brokerAddrs":{0:"addr"}}``): on a decode error they are quoted and parsing retried.
    Raises ``json.JSONDecodeError`` (a ValueError) when the text is still not JSON."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2":', text))


@dataclass(slots=True)
class QueueData:
    """One broker's queues of one topic (Java ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }

    @classmethod
    def from_json(cls, q: dict[str, Any]) -> QueueData:
        """Lenient: missing counts are 0, a missing perm is 6 (read | write), and Java's old
        misspelling ``topicSynFlag`` is read too. KeyError without ``brokerName``."""
        return cls(str(q["brokerName"]), int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)),
                   int(q.get("perm", 6)), int(q.get("topicSysFlag", q.get("topicSynFlag", 0)) or 0))


@dataclass(slots=True)
class BrokerData:
    """The addresses of one broker name, master (id 0) and slaves (Java ``BrokerData``)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Standard JSON: the numeric ids become string keys ("0"), which both ONS and CPP
        # accept, rather than fastjson's unquoted {0:"addr"} (Java RemotingSerializable.toJson).
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
        }

    @classmethod
    def from_json(cls, b: dict[str, Any]) -> BrokerData:
        """Broker ids become ints (they arrive as "0" or, via fastjson, 0)."""
        return cls(str(b.get("cluster", "")), str(b["brokerName"]),
                   {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()})

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's."""
        return self.broker_addrs.get(MASTER_ID) or next(iter(self.broker_addrs.values()), None)
