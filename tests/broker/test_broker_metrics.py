"""The broker's Prometheus endpoint, scraped over real HTTP from real brokers: names, labels
and values under a known workload, the port rules (taken → warning, 0 → no listener), the
Grafana dashboard's expressions, and the start-up check of the properties."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib
import re
import socket
import subprocess
import sys

from metrics_support import (
    CONSUMED,
    GROUP,
    LAG,
    TOPIC,
    consumer_online,
    http_get,
    lag_workload,
    parse,
    retry_and_dlq_workload,
    scrape,
    value,
)

import rmq
from rmq._testing import StandaloneProcess, broker_env, free_port, wait_until, wait_until_sync
from rmq.common.metrics import CLIENT_STATUS_FAMILIES, FAMILIES
from rmq.config import BrokerConfig
from rmq.protocol.codes import RequestCode, ResponseCode

DASHBOARD = pathlib.Path(__file__).resolve().parents[2] / "docs" / "grafana-rmq.json"


async def test_lag_and_throughput_of_a_known_workload(tmp_path):
    port = free_port()
    async with broker_env(tmp_path / "store", metrics_port=port) as env:
        assert env.broker.metrics.port == port
        await lag_workload(env)
        s = await scrape(port)
    broker = "broker-a"
    cluster = "DefaultCluster"
    # RocketMQ 5's per-queue lag, summing over the queues to the exporter's group total
    per_queue = {
        int(lab["queue_id"]): v
        for lab, v in s["rocketmq_consumer_lag_messages"]
        if lab["topic"] == TOPIC and lab["consumer_group"] == GROUP
    }
    assert per_queue == LAG
    for lab, _v in s["rocketmq_consumer_lag_messages"]:
        assert set(lab) == {"topic", "consumer_group", "broker", "queue_id"}
        assert lab["broker"] == broker
    assert sum(per_queue.values()) == 700
    for qid in LAG:
        latency = value(s, "rocketmq_consumer_lag_latency", topic=TOPIC, consumer_group=GROUP, queue_id=str(qid))
        assert 0 < latency < 600_000
    assert value(s, "rocketmq_group_diff", group=GROUP, topic=TOPIC) == 700
    [(labels, _)] = [x for x in s["rocketmq_group_diff"] if x[0]["group"] == GROUP]
    assert labels == {"group": GROUP, "topic": TOPIC, "countOfOnlineConsumers": "0", "msgModel": "1"}
    assert value(s, "rocketmq_consumer_offset", cluster=cluster, broker=broker, topic=TOPIC, group=GROUP) == 300
    assert value(s, "rocketmq_group_get_latency_by_storetime", topic=TOPIC, group=GROUP) > 0
    # GET_CONSUME_STATS' figures of the pair (Java ConsumeStats): the committed total, and
    # consumeTps, which is GROUP_GET_NUMS' minute rate as rocketmq_consumer_tps
    assert value(s, "rocketmq_group_consume_total_offset", broker=broker, topic=TOPIC, group=GROUP) == 300
    assert value(s, "rocketmq_group_consume_tps", topic=TOPIC, group=GROUP) == value(
        s, "rocketmq_consumer_tps", topic=TOPIC, group=GROUP
    )
    # producer side
    assert value(s, "rocketmq_producer_offset", cluster=cluster, broker=broker, topic=TOPIC) == 1000
    assert value(s, "rocketmq_messages_in_total", topic=TOPIC) == 1000
    assert value(s, "rocketmq_messages_out_total", topic=TOPIC, group=GROUP) == sum(CONSUMED.values())
    assert value(s, "rocketmq_throughput_in_total", topic=TOPIC) > 1000
    # SEND and PULL latency histograms (ms, RocketMQ 5's buckets): one observation per request
    assert value(s, "rocketmq_rpc_latency_count", request_code="send_message") >= 1000
    assert value(s, "rocketmq_rpc_latency_count", request_code="pull_message") >= 10
    inf = value(s, "rocketmq_rpc_latency_bucket", request_code="send_message", le="+Inf")
    assert inf == value(s, "rocketmq_rpc_latency_count", request_code="send_message")
    # broker runtime (the exporter's labels) and storage
    put_total = [(lab, v) for lab, v in s["rocketmq_brokeruntime_putmessage_times_total"]]
    assert len(put_total) == 1 and put_total[0][1] >= 1000
    assert set(put_total[0][0]) == {"cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"}
    assert put_total[0][0]["des"] == "V4_9_8"
    # rmq's own version, the one `rmq --version` and the runtime info's rmqVersion print
    assert [lab["version"] for lab, _ in s["rmq_build_info"]] == [rmq.__version__]
    assert value(s, "rocketmq_storage_size", broker=broker) > 0
    assert value(s, "rocketmq_storage_dispatch_behind_bytes", broker=broker) == 0
    assert value(s, "rocketmq_brokeruntime_commitlogdir_capacity_total") > 0
    assert value(s, "rocketmq_topic_number", broker=broker) >= 1
    assert value(s, "rocketmq_half_messages", broker=broker) == 0
    # every sample belongs to a declared family, with its declared labels
    for name, rows in s.items():
        family = FAMILIES.get(re.sub(r"_(bucket|count|sum)$", "", name)) or FAMILIES[name]
        for lab, _v in rows:
            assert set(lab) - {"le"} == set(family.labels), (name, lab)


async def test_a_broadcasting_group_has_no_group_lag_series(tmp_path):
    """Java's exporter leaves broadcasting groups out of the group diffs (each member keeps its
    own offsets); a clustering group online is in them with its member count."""
    port = free_port()
    async with broker_env(tmp_path / "store", metrics_port=port) as env:
        await lag_workload(env)
        await consumer_online(env, message_model="BROADCASTING")
        broadcasting = await scrape(port)
        await consumer_online(env, message_model="CLUSTERING")
        clustering = await scrape(port)
    assert not [x for x in broadcasting.get("rocketmq_group_diff", []) if x[0]["group"] == GROUP]
    [(labels, _)] = [x for x in clustering["rocketmq_group_diff"] if x[0]["group"] == GROUP]
    assert labels["countOfOnlineConsumers"] == "1" and labels["msgModel"] == "1"


async def test_lag_falls_as_the_group_commits(tmp_path):
    async with broker_env(tmp_path / "store") as env:
        await lag_workload(env)
        # no metrics port: collect() is what the endpoint serves
        before = parse((await env.broker.metrics.collect()).decode())
        for qid in CONSUMED:
            await env.call(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(qid), "commitOffset": "250"},
            )
        after = parse((await env.broker.metrics.collect()).decode())
    assert value(before, "rocketmq_group_diff", group=GROUP) == 700
    assert value(after, "rocketmq_group_diff", group=GROUP) == 0
    for qid in CONSUMED:
        assert value(after, "rocketmq_consumer_lag_messages", consumer_group=GROUP, queue_id=str(qid)) == 0
        assert value(after, "rocketmq_consumer_lag_latency", consumer_group=GROUP, queue_id=str(qid)) == 0


async def test_per_queue_series_are_bounded(tmp_path):
    async with broker_env(tmp_path / "store", metrics_max_queue_series=3) as env:
        await lag_workload(env)
        s = parse((await env.broker.metrics.collect()).decode())
    assert len(s["rocketmq_consumer_lag_messages"]) == 3
    assert value(s, "rmq_metrics_dropped_series", broker="broker-a") >= 1
    assert value(s, "rocketmq_group_diff", group=GROUP) == 700  # totals stay complete


async def test_taken_port_is_a_warning_and_the_broker_serves(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with broker_env(tmp_path / "store", metrics_port=port) as env:
            assert env.broker.metrics.port == 0
            await env.create_topic("Served", 1)
            assert (await env.send("Served", b"x")).code == ResponseCode.SUCCESS
            assert (await env.pull("Served", 0, 0, suspend_ms=0)).code == ResponseCode.SUCCESS
    lines = [r.getMessage() for r in caplog.records if "cannot serve metrics" in r.getMessage()]
    assert len(lines) == 1 and f":{port}" in lines[0], lines


async def test_http_rules(tmp_path):
    port = free_port()
    async with broker_env(tmp_path / "store", metrics_port=port):
        for path, status in (("/", 200), ("/metrics?x=1", 200), ("/nope", 404)):
            code, _ctype, _body = await asyncio.to_thread(http_get, port, path)
            assert code == status, path

        def post() -> int:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                return int(s.recv(100).split()[1])

        assert await asyncio.to_thread(post) == 405

        def garbage() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"x" * 20_000)  # no head end within the 8 KiB limit: closed
                return s.recv(100)

        assert await asyncio.to_thread(garbage) == b""
        # the endpoint still serves
        assert (await asyncio.to_thread(http_get, port))[0] == 200


async def _served_with(port: int, name: str) -> set[str] | None:
    served = set(await scrape(port))
    return served if name in served else None


def _listening_ports(pid: int) -> set[int]:
    """TCP ports the process listens on (its socket inodes matched in /proc/net/tcp)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def test_standalone_serves_metrics_and_port_zero_means_no_listener(tmp_path):
    assert BrokerConfig().metrics_port == 5557  # on by default, rocketmq-exporter's port
    port = free_port()
    with StandaloneProcess(tmp_path / "on", [f"--metricsPort={port}"]) as proc:
        assert wait_until_sync(lambda: port in _listening_ports(proc.pid), 20, what="metrics listener")
        status, _ctype, body = http_get(port)
        assert status == 200 and "rocketmq_brokeruntime_putmessage_times_total{" in body
    with StandaloneProcess(tmp_path / "off", ["--metricsPort=0"]) as proc:
        # the name server, the broker, its HA port (listenPort + 1) and VIP channel (listenPort - 2)
        assert _listening_ports(proc.pid) == {
            proc.namesrv_port,
            proc.broker_port,
            proc.broker_port + 1,
            proc.broker_port - 2,
        }


def test_bad_metrics_port_stops_the_start_naming_the_property(tmp_path):
    for bad, allowed in (("70000", "0..65535"), ("-1", "0..65535"), ("many", "an integer"), ("", "an integer")):
        r = subprocess.run(
            [sys.executable, "-m", "rmq", "broker", f"--metricsPort={bad}", f"--storePathRootDir={tmp_path}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert "metricsPort" in r.stderr and allowed in r.stderr, r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "rmq", "broker", "--metricsMaxQueueSeries=-5", f"--storePathRootDir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "metricsMaxQueueSeries" in r.stderr and "0..10000000" in r.stderr, r.stderr


async def test_dashboard_expressions_use_served_metrics(tmp_path):
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [
        v.get("query", {}).get("query", "") if isinstance(v.get("query"), dict) else v.get("query", "")
        for v in board.get("templating", {}).get("list", [])
    ]
    names = {n for e in exprs for n in re.findall(r"\b((?:rocketmq|rmq)_[a-z0-9_]+)", e)}
    assert len(names) >= 10
    kinds = {p["title"] for p in board["panels"]}
    assert kinds, "panels"
    port = free_port()
    # a short statistics tick, so the runtime TPS windows fill at once
    async with broker_env(tmp_path / "store", metrics_port=port, stats_sample_interval_ms=100) as env:
        await lag_workload(env)
        await retry_and_dlq_workload(env)
        await consumer_online(env)
        served = await wait_until(
            lambda: _served_with(port, "rocketmq_brokeruntime_put_tps10"), what="the 10 s TPS window"
        )
    # only a master with slaves (HA) or the exporter serves the replication gauge, and only the
    # exporter the consumers' own figures (tests/cli/test_cli_exporter_families.py serves them)
    exporter_only = {"rocketmq_broker_commitlog_diff", *CLIENT_STATUS_FAMILIES}
    assert {n for n in names if n.startswith("rocketmq_client_")} <= exporter_only
    missing = names - served - exporter_only
    assert not missing, f"dashboard expressions name metrics the broker does not serve: {sorted(missing)}"


async def test_metrics_host_binds_metrics_apart_from_the_broker(tmp_path):
    """``metricsHost`` puts /metrics on its own address (default: the broker's listenHost)."""
    import socket

    port = free_port()
    async with broker_env(tmp_path / "store", metrics_port=port, metrics_host="127.0.0.2") as env:
        assert env.broker.metrics.server.host == "127.0.0.2" and env.broker.metrics.port == port

        def connect(host: str) -> bool:
            try:
                socket.create_connection((host, port), 5).close()
                return True
            except ConnectionRefusedError:
                return False

        assert await asyncio.to_thread(connect, "127.0.0.2")
        assert not await asyncio.to_thread(connect, "127.0.0.1")
