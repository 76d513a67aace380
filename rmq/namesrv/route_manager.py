"""RouteInfoManager: who serves which topic, as the name server knows it.

Brokers register every 30 s with their whole topic table; clients ask for the route of one
topic at a time. Four tables, as in Java's ``RouteInfoManager``::

    topic_queue_table   topic        -> {broker_name: QueueData}
    broker_addr_table   broker_name  -> BrokerData(cluster, broker_name, {broker_id: addr})
    cluster_addr_table  cluster      -> {broker_name, ...}
    broker_live_table   broker_addr  -> BrokerLiveInfo(last_update, data_version, conn, ha addr)

A broker that has not registered for ``broker_channel_expired_seconds`` (120 s), or whose
connection closed, is removed from all four (``scan_not_active_broker``, ``on_channel_destroy``).

Everything runs on the event loop, so there is no lock: each method is atomic between awaits.
Route JSON is built here in Java's field names (wire-contract §4).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rmq.common.constants import PermName
from rmq.common.route import MASTER_ID, BrokerData, QueueData

__all__ = ["RouteInfoManager", "QueueData", "BrokerData", "BrokerLiveInfo", "RegisterBrokerResult", "MASTER_ID"]

log = logging.getLogger("rmq.namesrv")


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update: float
    data_version: dict
    conn: object | None
    ha_server_addr: str


@dataclass(slots=True)
class RegisterBrokerResult:
    """What a registering broker is told: where its master and HA peer are."""

    ha_server_addr: str = ""
    master_addr: str = ""


class RouteInfoManager:
    """The name server's routing tables (see module docstring).

    Args:
        broker_channel_expired_seconds: expiry of a silent broker (default 120 s).
    """

    def __init__(self, broker_channel_expired_seconds: float = 120.0):
        self.broker_channel_expired_seconds = broker_channel_expired_seconds
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}

    # -- registration ---------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_config_table: dict[str, dict] | None,
        data_version: dict | None,
        conn: object | None = None,
    ) -> RegisterBrokerResult:
        """Record (or refresh) one broker and, for a master, its topic table.

        ``topic_config_table`` maps topic → Java ``TopicConfig`` JSON (``readQueueNums``,
        ``writeQueueNums``, ``perm``, ``topicSysFlag``). When a master sends its table, topics
        it no longer lists lose this broker's queues, so a deleted topic disappears from
        routes on the next registration.
        """
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        first_register = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name)
            self.broker_addr_table[broker_name] = broker_data
        # One address per id: a broker that moved to another id (slave promoted) must not
        # stay listed twice (Java removes the old id with the same address).
        for bid, addr in list(broker_data.broker_addrs.items()):
            if addr == broker_addr and bid != broker_id:
                del broker_data.broker_addrs[bid]
        old_addr = broker_data.broker_addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            self.broker_live_table.pop(old_addr, None)
        broker_data.broker_addrs[broker_id] = broker_addr
        first_register = first_register or old_addr is None

        if topic_config_table is not None and broker_id == MASTER_ID:
            prev = self.broker_live_table.get(broker_addr)
            if first_register or prev is None or prev.data_version != data_version:
                self._update_topics_of_broker(broker_name, topic_config_table)

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            time.monotonic(), dict(data_version or {}), conn, ha_server_addr
        )
        if first_register:
            log.info("new broker registered: %s %s id=%d cluster=%s", broker_name, broker_addr, broker_id, cluster_name)

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master_addr = broker_data.broker_addrs.get(MASTER_ID)
            if master_addr:
                master_live = self.broker_live_table.get(master_addr)
                result.master_addr = master_addr
                result.ha_server_addr = master_live.ha_server_addr if master_live else ""
        return result

    def _update_topics_of_broker(self, broker_name: str, topic_config_table: dict[str, dict]) -> None:
        for topic, tc in topic_config_table.items():
            qd = QueueData(
                broker_name,
                int(tc.get("readQueueNums", 0)),
                int(tc.get("writeQueueNums", 0)),
                int(tc.get("perm", PermName.READ_WRITE)),
                int(tc.get("topicSysFlag", 0)),
            )
            queues = self.topic_queue_table.setdefault(topic, {})
            if queues.get(broker_name) != qd:
                if broker_name not in queues:
                    log.debug("new topic registered: %s on %s", topic, broker_name)
                queues[broker_name] = qd
        for topic in list(self.topic_queue_table):
            if topic not in topic_config_table:
                self._remove_topic_of_broker(topic, broker_name)

    def _remove_topic_of_broker(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues and queues.pop(broker_name, None) is not None:
            log.debug("topic %s removed from broker %s", topic, broker_name)
            if not queues:
                del self.topic_queue_table[topic]

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """Forget one broker address (UNREGISTER_BROKER, or expiry)."""
        self.broker_live_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            if broker_data.broker_addrs.get(broker_id) == broker_addr:
                del broker_data.broker_addrs[broker_id]
            else:
                for bid, addr in list(broker_data.broker_addrs.items()):
                    if addr == broker_addr:
                        del broker_data.broker_addrs[bid]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[broker_name]
                names = self.cluster_addr_table.get(cluster_name)
                if names is not None:
                    names.discard(broker_name)
                    if not names:
                        del self.cluster_addr_table[cluster_name]
                for topic in list(self.topic_queue_table):
                    self._remove_topic_of_broker(topic, broker_name)
        log.info("broker unregistered: %s %s id=%d", broker_name, broker_addr, broker_id)

    def _remove_by_addr(self, broker_addr: str, why: str) -> None:
        for broker_data in list(self.broker_addr_table.values()):
            for bid, addr in list(broker_data.broker_addrs.items()):
                if addr == broker_addr:
                    log.warning("broker %s (%s id=%d) removed: %s", broker_addr, broker_data.broker_name, bid, why)
                    self.unregister_broker(broker_data.cluster, broker_addr, broker_data.broker_name, bid)
                    return
        self.broker_live_table.pop(broker_addr, None)

    def scan_not_active_broker(self, now: float | None = None) -> list[str]:
        """Drop brokers silent for longer than the expiry; return their addresses."""
        now = time.monotonic() if now is None else now
        expired = [
            addr
            for addr, live in self.broker_live_table.items()
            if now - live.last_update > self.broker_channel_expired_seconds
        ]
        for addr in expired:
            live = self.broker_live_table.get(addr)
            if live is not None and live.conn is not None:
                close = getattr(live.conn, "close", None)
                if close is not None:
                    close()
            self._remove_by_addr(addr, f"no registration for {self.broker_channel_expired_seconds:.0f} s")
        return expired

    def on_channel_destroy(self, conn: object) -> None:
        """A connection closed: drop the broker that registered over it, if any."""
        for addr, live in list(self.broker_live_table.items()):
            if live.conn is conn:
                self._remove_by_addr(addr, "its connection closed")

    def delete_topic(self, topic: str) -> None:
        self.topic_queue_table.pop(topic, None)

    # -- queries --------------------------------------------------------------------------

    def pick_topic_route_data(self, topic: str) -> dict | None:
        """The route JSON of ``topic`` (wire-contract §4), or ``None`` when nobody serves it."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        broker_datas = []
        for name in sorted(queues):
            bd = self.broker_addr_table.get(name)
            if bd is not None and bd.broker_addrs:
                broker_datas.append(bd.to_json())
        if not broker_datas:
            return None
        return {
            "queueDatas": [queues[name].to_json() for name in sorted(queues)],
            "brokerDatas": broker_datas,
            "filterServerTable": {},
        }

    def get_all_cluster_info(self) -> dict:
        """Java ``ClusterInfo``: brokerAddrTable and clusterAddrTable."""
        return {
            "brokerAddrTable": {name: bd.to_json() for name, bd in sorted(self.broker_addr_table.items())},
            "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())},
        }

    def get_all_topic_list(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())

    def query_data_version(self, broker_addr: str) -> dict | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live else None
