"""The connector on a real Spark standalone cluster: a master and two workers as JVMs of their
own (rmq._testing.spark), executors in their own JVMs with Spark's Python workers, the driver
program in a process of its own; rmq is ``rmq standalone --brokers 2`` with a topic of 16 queues,
8 on each broker.

A batch read through the cluster holds every (topic, broker, queue, offset) once. A streaming
query (checkpointed, parquet file sink) loses a worker mid-stream (``kill -9`` of the worker JVM,
its executor and their Python workers, once the sink has committed batches); a new worker
joins, the query goes on (Spark reruns the lost tasks; were the query to fail, it is restarted
from its checkpoint), more messages arrive, the query is stopped and restarted from its
checkpoint: the sink then holds every (topic, broker, queue, offset) exactly once.

Waits are for states (the master's JSON, the checkpoint's commit log, the driver's answers)
with generous timeouts: a JVM start takes a minute on a busy 2-core machine. The size is
``RMQ_SPARK_CLUSTER_MESSAGES`` (default 20,000); ``bench/spark_bench.py --cluster`` is the long
form.
"""

from __future__ import annotations

import asyncio
import os

import pytest

import rmq
from rmq._testing import StandaloneProcess, skip_or_fail, wait_until, wait_until_sync
from rmq._testing.spark import SparkCluster, SparkDriver, checkpoint_progress, spark_missing
from rmq.types import MessageQueue

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(2400), pytest.mark.heavy(150)]

MESSAGES = int(os.environ.get("RMQ_SPARK_CLUSTER_MESSAGES", "20000"))
TOPIC = "ClusterEvents"
QUEUES_PER_BROKER = 8
BATCH = 200  # messages per SEND_BATCH_MESSAGE
STATE_TIMEOUT = 900.0  # seconds: a Spark job on a loaded 2-core machine can take minutes


async def _brokers(namesrv: str) -> dict[str, str]:
    async with rmq.Admin(namesrv) as admin:
        info = await admin.examine_broker_cluster_info()
    return {name: data.broker_addrs[0] for name, data in info.broker_addr_table.items() if 0 in data.broker_addrs}


async def _create_topic(namesrv: str) -> list[MessageQueue]:
    brokers = await _brokers(namesrv)
    assert sorted(brokers) == ["broker-a", "broker-b"]
    async with rmq.Admin(namesrv) as admin:
        for addr in brokers.values():
            await admin.create_and_update_topic_config(
                addr, TOPIC, read_queue_nums=QUEUES_PER_BROKER, write_queue_nums=QUEUES_PER_BROKER
            )

        async def routed() -> bool:  # once each broker registered the topic with the name server
            route = await admin.examine_topic_route_info(TOPIC)
            return sorted((q.broker_name, q.read_queue_nums) for q in route.queue_datas) == [
                ("broker-a", QUEUES_PER_BROKER),
                ("broker-b", QUEUES_PER_BROKER),
            ]

        await wait_until(routed, 60, what=f"{TOPIC} routed on both brokers")
    return [MessageQueue(TOPIC, b, q) for b in sorted(brokers) for q in range(QUEUES_PER_BROKER)]


async def _produce(namesrv: str, queues: list[MessageQueue], start: int, n: int) -> None:
    """``n`` messages ``m<start>``… in batches, round-robin over the queues."""
    async with rmq.Producer(namesrv, "PID_spark_cluster") as producer:
        sends = []
        for i, first in enumerate(range(start, start + n, BATCH)):
            msgs = [rmq.Message(TOPIC, f"m{k}".encode()) for k in range(first, min(first + BATCH, start + n))]
            sends.append(producer.send_batch(msgs, queue=queues[i % len(queues)]))
            if len(sends) == 16:
                await asyncio.gather(*sends)
                sends = []
        await asyncio.gather(*sends)


async def _max_offsets(namesrv: str, queues: list[MessageQueue]) -> dict[tuple[str, str, int], int]:
    async with rmq.Admin(namesrv) as admin:
        return {(mq.topic, mq.broker_name, mq.queue_id): await admin.max_offset(mq) for mq in queues}


def _every_offset_once(ends: dict[tuple[str, str, int], int]) -> dict[str, object]:
    """What the driver's summary holds when every offset below each queue's end is there once."""
    queues = sorted([t, b, q, end, end, 0, end - 1] for (t, b, q), end in ends.items())
    return {"queues": queues, "rows": sum(ends.values())}


def _as_checkpoint(ends: dict[tuple[str, str, int], int]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (t, b, q), end in ends.items():
        out.setdefault(t, {}).setdefault(b, {})[str(q)] = end
    return out


@pytest.fixture(scope="module")
def two_brokers(tmp_path_factory):
    with StandaloneProcess(tmp_path_factory.mktemp("spark-brokers") / "store", brokers=2, start_timeout=120) as proc:
        queues = asyncio.run(_create_topic(proc.namesrv_addr))
        asyncio.run(_produce(proc.namesrv_addr, queues, 0, MESSAGES))
        yield proc, queues


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = spark_missing()
    if reason:
        skip_or_fail(reason)
    with SparkCluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


@pytest.fixture(scope="module")
def driver(cluster):
    with SparkDriver(cluster.dir / "logs" / "driver.log") as d:
        d.call("session", conf=cluster.session_conf("rmq-cluster-test"), timeout=STATE_TIMEOUT)
        # the app runs an executor on each worker before any test starts
        wait_until_sync(
            lambda: sorted(cluster.executors().values()) == [1, 1],
            STATE_TIMEOUT,
            interval=0.5,
            what="an executor on each worker",
        )
        yield d


def test_batch_read_through_the_cluster_holds_every_offset_once(two_brokers, cluster, driver):
    proc, queues = two_brokers
    ends = asyncio.run(_max_offsets(proc.namesrv_addr, queues))
    assert sum(ends.values()) == MESSAGES and all(ends.values())  # every queue of both brokers has some
    got = driver.call(
        "batch_summary", options={"nameServer": proc.namesrv_addr, "subscribe": TOPIC}, timeout=STATE_TIMEOUT
    )
    assert got == _every_offset_once(ends)


def test_stream_survives_a_killed_worker_and_a_restart_exactly_once(two_brokers, cluster, driver, tmp_path):
    proc, queues = two_brokers
    ns = proc.namesrv_addr
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    options = {
        "nameServer": ns,
        "subscribe": TOPIC,
        "startingOffsets": "earliest",
        # about ten batches for what is there: the kill comes after the second commit, with
        # eight to go (each batch has a fixed cost, Spark's planning and a parquet file per
        # partition read again by the final summary: twenty made the test about a fifth longer)
        "maxOffsetsPerTrigger": str(max(1, MESSAGES // 10)),
    }

    def start(name: str, available_now: bool = False) -> None:
        driver.call("stream_start", name=name, options=options, path=out, checkpoint=ckpt, available_now=available_now)

    def running(name: str) -> bool:
        status = driver.call("stream_status", name=name)
        return bool(status["active"])

    start("q1")
    name = "q1"

    def batches_committed(n: int) -> bool:
        if not running(name):
            raise AssertionError(f"the query stopped: {driver.call('stream_status', name=name)}")
        return checkpoint_progress(ckpt)[0] >= n - 1

    wait_until_sync(lambda: batches_committed(2), STATE_TIMEOUT, interval=0.5, what="two committed batches")

    # kill -9 a worker with an executor of the app, mid-stream
    victim = next(w for w in cluster.workers if w.proc is not None and w.proc.poll() is None)
    victim_port = cluster.worker_port(victim)
    assert cluster.executors().get(victim_port) == 1
    killed = victim.kill_tree()
    assert len(killed) >= 2, f"the worker and its executor: {killed}"
    at_kill, offsets_at_kill = checkpoint_progress(ckpt)
    first_ends = asyncio.run(_max_offsets(ns, queues))
    assert offsets_at_kill != _as_checkpoint(first_ends), "the kill came after the query had read everything"
    # the driver saw its executor go (TaskSchedulerImpl logs it at ERROR)
    wait_until_sync(
        lambda: "Lost executor" in driver.log_text(), STATE_TIMEOUT, interval=0.5, what="the driver to lose an executor"
    )
    wait_until_sync(
        lambda: not any(w["port"] == victim_port and w["state"] == "ALIVE" for w in cluster.state()["workers"]),
        STATE_TIMEOUT,
        interval=0.5,
        what="the master to drop the killed worker",
    )
    cluster.add_worker()  # waits until the master lists it ALIVE
    asyncio.run(_produce(ns, queues, MESSAGES, MESSAGES // 10))  # more arrives after the loss
    ends = asyncio.run(_max_offsets(ns, queues))

    # Spark reruns the lost tasks on the executors left and the new one; a query that failed
    # instead is restarted from its checkpoint, as Spark requires.
    def caught_up() -> bool:
        nonlocal name
        status = driver.call("stream_status", name=name)
        if not status["active"]:
            assert name == "q1", f"the restarted query stopped too: {status}"
            name = "q1-restarted"
            start(name)
            return False
        return checkpoint_progress(ckpt)[1] == _as_checkpoint(ends)

    wait_until_sync(caught_up, STATE_TIMEOUT, interval=1.0, what="the query to commit every offset")
    assert checkpoint_progress(ckpt)[0] > at_kill
    status = driver.call("stream_stop", name=name)
    assert not status["active"] and status["exception"] is None

    # restart from the checkpoint (on a cluster whose workers changed) with new messages
    asyncio.run(_produce(ns, queues, MESSAGES + MESSAGES // 10, MESSAGES // 10))
    ends = asyncio.run(_max_offsets(ns, queues))
    start("q2", available_now=True)
    status = driver.call("stream_await", name="q2", seconds=STATE_TIMEOUT, timeout=STATE_TIMEOUT + 60)
    assert not status["active"] and status["exception"] is None, status
    assert checkpoint_progress(ckpt)[1] == _as_checkpoint(ends)
    assert driver.call("parquet_summary", path=out, timeout=STATE_TIMEOUT) == _every_offset_once(ends)
