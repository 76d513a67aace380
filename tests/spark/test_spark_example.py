"""The README's pipeline (examples/tag_counts_per_minute.py) runs end to end: a stream read,
a windowed count per tag, results to a topic and to Parquet, then a restart that only adds
what arrived in between."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

from rmq._testing.spark import run_stream

pytestmark = [pytest.mark.spark, pytest.mark.heavy(40)]

_EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "tag_counts_per_minute.py"


def _example():
    spec = importlib.util.spec_from_file_location("tag_counts_per_minute", _EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _latest_counts(rows):
    """Update mode: the latest batch's count per (window, tag) is the window's count."""
    best: dict = {}
    for r in rows:
        k = (r["window_start"], r["tag"])
        if k not in best or r["batch_id"] > best[k]["batch_id"]:
            best[k] = r
    totals: dict = {}
    for (_, tag), r in best.items():
        totals[tag] = totals.get(tag, 0) + r["count"]
    return totals


def test_tag_counts_pipeline_to_topic_and_parquet(spark, rmq_server, tmp_path):
    ex = _example()
    rmq_server.create_topic("shop-orders", 2)
    rmq_server.create_topic("shop-stats", 1)
    ex.produce_demo(spark, rmq_server.namesrv, "shop-orders", 30)  # 10 food, 10 books, 10 toys
    kw = dict(
        namesrv=rmq_server.namesrv,
        source="shop-orders",
        target="shop-stats",
        out=str(tmp_path / "stats.parquet"),
        checkpoint=str(tmp_path / "ckpt"),
        once=True,
    )
    q = run_stream(lambda: ex.start_query(spark, **kw))
    assert q.exception() is None
    rmq_server.send("shop-orders", 0, b"{}", tags="toys")  # arrives while the job is down
    q = run_stream(lambda: ex.start_query(spark, **kw))
    assert q.exception() is None

    want = {"food": 10, "books": 10, "toys": 11}
    parquet = [r.asDict() for r in spark.read.parquet(kw["out"]).collect()]
    assert _latest_counts(parquet) == want
    msgs = (
        spark.read.format("rocketmq")
        .option("nameServer", rmq_server.namesrv)
        .option("subscribe", "shop-stats")
        .load()
        .collect()
    )
    from_topic = [json.loads(m.value) for m in msgs]
    assert all(m.tags == m.key.decode() == json.loads(m.value)["tag"] for m in msgs)
    assert _latest_counts(from_topic) == want
    assert len(from_topic) == len(parquet)
