"""Spark-Kafka's ``includeHeaders`` / ``headers`` column and ``startingOffsetsByTimestampStrategy``
over a real ``rmq standalone`` and a local SparkSession; the workers' interpreter check."""

from __future__ import annotations

import pytest
from spark_support import Rmq, time_cut

import rmq
import rmq.spark

pytestmark = pytest.mark.spark


def _read(spark, server: Rmq, **options):
    r = spark.read.format("rocketmq").option("nameServer", server.namesrv)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def test_include_headers_adds_the_headers_column(spark, rmq_server):
    from rmq.spark.source import HEADERS_TYPE

    rmq_server.create_topic("with-headers", 1)
    rmq_server.send("with-headers", 0, b"h0", tags="A", keys="k0", props={"trace": "t-1", "unicode": "ü"})
    rmq_server.send("with-headers", 0, b"h1")
    df = _read(spark, rmq_server, subscribe="with-headers", includeHeaders="true").load()
    assert df.schema["headers"].dataType == HEADERS_TYPE
    assert df.columns[:-1] == rmq.spark.SOURCE_SCHEMA.names and df.columns[-1] == "headers"
    rows = sorted(df.collect(), key=lambda r: r.offset)
    h0 = [(h.key, h.value) for h in rows[0].headers]
    assert ("trace", b"t-1") in h0 and ("unicode", "ü".encode()) in h0
    assert ("TAGS", b"A") in h0 and ("KEYS", b"k0") in h0
    assert dict(h0) == {k: v.encode() for k, v in rows[0].properties.items()}  # the same pairs
    assert all(h.key != "trace" for h in rows[1].headers)
    # without the option there is no headers column; a declared schema may still ask for it
    assert "headers" not in _read(spark, rmq_server, subscribe="with-headers").load().columns
    only = (
        _read(spark, rmq_server, subscribe="with-headers")
        .schema("offset long, headers array<struct<key:string,value:binary>>")
        .load()
        .collect()
    )
    assert {(h.key, h.value) for h in sorted(only, key=lambda r: r.offset)[0].headers} == set(h0)


def test_starting_timestamp_without_a_match_fails_or_starts_at_latest(spark, rmq_server):
    rmq_server.create_topic("ts-strategy", 2)
    for i in range(3):
        rmq_server.send("ts-strategy", 0, f"q0-{i}".encode())
    cut = time_cut()
    for i in range(2):
        rmq_server.send("ts-strategy", 1, f"q1-{i}".encode())
    # queue 0 has nothing at or after `cut`: Spark-Kafka's default strategy "error" fails the query
    with pytest.raises(Exception, match="no message of queue ts-strategy/broker-a/0 was stored at or after"):
        _read(spark, rmq_server, subscribe="ts-strategy", startingTimestamp=str(cut)).load().collect()
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy=latest"):
        _read(
            spark,
            rmq_server,
            subscribe="ts-strategy",
            startingOffsetsByTimestamp=f'{{"ts-strategy": {{"0": {cut}, "1": {cut}}}}}',
        ).load().collect()
    # "latest": queue 0 starts at its latest offset (nothing to read), queue 1 from the match
    got = (
        _read(
            spark,
            rmq_server,
            subscribe="ts-strategy",
            startingTimestamp=str(cut),
            startingOffsetsByTimestampStrategy="latest",
        )
        .load()
        .select("value")
        .collect()
    )
    assert sorted(r.value for r in got) == [b"q1-0", b"q1-1"]
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy: expected one of error, latest"):
        _read(
            spark,
            rmq_server,
            subscribe="ts-strategy",
            startingTimestamp=str(cut),
            startingOffsetsByTimestampStrategy="earliest",
        ).load().collect()


def test_register_checks_the_workers_interpreter(spark, monkeypatch):
    assert rmq.spark.is_registered(spark) is True
    assert rmq.spark.register(spark) is False  # already known: not registered again
    rmq.spark.check_workers(spark)  # this interpreter has rmq
    monkeypatch.setenv("PYSPARK_PYTHON", "/nonexistent/python3")
    with pytest.raises(rmq.ConfigError, match="PYSPARK_PYTHON") as ei:
        rmq.spark.check_workers(spark)
    assert "/nonexistent/python3" in str(ei.value) and ei.value.argument == "PYSPARK_PYTHON"
