"""Java's ``StatsItem`` / ``StatsItemSet`` (``org.apache.rocketmq.common.stats``): a running
``value`` / ``times`` pair per key, sampled into minute, hour and day windows from which a
window's sum, tps and average are read (Java ``StatsItem.computeStatsData``).

The broker's statistics (``rmq.broker.stats``, Java ``BrokerStatsManager``) sample them on their
own ticks; the SDK's consumer statistics (``rmq.client.consumer.stats``, Java
``ConsumerStatsManager``) use :class:`StatsItemSet` too, sampled when they are touched.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from rmq.common.log import RateLimitedLog, clip

__all__ = ["DEFAULT_IDLE_MS", "DEFAULT_MAX_ITEMS", "StatsItem", "StatsItemSet"]

log = logging.getLogger("rmq.stats")
_rlog = RateLimitedLog(log)

#: keys a set holds at most (the broker's ``maxStatsItems``)
DEFAULT_MAX_ITEMS = 100_000
#: an item unchanged this long (ms) is dropped at the hourly sampling (longer than the day window)
DEFAULT_IDLE_MS = 25 * 3600 * 1000


class StatsItem:
    """One key of a stats set (Java ``StatsItem``): running ``value`` and ``times`` and their
    snapshots ``(timestamp ms, times, value)`` for the minute, hour and day windows."""

    __slots__ = ("key", "value", "times", "minute", "hour", "day", "last_value", "last_change_ms", "created_ms")

    def __init__(self, key: str, now_ms: int) -> None:
        self.key = key
        self.created_ms = now_ms
        self.value = 0
        self.times = 0
        self.minute: deque[tuple[int, int, int]] = deque(maxlen=7)
        self.hour: deque[tuple[int, int, int]] = deque(maxlen=7)
        self.day: deque[tuple[int, int, int]] = deque(maxlen=25)
        self.last_value = 0
        self.last_change_ms = now_ms

    def add(self, value: int, times: int = 1) -> None:
        self.value += value
        self.times += times

    @staticmethod
    def _sample(window: deque[tuple[int, int, int]], now_ms: int, back_ms: int, times: int, value: int) -> None:
        # Java StatsItem.samplingIn*: the first sample is preceded by a zero one a period back.
        if not window:
            window.append((now_ms - back_ms, 0, 0))
        window.append((now_ms, times, value))

    @staticmethod
    def compute(window: Sequence[tuple[int, int, int]]) -> tuple[int, float, float]:
        """``(sum, tps, avgpt)`` over a window (Java ``StatsItem.computeStatsData``)."""
        if not window:
            return 0, 0.0, 0.0
        t0, times0, v0 = window[0]
        t1, times1, v1 = window[-1]
        total = v1 - v0
        tps = total * 1000.0 / (t1 - t0) if t1 != t0 else 0.0
        times_diff = times1 - times0
        avgpt = total / times_diff if times_diff > 0 else 0.0
        return total, tps, avgpt


class StatsItemSet:
    """A named set of :class:`StatsItem` (Java ``StatsItemSet``), bounded to ``max_items`` keys."""

    def __init__(self, name: str, max_items: int = DEFAULT_MAX_ITEMS, clock: Callable[[], int] | None = None) -> None:
        self.name = name
        self.max_items = max_items
        self.items: dict[str, StatsItem] = {}
        self._clock = clock or (lambda: int(time.time() * 1000))
        self.refused = 0

    def get_or_create(self, key: str) -> StatsItem | None:
        """The item of ``key``, created if the set has room; ``None`` when it is full."""
        item = self.items.get(key)
        if item is None:
            if len(self.items) >= self.max_items:
                self.refused += 1
                _rlog.warning(
                    f"stats-full-{self.name}",
                    "stats set %s is full (%d keys): %s is not counted",
                    self.name,
                    self.max_items,
                    clip(key),
                )
                return None
            item = self.items[key] = StatsItem(key, self._clock())
        return item

    def add(self, key: str, value: int, times: int = 1) -> None:
        item = self.items.get(key) or self.get_or_create(key)
        if item is not None:
            item.value += value
            item.times += times

    def get(self, key: str) -> StatsItem | None:
        return self.items.get(key)

    def remove_where(self, pred: Callable[[str], bool]) -> None:
        for key in [k for k in self.items if pred(k)]:
            del self.items[key]

    # the three samplings (Java samplingInSeconds / InMinutes / InHour)
    def sample_seconds(self, now_ms: int, period_ms: int) -> None:
        for it in self.items.values():
            it._sample(it.minute, now_ms, period_ms, it.times, it.value)

    def sample_minutes(self, now_ms: int, period_ms: int) -> None:
        for it in self.items.values():
            it._sample(it.hour, now_ms, period_ms, it.times, it.value)

    def sample_hour(self, now_ms: int, period_ms: int, idle_ms: int) -> None:
        idle: list[str] = []
        for key, it in self.items.items():
            it._sample(it.day, now_ms, period_ms, it.times, it.value)
            if it.value != it.last_value:
                it.last_value = it.value
                it.last_change_ms = now_ms
            elif now_ms - it.last_change_ms >= idle_ms:
                idle.append(key)
        for key in idle:
            del self.items[key]
