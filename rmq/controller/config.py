"""``rmq controller``'s settings: Java 5.3.3 ``ControllerConfig``'s names where they apply, plus
what running on etcd needs.

Java's DLedger and JRaft settings (``controllerType``, ``controllerDLegerGroup``,
``controllerDLegerPeers``, ``controllerDLegerSelfId``, ``controllerStorePath``,
``mappedFileSize``, ``jRaft*``) do not apply: the consensus is etcd's, and the controllers are
peers of no fixed membership. ``isProcessReadEvent`` does not apply either (every read is
answered from the state the leader loaded from etcd when it took over, kept current by its own
fenced writes).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.common.settings import setting

__all__ = ["ControllerConfig"]


def _check_etcd(value: object) -> str | None:
    from rmq.controller.etcd import parse_endpoints

    try:
        parse_endpoints(str(value))
    except ValueError as e:
        return str(e)
    return None


@dataclass(slots=True)
class ControllerConfig:
    """Settings of one controller process.

    Attributes:
        listen_host: address to bind (127.0.0.1).
        listen_port: the controller's remoting port (9878, Java's ``controllerAddr`` default
            port in its quick start).
        etcd: etcd client URLs, ``http://h:p[,http://h:p...]`` (required).
        etcd_prefix: every key of this controller group is under it (``/rmq/controller/``
            + the cluster name); controllers sharing it are one group, one of them leading.
        cluster_name: the group's name, shown as GET_METADATA_INFO's ``group``
            (``DefaultCluster``).
        etcd_lease_ttl_seconds: the leader's lease; a leader silent for this long is replaced
            (2..60 s, default 5).
        etcd_timeout_ms: every etcd call's timeout (100..60 000 ms, default 2000).
        scan_not_active_broker_interval: ms between two scans for dead masters (Java 5000).
        controller_heart_beat_timeout_mills: a broker whose heartbeat carries no timeout is
            dead after this long without one (Java's broker default 10 000 ms); also how long
            a new leader waits, heartbeats arriving, before it declares any master dead.
        enable_elect_unclean_master: elect a replica outside the SyncStateSet when none in
            it is alive (Java, false: that loses acknowledged messages).
        notify_broker_role_changed: send NOTIFY_BROKER_ROLE_CHANGED after an election (Java,
            true).
        elect_master_max_retry_count: tries of an election the controller starts (Java 3).
        max_broker_names / max_replicas_per_broker_name: bounds of the state (1024, 16).
        max_broker_name_chars: the longest broker name accepted (127).
        max_requests_per_connection: requests in flight per connection (64).
        max_frame_bytes: the largest request (1 MiB; the controller's requests are small).
        idle_timeout: idle connections are closed (120 s).
        acl_enable: guard the writing codes with ``<rocketmqHome>/conf/plain_acl.yml`` as the
            name server does (false).
        rocketmq_home: where the accounts are (``$ROCKETMQ_HOME``).
        metrics_port: Prometheus ``/metrics`` (0 = off, the default).
        metrics_host: its address (default: ``listen_host``).
    """

    listen_host: str = "127.0.0.1"
    listen_port: int = setting(9878, lo=0, hi=65535)
    etcd: str = setting("", check=_check_etcd)
    etcd_prefix: str = ""
    cluster_name: str = "DefaultCluster"
    etcd_lease_ttl_seconds: int = setting(5, lo=2, hi=60, unit="s")
    etcd_timeout_ms: int = setting(2000, lo=100, hi=60_000, unit="ms")
    scan_not_active_broker_interval: int = setting(5000, lo=50, hi=3_600_000, unit="ms")
    controller_heart_beat_timeout_mills: int = setting(10_000, lo=100, hi=3_600_000, unit="ms")
    enable_elect_unclean_master: bool = setting(False, choices=(False, True))
    notify_broker_role_changed: bool = setting(True, choices=(False, True))
    elect_master_max_retry_count: int = setting(3, lo=1, hi=100)
    max_broker_names: int = setting(1024, lo=1, hi=1_000_000)
    max_replicas_per_broker_name: int = setting(16, lo=1, hi=1024)
    max_broker_name_chars: int = setting(127, lo=1, hi=1024)
    max_requests_per_connection: int = setting(64, lo=1, hi=65_536)
    max_frame_bytes: int = setting(1 << 20, lo=4096, hi=64 << 20)
    idle_timeout: float = setting(120.0, lo=0.001, hi=86_400.0, unit="s")
    acl_enable: bool = setting(False, choices=(False, True))
    rocketmq_home: str | None = None
    acl_watch_interval_ms: int = setting(500, lo=50, hi=60_000, unit="ms")
    metrics_port: int = setting(0, lo=0, hi=65535)
    metrics_host: str = ""

    def prefix(self) -> str:
        """The etcd key prefix, ending in ``/``."""
        p = self.etcd_prefix or f"/rmq/controller/{self.cluster_name}"
        return p if p.endswith("/") else p + "/"
