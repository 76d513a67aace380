"""Runtime statistics of the broker, as Java keeps them.

Two families, both counted once per request on the send and pull paths (never per message):

* :class:`StoreStats` — Java ``StoreStatsService``: broker-wide totals (messages and bytes put,
  pulls that found or missed, messages transferred), sampled once a second into a ring of 601
  snapshots; ``putTps``/``getFoundTps``/``getMissTps``/``getTotalTps``/``getTransferedTps`` are
  rates over the last 10, 60 and 600 samples, printed as Java's ``"a b c"`` (a window with too
  few samples prints as an empty string, as Java's does). It also keeps the put-latency
  histogram (``putMessageDistributeTime``, ``putLatency99``/``999``) and the per-day
  ``msgPutTotal*``/``msgGetTotal*`` records (Java ``BrokerStats.record`` at midnight).
* :class:`StatsItemSet` of :class:`StatsItem` (``rmq.common.stats``, shared with the SDK) —
  Java ``BrokerStatsManager``'s TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE
  (keyed ``topic@group``), SNDBCK_PUT_NUMS, BROKER_PUT_NUMS and BROKER_GET_NUMS (keyed by the
  cluster name): each item is a running ``value``/``times`` pair sampled every 10 s (7 kept:
  the minute window), every 10 min (7: the hour) and every hour (25: the day), from which
  VIEW_BROKER_STATS_DATA reports sum, tps and avgpt per window (Java
  ``StatsItem.computeStatsData``).

Bounds (Java has none): a set holds at most ``max_items`` keys (``maxStatsItems``, 100 000);
a new key past it is not counted (one rate-limited warning). An item whose value has not
changed for ``idle_ms`` (25 h: longer than the day window, so nothing visible is lost) is
dropped at the next hourly sampling.

Time: every window boundary is computed from :attr:`BrokerStatsManager.clock` (milliseconds;
``time.time`` by default) and ``sample_interval_ms`` (the "10 s" tick; the 1 s, 10 min and 1 h
ticks scale with it). Tests shorten the interval (``statsSampleIntervalMs``) or inject a clock and
call :meth:`BrokerStatsManager.tick` themselves; the broker's loop calls ``tick()`` often
enough for the shortest tick, and a tick that is not due does nothing.
"""

from __future__ import annotations

import bisect
import datetime
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rmq.common.metrics import RPC_LATENCY_BUCKETS_MS
from rmq.common.stats import DEFAULT_IDLE_MS, DEFAULT_MAX_ITEMS, StatsItem, StatsItemSet

__all__ = [
    "BROKER_GET_NUMS",
    "BROKER_PUT_NUMS",
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "SNDBCK_PUT_NUMS",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "BrokerStatsManager",
    "LatencyHistogram",
    "StatsItem",
    "StatsItemSet",
    "StoreStats",
    "java_double",
]

log = logging.getLogger("rmq.broker")

# Java org.apache.rocketmq.common.stats.Stats names.
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

# What the C counter blocks give BrokerStatsManager.fold (rmq/broker/processors/_sendpath.pyx):
# PutCounters.take: (topics [(topic, nums, size, times)], floor_ms [(ms, n)], ceil_ms [(ms, n)],
# rpc_total_ns, slow_ns); PullCounters.take: (found [(group, topic, nums, size, times)], misses,
# max_ms, ceil_ms [(ms, n)], rpc_total_ns, slow_ns).
PutCounts = tuple[list[tuple[str, int, int, int]], list[tuple[int, int]], list[tuple[int, int]], int, list[int]]
PullCounts = tuple[list[tuple[str, str, int, int, int]], int, int, list[tuple[int, int]], int, list[int]]


def java_double(x: float) -> str:
    """``Double.toString(x)`` as Java prints it: ``0.0``, ``633.5298231591568``, ``1.5E7``,
    ``1.0E-4`` (plain between 10^-3 and 10^7, else computerized scientific notation)."""
    x = float(x)
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        return repr(x)  # plain in this range, with ".0" for whole numbers, as Java
    for digits in range(17):  # the shortest mantissa that reads back as x
        text = f"{x:.{digits}e}"
        if float(text) == x:
            break
    mantissa, _, exp = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exp)}"


# Java StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_MAX_DESC and its bucket bounds (ms, exclusive).
_DISTRIBUTE_DESC = (
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
)
_DISTRIBUTE_BOUNDS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _latency_bucket_bounds() -> list[int]:
    # Java StoreStatsService.PUT_MESSAGE_ENTIRE_TIME_BUCKETS: (step, count) runs up to 10 s.
    bounds: list[int] = []
    edge = 0
    for step, count in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(count):
            edge += step
            bounds.append(edge)
    return bounds


_LATENCY_BOUNDS = _latency_bucket_bounds()


class StoreStats:
    """Broker-wide totals and their per-second samples (Java ``StoreStatsService``)."""

    SAMPLES = 601  # Java MAX_RECORDS_OF_SAMPLING + 1

    def __init__(self, now_ms: int) -> None:
        self.boot_timestamp = now_ms
        self.put_nums = 0  # messages put (Java getPutMessageTimesTotal)
        self.put_size = 0  # bytes put
        self.put_failed = 0
        self.get_found = 0  # pulls that found messages
        self.get_miss = 0  # pulls that did not
        self.get_transferred = 0  # messages pulled (Java getMessageTransferedMsgCount)
        self.get_size = 0
        self.put_time_max = 0  # ms, the slowest put so far
        self.get_time_max = 0
        # (ms, put_nums, found, miss, transferred)
        self.samples: deque[tuple[int, int, int, int, int]] = deque(maxlen=self.SAMPLES)
        self._distribute = [0] * len(_DISTRIBUTE_DESC)
        self._last_distribute: list[int] | None = None
        self._latency = [0] * (len(_LATENCY_BOUNDS) + 1)
        self._last_latency = [0] * (len(_LATENCY_BOUNDS) + 1)
        # Java BrokerStats: the totals at the start of today and of yesterday
        self.put_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_today_morning = 0
        self.get_total_yesterday_morning = 0

    def record_put_time(self, ms: int, n: int = 1) -> None:
        """``n`` puts of ``ms`` milliseconds each (default one; Java ``setPutMessageEntireTimeMax``)."""
        self._distribute[bisect.bisect_left(_DISTRIBUTE_BOUNDS, ms + 1) if ms > 0 else 0] += n
        self._latency[bisect.bisect_left(_LATENCY_BOUNDS, ms)] += n
        if ms > self.put_time_max:
            self.put_time_max = ms

    def record_get_time(self, ms: int) -> None:
        """One store read's duration (Java ``setGetMessageEntireTimeMax``)."""
        if ms > self.get_time_max:
            self.get_time_max = ms

    def sample(self, now_ms: int) -> None:
        self.samples.append((now_ms, self.put_nums, self.get_found, self.get_miss, self.get_transferred))

    def roll_minute(self) -> None:
        """Java printTps each minute: the distribution and latency buckets start over; the
        finished minute is what runtime info reports."""
        self._last_distribute, self._distribute = self._distribute, [0] * len(_DISTRIBUTE_DESC)
        self._last_latency, self._latency = self._latency, [0] * (len(_LATENCY_BOUNDS) + 1)

    def record_day(self) -> None:
        """Java ``BrokerStats.record`` at midnight."""
        self.put_total_yesterday_morning = self.put_total_today_morning
        self.get_total_yesterday_morning = self.get_total_today_morning
        self.put_total_today_morning = self.put_nums
        self.get_total_today_morning = self.get_transferred
        log.info(
            "yesterday put message total: %d, get message total: %d",
            self.put_total_today_morning - self.put_total_yesterday_morning,
            self.get_total_today_morning - self.get_total_yesterday_morning,
        )

    def _tps(self, field: int, window: int) -> float | None:
        s = self.samples
        if len(s) <= window:
            return None
        a, b = s[-(window + 1)], s[-1]
        dt = b[0] - a[0]
        return (b[field] - a[field]) * 1000.0 / dt if dt > 0 else 0.0

    def tps_string(self, field: int) -> str:
        """Java's ``"10s 1min 10min"`` figure; a window without enough samples is empty."""
        return " ".join("" if (v := self._tps(field, w)) is None else java_double(v) for w in (10, 60, 600))

    def total_tps_string(self) -> str:
        """Java getGetTotalTps: found + miss, 0.0 where a window has too few samples."""
        return " ".join(java_double((self._tps(2, w) or 0.0) + (self._tps(3, w) or 0.0)) for w in (10, 60, 600))

    def distribute_string(self) -> str:
        if self._last_distribute is None:
            return "null"
        return "".join(f"{d}:{n} " for d, n in zip(_DISTRIBUTE_DESC, self._last_distribute, strict=True))

    def latency_px(self, px: float) -> float:
        """Java ``findPutMessageEntireTimePX`` over the last finished minute."""
        buckets = self._last_latency
        total = sum(buckets)
        index = int(total * px)
        passed = 0
        bounds = [*_LATENCY_BOUNDS, 2**63 - 1]
        for i, count in enumerate(buckets):
            if index <= passed + count:
                rel = index - passed
                if i == 0:
                    return bounds[0] * rel / count if count else 0.0
                lower = bounds[i - 1]
                return lower + ((bounds[i] - lower) * rel / count if count else 0.0)
            passed += count
        return 0.0


class LatencyHistogram:
    """Request durations in RocketMQ 5's RPC latency buckets (ms, ``RPC_LATENCY_BUCKETS_MS``;
    Java ``RemotingMetricsManager``): ``counts[i]`` durations ≤ bound i, the last for longer
    ones, and their ``total`` in ms. One bisect per request."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(RPC_LATENCY_BUCKETS_MS) + 1)
        self.total = 0.0

    def observe_ns(self, ns: int) -> None:
        ms = ns / 1e6
        self.counts[bisect.bisect_left(RPC_LATENCY_BUCKETS_MS, ms)] += 1
        self.total += ms

    def add_ms(self, ms: int, n: int, total_ms: float = 0.0) -> None:
        """``n`` durations of at most ``ms`` whole milliseconds and more than ``ms - 1`` (one
        bucket, since the bounds are whole milliseconds), plus ``total_ms`` to the total."""
        self.counts[bisect.bisect_left(RPC_LATENCY_BUCKETS_MS, ms)] += n
        self.total += total_ms


def _human_bytes(n: int) -> str:
    """Java ``MixAll.humanReadableByteCount(bytes, false)``: ``"55.7 KiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


class BrokerStatsManager:
    """The broker's statistics (Java ``BrokerStatsManager`` + ``StoreStatsService`` +
    ``BrokerStats``).

    Args:
        cluster_name: the key of BROKER_PUT_NUMS / BROKER_GET_NUMS (Java's).
        max_items: keys per stats set (default 100 000).
        idle_ms: an item unchanged this long is dropped (default 25 h).
        sample_interval_ms: the "10 s" tick (default 10 000; tests shorten it).
        clock: milliseconds since the epoch (default ``time.time``).
    """

    def __init__(
        self,
        cluster_name: str = "DefaultCluster",
        *,
        max_items: int = DEFAULT_MAX_ITEMS,
        idle_ms: int = DEFAULT_IDLE_MS,
        sample_interval_ms: int = 10_000,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.idle_ms = idle_ms
        self.clock: Callable[[], int] = clock or (lambda: int(time.time() * 1000))
        self.set_sample_interval(sample_interval_ms)
        now = self.clock()
        self.store = StoreStats(now)
        # SEND's store put and PULL's store read, for rocketmq_rpc_latency (rmq.broker.metrics)
        self.send_latency = LatencyHistogram()
        self.pull_latency = LatencyHistogram()
        clk = self._now
        self.sets: dict[str, StatsItemSet] = {
            name: StatsItemSet(name, max_items, clk)
            for name in (
                TOPIC_PUT_NUMS,
                TOPIC_PUT_SIZE,
                GROUP_GET_NUMS,
                GROUP_GET_SIZE,
                SNDBCK_PUT_NUMS,
                BROKER_PUT_NUMS,
                BROKER_GET_NUMS,
            )
        }
        self._topic_put_nums = self.sets[TOPIC_PUT_NUMS]
        self._topic_put_size = self.sets[TOPIC_PUT_SIZE]
        self._group_get_nums = self.sets[GROUP_GET_NUMS]
        self._group_get_size = self.sets[GROUP_GET_SIZE]
        self._broker_put = self.sets[BROKER_PUT_NUMS].get_or_create(cluster_name)
        self._broker_get = self.sets[BROKER_GET_NUMS].get_or_create(cluster_name)
        # Java samples every set at once on start (initial delay 0)
        self._next = {"store": now, "sec": now, "min": now, "hour": now, "print": now + 6 * self.interval_ms}
        self._next_midnight = self._midnight_after(now)
        self._folds: list[tuple[Callable[[], Any], Callable[[Any], None]]] = []
        self.tick()

    def _now(self) -> int:
        return self.clock()

    def set_sample_interval(self, interval_ms: int) -> None:
        """The "10 s" tick; the 1 s (store samples), 10 min, 1 h and 1 min (latency roll) ticks
        keep Java's ratios to it."""
        self.interval_ms = max(10, int(interval_ms))
        self.store_period_ms = max(1, self.interval_ms // 10)
        self.minute_period_ms = self.interval_ms * 60
        self.hour_period_ms = self.interval_ms * 360

    @property
    def max_items(self) -> int:
        return self._topic_put_nums.max_items

    @max_items.setter
    def max_items(self, n: int) -> None:
        for s in self.sets.values():
            s.max_items = n

    @staticmethod
    def _midnight_after(now_ms: int) -> int:
        """The next local midnight, in ms (Java UtilAll.computeNextMorningTimeMillis)."""
        day = datetime.datetime.fromtimestamp(now_ms / 1000).date() + datetime.timedelta(days=1)
        return int(datetime.datetime.combine(day, datetime.time()).timestamp() * 1000)

    # -- counting (one call per request) -------------------------------------------------

    def on_put(self, topic: str, nums: int, size: int, times: int = 1) -> None:
        """A SEND stored ``nums`` messages of ``size`` bytes into ``topic`` (Java
        incTopicPutNums / incTopicPutSize / incBrokerPutNums and the store's totals); the
        put's duration goes to ``store.record_put_time``. ``times`` (default 1): the SENDs
        these are the sums of (a fold of the fast path's counters)."""
        st = self.store
        st.put_nums += nums
        st.put_size += size
        _count(self._topic_put_nums, self._topic_put_size, self._broker_put, topic, nums, size, times)

    # -- counts kept outside (the SEND fast path's C counters) ------------------------------

    def add_fold(self, take: Callable[[], Any], apply: Callable[[Any], None]) -> None:
        """At every :meth:`fold`, ``apply(take())`` unless ``take()`` is None: the C counter
        blocks of the SEND fast path and the PULL path (``PutCounters`` / ``PullCounters`` in
        rmq/broker/processors/_sendpath.pyx) with :meth:`apply_put_counts` /
        :meth:`apply_pull_counts`."""
        self._folds.append((take, apply))

    def fold(self) -> None:
        """Take in the counts kept outside since the last fold. Called by every tick and by
        every reader of the statistics (runtime info, stats items, consume stats,
        ``/metrics``, topic and group deletion), so that what they see includes every request."""
        for take, apply in self._folds:
            got = take()
            if got is not None:
                apply(got)

    def apply_put_counts(self, got: PutCounts) -> None:
        """``PutCounters.take()``'s counts, as the per-SEND calls would have made them."""
        topics, floor_ms, ceil_ms, rpc_total_ns, slow_ns = got
        for topic, nums, size, times in topics:
            self.on_put(topic, nums, size, times)
        st = self.store
        for ms, n in floor_ms:
            st.record_put_time(ms, n)
        hist = self.send_latency
        for ms, n in ceil_ms:
            hist.add_ms(ms, n)
        hist.total += rpc_total_ns / 1e6
        for ns in slow_ns:
            st.record_put_time(ns // 1_000_000)
            hist.observe_ns(ns)

    def apply_pull_counts(self, got: PullCounts) -> None:
        """``PullCounters.take()``'s counts, as the per-pull calls would have made them."""
        found, misses, max_ms, ceil_ms, rpc_total_ns, slow_ns = got
        for group, topic, nums, size, times in found:
            self.on_pull(group, topic, nums, size, times)
        st = self.store
        st.get_miss += misses
        st.record_get_time(max_ms)
        hist = self.pull_latency
        for ms, n in ceil_ms:
            hist.add_ms(ms, n)
        hist.total += rpc_total_ns / 1e6
        for ns in slow_ns:
            hist.observe_ns(ns)

    def on_put_failed(self) -> None:
        self.store.put_failed += 1

    def on_send_back(self, group: str, topic: str) -> None:
        """A consumer sent a message back (Java incSendBackNums; the put itself is counted by
        :meth:`on_put`)."""
        self.sets[SNDBCK_PUT_NUMS].add(f"{topic}@{group}", 1)

    def on_pull_miss(self) -> None:
        """A pull that found no message (Java getMessageTimesTotalMiss)."""
        self.store.get_miss += 1

    def on_pull(self, group: str, topic: str, nums: int, size: int, times: int = 1) -> None:
        """A pull answered with ``nums`` messages of ``size`` bytes (Java incGroupGetNums /
        incGroupGetSize / incBrokerGetNums and the store's found count); ``times`` (default
        1): the pulls these are the sums of (a fold of the PULL path's counters)."""
        st = self.store
        st.get_found += times
        st.get_transferred += nums
        st.get_size += size
        key = f"{topic}@{group}"
        _count(self._group_get_nums, self._group_get_size, self._broker_get, key, nums, size, times)

    # -- table upkeep --------------------------------------------------------------------

    def on_topic_deleted(self, topic: str) -> None:
        """Java onTopicDeleted: the topic's items and its topic@group items go."""
        self.fold()  # (counts of the topic still outside would bring its items back)
        prefix = topic + "@"
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sets[name].items.pop(topic, None)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].remove_where(lambda k: k.startswith(prefix))

    def on_group_deleted(self, group: str) -> None:
        """Java onGroupDeleted: every topic@group item of the group goes."""
        self.fold()  # (counts of the group still outside would bring its items back)
        suffix = "@" + group
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            self.sets[name].remove_where(lambda k: k.endswith(suffix))

    # -- sampling ------------------------------------------------------------------------

    def tick(self) -> None:
        """Take every sample that is due by :attr:`clock` (cheap when none is)."""
        self.fold()
        now = self.clock()
        nxt = self._next
        if now >= nxt["store"]:
            self.store.sample(now)
            nxt["store"] = now + self.store_period_ms
        if now >= nxt["sec"]:
            for s in self.sets.values():
                s.sample_seconds(now, self.interval_ms)
            nxt["sec"] = now + self.interval_ms
        if now >= nxt["print"]:
            self.store.roll_minute()
            nxt["print"] = now + 6 * self.interval_ms
        if now >= nxt["min"]:
            for s in self.sets.values():
                s.sample_minutes(now, self.minute_period_ms)
            nxt["min"] = now + self.minute_period_ms
        if now >= nxt["hour"]:
            for s in self.sets.values():
                s.sample_hour(now, self.hour_period_ms, self.idle_ms)
            nxt["hour"] = now + self.hour_period_ms
            # the BROKER_* items never go idle-dropped for good: recreate them
            self._broker_put = self.sets[BROKER_PUT_NUMS].get_or_create(self.cluster_name)
            self._broker_get = self.sets[BROKER_GET_NUMS].get_or_create(self.cluster_name)
        if now >= self._next_midnight:
            self._next_midnight = self._midnight_after(now)
            self.store.record_day()

    @property
    def tick_period(self) -> float:
        """Seconds between two calls of :meth:`tick` from the broker's loop."""
        return self.store_period_ms / 1000.0

    # -- reads ---------------------------------------------------------------------------

    def get_stats_item(self, stats_name: str, stats_key: str) -> StatsItem | None:
        """Java ``BrokerStatsManager.getStatsItem`` (None for an unknown name or key)."""
        self.fold()
        s = self.sets.get(stats_name)
        return s.get(stats_key) if s is not None else None

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        """Java ``tpsGroupGetNums``: GROUP_GET_NUMS tps over the minute window."""
        self.fold()
        item = self._group_get_nums.get(f"{topic}@{group}")
        return StatsItem.compute(item.minute)[1] if item is not None else 0.0

    def runtime_info(self) -> dict[str, str]:
        """The StoreStatsService and BrokerStats part of GET_BROKER_RUNTIME_INFO."""
        self.fold()
        st = self.store
        now = self.clock()
        total = st.put_nums or 1
        elapsed = max(0, now - st.boot_timestamp) // 1000
        days, rest = divmod(elapsed, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        return {
            "bootTimestamp": str(st.boot_timestamp),
            "runtime": f"[ {days} days, {hours} hours, {minutes} minutes, {seconds} seconds ]",
            "putMessageEntireTimeMax": str(st.put_time_max),
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(st.put_failed),
            "putMessageSizeTotal": str(st.put_size),
            "putMessageDistributeTime": st.distribute_string(),
            "putMessageAverageSize": java_double(st.put_size / total),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(st.get_time_max),
            "putTps": st.tps_string(1),
            "getFoundTps": st.tps_string(2),
            "getMissTps": st.tps_string(3),
            "getTotalTps": st.total_tps_string(),
            "getTransferedTps": st.tps_string(4),
            "putLatency99": f"{st.latency_px(0.99):.2f}",
            "putLatency999": f"{st.latency_px(0.999):.2f}",
            "msgPutTotalYesterdayMorning": str(st.put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(st.put_total_today_morning),
            "msgPutTotalTodayNow": str(st.put_nums),
            "msgGetTotalYesterdayMorning": str(st.get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(st.get_total_today_morning),
            "msgGetTotalTodayNow": str(st.get_transferred),
        }


human_bytes = _human_bytes


def _count(
    nums: StatsItemSet, sizes: StatsItemSet, total: StatsItem | None, key: str, n: int, size: int, times: int = 1
) -> None:
    """``times`` puts or pulls (default one) of ``n`` messages of ``size`` bytes in all: the
    key's count and size items and the broker's total (Java incTopicPutNums + incTopicPutSize +
    incBrokerPutNums, and the GET counterparts)."""
    nums.add(key, n, times)
    sizes.add(key, size, times)
    if total is not None:
        total.add(n, times)
