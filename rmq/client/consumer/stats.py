"""A push consumer's consume statistics (Java ``ConsumerStatsManager``): what
GET_CONSUMER_RUNNING_INFO's ``statusTable`` reports per topic (Java ``ConsumeStatus``) and
rocketmq-exporter turns into its ``rocketmq_client_*`` families.

Five :class:`~rmq.common.stats.StatsItemSet` keyed by topic, as Java's are keyed
``topic@group`` within a client instance (ours belong to one consumer, so to one group):

* pull RT (ms per FOUND pull) and pull TPS (messages found), counted by the pull loop
  (Java ``DefaultMQPushConsumerImpl.pullMessage``'s ``PullCallback``);
* consume RT (ms per handler call), consume OK TPS and consume failed TPS (messages), counted
  by the consume services (Java ``ConsumeMessageConcurrentlyService.processConsumeResult`` and
  its orderly twin).

Java samples every set on a timer (every 10 s into the minute window, every 10 min into the
hour window). Here nothing runs in the background: each count or read first takes the samples
a timer would have taken since the last one, on the same 10 s / 10 min grid (nothing was
counted in between, so they hold the current values). A read adds the running value as the
window's last point, so a rate shows at once rather than up to 10 s late (Java reads the
samples only); a key not yet sampled starts from zero one period before it was created, as
Java's first sample does.

Bounds: at most :data:`MAX_KEYS` topics per set (a subscription's topics and its retry topic;
one more is not counted, one rate-limited warning by the set).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rmq.common.stats import StatsItem, StatsItemSet

__all__ = ["MAX_KEYS", "ConsumerStatsManager"]

#: topics counted per set at most
MAX_KEYS = 1024
#: Java StatsItemSet's sampling periods: every 10 s (the minute window), every 10 min (the hour)
_SECONDS_PERIOD_MS = 10_000
_MINUTES_PERIOD_MS = 600_000
#: samples a window keeps (StatsItem's minute and hour deques): older catch-up samples fall out
_WINDOW = 7


def _status_window(
    item: StatsItem, window: Sequence[tuple[int, int, int]], now_ms: int, period_ms: int
) -> tuple[int, float, float]:
    """``(sum, tps, avgpt)`` over ``window`` and the running value now."""
    pts = list(window) or [(item.created_ms - period_ms, 0, 0)]
    pts.append((now_ms, item.times, item.value))
    return StatsItem.compute(pts)


class ConsumerStatsManager:
    """The five sets of one consumer and Java's ``consumeStatus`` over them.

    Args:
        clock: milliseconds now (default ``time.time() * 1000``; tests pass their own).
    """

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or (lambda: int(time.time() * 1000))
        now = self._clock()
        self.pull_rt = StatsItemSet("CONSUMER_PULL_RT", MAX_KEYS, self._clock)
        self.pull_tps = StatsItemSet("CONSUMER_PULL_TPS", MAX_KEYS, self._clock)
        self.consume_rt = StatsItemSet("CONSUME_RT", MAX_KEYS, self._clock)
        self.consume_ok = StatsItemSet("CONSUME_OK_TPS", MAX_KEYS, self._clock)
        self.consume_failed = StatsItemSet("CONSUME_FAILED_TPS", MAX_KEYS, self._clock)
        self._sets = (self.pull_rt, self.pull_tps, self.consume_rt, self.consume_ok, self.consume_failed)
        self._seconds_due = now - now % _SECONDS_PERIOD_MS + _SECONDS_PERIOD_MS
        self._minutes_due = now - now % _MINUTES_PERIOD_MS + _MINUTES_PERIOD_MS

    def _tick(self, now: int) -> None:
        """The samples the timers would have taken up to ``now`` (at most a window's worth)."""
        if now >= self._seconds_due:
            p = _SECONDS_PERIOD_MS
            last = now - now % p
            for t in range(max(self._seconds_due, last - (_WINDOW - 1) * p), last + 1, p):
                for s in self._sets:
                    s.sample_seconds(t, p)
            self._seconds_due = last + p
        if now >= self._minutes_due:
            p = _MINUTES_PERIOD_MS
            last = now - now % p
            for t in range(max(self._minutes_due, last - (_WINDOW - 1) * p), last + 1, p):
                for s in self._sets:
                    s.sample_minutes(t, p)
            self._minutes_due = last + p

    def _add(self, stats: StatsItemSet, topic: str, value: int, times: int) -> None:
        self._tick(self._clock())
        stats.add(topic, value, times)

    def inc_pull_rt(self, topic: str, rt_ms: float) -> None:
        """One FOUND pull took ``rt_ms`` (Java ``incPullRT``)."""
        self._add(self.pull_rt, topic, int(rt_ms), 1)

    def inc_pull_tps(self, topic: str, msgs: int) -> None:
        """A FOUND pull brought ``msgs`` messages (Java ``incPullTPS``)."""
        self._add(self.pull_tps, topic, msgs, 1)

    def inc_consume_rt(self, topic: str, rt_ms: float) -> None:
        """One handler call took ``rt_ms`` (Java ``incConsumeRT``)."""
        self._add(self.consume_rt, topic, int(rt_ms), 1)

    def inc_consume_ok(self, topic: str, msgs: int) -> None:
        """``msgs`` messages consumed (Java ``incConsumeOKTPS``)."""
        self._add(self.consume_ok, topic, msgs, 1)

    def inc_consume_failed(self, topic: str, msgs: int) -> None:
        """``msgs`` messages failed (Java ``incConsumeFailedTPS``)."""
        self._add(self.consume_failed, topic, msgs, 1)

    def consume_status(self, topic: str) -> dict[str, float | int]:
        """Java ``ConsumerStatsManager.consumeStatus``: pull RT (the minute's average), pull TPS,
        consume RT (the minute's average, the hour's when the minute has none), consume OK and
        failed TPS (the minute's), failed messages (the hour's sum); 0 for what was never
        counted. Keys as Java's fastjson writes ``ConsumeStatus``."""
        now = self._clock()
        self._tick(now)
        s = _SECONDS_PERIOD_MS

        def minute(stats: StatsItemSet) -> tuple[int, float, float]:
            it = stats.get(topic)
            return (0, 0.0, 0.0) if it is None else _status_window(it, it.minute, now, s)

        def hour(stats: StatsItemSet) -> tuple[int, float, float]:
            it = stats.get(topic)
            return (0, 0.0, 0.0) if it is None else _status_window(it, it.hour, now, _MINUTES_PERIOD_MS)

        consume_rt = minute(self.consume_rt)
        if consume_rt[0] == 0:
            consume_rt = hour(self.consume_rt)
        return {
            "consumeFailedMsgs": hour(self.consume_failed)[0],
            "consumeFailedTPS": minute(self.consume_failed)[1],
            "consumeOKTPS": minute(self.consume_ok)[1],
            "consumeRT": consume_rt[2],
            "pullRT": minute(self.pull_rt)[2],
            "pullTPS": minute(self.pull_tps)[1],
        }
