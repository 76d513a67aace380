"""Prometheus metrics shared by the broker's ``/metrics`` and ``rmq exporter``.

One table of metric families (:data:`FAMILIES`: name, type, help, label names) and one
:class:`MetricsBuilder` that both sources fill, so the broker (from its own tables) and the
exporter (from ``rmq.Admin`` replies) serve the same names with the same labels.

Names and labels:

* rocketmq-exporter's (Java ``RMQMetricsCollector``) where it has them: ``rocketmq_producer_tps``,
  ``rocketmq_producer_offset``, ``rocketmq_consumer_tps``, ``rocketmq_consumer_offset``,
  ``rocketmq_group_diff`` / ``_retrydiff`` / ``_dlqdiff`` (labels ``group, topic,
  countOfOnlineConsumers, msgModel``; the total over the group's queues of that topic, summed
  over brokers), ``rocketmq_group_count``, ``rocketmq_broker_tps`` / ``_qps``,
  ``rocketmq_brokeruntime_*`` (labels ``cluster, brokerIP, brokerHost, des, boottime,
  broker_version``, read from GET_BROKER_RUNTIME_INFO's table as the exporter's
  ``BrokerRuntimeStats`` does), ``rocketmq_group_consume_tps`` / ``_consume_total_offset``, and
  the clients' ``rocketmq_client_*`` (labels ``clientAddr, clientId, group, topic``: each
  online consumer's GET_CONSUMER_RUNNING_INFO statusTable, :data:`CLIENT_STATUS_FAMILIES`).
* RocketMQ 5's (Java ``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant``,
  ``RemotingMetricsConstant``) for what the 4.x exporter lacks: per-queue lag in messages and
  milliseconds (``rocketmq_consumer_lag_messages`` / ``_latency``, labels ``topic,
  consumer_group, broker, queue_id``), message and byte counters, connections, storage, half
  messages, DLQ sends, and ``rocketmq_rpc_latency`` (milliseconds, RocketMQ 5's buckets).

Rendering: :meth:`MetricsBuilder.families` gives prometheus_client's metric objects
(``GaugeMetricFamily`` …); :func:`render` writes such objects, and :meth:`MetricsBuilder.render`
writes the builder's tables directly, both in the text format 0.0.4 exactly as
``prometheus_client.generate_latest`` does (same sorted labels, escaping, float text), keeping
each series' label text between scrapes (:class:`LabelCache`). For 20 000 per-queue series
``generate_latest`` took 0.24 s here, the cached path 0.07 s. ``generate_latest`` stays the
reference: the tests compare them byte for byte.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    # prometheus_client (90 ms of imports: http.server, email, ...) is loaded when metrics are
    # first written: a broker with metricsPort=0 never does (docs/design.md "Start-up time").
    from prometheus_client.core import Metric

__all__ = [
    "BROKER_RUNTIME_LABELS",
    "CLIENT_LABELS",
    "CLIENT_STATUS_FAMILIES",
    "CONTENT_TYPE",
    "DEFAULT_MAX_QUEUE_SERIES",
    "FAMILIES",
    "GROUP_DIFF_LABELS",
    "QUEUE_LAG_LABELS",
    "RPC_LATENCY_BUCKETS_MS",
    "RUNTIME_KEYS",
    "Family",
    "LabelCache",
    "MetricsBuilder",
    "human_bytes_to_int",
    "msg_model_label",
    "render",
]


@cache
def _go_float_impl() -> Callable[[float], str]:
    from prometheus_client import utils

    return cast(Callable[[float], str], utils.floatToGoString)


def _go_float(value: float) -> str:
    """prometheus_client's float text (``1.0``, ``+Inf``, ``1e+20``), the one generate_latest writes."""
    return _go_float_impl()(value)


def _fmt(value: float) -> str:
    """:data:`_go_float` of a float, with its common case inline: below a million in size
    it is Python's ``repr`` (Go writes exponents only from 1e+06 up; NaN fails the test)."""
    return repr(value) if -1e6 < value < 1e6 else _go_float(value)


#: the Content-Type of :func:`render`'s text (Prometheus text format 0.0.4): prometheus_client's
#: ``exposition.CONTENT_TYPE_PLAIN_0_0_4``, written out so that serving needs no import of it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: per-queue series (``rocketmq_consumer_lag_*``) one scrape carries at most (broker property
#: ``metricsMaxQueueSeries``); the totals per group and topic are always complete.
DEFAULT_MAX_QUEUE_SERIES = 100_000

#: RocketMQ 5's RPC latency buckets (Java ``RemotingMetricsManager.getMetricsView``), in ms.
RPC_LATENCY_BUCKETS_MS: tuple[float, ...] = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)

# rocketmq-exporter's label sets (Java RMQMetricsCollector *_LABEL_NAMES)
GROUP_DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
GROUP_COUNT_LABELS = ("caddr", "localaddr", "group")
TOPIC_LABELS = ("cluster", "broker", "topic")
DLQ_TOPIC_LABELS = ("cluster", "broker", "group")
GROUP_NUMS_LABELS = ("cluster", "broker", "topic", "group")
BROKER_NUMS_LABELS = ("cluster", "brokerIP", "broker")
PRODUCER_COUNT_LABELS = ("cluster", "broker", "group")
BROKER_RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
CLIENT_LABELS = ("clientAddr", "clientId", "group", "topic")
# RocketMQ 5's, with the broker named as the exporter names it
QUEUE_LAG_LABELS = ("topic", "consumer_group", "broker", "queue_id")
BROKER_LABELS = ("cluster", "broker")


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family: ``kind`` is ``gauge``, ``counter`` (name ends in ``_total``) or
    ``histogram``."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]


def _g(name: str, help_: str, labels: tuple[str, ...]) -> Family:
    return Family(name, "gauge", help_, labels)


def _c(name: str, help_: str, labels: tuple[str, ...]) -> Family:
    return Family(name, "counter", help_, labels)


#: Timer messages' families ← GET_BROKER_RUNTIME_INFO key (Java's timer keys; the totals are rmq's).
_TIMER_KEYS: tuple[tuple[str, str], ...] = (
    ("rocketmq_timer_pending", "timerCongestNum"),
    ("rocketmq_timer_lag_seconds", "timerReadBehind"),
    ("rocketmq_timer_offset_behind", "timerOffsetBehind"),
    ("rocketmq_timer_enqueued_total", "timerEnqueuedTotal"),
    ("rocketmq_timer_dequeued_total", "timerDequeuedTotal"),
)

#: Java BrokerRuntimeStats: ``rocketmq_brokeruntime_<suffix>`` ← GET_BROKER_RUNTIME_INFO key.
RUNTIME_KEYS: tuple[tuple[str, str], ...] = (
    ("msg_put_total_today_now", "msgPutTotalTodayNow"),
    ("msg_gettotal_today_now", "msgGetTotalTodayNow"),
    ("dispatch_behind_bytes", "dispatchBehindBytes"),
    ("put_message_size_total", "putMessageSizeTotal"),
    ("put_message_average_size", "putMessageAverageSize"),
    ("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity"),
    ("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs"),
    ("earliest_message_timestamp", "earliestMessageTimeStamp"),
    ("putmessage_entire_time_max", "putMessageEntireTimeMax"),
    ("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp"),
    ("send_threadpool_queue_size", "sendThreadPoolQueueSize"),
    ("putmessage_times_total", "putMessageTimesTotal"),
    ("getmessage_entire_time_max", "getMessageEntireTimeMax"),
    ("pagecache_lock_time_mills", "pageCacheLockTimeMills"),
    ("commitlog_disk_ratio", "commitLogDiskRatio"),
    ("consumequeue_disk_ratio", "consumeQueueDiskRatio"),
    ("dispatch_maxbuffer", "dispatchMaxBuffer"),
    ("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity"),
    ("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity"),
    ("pull_threadpoolqueue_size", "pullThreadPoolQueueSize"),
    ("query_threadpoolqueue_size", "queryThreadPoolQueueSize"),
    ("pull_threadpoolqueue_headwait_timemills", "pullThreadPoolQueueHeadWaitTimeMills"),
    ("query_threadpoolqueue_headwait_timemills", "queryThreadPoolQueueHeadWaitTimeMills"),
    ("send_threadpoolqueue_headwait_timemills", "sendThreadPoolQueueHeadWaitTimeMills"),
    ("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning"),
    ("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning"),
    ("msg_gettotal_todaymorning", "msgGetTotalTodayMorning"),
    ("msg_puttotal_todaymorning", "msgPutTotalTodayMorning"),
    ("commitlog_maxoffset", "commitLogMaxOffset"),
    ("commitlog_minoffset", "commitLogMinOffset"),
    ("put_latency_99", "putLatency99"),
    ("put_latency_999", "putLatency999"),
)
_TPS_KEYS = (
    ("put_tps", "putTps"),
    ("getmiss_tps", "getMissTps"),
    ("gettransfered_tps", "getTransferedTps"),
    ("gettotal_tps", "getTotalTps"),
    ("getfound_tps", "getFoundTps"),
)
# Java StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC → the exporter's pmdt_* names
_PMDT = (
    ("[<=0ms]", "0ms"),
    ("[0~10ms]", "0to10ms"),
    ("[10~50ms]", "10to50ms"),
    ("[50~100ms]", "50to100ms"),
    ("[100~200ms]", "100to200ms"),
    ("[200~500ms]", "200to500ms"),
    ("[500ms~1s]", "500to1s"),
    ("[1~2s]", "1to2s"),
    ("[2~3s]", "2to3s"),
    ("[3~4s]", "3to4s"),
    ("[4~5s]", "4to5s"),
    ("[5~10s]", "5to10s"),
    ("[10s~]", "10stomore"),
)


#: ``rocketmq_client_*`` ← the ConsumeStatus field of GET_CONSUMER_RUNNING_INFO's statusTable
#: (Java ``ClientMetricTaskRunnable``; help texts say what the client measures).
CLIENT_STATUS_FAMILIES: dict[str, tuple[str, str]] = {
    "rocketmq_client_consume_fail_msg_count": (
        "consumeFailedMsgs",
        "messages the client failed to consume in the hour",
    ),
    "rocketmq_client_consume_fail_msg_tps": ("consumeFailedTPS", "messages failed per second (minute window)"),
    "rocketmq_client_consume_ok_msg_tps": ("consumeOKTPS", "messages consumed per second (minute window)"),
    "rocketmq_client_consume_rt": ("consumeRT", "ms per consume call, the minute's average (the hour's if none)"),
    "rocketmq_client_consumer_pull_rt": ("pullRT", "ms per pull that found messages, the minute's average"),
    "rocketmq_client_consumer_pull_tps": ("pullTPS", "messages pulled per second (minute window)"),
}


def _runtime_families() -> list[Family]:
    names = [s for s, _ in RUNTIME_KEYS]
    names += [f"{s}{w}" for s, _ in _TPS_KEYS for w in (10, 60, 600)]
    names += ["remain_howmanydata_toflush", "commitlogdir_capacity_free", "commitlogdir_capacity_total"]
    names += [f"pmdt_{s}" for _, s in _PMDT]
    return [_g(f"rocketmq_brokeruntime_{n}", f"GET_BROKER_RUNTIME_INFO {n}", BROKER_RUNTIME_LABELS) for n in names]


_FAMILY_LIST: list[Family] = [
    # rocketmq-exporter
    _g(
        "rocketmq_broker_tps",
        "messages put per second on the broker (BROKER_PUT_NUMS, minute window)",
        BROKER_NUMS_LABELS,
    ),
    _g(
        "rocketmq_broker_qps",
        "messages pulled per second from the broker (BROKER_GET_NUMS, minute window)",
        BROKER_NUMS_LABELS,
    ),
    _g("rocketmq_broker_commitlog_diff", "CommitLog bytes a slave is behind its master", BROKER_NUMS_LABELS),
    _g("rocketmq_producer_tps", "messages put per second into the topic (TOPIC_PUT_NUMS, minute window)", TOPIC_LABELS),
    _g(
        "rocketmq_producer_message_size",
        "bytes put per second into the topic (TOPIC_PUT_SIZE, minute window)",
        TOPIC_LABELS,
    ),
    _g("rocketmq_producer_offset", "sum of the max offsets of the topic's queues on the broker", TOPIC_LABELS),
    _g("rocketmq_topic_retry_offset", "sum of the max offsets of a %RETRY% topic's queues", TOPIC_LABELS),
    _g("rocketmq_topic_dlq_offset", "sum of the max offsets of a group's %DLQ% topic's queues", DLQ_TOPIC_LABELS),
    _g("rocketmq_producer_count", "producer connections of the group on the broker", PRODUCER_COUNT_LABELS),
    _g(
        "rocketmq_consumer_tps",
        "messages pulled per second by the group (GROUP_GET_NUMS, minute window)",
        GROUP_NUMS_LABELS,
    ),
    _g(
        "rocketmq_consumer_message_size",
        "bytes pulled per second by the group (GROUP_GET_SIZE, minute window)",
        GROUP_NUMS_LABELS,
    ),
    _g("rocketmq_consumer_offset", "sum of the group's committed offsets over the topic's queues", GROUP_NUMS_LABELS),
    _g(
        "rocketmq_send_back_nums",
        "messages the group sent back in the last minute (SNDBCK_PUT_NUMS)",
        GROUP_NUMS_LABELS,
    ),
    _g(
        "rocketmq_group_get_latency_by_storetime",
        "ms since the oldest unconsumed message of the group was stored (max over the queues)",
        GROUP_NUMS_LABELS,
    ),
    _g(
        "rocketmq_group_diff", "messages not yet consumed by the group, over all queues of the topic", GROUP_DIFF_LABELS
    ),
    _g("rocketmq_group_retrydiff", "messages not yet consumed by the group in its %RETRY% topic", GROUP_DIFF_LABELS),
    _g("rocketmq_group_dlqdiff", "messages in the group's %DLQ% topic not consumed", GROUP_DIFF_LABELS),
    _g("rocketmq_group_count", "online consumers of the group", GROUP_COUNT_LABELS),
    _g(
        "rocketmq_group_consume_tps",
        "messages pulled per second by the group (GET_CONSUME_STATS consumeTps: GROUP_GET_NUMS, minute window)",
        GROUP_NUMS_LABELS,
    ),
    _g(
        "rocketmq_group_consume_total_offset",
        "sum of the group's committed offsets over the topic's queues on the broker",
        GROUP_NUMS_LABELS,
    ),
    # the clients' own figures: GET_CONSUMER_RUNNING_INFO's statusTable (Java ConsumeStatus),
    # per client and subscribed topic (rmq exporter only)
    *(_g(name, help_, CLIENT_LABELS) for name, (_key, help_) in CLIENT_STATUS_FAMILIES.items()),
    *_runtime_families(),
    # RocketMQ 5
    _g(
        "rocketmq_consumer_lag_messages",
        "messages of the queue not yet consumed by the group (max offset minus committed offset)",
        QUEUE_LAG_LABELS,
    ),
    _g(
        "rocketmq_consumer_lag_latency",
        "ms since the group's first unconsumed message of the queue was stored (0 without lag)",
        QUEUE_LAG_LABELS,
    ),
    _c("rocketmq_messages_in_total", "messages put into the topic since the broker started", TOPIC_LABELS),
    _c("rocketmq_throughput_in_total", "bytes put into the topic since the broker started", TOPIC_LABELS),
    _c("rocketmq_messages_out_total", "messages pulled by the group since the broker started", GROUP_NUMS_LABELS),
    _c("rocketmq_throughput_out_total", "bytes pulled by the group since the broker started", GROUP_NUMS_LABELS),
    _c(
        "rocketmq_send_to_dlq_messages_total",
        "messages moved to the group's %DLQ% topic since the broker started",
        DLQ_TOPIC_LABELS,
    ),
    _g("rocketmq_producer_connections", "producer connections (all groups)", BROKER_LABELS),
    _g("rocketmq_consumer_connections", "consumer connections of the group", (*BROKER_LABELS, "consumer_group")),
    _g("rocketmq_topic_number", "topics on the broker", BROKER_LABELS),
    _g("rocketmq_consumer_group_number", "subscription groups on the broker", BROKER_LABELS),
    _g("rocketmq_half_messages", "transaction half messages not yet checked past", BROKER_LABELS),
    _g("rocketmq_storage_size", "CommitLog bytes held (max offset minus min offset)", BROKER_LABELS),
    _g("rocketmq_storage_flush_behind_bytes", "CommitLog bytes written but not yet flushed", BROKER_LABELS),
    _g(
        "rocketmq_storage_dispatch_behind_bytes",
        "CommitLog bytes not yet dispatched to the ConsumeQueues",
        BROKER_LABELS,
    ),
    _g("rocketmq_storage_message_reserve_time", "ms since the oldest message kept was stored", BROKER_LABELS),
    # timer messages (rmq.store.timer; Java TimerMessageStore's figures)
    _g("rocketmq_timer_pending", "timer messages in the wheel not delivered yet (timerCongestNum)", BROKER_LABELS),
    _g(
        "rocketmq_timer_lag_seconds",
        "how late the timer wheel delivers: now minus the next tick it delivers, 0 on time (timerReadBehind)",
        BROKER_LABELS,
    ),
    _g(
        "rocketmq_timer_offset_behind",
        "timer messages stored but not yet in the wheel (timerOffsetBehind)",
        BROKER_LABELS,
    ),
    _c("rocketmq_timer_enqueued_total", "timer messages put into the wheel since the broker started", BROKER_LABELS),
    _c("rocketmq_timer_dequeued_total", "timer messages delivered since the broker started", BROKER_LABELS),
    Family(
        "rocketmq_rpc_latency",
        "histogram",
        "broker time of SEND (the store put) and PULL (the store read) requests, ms",
        (*BROKER_LABELS, "request_code"),
    ),
    # controller mode (rmq.broker.replicas, Java 5 ReplicasManager / AutoSwitchHAService): one
    # series per replica (brokerIP tells the replicas of one broker name apart)
    _g(
        "rocketmq_broker_role",
        "1 for the role this replica holds now (role=master or slave), 0 for the other; both 0 "
        "while the controller has given it none",
        (*BROKER_NUMS_LABELS, "role"),
    ),
    _g("rocketmq_broker_master_epoch", "the master epoch this replica knows (the controller's)", BROKER_NUMS_LABELS),
    _g(
        "rocketmq_broker_sync_state_set_size",
        "replicas in the SyncStateSet, the master included (served by the master)",
        BROKER_NUMS_LABELS,
    ),
    _g(
        "rocketmq_broker_sync_state_set_epoch",
        "the SyncStateSet's epoch as the controller last answered (served by the master)",
        BROKER_NUMS_LABELS,
    ),
    _g(
        "rocketmq_broker_confirm_offset",
        "CommitLog offset every SyncStateSet member has: the master's computed one, or on a slave "
        "the master's as last received (-1 before it); a slave dispatches no further",
        BROKER_NUMS_LABELS,
    ),
    _c(
        "rocketmq_broker_role_changes_total",
        "role changes of this replica (elected master, or following another master) since it started",
        BROKER_NUMS_LABELS,
    ),
    _c(
        "rocketmq_broker_controller_heartbeat_failures_total",
        "heartbeats this replica could not send to the controller at controller_addr since it started",
        (*BROKER_NUMS_LABELS, "controller_addr"),
    ),
    # rmq's own version (rmqVersion of GET_BROKER_RUNTIME_INFO, rmq/_version.py; an Apache broker
    # has none): what Java clients compare stays brokerVersion, in rocketmq_brokeruntime_*'s labels
    _g("rmq_build_info", "1, labelled with the rmq version the broker runs", (*BROKER_LABELS, "version")),
    # the scrape itself
    _g("rmq_metrics_dropped_series", "per-queue series left out of this scrape (metricsMaxQueueSeries)", BROKER_LABELS),
    _g("rmq_metrics_collect_seconds", "seconds the last collection took, by phase", ("phase",)),
    _g("rmq_exporter_up", "1 when the exporter's last refresh of the broker succeeded", BROKER_NUMS_LABELS),
    _g(
        "rmq_exporter_clients",
        "online consumers by what the last refresh got of their running info: answered, failed, "
        "not_asked (past --max-clients; their last answer is served while fresh)",
        ("state",),
    ),
]

#: every family the broker or the exporter may serve, by name.
FAMILIES: dict[str, Family] = {f.name: f for f in _FAMILY_LIST}


def msg_model_label(clustering: bool) -> str:
    """The exporter's ``msgModel`` label: Java ``MessageModel.ordinal()`` (BROADCASTING 0,
    CLUSTERING 1)."""
    return "1" if clustering else "0"


_UNITS = {
    "B": 1,
    "KiB": 1 << 10,
    "MiB": 1 << 20,
    "GiB": 1 << 30,
    "TiB": 1 << 40,
    "PiB": 1 << 50,
    "EiB": 1 << 60,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "PB": 1000**5,
    "EB": 1000**6,
}


def human_bytes_to_int(text: str) -> int | None:
    """``"55.7 KiB"`` (Java ``MixAll.humanReadableByteCount``) → bytes; ``None`` if unreadable."""
    parts = text.strip().rstrip(".,").split()
    if not parts:
        return None
    try:
        value = float(parts[0])
    except ValueError:
        return None
    unit = parts[1] if len(parts) > 1 else "B"
    mult = _UNITS.get(unit)
    if mult is None or not math.isfinite(value):
        return None
    return int(value * mult)


_CAPACITY = re.compile(r"Total\s*:\s*([\d.]+\s*\w+)\s*,\s*Free\s*:\s*([\d.]+\s*\w+)")


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


class MetricsBuilder:
    """Accumulates samples of :data:`FAMILIES`, then gives prometheus_client metric families.

    ``set`` replaces a sample, ``add`` sums into it (``rocketmq_group_diff`` adds each
    broker's part). Per-queue lag series are bounded by ``max_queue_series``: past it
    :meth:`queue_lag` drops the series (and counts it in :attr:`dropped_series`).

    Args:
        max_queue_series: per-queue series kept at most (default 100 000).
    """

    def __init__(self, max_queue_series: int = DEFAULT_MAX_QUEUE_SERIES) -> None:
        self.max_queue_series = max_queue_series
        self.dropped_series = 0
        self._queue_series = 0
        self._values: dict[str, dict[tuple[str, ...], float]] = {}
        self._hist: dict[str, dict[tuple[str, ...], tuple[Sequence[float], Sequence[int], float]]] = {}

    @staticmethod
    def _check(name: str, labels: tuple[str, ...]) -> None:
        fam = FAMILIES.get(name)
        if fam is None:
            raise KeyError(f"unknown metric family {name}")
        if len(labels) != len(fam.labels):
            raise ValueError(f"{name} takes the labels {fam.labels}, got {labels!r}")

    def set(self, name: str, labels: tuple[str, ...], value: float) -> None:
        """The sample ``name{labels}`` is ``value``."""
        self._check(name, labels)
        self._values.setdefault(name, {})[labels] = float(value)

    def add(self, name: str, labels: tuple[str, ...], value: float) -> None:
        """Add ``value`` to the sample ``name{labels}`` (0 when new)."""
        self._check(name, labels)
        table = self._values.setdefault(name, {})
        table[labels] = table.get(labels, 0.0) + float(value)

    def histogram(
        self, name: str, labels: tuple[str, ...], bounds: Sequence[float], counts: Sequence[int], total: float
    ) -> None:
        """A histogram sample: ``counts[i]`` observations ≤ ``bounds[i]`` (not cumulative;
        one more count than bounds, the last for +Inf) and their ``total``."""
        self._check(name, labels)
        if len(counts) != len(bounds) + 1:
            raise ValueError("a histogram needs one count per bound and one for +Inf")
        self._hist.setdefault(name, {})[labels] = (tuple(bounds), tuple(counts), float(total))

    def get(self, name: str, labels: tuple[str, ...]) -> float | None:
        return self._values.get(name, {}).get(labels)

    def queue_lag(self, topic: str, group: str, broker: str, queue_id: int, lag: int, latency_ms: float | None) -> bool:
        """RocketMQ 5's per-queue lag (messages and, when known, ms); False when the series
        bound is reached (the series is dropped and counted)."""
        if self._queue_series >= self.max_queue_series:
            self.dropped_series += 1
            return False
        self._queue_series += 1
        labels = (topic, group, broker, str(queue_id))
        self.set("rocketmq_consumer_lag_messages", labels, lag)
        if latency_ms is not None:
            self.set("rocketmq_consumer_lag_latency", labels, latency_ms)
        return True

    def client_status(
        self, client_addr: str, client_id: str, group: str, topic: str, status: Mapping[str, object]
    ) -> None:
        """The ``rocketmq_client_*`` gauges of one client's ConsumeStatus of ``topic`` (a number,
        or a number's text as the C++ client writes them; a field missing or unreadable is left
        out)."""
        labels = (client_addr, client_id, group, topic)
        for name, (key, _help) in CLIENT_STATUS_FAMILIES.items():
            raw = status.get(key)
            v = _number(raw) if isinstance(raw, str) else raw
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                continue
            self.set(name, labels, v)

    def broker_runtime(
        self, cluster: str, broker: str, addr: str, kv: Mapping[str, str], now_ms: float | None = None
    ) -> None:
        """The ``rocketmq_brokeruntime_*`` gauges from a GET_BROKER_RUNTIME_INFO table (as the
        exporter's ``BrokerRuntimeStats`` reads it; a missing or unreadable key is left out),
        and RocketMQ 5's storage gauges from the same table."""
        labels = (
            cluster,
            addr,
            "",
            kv.get("brokerVersionDesc", ""),
            kv.get("bootTimestamp", ""),
            kv.get("brokerVersion", ""),
        )
        if kv.get("rmqVersion"):
            self.set("rmq_build_info", (cluster, broker, kv["rmqVersion"]), 1.0)
        prefix = "rocketmq_brokeruntime_"
        for suffix, key in RUNTIME_KEYS:
            v = _number(kv.get(key))
            if v is not None:
                self.set(prefix + suffix, labels, v)
        for suffix, key in _TPS_KEYS:
            text = kv.get(key)
            if text is None and key == "getTransferedTps":
                text = kv.get("getTransferredTps")
            if text is None:
                continue
            # Java StoreStatsService writes "" for a window without enough samples yet (600 s
            # for the last); rocketmq-exporter's BrokerRuntimeStats.loadTps then keeps its
            # default 0.0, so a young broker's window reads 0 rather than being left out
            parts = text.split()
            for i, window in enumerate((10, 60, 600)):
                v = _number(parts[i]) if i < len(parts) else 0.0
                if v is not None:
                    self.set(f"{prefix}{suffix}{window}", labels, v)
        flush = human_bytes_to_int(kv.get("remainHowManyDataToFlush", ""))
        if flush is not None:
            self.set(prefix + "remain_howmanydata_toflush", labels, flush)
        m = _CAPACITY.search(kv.get("commitLogDirCapacity", ""))
        if m:
            total, free = human_bytes_to_int(m.group(1)), human_bytes_to_int(m.group(2))
            if total is not None:
                self.set(prefix + "commitlogdir_capacity_total", labels, total)
            if free is not None:
                self.set(prefix + "commitlogdir_capacity_free", labels, free)
        dist = kv.get("putMessageDistributeTime")
        if dist is not None:
            # "null" until the broker's first minute is over (Java StoreStatsService): the
            # exporter's loadPutMessageDistributeTime keeps its 0 defaults, so do we
            for desc, suffix in _PMDT:
                m2 = re.search(re.escape(desc) + r":(\d+)", dist)
                self.set(f"{prefix}pmdt_{suffix}", labels, int(m2.group(1)) if m2 else 0)
        # RocketMQ 5's storage gauges
        b = (cluster, broker)
        max_off, min_off = _number(kv.get("commitLogMaxOffset")), _number(kv.get("commitLogMinOffset"))
        if max_off is not None and min_off is not None:
            self.set("rocketmq_storage_size", b, max(0.0, max_off - min_off))
        flushed = _number(kv.get("commitLogFlushedOffset"))
        if max_off is not None and flushed is not None:
            self.set("rocketmq_storage_flush_behind_bytes", b, max(0.0, max_off - flushed))
        elif flush is not None:
            self.set("rocketmq_storage_flush_behind_bytes", b, flush)
        behind = _number(kv.get("dispatchBehindBytes"))
        if behind is not None:
            self.set("rocketmq_storage_dispatch_behind_bytes", b, behind)
        earliest = _number(kv.get("earliestMessageTimeStamp"))
        if earliest is not None and earliest > 0:
            now = time.time() * 1000 if now_ms is None else now_ms
            self.set("rocketmq_storage_message_reserve_time", b, max(0.0, now - earliest))
        # timer messages (Java's runtime keys; the totals are rmq's own keys)
        for family, key in _TIMER_KEYS:
            v = _number(kv.get(key))
            if v is not None:
                self.set(family, b, v)

    def render(self, cache: LabelCache | None = None, pause: Callable[[], None] | None = None) -> bytes:
        """The text of everything set: the same bytes as :func:`render` of :meth:`families`
        (hence as ``generate_latest``), written straight from the tables, without a metric
        object per sample. ``pause()`` is called every 256 samples (the broker passes
        ``time.sleep(0)`` so its event loop gets the GIL at once)."""
        cache = cache if cache is not None else LabelCache()
        out: list[str] = []
        n = 0
        for fam in _FAMILY_LIST:
            if fam.kind == "histogram":
                if self._hist.get(fam.name):
                    out.append(render(self.families(only=fam.name), cache).decode())
                continue
            values = self._values.get(fam.name)
            if not values:
                continue
            out.append(f"# HELP {fam.name} {_escape_help(fam.help)}\n# TYPE {fam.name} {fam.kind}\n")
            text = cache.series_text
            for labels, value in values.items():
                out.append(text(fam, labels) + _fmt(value) + "\n")
                n += 1
                if pause is not None and n % 256 == 0:
                    pause()
        return "".join(out).encode()

    def families(self, only: str | None = None) -> list[Metric]:
        """prometheus_client metric families of everything set (or of the family ``only``),
        in :data:`FAMILIES` order."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        out: list[Metric] = []
        for fam in _FAMILY_LIST:
            if only is not None and fam.name != only:
                continue
            values = self._values.get(fam.name)
            hist = self._hist.get(fam.name)
            if fam.kind == "histogram":
                if not hist:
                    continue
                h = HistogramMetricFamily(fam.name, fam.help, labels=fam.labels)
                for labels, (bounds, counts, total) in hist.items():
                    cumulative: list[tuple[str, float]] = []
                    running = 0
                    for le, n in zip((*bounds, math.inf), counts, strict=True):
                        running += n
                        cumulative.append((_go_float(le), float(running)))
                    h.add_metric(labels, cumulative, total)
                out.append(h)
                continue
            if not values:
                continue
            metric: GaugeMetricFamily | CounterMetricFamily
            if fam.kind == "counter":
                metric = CounterMetricFamily(fam.name, fam.help, labels=fam.labels)
            else:
                metric = GaugeMetricFamily(fam.name, fam.help, labels=fam.labels)
            for labels, value in values.items():
                metric.add_metric(labels, value)
            out.append(metric)
        return out


def _escape_label(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


class LabelCache:
    """Each series' ``name{labels} `` text, kept between scrapes (the labels of a queue do not
    change, only its value). Bounded: past ``max_entries`` it starts over.

    Args:
        max_entries: series texts kept (default 400 000).
    """

    def __init__(self, max_entries: int = 400_000) -> None:
        self.max_entries = max_entries
        self._texts: dict[tuple[str, ...], str] = {}

    def series_text(self, fam: Family, labels: tuple[str, ...]) -> str:
        """``name{labels} `` of a gauge or counter sample of ``fam`` (labels in ``fam.labels``
        order; written sorted by name, as prometheus_client does)."""
        key = (fam.name, *labels)
        t = self._texts.get(key)
        if t is None:
            if len(self._texts) >= self.max_entries:
                self._texts.clear()
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(zip(fam.labels, labels, strict=True)))
            t = f"{fam.name}{{{inner}}} " if inner else fam.name + " "
            self._texts[key] = t
        return t

    def text(self, name: str, labels: Mapping[str, str]) -> str:
        key = (name, *labels.keys(), *labels.values())
        t = self._texts.get(key)
        if t is None:
            if len(self._texts) >= self.max_entries:
                self._texts.clear()
            if labels:
                inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in sorted(labels.items()))
                t = f"{name}{{{inner}}} "
            else:
                t = name + " "
            self._texts[key] = t
        return t


def render(families: Iterable[Metric], cache: LabelCache | None = None) -> bytes:
    """The text exposition format 0.0.4 of ``families``, byte for byte what
    ``prometheus_client.generate_latest`` writes for them (samples with timestamps or
    exemplars are not used here)."""
    cache = cache if cache is not None else LabelCache()
    out: list[str] = []
    for m in families:
        name = m.name
        mtype = m.type
        if mtype == "counter":
            name += "_total"
        elif mtype in ("info", "stateset", "gaugehistogram"):
            raise ValueError(f"render does not write {mtype} metrics")
        out.append(f"# HELP {name} {_escape_help(m.documentation)}\n# TYPE {name} {mtype}\n")
        for s in m.samples:
            out.append(cache.text(s.name, s.labels) + _go_float(s.value) + "\n")
    return "".join(out).encode()
