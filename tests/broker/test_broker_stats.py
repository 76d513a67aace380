"""rmq.broker.stats and rmq.broker.config_update units: Java's number formats, the sampling
windows, the table bounds, the latency percentiles, and the properties-file rewrite."""

from __future__ import annotations

import pytest

from rmq.broker.stats import BrokerStatsManager, StatsItem, human_bytes, java_double
from rmq.config import load_properties
from rmq.config import rewrite_properties_file as _persist


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.0, "0.0"),
        (2.0, "2.0"),
        (633.5298231591568, "633.5298231591568"),
        (0.001, "0.001"),
        (1.0e-4, "1.0E-4"),
        (1.25e-5, "1.25E-5"),
        (1.5e7, "1.5E7"),
        (12345678.0, "1.2345678E7"),
        (9999999.0, "9999999.0"),
    ],
)
def test_java_double_prints_as_java(value, java):
    assert java_double(value) == java


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (57_037, "55.7 KiB"), (252 * 1024**3, "252.0 GiB")]
)
def test_human_bytes_as_java_mixall(n, text):
    assert human_bytes(n) == text


class Clock:
    def __init__(self):
        self.now = 1_700_000_000_000

    def __call__(self):
        return self.now


def test_minute_window_keeps_seven_samples_and_computes_sum_tps_avgpt():
    clock = Clock()
    m = BrokerStatsManager("C", clock=clock)
    for _ in range(3):
        m.on_put("T", 4, 100)  # 3 SENDs of 4 messages
    clock.now += 10_000
    m.tick()
    item = m.get_stats_item("TOPIC_PUT_NUMS", "T")
    assert StatsItem.compute(item.minute) == (12, 1.2, 4.0)
    for _ in range(10):  # a minute and more of nothing: the window slides past
        clock.now += 10_000
        m.tick()
    assert len(item.minute) == 7 and StatsItem.compute(item.minute)[0] == 0
    assert m.get_stats_item("TOPIC_PUT_SIZE", "T").value == 300
    assert m.get_stats_item("BROKER_PUT_NUMS", "C").value == 12
    assert m.get_stats_item("TOPIC_PUT_NUMS", "nope") is None and m.get_stats_item("NOPE", "T") is None


def test_sets_are_bounded_and_deleting_a_topic_or_group_drops_its_items():
    m = BrokerStatsManager("C", max_items=2, clock=Clock())
    for t in ("A", "B", "C"):
        m.on_put(t, 1, 1)
        m.on_pull("G", t, 1, 1)
    assert set(m.sets["TOPIC_PUT_NUMS"].items) == {"A", "B"} and m.sets["TOPIC_PUT_NUMS"].refused == 1
    m.on_topic_deleted("A")
    assert set(m.sets["TOPIC_PUT_NUMS"].items) == {"B"} and set(m.sets["GROUP_GET_NUMS"].items) == {"B@G"}
    m.on_group_deleted("G")
    assert not m.sets["GROUP_GET_NUMS"].items


def test_store_tps_windows_and_latency_percentiles():
    clock = Clock()
    m = BrokerStatsManager("C", clock=clock)
    for _ in range(10):
        clock.now += 1000
        m.on_put("T", 5, 10)
        m.tick()
    assert m.store.tps_string(1) == "5.0  "  # 10 s window only
    assert m.store.total_tps_string() == "0.0 0.0 0.0"
    for ms in [0] * 89 + [30] + [3000] * 10:
        m.store.record_put_time(ms)
    m.store.roll_minute()
    info = m.runtime_info()
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:89 [0~10ms]:0 [10~50ms]:1 ")
    assert "[3~4s]:10" in info["putMessageDistributeTime"] and info["putMessageEntireTimeMax"] == "3000"
    # Java findPutMessageEntireTimePX: interpolated in the (2000, 3000] bucket holding the 99th
    assert info["putLatency99"] == "2900.00"
    assert info["msgPutTotalTodayNow"] == "50" and info["putMessageAverageSize"] == "2.0"


def test_persist_replaces_keys_in_place_and_keeps_the_rest(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("# keep me\nbrokerName = b1\nmaxMessageSize=4194304\ndeleteWhen=04;\\\n  05\nother: x\n")
    _persist(str(conf), {"maxMessageSize": "1000", "deleteWhen": "03", "fileReservedTime": "12"})
    assert conf.read_text().splitlines() == [
        "# keep me",
        "brokerName = b1",
        "maxMessageSize=1000",
        "deleteWhen=03",
        "other: x",
        "fileReservedTime=12",
    ]
    assert load_properties(str(conf))["deleteWhen"] == "03"
    missing = tmp_path / "new" / "broker.properties"
    _persist(str(missing), {"traceOn": "false"})
    assert missing.read_text() == "traceOn=false\n"
