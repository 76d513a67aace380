"""The broker's Prometheus endpoint (``/metrics`` on ``metricsPort``).

What a scrape costs, and where (measured in ``bench/metrics_bench.py``):

1. **On the loop, once**: GET_BROKER_RUNTIME_INFO's table (the same function the admin code
   answers with; a few statvfs calls and one CommitLog read, no walk over queues).
2. **In the metrics thread**: the walk over the tables: every ConsumeQueue's max offset, every
   committed offset (``topic@group → {queue: offset}``), the statistics items, the client
   tables. Each table is copied with one C-level ``dict.copy``/``list`` (atomic under the GIL,
   so the loop thread's writes never meet a half-read table); the walk itself runs beside the
   loop.
3. **On the loop, in slices of 256**: the store time of the first unconsumed message of each
   *lagging* queue (RocketMQ 5's lag latency: a ConsumeQueue unit and a CommitLog read, which
   must not race the store's file deletion, hence the loop). Times are cached by
   ``(topic, queue, offset)``: a group that has not moved costs a dict lookup, not a read.
4. **In the metrics thread**: the samples (``rmq.common.metrics.MetricsBuilder``) and the
   text (``MetricsBuilder.render``, which keeps each series' label text between scrapes).

The thread pauses (a zero sleep, which hands the GIL over) every 256 queues or samples, so the
loop waits for it at most that slice of work rather than the interpreter's 5 ms switch
interval each time. With 10 000 lagging queues a warm scrape is about 0.2 CPU-seconds on a
loaded 2-core machine, most of it rendering 30 000 series (3.9 MB).

Scrapes are serialized; one that arrives while another collects gets that one's text. The
thread is one worker (``rmq-metrics``), so metrics never use more than one thread beside the loop.

Replication (``rocketmq_broker_commitlog_diff``, one series per connected slave on a master) is
one more source, read from the HA service's per-slave state; other components may register
theirs with :meth:`BrokerMetrics.add_source`, a function that adds its samples to the builder
in the metrics thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmq.broker.managers.consumer import MessageModel
from rmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    StatsItem,
)
from rmq.common.constants import MixAll, TopicValidator
from rmq.common.log import RateLimitedLog
from rmq.common.metrics import RPC_LATENCY_BUCKETS_MS, LabelCache, MetricsBuilder, msg_model_label
from rmq.remoting.metrics_http import MetricsHttpServer

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext

__all__ = ["BrokerMetrics", "MetricsSource"]

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

#: ``fn(builder)``: adds samples to a scrape, called in the metrics thread.
MetricsSource = Callable[[MetricsBuilder], None]

_RETRY = MixAll.RETRY_GROUP_TOPIC_PREFIX
_DLQ = MixAll.DLQ_GROUP_TOPIC_PREFIX
_SLICE = 256  # store reads per loop turn
_HITS_PER_TURN = 4096  # cache lookups per loop turn
_PAUSE_EVERY = 256  # queues or samples between two pauses of the metrics thread


def _pause() -> None:
    """Let the event loop's thread take the GIL now (a zero sleep releases it), rather than
    after the interpreter's 5 ms switch interval: the loop waits for the metrics thread at
    most a slice of work, not a whole walk."""
    time.sleep(0)


@dataclass
class _Walk:
    """What the thread's walk hands to the loop and back: the builder so far, the per-queue
    rows ``(topic, group, queue_id, max offset, committed offset)`` (bounded) and the group
    max-lag latency cells to fill."""

    builder: MetricsBuilder
    rows: list[tuple[str, str, int, int, int]] = field(default_factory=list)
    need: set[tuple[str, int, int]] = field(default_factory=set)
    times: dict[tuple[str, int, int], int] = field(default_factory=dict)


class BrokerMetrics:
    """The ``/metrics`` endpoint of one broker (``controller.metrics``).

    Args:
        controller: the broker (``rmq.broker.context.BrokerContext``); its ``broker_config.metrics_port`` (0 = off) and
            ``metrics_max_queue_series`` are read at :meth:`start` and at each scrape.
    """

    def __init__(self, controller: BrokerContext) -> None:
        self.controller = controller
        bc = controller.broker_config
        self.server = MetricsHttpServer(
            bc.metrics_host or bc.listen_host, bc.metrics_port, self.scrape, name=f"broker {bc.broker_name}"
        )
        self._executor: ThreadPoolExecutor | None = None
        self._lock: asyncio.Lock | None = None
        self._last: bytes | None = None
        self._last_done = -1.0
        self._times: dict[tuple[str, int, int], int] = {}
        self._labels = LabelCache()
        self._sources: list[MetricsSource] = [self._replication]
        self._admin: Any = None  # the AdminBrokerProcessor whose runtime_info GET_BROKER_RUNTIME_INFO answers
        #: seconds each phase of the last collection took (also served as rmq_metrics_collect_seconds)
        self.last_phases: dict[str, float] = {}

    @property
    def port(self) -> int:
        """The bound metrics port (0 when not serving)."""
        return self.server.port

    def add_source(self, source: MetricsSource) -> None:
        """Add samples to every scrape: ``source(builder)`` runs in the metrics thread (read
        only copies or plain attributes there). Replication is a built-in source
        (:meth:`_replication`)."""
        self._sources.append(source)

    def _replication(self, b: MetricsBuilder) -> None:
        """rocketmq-exporter's ``rocketmq_broker_commitlog_diff`` per connected slave, from the
        master's side (its CommitLog end minus what the slave acknowledged; Java
        HAConnection.slaveAckOffset). A slave has no such gauge: only its master knows the end."""
        store = self.controller.message_store
        ha = getattr(store, "ha", None)
        if ha is None:
            return
        bc = self.controller.broker_config
        for slave in ha.slaves():
            if slave.ack_offset < 0:  # connected, not reported yet: not a slave (yet)
                continue
            b.set(
                "rocketmq_broker_commitlog_diff",
                (bc.broker_cluster_name, slave.address, bc.broker_name),
                slave.lag_bytes,
            )

    async def start(self) -> None:
        """Serve on ``metricsPort`` unless it is 0; a taken port is a warning (the broker runs on)."""
        if self.controller.broker_config.metrics_port == 0:
            return
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="rmq-metrics")
        if not await self.server.start():
            self._executor.shutdown(wait=False)
            self._executor = None

    async def close(self) -> None:
        await self.server.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def scrape(self) -> bytes:
        """The exposition text (a scrape that arrives during a collection shares its result)."""
        loop = asyncio.get_running_loop()
        if self._lock is None:
            self._lock = asyncio.Lock()
        arrived = loop.time()
        async with self._lock:
            if self._last is not None and self._last_done >= arrived:
                return self._last
            body = await self.collect()
            self._last, self._last_done = body, loop.time()
            return body

    async def collect(self) -> bytes:
        """Collect and render once (see the module docstring for the phases)."""
        loop = asyncio.get_running_loop()
        executor = self._executor
        phases: dict[str, float] = {}
        t0 = time.perf_counter()
        self.controller.stats.fold()  # on the loop, before the walk reads the sets in a thread
        kv = self._runtime_info()
        t1 = time.perf_counter()
        phases["runtime_info"] = t1 - t0
        walk = await loop.run_in_executor(executor, self._walk, kv)
        t2 = time.perf_counter()
        phases["walk"] = t2 - t1
        await self._resolve_times(walk)
        t3 = time.perf_counter()
        phases["lag_latency"] = t3 - t2
        body: bytes = await loop.run_in_executor(executor, self._finish, walk, phases)
        phases["render"] = time.perf_counter() - t3
        self.last_phases = phases
        return body

    # -- phase 1 (loop) --------------------------------------------------------------------

    def _runtime_info(self) -> dict[str, str]:
        if self.controller.message_store is None:
            return {}
        if self._admin is None:
            from rmq.broker.processors.admin import AdminBrokerProcessor

            self._admin = AdminBrokerProcessor(self.controller)
        try:
            return dict(self._admin.runtime_info())
        except Exception:  # noqa: BLE001 - the rest of the scrape is still worth serving
            _rlog.error("metrics-runtime-info", "metrics: broker runtime info failed", exc_info=True)
            return {}

    # -- phase 2 (thread) ------------------------------------------------------------------

    def _walk(self, kv: dict[str, str]) -> _Walk:
        c = self.controller
        bc = c.broker_config
        cluster, broker, addr = bc.broker_cluster_name, bc.broker_name, c.broker_addr
        b = MetricsBuilder(bc.metrics_max_queue_series)
        w = _Walk(b)
        bl = (cluster, broker)
        if kv:
            b.broker_runtime(cluster, broker, addr, kv)
        self._walk_stats(b, cluster, broker, addr)
        # max offsets of every ConsumeQueue
        store = c.message_store
        max_offsets: dict[str, dict[int, int]] = {}
        min_offsets: dict[str, dict[int, int]] = {}
        walked = 0
        if store is not None:
            for topic, queues in list(store.consume_queue_table.items()):
                mx: dict[int, int] = {}
                mn: dict[int, int] = {}
                walked += len(queues)
                if walked >= _PAUSE_EVERY:
                    walked = 0
                    _pause()
                for qid, cq in list(queues.items()):
                    try:
                        mx[qid] = cq.get_max_offset_in_queue()
                        mn[qid] = cq.get_min_offset_in_queue()
                    except (IndexError, AttributeError, ValueError):  # the queue went meanwhile
                        continue
                max_offsets[topic], min_offsets[topic] = mx, mn
                total = float(sum(mx.values()))
                if topic.startswith(_RETRY):
                    b.set("rocketmq_topic_retry_offset", (cluster, broker, topic), total)
                elif topic.startswith(_DLQ):
                    b.set("rocketmq_topic_dlq_offset", (cluster, broker, topic[len(_DLQ) :]), total)
                else:
                    b.set("rocketmq_producer_offset", (cluster, broker, topic), total)
        # clients
        online: dict[str, tuple[int, bool]] = {}
        for group, info in list(c.consumer_manager.consumer_table.items()):
            members = list(info.channels.values())
            clustering = info.message_model != MessageModel.BROADCASTING
            online[group] = (len(members), clustering)
            b.set("rocketmq_consumer_connections", (*bl, group), len(members))
            b.set(
                "rocketmq_group_count",
                (
                    ",".join(sorted(m.remote_addr for m in members)),
                    ",".join(sorted(m.client_id for m in members)),
                    group,
                ),
                len(members),
            )
        producers = 0
        for group, conns in list(c.producer_manager.group_channel_table.items()):
            n = len(conns)
            producers += n
            b.set("rocketmq_producer_count", (cluster, broker, group), n)
        b.set("rocketmq_producer_connections", bl, producers)
        topics = c.topic_config_manager.topic_config_table
        b.set("rocketmq_topic_number", bl, len(topics))
        b.set("rocketmq_consumer_group_number", bl, len(c.subscription_group_manager.subscription_group_table))
        # lag: every topic@group with committed offsets, over the topic's read queues (Java
        # AdminBrokerProcessor.getConsumeStats, whose rules GET_CONSUME_STATS answers with)
        committed = c.consumer_offset_manager.offset_table
        get_nums = c.stats.sets[GROUP_GET_NUMS].items
        rows = w.rows
        limit = bc.metrics_max_queue_series
        dlq_consumed: set[str] = set()
        for key, offsets_live in list(committed.items()):
            walked += len(offsets_live)
            if walked >= _PAUSE_EVERY:
                walked = 0
                _pause()
            topic, _, group = key.partition("@")
            tc = topics.get(topic)
            if tc is None:
                continue
            group_info = c.consumer_manager.consumer_table.get(group)
            if group_info is not None and group_info.subscriptions and topic not in group_info.subscriptions:
                continue
            offsets = offsets_live.copy()
            mx = max_offsets.get(topic, {})
            diff = 0
            consumer_total = 0
            for qid in range(tc.read_queue_nums):
                broker_off = max(0, mx.get(qid, 0))
                consumer_off = max(0, offsets.get(qid, 0))
                diff += broker_off - consumer_off
                consumer_total += consumer_off
                if len(rows) < limit:
                    rows.append((topic, group, qid, broker_off, consumer_off))
                    if broker_off > consumer_off:
                        w.need.add((topic, qid, consumer_off))
                else:
                    b.dropped_series += 1
            b.set("rocketmq_consumer_offset", (cluster, broker, topic, group), consumer_total)
            # what GET_CONSUME_STATS answers for the pair (Java ConsumeStats): the committed total
            # and consumeTps, GROUP_GET_NUMS' minute rate (the dict read is atomic under the GIL)
            b.set("rocketmq_group_consume_total_offset", (cluster, broker, topic, group), consumer_total)
            got = get_nums.get(key)
            b.set(
                "rocketmq_group_consume_tps",
                (cluster, broker, topic, group),
                StatsItem.compute(tuple(got.minute))[1] if got is not None else 0.0,
            )
            count, clustering = online.get(group, (0, True))
            if not clustering:
                continue
            labels = (group, topic, str(count), msg_model_label(True))
            if topic.startswith(_RETRY):
                b.add("rocketmq_group_retrydiff", labels, diff)
            elif topic.startswith(_DLQ):
                dlq_consumed.add(topic)
                b.add("rocketmq_group_dlqdiff", labels, diff)
            else:
                b.add("rocketmq_group_diff", labels, diff)
        # a %DLQ% topic nobody consumes: all it holds is the group's DLQ backlog
        for topic, mx in max_offsets.items():
            if topic.startswith(_DLQ) and topic not in dlq_consumed:
                group = topic[len(_DLQ) :]
                count, _ = online.get(group, (0, True))
                held = sum(max(0, v - min_offsets[topic].get(q, 0)) for q, v in mx.items())
                b.set("rocketmq_group_dlqdiff", (group, topic, str(count), msg_model_label(True)), held)
        # transaction half messages past the check progress (Java's CID_RMQ_SYS_TRANS offset)
        half = TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC
        half_max = max_offsets.get(half, {})
        if half_max:
            progress = committed.get(f"{half}@{MixAll.CID_SYS_RMQ_TRANS}", {}).copy()
            b.set(
                "rocketmq_half_messages",
                bl,
                sum(max(0, v - max(progress.get(q, 0), min_offsets[half].get(q, 0))) for q, v in half_max.items()),
            )
        else:
            b.set("rocketmq_half_messages", bl, 0)
        for name, hist in (("send_message", c.stats.send_latency), ("pull_message", c.stats.pull_latency)):
            b.histogram("rocketmq_rpc_latency", (*bl, name), RPC_LATENCY_BUCKETS_MS, list(hist.counts), hist.total)
        for source in self._sources:
            try:
                source(b)
            except Exception:  # noqa: BLE001 - one source must not cost the whole scrape
                _rlog.error("metrics-source", "metrics: a metrics source failed", exc_info=True)
        return w

    def _walk_stats(self, b: MetricsBuilder, cluster: str, broker: str, addr: str) -> None:
        sets = self.controller.stats.sets

        def items(name: str) -> list[tuple[str, StatsItem]]:
            return list(sets[name].items.items())

        def minute(item: StatsItem) -> tuple[int, float, float]:
            return StatsItem.compute(tuple(item.minute))

        labels: tuple[str, ...]
        for key, item in items(TOPIC_PUT_NUMS):
            labels = (cluster, broker, key)
            b.set("rocketmq_producer_tps", labels, minute(item)[1])
            b.set("rocketmq_messages_in_total", labels, item.value)
            if key.startswith(_DLQ):
                b.set("rocketmq_send_to_dlq_messages_total", (cluster, broker, key[len(_DLQ) :]), item.value)
        for key, item in items(TOPIC_PUT_SIZE):
            labels = (cluster, broker, key)
            b.set("rocketmq_producer_message_size", labels, minute(item)[1])
            b.set("rocketmq_throughput_in_total", labels, item.value)
        for key, item in items(GROUP_GET_NUMS):
            topic, _, group = key.partition("@")
            labels = (cluster, broker, topic, group)
            b.set("rocketmq_consumer_tps", labels, minute(item)[1])
            b.set("rocketmq_messages_out_total", labels, item.value)
        for key, item in items(GROUP_GET_SIZE):
            topic, _, group = key.partition("@")
            labels = (cluster, broker, topic, group)
            b.set("rocketmq_consumer_message_size", labels, minute(item)[1])
            b.set("rocketmq_throughput_out_total", labels, item.value)
        for key, item in items(SNDBCK_PUT_NUMS):
            topic, _, group = key.partition("@")
            b.set("rocketmq_send_back_nums", (cluster, broker, topic, group), minute(item)[0])
        for name, metric in ((BROKER_PUT_NUMS, "rocketmq_broker_tps"), (BROKER_GET_NUMS, "rocketmq_broker_qps")):
            for _key, item in items(name):
                b.set(metric, (cluster, addr, broker), minute(item)[1])

    # -- phase 3 (loop, sliced) --------------------------------------------------------------

    async def _resolve_times(self, w: _Walk) -> None:
        store = self.controller.message_store
        if store is None or not store.running or not w.need:
            self._times = {}
            return
        old, new = self._times, w.times
        reads = hits = 0
        for key in w.need:
            ts = old.get(key)
            if ts is None:
                topic, qid, offset = key
                ts = store.get_message_store_timestamp(topic, qid, offset)
                if ts < 0:  # consumed past what is kept: the oldest message kept is the first unconsumed
                    oldest = store.get_min_offset_in_queue(topic, qid)
                    ts = store.get_message_store_timestamp(topic, qid, oldest) if oldest > offset else -1
                reads += 1
                if reads % _SLICE == 0:
                    await asyncio.sleep(0)
            else:
                hits += 1
                if hits % _HITS_PER_TURN == 0:
                    await asyncio.sleep(0)
            new[key] = ts
        self._times = new

    # -- phase 4 (thread) ------------------------------------------------------------------

    def _finish(self, w: _Walk, phases: dict[str, float]) -> bytes:
        bc = self.controller.broker_config
        cluster, broker = bc.broker_cluster_name, bc.broker_name
        b = w.builder
        now = time.time() * 1000
        worst: dict[tuple[str, str], float] = {}
        for i, (topic, group, qid, broker_off, consumer_off) in enumerate(w.rows):
            if i % _PAUSE_EVERY == 0:
                _pause()
            lag = broker_off - consumer_off
            latency: float | None = 0.0
            if lag > 0:
                ts = w.times.get((topic, qid, consumer_off), -1)
                latency = max(0.0, now - ts) if ts > 0 else None
            b.queue_lag(topic, group, broker, qid, lag, latency)
            if latency is not None and latency > worst.get((topic, group), -1.0):
                worst[(topic, group)] = latency
        for (topic, group), latency in worst.items():
            b.set("rocketmq_group_get_latency_by_storetime", (cluster, broker, topic, group), latency)
        b.set("rmq_metrics_dropped_series", (cluster, broker), b.dropped_series)
        for phase, seconds in (self.last_phases or phases).items():
            b.set("rmq_metrics_collect_seconds", (phase,), seconds)
        return b.render(self._labels, _pause)
