"""The controller's Prometheus ``/metrics`` (``metricsPort``; Java 5.3.3
``ControllerMetricsManager``'s families where it has them, ``rocketmq_controller_`` before each):

* ``rocketmq_controller_role`` (gauge, ``address``): 1 while this controller leads, else 0;
* ``rocketmq_controller_active_broker_num`` (gauge, ``cluster, broker_set``): replicas alive;
* ``rocketmq_controller_election_total`` (counter, ``broker_set, election_result``:
  ``new_master_elected`` / ``keep_current_master`` / ``no_master_elected``);
* ``rocketmq_controller_request_total`` (counter, ``request_type, request_handle_status``);
* ``rocketmq_controller_request_latency`` (histogram, ``request_type``; µs, Java's buckets);
* Java's ``dledger_op_total`` / ``dledger_op_latency`` are for its replicated log; ours is etcd:
  ``rocketmq_controller_etcd_op_total`` (counter, ``etcd_operation``: put / delete of a broker
  name's record, ``etcd_operation_status``: success / fenced / failed) and
  ``rocketmq_controller_etcd_op_latency`` (histogram, ``etcd_operation``; µs);
* ours, from the leader's records: ``rocketmq_controller_master_epoch``,
  ``rocketmq_controller_sync_state_set_epoch`` and ``rocketmq_controller_sync_state_set_size``
  (gauges, ``cluster, broker_set``), ``rocketmq_controller_fenced_writes_total`` and
  ``rocketmq_controller_leader_changes_total`` (this controller became leader or stepped down).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from rmq.common.metrics import render
from rmq.controller.manager import LATENCY_BUCKETS_US, Latency
from rmq.remoting.metrics_http import MetricsHttpServer

if TYPE_CHECKING:
    from rmq.controller.manager import ControllerManager

__all__ = ["ControllerMetrics", "families"]


def families(m: ControllerManager) -> list[Metric]:
    """The metric families of ``m`` now (cheap: a walk of its in-memory tables)."""
    role = GaugeMetricFamily("rocketmq_controller_role", "1 while this controller is the leader", labels=["address"])
    role.add_metric([m.address], 1.0 if m.is_leader() else 0.0)
    active = GaugeMetricFamily(
        "rocketmq_controller_active_broker_num",
        "replicas alive (heartbeat within its timeout)",
        labels=["cluster", "broker_set"],
    )
    epoch = GaugeMetricFamily(
        "rocketmq_controller_master_epoch", "the broker name's master epoch", labels=["cluster", "broker_set"]
    )
    sss_epoch = GaugeMetricFamily(
        "rocketmq_controller_sync_state_set_epoch",
        "the broker name's SyncStateSet epoch",
        labels=["cluster", "broker_set"],
    )
    sss_size = GaugeMetricFamily(
        "rocketmq_controller_sync_state_set_size",
        "replicas in the broker name's SyncStateSet",
        labels=["cluster", "broker_set"],
    )
    counts = m.heartbeats.active_per_name()
    if m.is_leader():
        for name, s in sorted(m.states.items()):
            labels = [s.cluster_name, name]
            epoch.add_metric(labels, float(s.master_epoch))
            sss_epoch.add_metric(labels, float(s.sync_state_set_epoch))
            sss_size.add_metric(labels, float(len(s.sync_state_set)))
            active.add_metric(labels, float(counts.get(name, 0)))
    elections = CounterMetricFamily(
        "rocketmq_controller_election", "elections by outcome", labels=["broker_set", "election_result"]
    )
    for (name, result), n in sorted(m.stats.elections.items()):
        elections.add_metric([name, result], float(n))
    requests = CounterMetricFamily(
        "rocketmq_controller_request", "requests served", labels=["request_type", "request_handle_status"]
    )
    for (kind, status), n in sorted(m.stats.requests.items()):
        requests.add_metric([kind, status], float(n))
    fenced = CounterMetricFamily("rocketmq_controller_fenced_writes", "state writes refused by etcd (a deposed leader)")
    fenced.add_metric([], float(m.stats.fenced_writes))
    leader_changes = CounterMetricFamily(
        "rocketmq_controller_leader_changes", "times this controller became the leader or stepped down"
    )
    leader_changes.add_metric([], float(m.stats.leader_changes))
    latency = HistogramMetricFamily(
        "rocketmq_controller_request_latency",
        "time to serve a request that needs the leader, microseconds",
        labels=["request_type"],
    )
    for kind, h in sorted(m.stats.request_latency.items()):
        latency.add_metric([kind], _buckets(h), h.total)
    etcd_ops = CounterMetricFamily(
        "rocketmq_controller_etcd_op",
        "etcd transactions writing a broker name's record, by outcome",
        labels=["etcd_operation", "etcd_operation_status"],
    )
    for (kind, status), n in sorted(m.stats.etcd_ops.items()):
        etcd_ops.add_metric([kind, status], float(n))
    etcd_latency = HistogramMetricFamily(
        "rocketmq_controller_etcd_op_latency",
        "time of an etcd transaction writing a broker name's record, microseconds",
        labels=["etcd_operation"],
    )
    for kind, h in sorted(m.stats.etcd_latency.items()):
        etcd_latency.add_metric([kind], _buckets(h), h.total)
    return [
        role,
        active,
        epoch,
        sss_epoch,
        sss_size,
        elections,
        requests,
        fenced,
        leader_changes,
        latency,
        etcd_ops,
        etcd_latency,
    ]


def _buckets(h: Latency) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs of ``h``, +Inf last (prometheus_client's form)."""
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*LATENCY_BUCKETS_US, float("inf")), h.counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
    return out


class ControllerMetrics:
    """``/metrics`` of one controller on ``metricsHost`` (default ``listenHost``):``metricsPort``."""

    def __init__(self, manager: ControllerManager) -> None:
        self.m = manager
        c = manager.config
        self.server = MetricsHttpServer(
            c.metrics_host or c.listen_host, c.metrics_port, self._render, name="controller"
        )

    async def _render(self) -> bytes:
        return render(families(self.m))

    async def start(self) -> bool:
        return await self.server.start()

    async def close(self) -> None:
        await self.server.close()
