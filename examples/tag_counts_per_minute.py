"""Streaming ETL on rmq with Spark: messages per tag per minute.

Reads a topic with ``readStream.format("rocketmq")``, counts messages per tag in one-minute
windows of the broker's store time, and writes every micro-batch's results twice: as JSON
messages to another topic (``format("rocketmq")``, for dashboards and alerting consumers) and
as Parquet files (for the warehouse). Progress lives in the checkpoint directory, so a restart
resumes exactly where the last run stopped; the ``group`` option also stores the consumed
offsets in the broker, where rmq's consumer-lag tools see them.

The aggregation runs in *update* mode: each micro-batch emits the windows that changed, with
their counts so far, so a window may be emitted again with a higher count when more of its
messages arrive; readers keep the row with the latest ``batch_id`` per (window, tag). A
watermark of ``--late`` drops state for windows that can no longer change.

    make run &                                          # name server + broker on 9876 / 10911
    .venv/bin/python examples/tag_counts_per_minute.py --demo-messages 5000 --once
    .venv/bin/python examples/tag_counts_per_minute.py   # keep running, every 10 s

Options: ``--namesrv`` (127.0.0.1:9876), ``--source`` (orders), ``--target`` (order-stats),
``--dir`` (``$RMQ_EXAMPLE_DIR``, else ``<temp dir>/rmq-examples``: where the two below go),
``--out`` (<dir>/order-stats.parquet), ``--checkpoint`` (<dir>/order-stats.checkpoint). Nothing
is written into the current directory (a checkout stays clean).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile


def start_query(spark, *, namesrv: str, source: str, target: str, out: str, checkpoint: str,
                once: bool = False, window: str = "1 minute", late: str = "2 minutes",
                every: str = "10 seconds", group: str | None = "order-stats"):
    """Start the pipeline; returns the StreamingQuery (``once``: process what is there, then stop)."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("rocketmq")
              # Python sources build every declared column, so declare only what is used.
              .schema("timestamp timestamp, tags string")
              .option("nameServer", namesrv)
              .option("subscribe", source)
              .option("startingOffsets", "earliest"))
    if group:
        reader = reader.option("group", group)
    counts = (reader.load()
              .select("timestamp", F.coalesce("tags", F.lit("(none)")).alias("tag"))
              .withWatermark("timestamp", late)
              .groupBy(F.window("timestamp", window).alias("w"), "tag")
              .count())

    def write_batch(batch, batch_id: int) -> None:
        rows = batch.select(
            F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"), "tag", "count",
            F.lit(batch_id).alias("batch_id"))
        rows.persist()
        try:
            # To a topic: JSON value, the tag as the message key and tag, so a consumer can
            # subscribe to one tag's series.
            (rows.select(F.to_json(F.struct("window_start", "window_end", "tag", "count", "batch_id")).alias("value"),
                         F.col("tag").alias("key"), F.col("tag").alias("tags"))
             .write.format("rocketmq").option("nameServer", namesrv).option("topic", target)
             .mode("append").save())
            # To Parquet, partitioned by day for the warehouse.
            (rows.withColumn("day", F.to_date("window_start"))
             .write.mode("append").partitionBy("day").parquet(out))
        finally:
            rows.unpersist()

    w = counts.writeStream.outputMode("update").foreachBatch(write_batch).option("checkpointLocation", checkpoint)
    w = w.trigger(availableNow=True) if once else w.trigger(processingTime=every)
    return w.start()


def produce_demo(spark, namesrv: str, topic: str, n: int) -> None:
    """Write ``n`` sample orders (tags food / books / toys) with the Spark sink."""
    from pyspark.sql import functions as F

    tags = F.element_at(F.array(F.lit("food"), F.lit("books"), F.lit("toys")), (F.col("id") % 3 + 1).cast("int"))
    (spark.range(n).select(F.to_json(F.struct(F.col("id").alias("order"), (F.col("id") % 97).alias("amount")))
                           .alias("value"), tags.alias("tags"))
     .write.format("rocketmq").option("nameServer", namesrv).option("topic", topic).mode("append").save())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--namesrv", default="127.0.0.1:9876")
    ap.add_argument("--source", default="orders")
    ap.add_argument("--target", default="order-stats")
    ap.add_argument("--dir", default=os.environ.get("RMQ_EXAMPLE_DIR")
                    or os.path.join(tempfile.gettempdir(), "rmq-examples"),
                    help="directory of the Parquet output and the checkpoint (default $RMQ_EXAMPLE_DIR, "
                         "else <temp dir>/rmq-examples)")
    ap.add_argument("--out", default=None, help="Parquet output (default <dir>/order-stats.parquet)")
    ap.add_argument("--checkpoint", default=None, help="checkpoint directory (default <dir>/order-stats.checkpoint)")
    ap.add_argument("--once", action="store_true", help="process what is in the topic, then stop")
    ap.add_argument("--demo-messages", type=int, default=0, help="first write this many sample orders")
    args = ap.parse_args(argv)
    args.out = args.out or os.path.join(args.dir, "order-stats.parquet")
    args.checkpoint = args.checkpoint or os.path.join(args.dir, "order-stats.checkpoint")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import rmq.spark

    spark = (SparkSession.builder.master("local[2]").appName("tag-counts-per-minute")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    # An installed rmq is found by Spark itself (its pyspark_rocketmq module); an editable
    # checkout is registered here. register() first checks that Spark's Python workers can
    # import rmq (PYSPARK_PYTHON) and says so clearly when they cannot.
    if not rmq.spark.is_registered(spark):
        rmq.spark.register(spark)
    if args.demo_messages:
        produce_demo(spark, args.namesrv, args.source, args.demo_messages)
    q = start_query(spark, namesrv=args.namesrv, source=args.source, target=args.target, out=args.out,
                    checkpoint=args.checkpoint, once=args.once)
    q.awaitTermination()
    spark.read.parquet(args.out).orderBy("window_start", "tag", "batch_id").show(20, truncate=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
