"""The dashboard's TPS history (rocketmq-dashboard's ``DashboardCollectTask``, which samples
broker and topic rates every minute): the console samples in the background and keeps the
last hour in bounded ring buffers, so the charts need no broker-side history.

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

__all__ = ["TpsSampler"]

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
