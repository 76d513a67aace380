"""Throughput of the Spark connector: write N messages through ``df.write.format("rocketmq")``,
then read them back with ``spark.read.format("rocketmq")`` into Spark's ``noop`` sink, as a
batch and as a streaming query (``Trigger.AvailableNow``, a fresh checkpoint).

Starts its own ``rmq standalone`` (``--brokers N``, the topic's ``--queues`` on each broker) on
free loopback ports (store in a temp dir) unless ``--namesrv`` points at a running name server,
and a local SparkSession (``--master``, default local[2]). With ``--cluster`` the reads run
again on a Spark standalone cluster on this machine (rmq._testing.spark: a master and
``--workers`` workers of one core each, executors in their own JVMs), beside the local run;
``--cluster`` implies ``--brokers 2``. Prints one line per phase and a JSON line with
everything. Numbers, never assertions.

    .venv/bin/python bench/spark_bench.py                       # 1,000,000 x 1 KiB, 8 queues
    .venv/bin/python bench/spark_bench.py --messages 100000 --size 256
    .venv/bin/python bench/spark_bench.py --cluster             # 1M, 16 queues over 2 brokers,
                                                                # local[2] beside the cluster
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import _common as c  # this script's directory is on the path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024, help="value bytes per message (default 1024)")
    ap.add_argument("--queues", type=int, default=8, help="queues of the bench topic on each broker (default 8)")
    ap.add_argument("--brokers", type=int, help="brokers of the rmq standalone started (default 1; 2 with --cluster)")
    ap.add_argument("--cluster", action="store_true", help="also read on a Spark standalone cluster")
    ap.add_argument("--workers", type=int, default=2, help="workers of the --cluster (1 core each; default 2)")
    ap.add_argument("--topic", default="SparkBench")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--write-partitions", type=int, default=2, help="Spark partitions of the written DataFrame")
    ap.add_argument("--namesrv", help="use this name server instead of starting rmq standalone")
    ap.add_argument("--skip-write", action="store_true", help="read what the topic already holds")
    ap.add_argument("--skip-read", action="store_true", help="only write")
    args = ap.parse_args(argv)
    brokers = args.brokers or (2 if args.cluster else 1)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import rmq.spark
    from rmq._testing import StandaloneProcess, wait_until_sync
    from rmq.common.constants import TopicValidator
    from rmq.protocol.headers.topic import CreateTopicRequestHeader
    from rmq.protocol.requests import check_success
    from rmq.protocol.requests.topic import create_topic
    from rmq.spark._client import RocketMQClient

    proc = None
    tmp = None
    if args.namesrv:
        namesrv = args.namesrv
    else:
        tmp = tempfile.mkdtemp(prefix="rmq-spark-bench-")
        proc = StandaloneProcess(os.path.join(tmp, "store"), brokers=brokers, start_timeout=120).start()
        namesrv = proc.namesrv_addr
    client = RocketMQClient([namesrv])
    results: dict = {
        "messages": args.messages,
        "size": args.size,
        "queues": args.queues,
        "queues_total": args.queues * (brokers if proc else 1),
        "master": args.master,
        "brokers": brokers if proc else None,
        "loadavg_start": round(os.getloadavg()[0], 1),
    }
    try:
        route_brokers = None
        if not args.skip_write:
            try:
                route_brokers = client.topic_route(TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC).broker_datas
            except Exception:
                route_brokers = None
            for b in route_brokers or ():
                resp = client.invoke(
                    b.master_addr,
                    create_topic(
                        CreateTopicRequestHeader(
                            topic=args.topic, read_queue_nums=args.queues, write_queue_nums=args.queues
                        )
                    ),
                )
                try:
                    check_success(resp)
                except rmq.errors.RMQError as e:
                    raise SystemExit(f"creating {args.topic} failed: {e}") from None
            want = {b.broker_name for b in route_brokers or ()}

            def routed():
                try:
                    return {q.broker_name for q in client.topic_route(args.topic).queue_datas} >= want
                except rmq.errors.RMQError:  # not registered yet
                    return False

            wait_until_sync(routed, 60, what=f"{args.topic} routed on every broker")

        t0 = time.monotonic()
        spark = (
            SparkSession.builder.master(args.master)
            .appName("rmq-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "2g")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        rmq.spark.register(spark)
        results["session_start_s"] = round(time.monotonic() - t0, 1)
        import pyspark

        results["pyspark"] = pyspark.__version__

        def broker_cpu():
            # with --brokers N the brokers are the standalone's child processes
            pids = [proc.pid, *proc.broker_pids().values()] if proc else []
            cpu = [c.cpu_seconds_or_none(pid) for pid in pids]
            return None if not cpu or None in cpu else sum(cpu)

        def phase(name, fn, rows):
            cpu0 = broker_cpu()
            t = time.monotonic()
            fn()
            dt = time.monotonic() - t
            cpu1 = broker_cpu()
            rate = rows / dt if dt else 0.0
            results[name] = {
                "seconds": round(dt, 2),
                "rows_per_s": round(rate),
                "MiB_per_s": round(rate * args.size / 2**20, 1),
            }
            if cpu0 is not None and cpu1 is not None:
                results[name]["broker_cpu_s"] = round(cpu1 - cpu0, 1)
            print(
                f"{name:<48} {rows:>10} rows {dt:8.2f} s {rate:>12,.0f} rows/s {rate * args.size / 2**20:8.1f} MiB/s",
                flush=True,
            )

        if not args.skip_write:
            # Warm-up: the first job of a session pays for JIT, codegen and Python worker
            # start-up (about 9 s here); it is not what a long-running pipeline sees.
            spark.range(0, 20_000, 1, args.write_partitions).selectExpr("CAST(id AS STRING) AS value").write.format(
                "rocketmq"
            ).option("nameServer", namesrv).option("topic", args.topic + "-warmup").mode("append").save()
            pad = max(0, args.size - 12)
            df = spark.range(0, args.messages, 1, args.write_partitions).selectExpr(
                f"CAST(concat(lpad(CAST(id AS STRING), 12, '0'), repeat('x', {pad})) AS BINARY) AS value"
            )
            phase(
                "write",
                lambda: (
                    df.write.format("rocketmq")
                    .option("nameServer", namesrv)
                    .option("topic", args.topic)
                    .mode("append")
                    .save()
                ),
                args.messages,
            )

        if args.skip_read:
            spark.stop()
            results["loadavg_end"] = round(os.getloadavg()[0], 1)
            print(json.dumps(results))
            return 0

        def reads(spark, label):
            """Count the topic, then the batch reads and a streaming read into ``noop``."""

            def read(schema=None):
                r = spark.read.format("rocketmq").option("nameServer", namesrv).option("subscribe", args.topic)
                if schema:
                    r = r.schema(schema)
                r.load().write.format("noop").mode("overwrite").save()

            def stream():
                q = (
                    spark.readStream.format("rocketmq")
                    .option("nameServer", namesrv)
                    .option("subscribe", args.topic)
                    .option("startingOffsets", "earliest")
                    .load()
                    .writeStream.format("noop")
                    .option("checkpointLocation", tempfile.mkdtemp(prefix="ckpt-", dir=work))
                    .trigger(availableNow=True)
                    .start()
                )
                q.awaitTermination()
                if q.exception():
                    raise SystemExit(f"the streaming read failed: {q.exception()}")

            total = (
                spark.read.format("rocketmq")
                .option("nameServer", namesrv)
                .option("subscribe", args.topic)
                .schema("offset long")
                .load()
                .count()
            )
            results["rows_in_topic"] = total
            prefix = f"{label} " if args.cluster else ""
            phase(prefix + "read value,offset", lambda: read("value binary, offset long"), total)
            phase(prefix + "read all 12 columns", lambda: read(), total)
            phase(prefix + "stream all columns", stream, total)

        work = tmp or tempfile.mkdtemp(prefix="rmq-spark-bench-")
        reads(spark, args.master)
        spark.stop()
        if args.cluster:
            from rmq._testing.spark import SparkCluster

            t0 = time.monotonic()
            with SparkCluster(os.path.join(work, "spark-cluster"), workers=args.workers) as cluster:
                results["cluster_start_s"] = round(time.monotonic() - t0, 1)
                b = SparkSession.builder
                for k, v in cluster.session_conf("rmq-spark-bench", executor_memory="1g").items():
                    b = b.config(k, v)
                spark = b.config("spark.driver.memory", "2g").getOrCreate()
                spark.sparkContext.setLogLevel("ERROR")
                rmq.spark.register(spark)
                # every worker runs its executor before anything is timed
                c_workers = args.workers
                wait_until_sync(
                    lambda: sum(cluster.executors().values()) >= c_workers, 600, interval=0.5, what="the executors"
                )
                reads(spark, f"cluster({args.workers} workers)")
                spark.stop()
        results["loadavg_end"] = round(os.getloadavg()[0], 1)
    finally:
        client.close()
        if proc is not None:
            proc.stop()
        if tmp:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
