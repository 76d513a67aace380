"""Route data as the name server sends it (Java ``TopicRouteData``, ``QueueData``,
``BrokerData``, ``ClusterInfo``): built by the name server, read by the SDK, the Spark
connector, the admin CLI and the bench harness.

Broker ids are ints here (``MixAll.MASTER_ID`` is 0) whatever the JSON carried ("0" or, from
fastjson, an unquoted 0).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from rmq.common import fastjson
from rmq.common.constants import MixAll, PermName
from rmq.common.lazy_dataclass import lazy_dataclass

__all__ = ["MASTER_ID", "BrokerData", "ClusterInfo", "QueueData", "TopicRouteData"]

MASTER_ID = MixAll.MASTER_ID  # the broker id of a master


@lazy_dataclass(slots=True)
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
        return cls(
            str(q["brokerName"]),
            int(q.get("readQueueNums", 0)),
            int(q.get("writeQueueNums", 0)),
            int(q.get("perm", PermName.READ_WRITE)),
            int(q.get("topicSysFlag", q.get("topicSynFlag", 0)) or 0),
        )


@lazy_dataclass(slots=True)
class BrokerData:
    """The addresses of one broker name, master (id 0) and slaves (Java ``BrokerData``)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Standard JSON: the numeric ids become string keys ("0"), which both ONS and CPP
        # accept (their JSON readers take quoted keys), rather than fastjson's unquoted {0:"addr"}.
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
        }

    @classmethod
    def from_json(cls, b: dict[str, Any]) -> BrokerData:
        """Broker ids become ints (they arrive as "0" or, via fastjson, 0)."""
        return cls(
            str(b.get("cluster", "")),
            str(b["brokerName"]),
            {int(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()},
        )

    def select_broker_addr(self) -> str | None:
        """The master's address, else any slave's."""
        return self.broker_addrs.get(MASTER_ID) or next(iter(self.broker_addrs.values()), None)

    @property
    def master_addr(self) -> str | None:
        """The master's address (broker id 0), None when the master is down."""
        return self.broker_addrs.get(MASTER_ID)


@lazy_dataclass(slots=True)
class TopicRouteData:
    """The reply body of GET_ROUTEINFO_BY_TOPIC (Java ``TopicRouteData``), sorted by broker name."""

    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    order_topic_conf: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicRouteData:
        qds = [QueueData.from_json(q) for q in d.get("queueDatas") or []]
        bds = [BrokerData.from_json(b) for b in d.get("brokerDatas") or []]
        qds.sort(key=lambda q: q.broker_name)
        bds.sort(key=lambda b: b.broker_name)
        conf = d.get("orderTopicConf")
        return cls(qds, bds, None if conf is None else str(conf))

    @classmethod
    def from_body(cls, body: str | bytes | bytearray | memoryview) -> TopicRouteData:
        """Parse the JSON body (fastjson's unquoted integer keys accepted). Raises ValueError,
        KeyError, TypeError or AttributeError when it is not a route."""
        d = fastjson.loads(body)
        if not isinstance(d, dict):
            raise TypeError(f"a route is a JSON object, not {type(d).__name__}")
        return cls.from_json(d)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "queueDatas": [q.to_json() for q in self.queue_datas],
            "brokerDatas": [b.to_json() for b in self.broker_datas],
        }
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        return d

    def same_as(self, other: TopicRouteData | None) -> bool:
        """Java ``topicRouteDataIsChange`` negated: the same queues, brokers and order conf."""
        return other is not None and self == other

    def broker(self, broker_name: str) -> BrokerData | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b
        return None

    def master_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name`` in this route, None when it has none."""
        b = self.broker(broker_name)
        return None if b is None else b.master_addr

    def readable_queues(self) -> list[tuple[str, int]]:
        """``(broker_name, queue_id)`` of every readable queue whose broker has a master, sorted."""
        return sorted(
            (q.broker_name, i)
            for q in self.queue_datas
            if PermName.is_readable(q.perm) and self.master_addr(q.broker_name)
            for i in range(q.read_queue_nums)
        )

    def writable_queues(self) -> list[tuple[str, int]]:
        """``(broker_name, queue_id)`` of every writable queue whose broker has a master, sorted."""
        return sorted(
            (q.broker_name, i)
            for q in self.queue_datas
            if PermName.is_writeable(q.perm) and self.master_addr(q.broker_name)
            for i in range(q.write_queue_nums)
        )


@lazy_dataclass(slots=True)
class ClusterInfo:
    """The reply body of GET_BROKER_CLUSTER_INFO (Java ``ClusterInfo``)."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_body(cls, body: str | bytes | bytearray | memoryview) -> ClusterInfo:
        """Parse the JSON body. Raises ValueError, KeyError, TypeError or AttributeError when
        it is not a cluster info."""
        d = fastjson.loads(body or b"{}")
        if not isinstance(d, dict):
            raise TypeError(f"a cluster info is a JSON object, not {type(d).__name__}")
        brokers = {
            str(name): BrokerData.from_json({"brokerName": name, **bd})
            for name, bd in (d.get("brokerAddrTable") or {}).items()
        }
        clusters = {
            str(c): sorted(str(n) for n in names or ()) for c, names in (d.get("clusterAddrTable") or {}).items()
        }
        return cls(brokers, clusters)

    def master_addrs(self, cluster: str | None = None) -> dict[str, str]:
        """brokerName → master address, of every broker (or of ``cluster``'s) that has a master.
        Raises KeyError for a cluster the name server does not know."""
        names = self.cluster_addr_table[cluster] if cluster is not None else list(self.broker_addr_table)
        out = {}
        for n in sorted(names):
            b = self.broker_addr_table.get(n)
            addr = None if b is None else b.master_addr
            if addr:
                out[n] = addr
        return out

    def names(self) -> set[str]:
        """Cluster and broker names: RocketMQ lists them among the topics (the name server's
        topic list includes them, and ``<cluster>_REPLY_TOPIC``)."""
        out = set(self.broker_addr_table)
        for cluster, brokers in self.cluster_addr_table.items():
            out.add(cluster)
            out.add(MixAll.get_reply_topic(cluster))
            out.update(brokers)
        return out
