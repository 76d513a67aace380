"""The dashboard's TPS history (rocketmq-dashboard's ``DashboardCollectTask``, which samples
broker and topic rates every minute): the console samples in the background and keeps the
last hour in bounded ring buffers, so the charts need no broker-side history. Given a
Prometheus (``rmq console --prometheus-url``), :class:`PrometheusHistory` reads longer ranges
from its HTTP API instead, over the families ``rmq exporter`` serves.

Each round asks every broker for its runtime info (``putTps`` / ``getTransferedTps``: one
call per broker) and, for up to ``max_topics`` normal topics, the sum of their queues' max
offsets (one route lookup and one GET_TOPIC_STATS_INFO per broker of the topic); a topic's TPS
is the growth of that sum over the time between two rounds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

from rmq.common.log import RateLimitedLog
from rmq.common.tasks import BackgroundTasks, wait_event
from rmq.errors import RMQError

from .service import ConsoleService

__all__ = ["PrometheusError", "PrometheusHistory", "TpsSampler", "check_prometheus_url"]

log = logging.getLogger("rmq.console")
_warn = RateLimitedLog(log, interval=60.0)


class TpsSampler:
    """Broker and topic TPS sampled every ``interval`` seconds, ``history`` seconds kept.

    Args:
        service: the console service whose admin asks the brokers.
        interval: seconds between two rounds (default 10; > 0).
        history: seconds of samples kept per series (default 3600: the dashboard's last hour).
        max_topics: normal topics sampled (default 64, the first by name; the rest are named
            in ``topics_skipped``), also the bound on topic series kept.
        max_brokers: broker series kept (default 256).
    """

    def __init__(
        self,
        service: ConsoleService,
        *,
        interval: float = 10.0,
        history: float = 3600.0,
        max_topics: int = 64,
        max_brokers: int = 256,
    ) -> None:
        if not interval > 0 or not history >= interval:
            raise ValueError(f"need interval > 0 and history >= interval, not {interval} and {history}")
        self.service = service
        self.interval = interval
        self.history = history
        self.max_topics = max_topics
        self.max_brokers = max_brokers
        self.points = int(history / interval) + 1
        self.brokers: dict[str, deque[tuple[int, float, float]]] = {}
        self.topics: dict[str, deque[tuple[int, float]]] = {}
        self.topics_skipped = 0
        self.rounds = 0
        self.last_error = ""
        self._last_totals: dict[str, tuple[float, int]] = {}
        self._tasks = BackgroundTasks("console TPS sampler", log)
        self._stop = asyncio.Event()
        self._round_done = asyncio.Event()

    def start(self) -> None:
        """Begin sampling (the first round at once)."""
        self._tasks.spawn(self._run(), name="console-tps-sampler")

    async def stop(self) -> None:
        """Stop sampling and wait for the task to end."""
        self._stop.set()
        await self._tasks.close()

    async def wait_round(self, rounds: int, timeout: float = 30.0) -> None:
        """Wait until at least ``rounds`` rounds have completed (tests)."""
        async with asyncio.timeout(timeout):
            while self.rounds < rounds:
                self._round_done.clear()
                await self._round_done.wait()

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # a round may not outlast three intervals (at least 30 s): a hung broker
                # delays the charts, it does not stop them
                async with asyncio.timeout(max(30.0, 3 * self.interval)):
                    await self.sample_once()
                self.last_error = ""
            except (RMQError, OSError, TimeoutError) as e:
                self.last_error = str(e) or type(e).__name__
                _warn.warning("sample", "console: TPS sampling failed: %s", self.last_error)
            self.rounds += 1
            self._round_done.set()
            await wait_event(self._stop, self.interval)

    async def sample_once(self) -> None:
        """One round: every broker's rates, then the topics' growth since the last round."""
        ts = int(time.time() * 1000)
        cluster = await self.service.cluster()
        for b in cluster["brokers"]:
            if "error" in b:
                continue
            key = f"{b['brokerName']} ({b['addr']})"
            series = self.brokers.get(key)
            if series is None:
                if len(self.brokers) >= self.max_brokers:
                    continue
                series = self.brokers[key] = deque(maxlen=self.points)
            series.append((ts, float(b["putTps"]), float(b["getTps"])))
        names = [t["topic"] for t in await self.service.topics() if t["kind"] == "normal"]
        self.topics_skipped = max(0, len(names) - self.max_topics)
        names = names[: self.max_topics]
        totals = await self.service.topic_put_totals(names)
        now = time.monotonic()
        for topic, total in totals.items():
            prev = self._last_totals.get(topic)
            self._last_totals[topic] = (now, total)
            if prev is None:
                continue
            dt = now - prev[0]
            tps = max(0.0, (total - prev[1]) / dt) if dt > 0 else 0.0
            self.topics.setdefault(topic, deque(maxlen=self.points)).append((ts, round(tps, 2)))
        for gone in set(self._last_totals) - set(names):  # deleted or no longer sampled
            self._last_totals.pop(gone, None)
            self.topics.pop(gone, None)

    def snapshot(self) -> dict[str, Any]:
        """The history as the dashboard draws it."""
        return {
            "interval": self.interval,
            "history": self.history,
            "rounds": self.rounds,
            "lastError": self.last_error,
            "topicsSkipped": self.topics_skipped,
            "brokers": {k: [[t, p, g] for t, p, g in v] for k, v in sorted(self.brokers.items())},
            "topics": {k: [[t, v] for t, v in s] for k, s in sorted(self.topics.items())},
        }


class PrometheusError(Exception):
    """Prometheus could not answer a range query (unreachable, timed out, refused, or an
    answer too large or not its JSON); the message says which, for the page."""


#: the dashboard's series as PromQL over the families ``rmq exporter`` and the brokers serve.
#: ``max by`` folds the same series scraped from both sources (the exporter and the broker's
#: own endpoint) into one; retry and DLQ topics are left out as the in-memory sampler does.
PROM_BROKER_PUT = "max by (broker, brokerIP) (rocketmq_broker_tps)"
PROM_BROKER_GET = "max by (broker, brokerIP) (rocketmq_broker_qps)"
PROM_TOPICS = 'sum by (topic) (max by (broker, topic) (rocketmq_producer_tps{topic!~"%RETRY%.*|%DLQ%.*"}))'


def check_prometheus_url(url: str) -> str:
    """``url`` without a trailing ``/`` when it is ``http(s)://host[:port][/path]``; ValueError
    naming ``--prometheus-url`` and the allowed form otherwise."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"bad --prometheus-url {url!r} (expected http(s)://host[:port][/path])")
    return url.rstrip("/")


class PrometheusHistory:
    """The dashboard's history read from Prometheus's HTTP API (``/api/v1/query_range``)
    instead of the in-memory hour: any range up to ``max_range``, as far back as Prometheus
    keeps the ``rmq exporter`` (or broker) families it scrapes.

    Args:
        url: Prometheus's base URL (``http://host:9090``; see :func:`check_prometheus_url`).
        timeout: seconds one query may take in all (default 10).
        max_points: points per series at most (default 720): the step is ``range / max_points``
            rounded up to a whole second (at least 1 s).
        max_topics: topic series kept, the busiest (default 64); the rest are counted in
            ``topicsSkipped``.
        max_brokers: broker series kept (default 256).
        max_bytes: the largest answer read (default 8 MiB); past it the query fails.
        default_range / max_range: seconds drawn when the page asks for none (3600) and at most
            (30 days); at least 60.
        cache_ttl: seconds an answer is reused for the same range (default 10).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        max_points: int = 720,
        max_topics: int = 64,
        max_brokers: int = 256,
        max_bytes: int = 8 << 20,
        default_range: float = 3600.0,
        max_range: float = 30 * 86400.0,
        cache_ttl: float = 10.0,
    ) -> None:
        self.url = check_prometheus_url(url)
        self.timeout = timeout
        self.max_points = max_points
        self.max_topics = max_topics
        self.max_brokers = max_brokers
        self.max_bytes = max_bytes
        self.default_range = default_range
        self.max_range = max_range
        self.cache_ttl = cache_ttl
        self._session: Any = None
        self._cache: dict[int, tuple[float, dict[str, Any]]] = {}
        self._inflight: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def close(self) -> None:
        """Close the HTTP session (idempotent)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def range_of(self, text: str | None) -> int:
        """The range (whole seconds) the page asked for, bounded to 60..``max_range``;
        ``default_range`` when none; ValueError for one that is not a number."""
        if not text:
            return int(self.default_range)
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"range is seconds (60..{int(self.max_range)}), not {text[:40]!r}") from None
        if value != value:  # NaN
            raise ValueError("range is a number of seconds")
        return int(min(max(value, 60.0), self.max_range))

    async def snapshot(self, range_s: int) -> dict[str, Any]:
        """The history of the last ``range_s`` seconds in :meth:`TpsSampler.snapshot`'s shape
        (and ``source``, ``range``, ``step``); one query set at a time per range, reused for
        ``cache_ttl``. PrometheusError when Prometheus does not answer."""
        now = time.monotonic()
        hit = self._cache.get(range_s)
        if hit is not None and now - hit[0] < self.cache_ttl:
            return hit[1]
        pending = self._inflight.get(range_s)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not pending.cancelled() or (task is not None and task.cancelling()):
                    raise  # this request was cancelled, not the one it waited for
            # the request that was asking gave up: ask for this one
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inflight[range_s] = fut
        try:
            snap = await self._query_all(range_s)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved here: there may be no other waiter
            raise
        finally:
            self._inflight.pop(range_s, None)
        fut.set_result(snap)
        for key in [k for k, (t, _) in self._cache.items() if now - t >= self.cache_ttl]:
            del self._cache[key]
        self._cache[range_s] = (time.monotonic(), snap)
        return snap

    async def _query_all(self, range_s: int) -> dict[str, Any]:
        end = time.time()
        step = max(1, -(-range_s // self.max_points))
        start = end - range_s
        put, get, topics = await asyncio.gather(
            self._query_range(PROM_BROKER_PUT, start, end, step),
            self._query_range(PROM_BROKER_GET, start, end, step),
            self._query_range(PROM_TOPICS, start, end, step),
        )
        joined: dict[str, dict[int, list[float]]] = {}
        for i, result in ((0, put), (1, get)):
            for metric, points in result:
                key = f"{metric.get('broker', '?')} ({metric.get('brokerIP', '?')})"
                if key not in joined and len(joined) >= self.max_brokers:
                    continue
                series = joined.setdefault(key, {})
                for t, v in points:
                    series.setdefault(t, [0.0, 0.0])[i] = v
        topic_series = sorted(
            ((m.get("topic", "?"), pts) for m, pts in topics), key=lambda tp: -sum(v for _, v in tp[1])
        )
        return {
            "source": "prometheus",
            "range": range_s,
            "step": step,
            "interval": step,
            "history": range_s,
            "rounds": max((len(p) for _, p in topic_series), default=0),
            "lastError": "",
            "topicsSkipped": max(0, len(topic_series) - self.max_topics),
            "brokers": {k: [[t, pg[0], pg[1]] for t, pg in sorted(s.items())] for k, s in sorted(joined.items())},
            "topics": {name: [[t, v] for t, v in pts] for name, pts in sorted(topic_series[: self.max_topics])},
        }

    async def _query_range(
        self, query: str, start: float, end: float, step: int
    ) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
        """One ``query_range``: ``(labels, [(ms, value)])`` per series (non-finite values left
        out), bounded by ``timeout`` and ``max_bytes``."""
        import json
        import math

        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession()
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": str(step)}
        where = f"Prometheus at {self.url}"
        try:
            async with asyncio.timeout(self.timeout):
                async with self._session.post(f"{self.url}/api/v1/query_range", data=params) as resp:
                    body = await resp.content.read(self.max_bytes + 1)
                    status = resp.status
        except TimeoutError:
            raise PrometheusError(f"{where} did not answer within {self.timeout:g} s") from None
        except (aiohttp.ClientError, OSError) as e:
            raise PrometheusError(f"{where} cannot be reached: {e}") from None
        if len(body) > self.max_bytes:
            raise PrometheusError(f"{where} answered more than {self.max_bytes} bytes")
        try:
            doc = json.loads(body)
        except ValueError:
            raise PrometheusError(f"{where} answered HTTP {status} without its JSON") from None
        if not isinstance(doc, dict) or doc.get("status") != "success":
            error = doc.get("error") if isinstance(doc, dict) else None
            raise PrometheusError(f"{where} refused the query (HTTP {status}): {str(error)[:300]}")
        out: list[tuple[dict[str, str], list[tuple[int, float]]]] = []
        data = doc.get("data")
        rows = data.get("result") if isinstance(data, dict) else None
        for row in rows if isinstance(rows, list) else ():
            if not isinstance(row, dict) or not isinstance(row.get("values"), list):
                continue
            points: list[tuple[int, float]] = []
            for pair in row["values"][-self.max_points :]:
                try:
                    t, v = pair
                    ms, value = int(float(t) * 1000), float(v)
                except (TypeError, ValueError):
                    continue
                if math.isfinite(value):
                    points.append((ms, round(value, 3)))
            metric = row.get("metric")
            out.append(({str(k): str(x) for k, x in metric.items()} if isinstance(metric, dict) else {}, points))
        return out
