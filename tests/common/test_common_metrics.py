"""rmq.common.metrics: the renderer writes exactly what prometheus_client.generate_latest
writes; the builder keeps the declared labels and bounds; the runtime table is read as
rocketmq-exporter's BrokerRuntimeStats reads it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from rmq.common.metrics import (
    FAMILIES,
    RPC_LATENCY_BUCKETS_MS,
    LabelCache,
    MetricsBuilder,
    human_bytes_to_int,
    render,
)


def _reference(builder: MetricsBuilder) -> bytes:
    families = builder.families()

    class Collector:
        def collect(self):
            return families

    registry = CollectorRegistry()
    registry.register(Collector())
    return generate_latest(registry)


@settings(max_examples=60, deadline=None)
@given(
    labels=st.lists(st.text(min_size=0, max_size=12), min_size=4, max_size=4),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**62), 2**62)),
)
def test_render_is_generate_latest_byte_for_byte(labels, value):
    b = MetricsBuilder()
    b.queue_lag(labels[0], labels[1], labels[2], 3, value, 12.5)
    b.add("rocketmq_group_diff", tuple(labels), value)
    b.set("rocketmq_messages_in_total", tuple(labels[:3]), abs(value) if value == value else 0)
    b.histogram(
        "rocketmq_rpc_latency",
        (labels[0], labels[1], "send_message"),
        RPC_LATENCY_BUCKETS_MS,
        [1, 0, 2, 0, 0, 0, 0, 0, 0, 4],
        9.25,
    )
    cache = LabelCache()
    reference = _reference(b)
    assert render(b.families(), cache) == reference
    assert render(b.families(), cache) == reference  # the cached label texts give the same bytes
    assert b.render(cache) == reference  # straight from the tables
    assert b.render(cache, pause=lambda: None) == reference


def test_builder_checks_names_labels_and_sums():
    b = MetricsBuilder()
    with pytest.raises(KeyError):
        b.set("rocketmq_no_such_metric", (), 1)
    with pytest.raises(ValueError, match="labels"):
        b.set("rocketmq_group_diff", ("g", "t"), 1)
    b.add("rocketmq_group_diff", ("g", "t", "1", "1"), 300)
    b.add("rocketmq_group_diff", ("g", "t", "1", "1"), 400)  # a second broker's part
    assert b.get("rocketmq_group_diff", ("g", "t", "1", "1")) == 700
    # every family's labels are declared once, the exporter's where it has them
    assert FAMILIES["rocketmq_group_diff"].labels == ("group", "topic", "countOfOnlineConsumers", "msgModel")
    assert FAMILIES["rocketmq_consumer_lag_messages"].labels == ("topic", "consumer_group", "broker", "queue_id")
    assert FAMILIES["rocketmq_producer_tps"].labels == ("cluster", "broker", "topic")
    assert FAMILIES["rocketmq_consumer_tps"].labels == ("cluster", "broker", "topic", "group")
    assert FAMILIES["rocketmq_brokeruntime_put_tps10"].labels == (
        "cluster",
        "brokerIP",
        "brokerHost",
        "des",
        "boottime",
        "broker_version",
    )


def test_queue_series_bound():
    b = MetricsBuilder(max_queue_series=2)
    assert b.queue_lag("t", "g", "b", 0, 5, None)
    assert b.queue_lag("t", "g", "b", 1, 5, 1.0)
    assert not b.queue_lag("t", "g", "b", 2, 5, 1.0)
    assert b.dropped_series == 1
    text = render(b.families()).decode()
    assert text.count("rocketmq_consumer_lag_messages{") == 2
    assert text.count("rocketmq_consumer_lag_latency{") == 1  # unknown latency: no sample


def test_broker_runtime_table_as_the_exporter_reads_it():
    kv = {  # a Java 4.9.8 broker's GET_BROKER_RUNTIME_INFO (abridged)
        "putTps": "12.5 10.0 8.25",
        "getTransferredTps": "3.0 2.0 1.0",
        "getMissTps": "1.0 1.0 1.0",
        "commitLogDirCapacity": "Total : 49.1 GiB, Free : 12.3 GiB.",
        "putMessageDistributeTime": "[<=0ms]:7 [0~10ms]:20 [10~50ms]:1 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 "
        "[500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:2 ",
        "remainHowManyDataToFlush": "1.5 MiB",
        "commitLogMaxOffset": "5000",
        "commitLogMinOffset": "1000",
        "dispatchBehindBytes": "0",
        "earliestMessageTimeStamp": "1000",
        "brokerVersionDesc": "V4_9_8",
        "bootTimestamp": "1700000000000",
        "brokerVersion": "415",
        "putLatency99": "1.50",
        "msgPutTotalTodayNow": "42",
        "commitLogDiskRatio": "0.75",
        "getFoundTps": "",
        "junk": "not a number",
    }
    b = MetricsBuilder()
    b.broker_runtime("DefaultCluster", "broker-a", "10.0.0.1:10911", kv, now_ms=61_000)
    lab = ("DefaultCluster", "10.0.0.1:10911", "", "V4_9_8", "1700000000000", "415")
    p = "rocketmq_brokeruntime_"
    assert b.get(p + "put_tps10", lab) == 12.5 and b.get(p + "put_tps600", lab) == 8.25
    assert b.get(p + "gettransfered_tps60", lab) == 2.0  # Java 5's spelling read too
    assert b.get(p + "getfound_tps10", lab) == 0.0  # a window without samples: the exporter's 0.0
    assert b.get(p + "gettotal_tps10", lab) is None  # a key the broker does not write: left out
    assert b.get(p + "commitlogdir_capacity_total", lab) == int(49.1 * 2**30)
    assert b.get(p + "commitlogdir_capacity_free", lab) == int(12.3 * 2**30)
    assert b.get(p + "pmdt_0ms", lab) == 7 and b.get(p + "pmdt_10stomore", lab) == 2
    assert b.get(p + "remain_howmanydata_toflush", lab) == 1.5 * 2**20
    assert b.get(p + "put_latency_99", lab) == 1.5 and b.get(p + "msg_put_total_today_now", lab) == 42
    assert b.get(p + "commitlog_disk_ratio", lab) == 0.75
    assert b.get("rocketmq_storage_size", ("DefaultCluster", "broker-a")) == 4000
    assert b.get("rocketmq_storage_flush_behind_bytes", ("DefaultCluster", "broker-a")) == 1.5 * 2**20
    assert b.get("rocketmq_storage_message_reserve_time", ("DefaultCluster", "broker-a")) == 60_000


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("0 B", 0),
        ("1023 B", 1023),
        ("55.7 KiB", int(55.7 * 1024)),
        ("1.0 GiB", 2**30),
        ("2 MB", 2_000_000),
        ("", None),
        ("x KiB", None),
        ("1 parsecs", None),
        ("inf KiB", None),
    ],
)
def test_human_bytes(text, n):
    assert human_bytes_to_int(text) == n


def test_histogram_needs_one_count_per_bucket():
    b = MetricsBuilder()
    with pytest.raises(ValueError, match="bound"):
        b.histogram("rocketmq_rpc_latency", ("c", "b", "send_message"), (1.0, 2.0), [1, 2], 3.0)
    b.histogram("rocketmq_rpc_latency", ("c", "b", "send_message"), (1.0, 2.0), [1, 2, 3], 3.0)
    text = render(b.families()).decode()
    assert 'le="+Inf",request_code="send_message"} 6.0' in text
    assert 'rocketmq_rpc_latency_count{broker="b",cluster="c",request_code="send_message"} 6.0' in text


def test_timer_families_from_the_runtime_table():
    # Java 5's timer keys (and rmq's totals), as the broker and the exporter both read them
    kv = {"timerCongestNum": "1200", "timerReadBehind": "75", "timerOffsetBehind": "3", "timerDequeuedTotal": "9"}
    b = MetricsBuilder()
    b.broker_runtime("C", "broker-a", "10.0.0.1:10911", kv)
    bl = ("C", "broker-a")
    assert b.get("rocketmq_timer_pending", bl) == 1200 and b.get("rocketmq_timer_lag_seconds", bl) == 75
    assert b.get("rocketmq_timer_offset_behind", bl) == 3 and b.get("rocketmq_timer_dequeued_total", bl) == 9
    assert b.get("rocketmq_timer_enqueued_total", bl) is None  # a Java broker has no totals


def test_client_status_as_the_collector_reads_it():
    b = MetricsBuilder()
    status = {  # a Java client's ConsumeStatus; a C++-style text number; junk left out
        "pullRT": 12.5,
        "pullTPS": "30.25",
        "consumeRT": 4,
        "consumeOKTPS": 20.0,
        "consumeFailedTPS": "not a number",
        "consumeFailedMsgs": True,
    }
    b.client_status("10.0.0.9:5000", "10.0.0.9@1#x", "G", "T", status)
    lab = ("10.0.0.9:5000", "10.0.0.9@1#x", "G", "T")
    assert b.get("rocketmq_client_consumer_pull_rt", lab) == 12.5
    assert b.get("rocketmq_client_consumer_pull_tps", lab) == 30.25
    assert b.get("rocketmq_client_consume_rt", lab) == 4 and b.get("rocketmq_client_consume_ok_msg_tps", lab) == 20
    assert b.get("rocketmq_client_consume_fail_msg_tps", lab) is None
    assert b.get("rocketmq_client_consume_fail_msg_count", lab) is None
    text = b.render().decode()
    assert (
        'rocketmq_client_consumer_pull_rt{clientAddr="10.0.0.9:5000",clientId="10.0.0.9@1#x",group="G",topic="T"} 12.5'
        in text
    )
