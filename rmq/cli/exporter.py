"""``rmq exporter``: the broker's ``/metrics`` for a whole cluster, through ``rmq.Admin``.

As rocketmq-exporter (Java ``MetricsCollectTask``) does, it asks the name server for the
cluster and the topics and every master for its runtime info, statistics and consume stats,
so it works with rmq and Apache brokers alike. It serves the families of
:data:`rmq.common.metrics.FAMILIES` with the same labels as a broker's own endpoint; what only
a broker can see from inside (the RPC latency histograms, the ``*_total`` counters since
start, connections by group, half messages) is left to the broker's endpoint.

Collection runs in the background every ``interval`` seconds; a scrape returns the latest
result at once. Bounds: every remote call has the admin's timeout; at most ``concurrency``
calls are in flight; a refresh stops at ``interval`` seconds (what it has is served, the rest
waits for the next round); a broker that fails is logged (rate-limited) and reported by
``rmq_exporter_up 0`` without stopping the others; lag latency is looked up (one message
read per lagging queue, Java ``MQAdminExtImpl.queryMsgByOffset``) for at most
``max_lag_lookups`` queues per round, cached while the group does not move; the clients'
``rocketmq_client_*`` figures come from at most ``max_clients`` consumers per round (the least
recently asked first, ``client_timeout`` each), an answer served until ``client_ttl`` old.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rmq.client.admin import Admin, AdminError
from rmq.common.constants import MixAll
from rmq.common.log import RateLimitedLog, clip
from rmq.common.metrics import DEFAULT_MAX_QUEUE_SERIES, LabelCache, MetricsBuilder, msg_model_label, render
from rmq.errors import RMQError
from rmq.protocol.body.conns import ConsumerRunningInfo
from rmq.protocol.body.stats import BrokerStatsData
from rmq.remoting.metrics_http import MetricsHttpServer

__all__ = ["ClusterCollector", "run_exporter"]

log = logging.getLogger("rmq.exporter")
_rlog = RateLimitedLog(log, interval=60)
_T = TypeVar("_T")

_RETRY = MixAll.RETRY_GROUP_TOPIC_PREFIX
_DLQ = MixAll.DLQ_GROUP_TOPIC_PREFIX

# Java BrokerStatsManager stats names, as VIEW_BROKER_STATS_DATA takes them
_TOPIC_PUT_NUMS, _TOPIC_PUT_SIZE = "TOPIC_PUT_NUMS", "TOPIC_PUT_SIZE"
_GROUP_GET_NUMS, _GROUP_GET_SIZE, _SNDBCK = "GROUP_GET_NUMS", "GROUP_GET_SIZE", "SNDBCK_PUT_NUMS"
_BROKER_PUT_NUMS, _BROKER_GET_NUMS = "BROKER_PUT_NUMS", "BROKER_GET_NUMS"

#: consumers asked for their running info per refresh at most (the least recently asked first)
DEFAULT_MAX_CLIENTS = 100
#: seconds one client may take to answer through the broker's relay
DEFAULT_CLIENT_TIMEOUT = 3.0


class ClusterCollector:
    """Collects a cluster's metrics through ``admin`` (see the module docstring).

    Args:
        admin: a started ``rmq.Admin`` (its ``timeout`` bounds every call).
        interval: seconds between refreshes (30, as the exporter's default crons are 15–60 s).
        concurrency: remote calls in flight at most (8).
        max_lag_lookups: message reads for lag latency per refresh (1000).
        max_queue_series: per-queue lag series served (100 000).
        max_clients: consumers asked for GET_CONSUMER_RUNNING_INFO per refresh (100).
        client_timeout: seconds one consumer may take to answer (3).
    """

    def __init__(
        self,
        admin: Admin,
        *,
        interval: float = 30.0,
        concurrency: int = 8,
        max_lag_lookups: int = 1000,
        max_queue_series: int = DEFAULT_MAX_QUEUE_SERIES,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
    ) -> None:
        self.admin = admin
        self.interval = interval
        self.max_lag_lookups = max_lag_lookups
        self.max_queue_series = max_queue_series
        self.max_clients = max_clients
        self.client_timeout = client_timeout
        #: a client's figures are served this long after it last answered (Java's cache expiry,
        #: ``outOfTimeSeconds`` 60 with a one-minute round: three rounds here, at least 60 s)
        self.client_ttl = max(60.0, 3 * interval)
        #: (group, client id) → (asked at, answered at, client address, statusTable)
        self._clients: dict[tuple[str, str], tuple[float, float, str, dict[str, dict[str, object]]]] = {}
        self._sem = asyncio.Semaphore(concurrency)
        self._client_sem = asyncio.Semaphore(concurrency)
        self._labels = LabelCache()
        self._times: dict[tuple[str, str, int, int], int] = {}
        self.latest: bytes = b""
        self.refreshes = 0
        self.last_error: str | None = None

    async def _call(self, what: str, fn: Callable[[], Awaitable[_T]]) -> _T | None:
        """One remote call under the concurrency bound; a failure is logged and gives None."""
        async with self._sem:
            try:
                return await fn()
            except (RMQError, OSError, TimeoutError) as e:
                if not (isinstance(e, AdminError) and what.startswith("stats")):  # idle items are normal
                    _rlog.warning(f"exporter-{what}", "exporter: %s failed: %s", what, clip(e))
                return None

    async def _stats(self, addr: str, stats_name: str, key: str) -> BrokerStatsData | None:
        """VIEW_BROKER_STATS_DATA; None when the broker has no such item (it was idle)."""
        return await self._call(f"stats-{stats_name}", lambda: self.admin.view_broker_stats_data(addr, stats_name, key))

    async def _runtime(self, addr: str) -> dict[str, str] | None:
        return await self._call(f"runtime-{addr}", lambda: self.admin.fetch_broker_runtime_stats(addr))

    async def refresh(self) -> bytes:
        """One collection of the whole cluster, rendered; also kept as :attr:`latest`."""
        b = MetricsBuilder(self.max_queue_series)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.interval):
                await self._collect(b)
            self.last_error = None
        except (TimeoutError, RMQError, OSError) as e:
            self.last_error = str(e) or type(e).__name__
            _rlog.warning("exporter-refresh", "exporter: refresh incomplete: %s", clip(self.last_error))
        b.set("rmq_metrics_collect_seconds", ("refresh",), time.perf_counter() - t0)
        body = await asyncio.to_thread(render, b.families(), self._labels)
        self.latest = body
        self.refreshes += 1
        return body

    async def _collect(self, b: MetricsBuilder) -> None:
        admin = self.admin
        info = await admin.examine_broker_cluster_info()
        masters: dict[str, tuple[str, str]] = {}  # broker name → (cluster, master addr)
        for name, bd in sorted(info.broker_addr_table.items()):
            master = bd.broker_addrs.get(MixAll.MASTER_ID)
            if master:
                masters[name] = (bd.cluster, master)
        rows: list[tuple[str, str, str, int, int, int]] = []  # topic, group, broker, qid, max, committed
        groups: dict[str, str] = {}  # group → a master that has its offsets
        await asyncio.gather(
            *(
                self._broker(b, name, cluster, master, info.broker_addr_table[name].broker_addrs, rows, groups)
                for name, (cluster, master) in masters.items()
            )
        )
        members: dict[str, list[tuple[str, str]]] = {}
        online = await self._groups(b, set(groups), members)
        # the clients are asked beside the rest, with their own concurrency and time budget, so
        # slow or silent consumers never hold up the brokers' figures
        clients = asyncio.create_task(self._client_status(b, groups, members))
        try:
            dlq_held = await self._topics(b, masters)
            await self._lag(b, masters, rows, online, dlq_held)
            await clients
        finally:
            clients.cancel()  # (done already unless the refresh itself was cut)

    async def _broker(
        self,
        b: MetricsBuilder,
        name: str,
        cluster: str,
        master: str,
        addrs: dict[int, str],
        rows: list[tuple[str, str, str, int, int, int]],
        groups: dict[str, str],
    ) -> None:
        admin = self.admin
        kv = await self._runtime(master)
        b.set("rmq_exporter_up", (cluster, master, name), 1.0 if kv is not None else 0.0)
        if kv is None:
            return
        b.broker_runtime(cluster, name, master, kv)
        for bid, addr in addrs.items():
            if bid == MixAll.MASTER_ID:
                continue
            skv = await self._runtime(addr)
            if skv is not None:
                diff = int(kv.get("commitLogMaxOffset", "0") or 0) - int(skv.get("commitLogMaxOffset", "0") or 0)
                b.set("rocketmq_broker_commitlog_diff", (cluster, addr, name), diff)
        for stats, metric in ((_BROKER_PUT_NUMS, "rocketmq_broker_tps"), (_BROKER_GET_NUMS, "rocketmq_broker_qps")):
            bsd = await self._stats(master, stats, cluster)
            if bsd is not None:
                b.set(metric, (cluster, master, name), bsd.stats_minute.tps)
        # producer instances per group (Java MetricsCollectTask.collectProducer: GET_ALL_PRODUCER_INFO)
        producers = await self._call(f"producers-{master}", lambda: admin.get_all_producer_info(master))
        for group, members in sorted(producers.data.items()) if producers is not None else ():
            b.set("rocketmq_producer_count", (cluster, name, group), len(members))
        csl = await self._call(f"consume-stats-{master}", lambda: admin.fetch_consume_stats_in_broker(master))
        if csl is None:
            return
        for entry in csl.consume_stats_list:
            for group, stats_list in entry.items():
                groups.setdefault(group, master)
                for cs in stats_list:
                    consumer_totals: dict[str, int] = {}
                    for mq, ow in sorted(cs.offset_table.items(), key=lambda kv_: (kv_[0].topic, kv_[0].queue_id)):
                        rows.append(
                            (mq.topic, group, mq.broker_name, mq.queue_id, ow.broker_offset, ow.consumer_offset)
                        )
                        consumer_totals[mq.topic] = consumer_totals.get(mq.topic, 0) + ow.consumer_offset
                    for topic, total in consumer_totals.items():
                        b.set("rocketmq_consumer_offset", (cluster, name, topic, group), total)
                        # Java ConsumeStats (one per topic here): consumeTps and the committed total
                        b.set("rocketmq_group_consume_tps", (cluster, name, topic, group), cs.consume_tps)
                        b.set("rocketmq_group_consume_total_offset", (cluster, name, topic, group), total)
                        for stats, metric in (
                            (_GROUP_GET_NUMS, "rocketmq_consumer_tps"),
                            (_GROUP_GET_SIZE, "rocketmq_consumer_message_size"),
                        ):
                            bsd = await self._stats(master, stats, f"{topic}@{group}")
                            if bsd is not None:
                                b.set(metric, (cluster, name, topic, group), bsd.stats_minute.tps)
                        bsd = await self._stats(master, _SNDBCK, f"{topic}@{group}")
                        if bsd is not None:
                            b.set("rocketmq_send_back_nums", (cluster, name, topic, group), bsd.stats_minute.sum)

    async def _groups(
        self, b: MetricsBuilder, groups: set[str], members: dict[str, list[tuple[str, str]]]
    ) -> dict[str, tuple[int, bool]]:
        """Online consumers of each group: ``group → (count, clustering)``; ``members`` gets each
        group's ``(client address, client id)``."""
        admin = self.admin
        online: dict[str, tuple[int, bool]] = {}

        async def one(group: str) -> None:
            async with self._sem:
                try:
                    cc = await admin.examine_consumer_connection_info(group)
                except AdminError:  # not online (CONSUMER_NOT_ONLINE) or not known
                    cc = None
                except (RMQError, OSError, TimeoutError) as e:
                    _rlog.warning("exporter-connections", "exporter: connections of %s: %s", clip(group), clip(e))
                    cc = None
            conns = cc.connection_set if cc is not None else ()
            clustering = cc is None or cc.message_model != "BROADCASTING"
            online[group] = (len(conns), clustering)
            members[group] = [(c.client_addr, c.client_id) for c in conns]
            b.set(
                "rocketmq_group_count",
                (",".join(sorted(c.client_addr for c in conns)), ",".join(sorted(c.client_id for c in conns)), group),
                len(conns),
            )

        await asyncio.gather(*(one(g) for g in sorted(groups)))
        return online

    async def _client_status(
        self, b: MetricsBuilder, groups: dict[str, str], members: dict[str, list[tuple[str, str]]]
    ) -> None:
        """The ``rocketmq_client_*`` gauges (Java ``ClientMetricTaskRunnable``): each online
        consumer's GET_CONSUMER_RUNNING_INFO (relayed by a master of its group) statusTable.
        Bounded: :attr:`max_clients` asked per refresh, the least recently asked first,
        ``concurrency`` at a time, each within :attr:`client_timeout` and all within half an
        interval; an answer is served until it is :attr:`client_ttl` old (so a client not
        asked this round keeps its last figures), a client gone is forgotten."""
        now = time.monotonic()
        online = {(g, cid): addr for g, ms in members.items() for addr, cid in ms}
        cache = self._clients
        for key in [k for k in cache if k not in online]:
            del cache[key]
        due = sorted(
            (k for k in online if k not in cache or now - cache[k][0] >= self.interval * 0.9),
            key=lambda k: cache[k][0] if k in cache else -1.0,
        )[: self.max_clients]
        admin = self.admin

        async def ask(key: tuple[str, str]) -> None:
            group, client_id = key
            _asked, answered, _addr, table = cache.get(key, (0.0, 0.0, online[key], {}))

            info: ConsumerRunningInfo | None = None
            async with self._client_sem:
                try:
                    async with asyncio.timeout(self.client_timeout):
                        info = await admin.get_consumer_running_info(group, client_id, broker_addr=groups.get(group))
                except (RMQError, OSError, TimeoutError) as e:
                    _rlog.warning(
                        "exporter-running-info",
                        "exporter: running info of %s in %s: %s",
                        clip(client_id),
                        clip(group),
                        clip(e) if str(e) else type(e).__name__,
                    )
            if info is not None:
                answered, table = time.monotonic(), info.status_table
                outcome["answered"] += 1
            else:
                outcome["failed"] += 1
            cache[key] = (now, answered, online[key], table)

        outcome = {"answered": 0, "failed": 0, "not_asked": len(online) - len(due)}
        tasks = [asyncio.create_task(ask(k)) for k in due]
        if tasks:
            # half an interval for them all: what has not answered by then counts as failed
            _done, pending = await asyncio.wait(tasks, timeout=max(1.0, self.interval / 2))
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            outcome["failed"] += len(pending)
        for state, n in outcome.items():
            b.set("rmq_exporter_clients", (state,), n)
        for (group, client_id), (_asked, answered, addr, table) in sorted(cache.items()):
            if now - answered > self.client_ttl:
                continue
            for topic, status in sorted(table.items()):
                b.client_status(addr, client_id, group, topic, status)

    async def _topics(self, b: MetricsBuilder, masters: dict[str, tuple[str, str]]) -> dict[str, int]:
        """Per topic its offsets and put rates; returns what each ``%DLQ%`` topic holds (max −
        min offsets over its queues)."""
        admin = self.admin
        topics = await admin.fetch_all_topic_list()
        dlq_held: dict[str, int] = {}

        async def one(topic: str) -> None:
            stats = await self._call(f"topic-stats-{topic}", lambda: admin.examine_topic_stats(topic))
            if stats is None:
                return
            per_broker: dict[str, int] = {}
            for mq, off in stats.offset_table.items():
                per_broker[mq.broker_name] = per_broker.get(mq.broker_name, 0) + off.max_offset
            if topic.startswith(_DLQ):
                dlq_held[topic] = sum(max(0, off.max_offset - off.min_offset) for off in stats.offset_table.values())
            for name, total in per_broker.items():
                cluster, master = masters.get(name, ("", ""))
                if topic.startswith(_RETRY):
                    b.set("rocketmq_topic_retry_offset", (cluster, name, topic), total)
                elif topic.startswith(_DLQ):
                    b.set("rocketmq_topic_dlq_offset", (cluster, name, topic[len(_DLQ) :]), total)
                else:
                    b.set("rocketmq_producer_offset", (cluster, name, topic), total)
                if not master or topic.startswith((_RETRY, _DLQ)):
                    continue
                for stats_name, metric in (
                    (_TOPIC_PUT_NUMS, "rocketmq_producer_tps"),
                    (_TOPIC_PUT_SIZE, "rocketmq_producer_message_size"),
                ):
                    bsd = await self._stats(master, stats_name, topic)
                    if bsd is not None:
                        b.set(metric, (cluster, name, topic), bsd.stats_minute.tps)

        await asyncio.gather(*(one(t) for t in sorted(topics)))
        return dlq_held

    async def _lag(
        self,
        b: MetricsBuilder,
        masters: dict[str, tuple[str, str]],
        rows: list[tuple[str, str, str, int, int, int]],
        online: dict[str, tuple[int, bool]],
        dlq_held: dict[str, int],
    ) -> None:
        admin = self.admin
        old, new = self._times, {}
        lookups: list[tuple[str, str, int, int]] = []
        for topic, _group, broker, qid, broker_off, consumer_off in rows:
            key = (topic, broker, qid, consumer_off)
            if broker_off > consumer_off and key not in new:
                if key in old:
                    new[key] = old[key]
                elif len(lookups) < self.max_lag_lookups:
                    lookups.append(key)
                    new[key] = -1

        async def look(key: tuple[str, str, int, int]) -> None:
            msg = await self._call("lag-latency", lambda: admin.view_message_by_queue_offset(*key))
            new[key] = msg.store_timestamp if msg is not None else -1

        await asyncio.gather(*(look(k) for k in lookups))
        self._times = {k: v for k, v in new.items() if v > 0}
        now = time.time() * 1000
        worst: dict[tuple[str, str, str], float] = {}
        for topic, group, broker, qid, broker_off, consumer_off in rows:
            lag = broker_off - consumer_off
            latency: float | None = 0.0
            if lag > 0:
                ts = new.get((topic, broker, qid, consumer_off), -1)
                latency = max(0.0, now - ts) if ts > 0 else None
            b.queue_lag(topic, group, broker, qid, lag, latency)
            if latency is not None and latency > worst.get((topic, group, broker), -1.0):
                worst[(topic, group, broker)] = latency
            count, clustering = online.get(group, (0, True))
            if clustering:
                labels = (group, topic, str(count), msg_model_label(True))
                metric = (
                    "rocketmq_group_retrydiff"
                    if topic.startswith(_RETRY)
                    else "rocketmq_group_dlqdiff"
                    if topic.startswith(_DLQ)
                    else "rocketmq_group_diff"
                )
                b.add(metric, labels, lag)
        for (topic, group, broker), latency in worst.items():
            cluster = masters.get(broker, ("", ""))[0]
            b.set("rocketmq_group_get_latency_by_storetime", (cluster, broker, topic, group), latency)
        # a %DLQ% topic nobody consumes: all it holds is the group's DLQ backlog (as the broker's
        # own endpoint counts it)
        consumed = {row[0] for row in rows}
        for topic, held in sorted(dlq_held.items()):
            if topic not in consumed:
                group = topic[len(_DLQ) :]
                labels = (group, topic, str(online.get(group, (0, True))[0]), msg_model_label(True))
                b.set("rocketmq_group_dlqdiff", labels, held)

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every :attr:`interval` seconds until ``stop`` is set."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 - the next round tries again
                _rlog.error("exporter-round", "exporter: refresh failed", exc_info=True)
            wait = max(0.5, self.interval - (time.monotonic() - started))
            try:
                async with asyncio.timeout(wait):
                    await stop.wait()
            except TimeoutError:
                pass


def run_exporter(
    namesrv: str,
    host: str,
    port: int,
    interval: float,
    timeout: float,
    max_lag_lookups: int,
    *,
    max_clients: int = DEFAULT_MAX_CLIENTS,
    client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
    access_key: str | None = None,
    secret_key: str | None = None,
    tls: bool | ssl.SSLContext = False,
) -> int:
    """``rmq exporter``: serve the cluster's metrics on ``host:port`` until SIGINT/SIGTERM
    (``access_key``/``secret_key`` sign every request; ``tls`` True uses the system trust store,
    an SSLContext its own: ``--tls-config``; ``max_clients`` consumers asked for their running
    info per refresh, default 100, each within ``client_timeout`` seconds, default 3).
    Exit 3 when the port is taken (the exporter has nothing else to do)."""
    import signal

    import uvloop

    from rmq.cli.process import EXIT_OK, EXIT_PORT_TAKEN, setup_logging

    setup_logging()

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with Admin(
            namesrv, timeout=timeout, access_key=access_key, secret_key=secret_key, tls=tls or None
        ) as admin:
            collector = ClusterCollector(
                admin,
                interval=interval,
                max_lag_lookups=max_lag_lookups,
                max_clients=max_clients,
                client_timeout=client_timeout,
            )

            async def latest() -> bytes:
                return collector.latest

            server = MetricsHttpServer(host, port, latest, name="exporter")
            if not await server.start():
                return EXIT_PORT_TAKEN
            log.info(
                "rmq exporter listening on http://%s:%d/metrics (name server %s, every %.0f s)",
                host,
                server.port,
                namesrv,
                interval,
            )
            task = asyncio.create_task(collector.run(stop), name="exporter-refresh")
            try:
                await stop.wait()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await server.close()
        return EXIT_OK

    return uvloop.run(main())
