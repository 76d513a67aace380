"""``rmq.client.consumer.stats.ConsumerStatsManager`` (Java ``ConsumerStatsManager``) on an
injected clock: the statusTable figures GET_CONSUMER_RUNNING_INFO carries, their windows, and
the samples taken when touched instead of on a timer."""

from __future__ import annotations

from rmq.client.consumer.stats import MAX_KEYS, ConsumerStatsManager


class Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def test_a_fresh_topic_reads_zero_and_every_field_is_there():
    st = ConsumerStatsManager(Clock(1_000_000))
    assert st.consume_status("T") == {
        "consumeFailedMsgs": 0,
        "consumeFailedTPS": 0.0,
        "consumeOKTPS": 0.0,
        "consumeRT": 0.0,
        "pullRT": 0.0,
        "pullTPS": 0.0,
    }


def test_rates_and_averages_over_the_minute():
    clock = Clock(1_000_000)  # on the 10 s grid
    st = ConsumerStatsManager(clock)
    for _ in range(10):  # 10 pulls of 30 messages, 20 ms each; 300 ok, 20 failed, 5 ms per call
        st.inc_pull_rt("T", 20)
        st.inc_pull_tps("T", 30)
        st.inc_consume_rt("T", 5)
    st.inc_consume_ok("T", 300)
    st.inc_consume_failed("T", 20)
    s = st.consume_status("T")  # not sampled yet: from zero one period before the keys were made
    assert s["pullRT"] == 20.0 and s["consumeRT"] == 5.0
    assert s["pullTPS"] == 300 * 1000 / 10_000 and s["consumeOKTPS"] == 30.0
    clock.ms += 20_000  # two samples later (the first preceded by a zero one 10 s back), nothing new
    s = st.consume_status("T")
    assert s["pullTPS"] == 300 * 1000 / 20_000 and s["pullRT"] == 20.0
    assert s["consumeOKTPS"] == 15.0 and s["consumeFailedTPS"] == 1.0
    assert s["consumeFailedMsgs"] == 20
    assert st.consume_status("Other")["pullTPS"] == 0.0  # per topic


def test_an_idle_minute_reads_zero_tps_and_the_hours_rt():
    clock = Clock(1_000_000)
    st = ConsumerStatsManager(clock)
    st.inc_consume_rt("T", 40)
    st.inc_consume_ok("T", 10)
    st.inc_consume_failed("T", 3)
    clock.ms += 700_000  # > 7 ten-second samples and one ten-minute sample later, nothing new
    s = st.consume_status("T")
    assert s["consumeOKTPS"] == 0.0 and s["consumeFailedTPS"] == 0.0  # the minute window moved on
    assert s["consumeRT"] == 40.0  # none in the minute: the hour's average, as Java
    assert s["consumeFailedMsgs"] == 3  # still within the hour
    clock.ms += 2 * 3600 * 1000
    assert st.consume_status("T")["consumeFailedMsgs"] == 0  # the hour moved on too


def test_a_key_past_the_bound_is_not_counted():
    st = ConsumerStatsManager(Clock(1_000_000))
    for i in range(MAX_KEYS + 1):
        st.inc_consume_ok(f"T{i}", 1)
    assert len(st.consume_ok.items) == MAX_KEYS and st.consume_ok.refused == 1
