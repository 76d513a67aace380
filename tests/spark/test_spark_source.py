"""End-to-end tests of ``format("rocketmq")``: a real ``rmq standalone`` on loopback, a real
local[2] SparkSession (shared by the whole test session), Spark's own Python workers.

Spark wraps errors raised in its Python workers (AnalysisException, PythonException,
StreamingQueryException, with JVM stack traces), so error tests match message substrings.
"""

from __future__ import annotations

import json

import pytest
from spark_support import Rmq, time_cut

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq._testing.spark import run_stream

pytestmark = [pytest.mark.spark, pytest.mark.heavy(60)]


def _read(spark, rmq: Rmq, **options):
    r = spark.read.format("rocketmq").option("nameServer", rmq.namesrv)
    for k, v in options.items():
        r = r.option(k, v)
    return r


# ------------------------------------------------------------------------------ batch read


@pytest.fixture(scope="module")
def prefilled(rmq_server):
    """Topic ``orders``: 2 queues, 20 messages each, tags alternating A/B, keys k<q>-<i>."""
    rmq_server.create_topic("orders", 2)
    sent = {}
    for q in (0, 1):
        for i in range(20):
            tag = "A" if i % 2 == 0 else "B"
            off, msg_id = rmq_server.send(
                "orders", q, f"q{q}-m{i}".encode(), tags=tag, keys=f"k{q}-{i}", props={"source": "test"}
            )
            sent[(q, off)] = (f"q{q}-m{i}", tag, f"k{q}-{i}", msg_id)
    return sent


def test_batch_read_exact_offsets_and_tag_filter(spark, rmq_server, prefilled):
    # Broker-qualified JSON for the start, Kafka-style JSON (unambiguous: one broker) for the end.
    df = _read(
        spark,
        rmq_server,
        subscribe="orders",
        subExpression="A",
        startingOffsets=json.dumps({"orders": {"broker-a": {"0": 4, "1": -2}}}),
        endingOffsets=json.dumps({"orders": {"0": 10, "1": -1}}),
    ).load()
    rows = df.collect()
    got = {(r.partition, r.offset): r for r in rows}
    expect = {k: v for k, v in prefilled.items() if v[1] == "A" and ((k[0] == 0 and 4 <= k[1] < 10) or k[0] == 1)}
    assert set(got) == set(expect)
    assert len(rows) == len(got)  # no duplicates
    for k, r in got.items():
        body, tag, key, msg_id = expect[k]
        assert r.value == body.encode() and r.tags == tag and r.key == key.encode()
        assert r.topic == "orders" and r.brokerName == "broker-a" and r.msgId == msg_id
        assert r.timestampType == 1 and r.timestamp is not None and r.bornTimestamp <= r.timestamp
        assert r.properties["source"] == "test" and r.properties["TAGS"] == tag


def test_batch_read_min_partitions_and_declared_schema(spark, rmq_server, prefilled):
    df = (
        _read(spark, rmq_server, subscribe="orders", minPartitions="6")
        .schema("value string, partition int, offset long")
        .load()
    )
    assert df.rdd.getNumPartitions() >= 6
    rows = df.collect()
    assert df.columns == ["value", "partition", "offset"]
    assert sorted((r.partition, r.offset, r.value) for r in rows) == sorted(
        (q, off, v[0]) for (q, off), v in prefilled.items()
    )


def test_batch_read_by_timestamp(spark, rmq_server):
    rmq_server.create_topic("ticks", 1)
    for i in range(3):
        rmq_server.send("ticks", 0, f"old{i}".encode())
    cut = time_cut()
    for i in range(4):
        rmq_server.send("ticks", 0, f"new{i}".encode())
    df = _read(spark, rmq_server, subscribe="ticks", startingTimestamp=str(cut)).load()
    assert sorted(r.value.decode() for r in df.select("value").collect()) == [f"new{i}" for i in range(4)]
    df = _read(spark, rmq_server, subscribe="ticks", endingTimestamp=str(cut)).load()
    assert sorted(r.value.decode() for r in df.select("value").collect()) == [f"old{i}" for i in range(3)]


def test_subscribe_pattern_and_assign(spark, rmq_server, prefilled):
    rmq_server.create_topic("metrics-a", 1)
    rmq_server.create_topic("metrics-b", 1)
    rmq_server.send("metrics-a", 0, b"a0")
    rmq_server.send("metrics-b", 0, b"b0")
    got = _read(spark, rmq_server, subscribePattern="metrics-.*").load().select("topic", "value").collect()
    assert sorted((r.topic, r.value) for r in got) == [("metrics-a", b"a0"), ("metrics-b", b"b0")]
    got = _read(spark, rmq_server, assign='{"orders": [1]}').load().select("partition").collect()
    assert {r.partition for r in got} == {1} and len(got) == 20


# ------------------------------------------------------------------------------ write


def test_write_then_read_back(spark, rmq_server):
    rmq_server.create_topic("sink-a", 2)
    rmq_server.create_topic("sink-b", 2)
    rows = [
        (
            f"v{i}",
            f"key{i % 5}",
            "sink-a" if i % 3 else "sink-b",
            "T" + str(i % 2),
            {"n": str(i)},
            (i % 2) if i < 10 else None,
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows, "value string, key string, topic string, tags string, properties map<string,string>, partition int"
    )
    df.write.format("rocketmq").option("nameServer", rmq_server.namesrv).mode("append").save()

    back = _read(spark, rmq_server, subscribe="sink-a,sink-b").load().collect()
    assert len(back) == 60
    by_value = {r.value.decode(): r for r in back}
    for value, key, topic, tags, props, partition in rows:
        r = by_value[value]
        assert (r.topic, r.key.decode(), r.tags, r.properties["n"]) == (topic, key, tags, props["n"])
        if partition is not None:
            assert r.partition == partition
    # One key, one queue (rows without an explicit partition).
    queues_per_key: dict = {}
    for value, key, topic, _tags, _props, partition in rows:
        if partition is None:
            queues_per_key.setdefault((topic, key), set()).add(by_value[value].partition)
    assert all(len(qs) == 1 for qs in queues_per_key.values())

    # The topic option overrides the column (as Spark-Kafka's does); binary values work too.
    spark.createDataFrame([(b"\x00\x01bin", "ignored")], "value binary, topic string").write.format("rocketmq").option(
        "nameServer", rmq_server.namesrv
    ).option("topic", "sink-b").mode("append").save()
    vals = [r.value for r in _read(spark, rmq_server, subscribe="sink-b").load().select("value").collect()]
    assert b"\x00\x01bin" in vals


def test_write_errors(spark, rmq_server):
    rmq_server.create_topic("sink-err", 1)
    w = spark.createDataFrame([("x",)], "v string").write.format("rocketmq").option("nameServer", rmq_server.namesrv)
    with pytest.raises(Exception, match="needs a 'value' column"):
        w.option("topic", "sink-err").mode("append").save()
    with pytest.raises(Exception, match="needs a 'topic' column or the 'topic' option"):
        spark.createDataFrame([("x",)], "value string").write.format("rocketmq").option(
            "nameServer", rmq_server.namesrv
        ).mode("append").save()
    with pytest.raises(Exception, match="partition 7 is not a writable queue"):
        spark.createDataFrame([("x", 7)], "value string, partition int").write.format("rocketmq").option(
            "nameServer", rmq_server.namesrv
        ).option("topic", "sink-err").mode("append").save()
    # A broker refusal reaches the user with the broker's own message: 5 MiB is over the
    # broker's maxMessageSize (4 MiB).
    big = spark.createDataFrame([(b"x" * (5 * 1024 * 1024),)], "value binary")
    with pytest.raises(Exception, match=r"CODE: 13 DESC: .*(message|size|large)"):
        big.write.format("rocketmq").option("nameServer", rmq_server.namesrv).option("topic", "sink-err").mode(
            "append"
        ).save()


# ------------------------------------------------------------------------------ streaming


def test_stream_stop_restart_exactly_the_produced_set(spark, rmq_server, tmp_path):
    rmq_server.create_topic("events", 2)
    produced = set()

    def produce(n, queues=(0, 1)):
        for i in range(n):
            q = queues[i % len(queues)]
            body = f"e{len(produced)}"
            rmq_server.send("events", q, body.encode(), tags="E")
            produced.add(body)

    produce(30)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    import pyspark

    # Spark >= 4.2 lets a Python source limit a micro-batch; before, the option is refused.
    limits = tuple(int(x) for x in pyspark.__version__.split(".")[:2]) >= (4, 2)

    def run(limit=limits, ckpt=ckpt):
        r = (
            spark.readStream.format("rocketmq")
            .option("nameServer", rmq_server.namesrv)
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("group", "spark-events")
        )
        if limit:
            r = r.option("maxOffsetsPerTrigger", "16")
        q = run_stream(
            lambda: (
                r.load()
                .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
                .writeStream.format("parquet")
                .option("path", out)
                .option("checkpointLocation", ckpt)
                .trigger(availableNow=True)
                .start()
            )
        )
        assert not q.isActive
        if q.exception():
            raise AssertionError(str(q.exception()))
        return q

    if not limits:
        with pytest.raises(Exception, match="maxOffsetsPerTrigger needs Spark >= 4.2"):
            run(limit=True, ckpt=str(tmp_path / "refused"))
    q1 = run()
    if limits:
        assert len([p for p in q1.recentProgress if p["numInputRows"]]) >= 2  # 30 rows at 16 per batch
    first_run_end = {q: rmq_server.max_offset("events", q) for q in (0, 1)}
    produce(10)
    rmq_server.create_topic("events", 3)  # a queue added while the query is down
    produce(9, queues=(0, 1, 2))
    run()
    rows = spark.read.parquet(out).collect()
    values = [r.v for r in rows]
    assert len(values) == len(set(values)), "duplicates after restart"
    assert set(values) == produced
    assert {r.partition for r in rows} == {0, 1, 2}
    # The optional group got the consumed offsets, so lag tools see the query's progress. A
    # batch is committed when Spark plans the next one; Spark >= 4.2 asks once more after the
    # last AvailableNow batch, 4.0/4.1 do not, so there the last batch shows at the next start.
    committed = {
        q: rmq_server.client.query_consumer_offset(rmq_server.broker, "spark-events", "events", q) for q in (0, 1, 2)
    }
    if limits:
        assert committed == {q: rmq_server.max_offset("events", q) for q in (0, 1, 2)}
    else:
        assert all(committed[q] >= first_run_end[q] for q in (0, 1))


def test_stream_topic_to_topic(spark, rmq_server, tmp_path):
    """writeStream.format("rocketmq"): an ETL from one topic into another."""
    rmq_server.create_topic("raw", 2)
    rmq_server.create_topic("clean", 1)
    for i in range(12):
        rmq_server.send("raw", i % 2, f"item-{i}".encode(), tags="T")
    q = run_stream(
        lambda: (
            spark.readStream.format("rocketmq")
            .option("nameServer", rmq_server.namesrv)
            .option("subscribe", "raw")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("upper(CAST(value AS STRING)) AS value", "CAST(offset AS STRING) AS key", "'clean' AS topic")
            .writeStream.format("rocketmq")
            .option("nameServer", rmq_server.namesrv)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
    )
    assert q.exception() is None
    got = _read(spark, rmq_server, subscribe="clean").load().selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(r.v for r in got) == sorted(f"ITEM-{i}" for i in range(12))


# ------------------------------------------------------------------------------ data loss


def test_data_loss_when_retention_deleted_the_start(spark, tmp_path):
    hours = ";".join(f"{h:02d}" for h in range(24))
    args = [
        "--mappedFileSizeCommitLog=65536",
        "--mappedFileSizeConsumeQueue=2000",
        "--fileReservedTime=0",
        f"--deleteWhen={hours}",
        "--cleanResourceInterval=200",
    ]
    with StandaloneProcess(tmp_path / "store", extra_args=args) as proc:
        r = Rmq(proc)
        try:
            r.create_topic("aged", 1)
            for i in range(400):  # ~1 KiB each: several 64 KiB CommitLog files
                r.send("aged", 0, b"%04d" % i + b"x" * 1000)
            low = wait_until_sync(
                lambda: r.client.min_offset(r.broker, "aged", 0),
                timeout=30,
                interval=0.2,
                what="retention to delete the oldest CommitLog file",
            )
            start = json.dumps({"aged": {"0": 0}})
            with pytest.raises(Exception, match="no longer available"):
                _read(spark, r, subscribe="aged", startingOffsets=start).load().count()
            rows = (
                _read(spark, r, subscribe="aged", startingOffsets=start, failOnDataLoss="false")
                .load()
                .select("offset")
                .collect()
            )
            offsets = sorted(x.offset for x in rows)
            assert offsets == list(range(offsets[0], 400)) and offsets[0] >= low
        finally:
            r.close()


# ------------------------------------------------------------------------------ bad options


@pytest.mark.parametrize(
    "options, match",
    [
        ({"subscribe": "orders", "nameServer": None}, "nameServer: required"),
        ({"subscribe": "no-such-topic"}, "topic 'no-such-topic' does not exist"),
        ({"subscribe": "orders", "startingOffsets": '{"other": {"0": 1}}'}, "topic 'other' is not part of this query"),
        ({"subscribe": "orders", "startingOffsets": '{"orders": {"9": 1}}'}, "queue 9 of topic 'orders' is not part"),
        (
            {
                "subscribe": "orders",
                "startingOffsets": '{"orders": {"0": 15}}',
                "endingOffsets": '{"orders": {"0": 5}}',
            },
            "starting offset 15 is after the ending offset 5",
        ),
        ({"subscribe": "orders", "endingOffsets": "earliest"}, "not allowed as an ending offset"),
        ({"topic": "orders", "assign": '{"orders": [0]}'}, "exactly one of subscribe"),
        ({"subscribe": "orders", "nameServer": "127.0.0.1:1"}, "connect to 127.0.0.1:1 failed"),
    ],
)
def test_bad_options_give_clear_errors(spark, rmq_server, prefilled, options, match):
    r = spark.read.format("rocketmq")
    options = {"nameServer": rmq_server.namesrv, **options}
    for k, v in options.items():
        if v is not None:
            r = r.option(k, v)
    with pytest.raises(Exception, match=match):
        r.load().collect()


def test_bad_declared_schema(spark, rmq_server, prefilled):
    with pytest.raises(Exception, match="has no column 'payload'"):
        _read(spark, rmq_server, subscribe="orders").schema("payload binary").load().collect()
    with pytest.raises(Exception, match="column 'offset' must be bigint"):
        _read(spark, rmq_server, subscribe="orders").schema("offset string").load().collect()
