"""``rmq exporter`` (a subprocess) against real brokers: it serves the lag the broker serves
itself, with the same names and labels, and a broker that is gone does not stop the others."""

from __future__ import annotations

import subprocess
import sys

from metrics_support import GROUP, LAG, TOPIC, Exporter, consumer_online, lag_workload, scrape, value

import rmq
from rmq._testing import BrokerEnv, broker_env, free_port, run_broker
from rmq.broker.namesrv_api import BrokerOuterAPI
from rmq.common.metrics import FAMILIES
from rmq.protocol.codes import RequestCode, ResponseCode


def _lag_of(s: dict) -> dict[int, float]:
    return {
        int(lab["queue_id"]): v
        for lab, v in s.get("rocketmq_consumer_lag_messages", [])
        if lab["topic"] == TOPIC and lab["consumer_group"] == GROUP
    }


async def test_exporter_serves_the_brokers_lag(tmp_path):
    port = free_port()
    async with broker_env(tmp_path / "store", metrics_port=port) as env:
        await lag_workload(env)
        await consumer_online(env)
        own = await scrape(port)
        exp = Exporter(tmp_path, env.ns_addr)
        try:
            s = await exp.samples_with(lambda s: _lag_of(s) == LAG and "rocketmq_producer_offset" in s)
        finally:
            assert exp.stop() == 0, exp.log.read_text()[-2000:]
    # the same lag, per queue and in total, as the broker's own endpoint
    assert _lag_of(s) == _lag_of(own) == LAG
    diff = [(lab, v) for lab, v in s["rocketmq_group_diff"] if lab["group"] == GROUP]
    assert diff == [({"group": GROUP, "topic": TOPIC, "countOfOnlineConsumers": "1", "msgModel": "1"}, 700.0)]
    assert diff == [(lab, v) for lab, v in own["rocketmq_group_diff"] if lab["group"] == GROUP]
    for qid in LAG:
        assert value(s, "rocketmq_consumer_lag_latency", consumer_group=GROUP, queue_id=str(qid)) > 0
    assert value(s, "rocketmq_consumer_offset", topic=TOPIC, group=GROUP) == 300
    assert value(s, "rocketmq_producer_offset", topic=TOPIC) == 1000
    assert value(s, "rocketmq_group_count", group=GROUP) == 1
    assert value(s, "rmq_exporter_up", broker="broker-a") == 1
    # the member online is a bare heartbeat that cannot answer GET_CONSUMER_RUNNING_INFO: one
    # failure counted and logged, no client series, and everything else served all the same
    assert value(s, "rmq_exporter_clients", state="failed") == 1
    assert value(s, "rmq_exporter_clients", state="answered") == 0
    assert not s.get("rocketmq_client_consume_ok_msg_tps")
    assert "running info of 10.0.0.1@metrics" in exp.log.read_text()
    # rmq's version as the broker serves it (the exporter reads it from the runtime info)
    assert s["rmq_build_info"] == own["rmq_build_info"] and s["rmq_build_info"][0][0]["version"] == rmq.__version__
    # the runtime gauges carry the broker's own labels
    assert [lab for lab, _ in s["rocketmq_brokeruntime_putmessage_times_total"]] == [
        lab for lab, _ in own["rocketmq_brokeruntime_putmessage_times_total"]
    ]
    for name, rows in s.items():
        family = (
            FAMILIES.get(name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")) or FAMILIES[name]
        )
        for lab, _v in rows:
            assert set(lab) - {"le"} == set(family.labels), (name, lab)


async def test_a_dead_broker_does_not_stop_the_others(tmp_path):
    async with broker_env(tmp_path / "a") as env:
        await lag_workload(env)
        # broker-b registers (over a connection that stays open) an address where nothing listens
        outer = BrokerOuterAPI([env.ns_addr])
        try:
            dead = f"127.0.0.1:{free_port()}"
            wrapper = {"topicConfigTable": {}, "dataVersion": {"timestamp": 0, "counter": 0}}
            [(_ns, ok)] = await outer.register_broker_all("DefaultCluster", dead, "broker-b", 0, dead, wrapper, 5.0)
            assert ok
            exp = Exporter(tmp_path, env.ns_addr)
            try:
                s = await exp.samples_with(lambda s: _lag_of(s) == LAG and len(s.get("rmq_exporter_up", [])) == 2)
            finally:
                assert exp.stop() == 0
        finally:
            await outer.close()
    up = {lab["broker"]: v for lab, v in s["rmq_exporter_up"]}
    assert up == {"broker-a": 1.0, "broker-b": 0.0}
    assert value(s, "rocketmq_group_diff", group=GROUP) == 700
    assert "exporter:" in exp.log.read_text()  # the failure was logged


async def test_group_diff_is_the_total_over_the_brokers(tmp_path):
    async with broker_env(tmp_path / "a") as env:
        await lag_workload(env)  # broker-a: 700 behind
        async with run_broker(tmp_path / "b", namesrv=env.ns, broker_name="broker-b") as b:
            env_b = BrokerEnv(env.ns, b, env.client)
            await env_b.create_topic(TOPIC, 2)
            for i in range(60):
                await env_b.send(TOPIC, b"b", queue_id=i % 2, wait_dispatch=False)
            await env_b.dispatched()
            for qid in range(2):  # broker-b: committed 10 of 30 on each queue, 40 behind
                resp = await env_b.call(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(qid), "commitOffset": "10"},
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark
            exp = Exporter(tmp_path, env.ns_addr)
            try:
                s = await exp.samples_with(
                    lambda s: any(
                        lab.get("broker") == "broker-b" and v == 20
                        for lab, v in s.get("rocketmq_consumer_lag_messages", [])
                    )
                )
            finally:
                assert exp.stop() == 0
    assert value(s, "rocketmq_group_diff", group=GROUP, topic=TOPIC) == 740
    by_broker = {
        (lab["broker"], int(lab["queue_id"])): v
        for lab, v in s["rocketmq_consumer_lag_messages"]
        if lab["consumer_group"] == GROUP and lab["topic"] == TOPIC
    }
    assert by_broker == {**{("broker-a", q): v for q, v in LAG.items()}, ("broker-b", 0): 20, ("broker-b", 1): 20}
    assert value(s, "rocketmq_consumer_offset", broker="broker-b", topic=TOPIC, group=GROUP) == 20
    assert value(s, "rocketmq_producer_offset", broker="broker-b", topic=TOPIC) == 60


def test_exporter_flags_are_checked():
    for args, text in (
        (["--port", "70000"], "0..65535"),
        (["--interval", "0"], "out of range"),
        (["--timeout", "x"], "not a number"),
        (["--aclAccessKey", "k"], "go together"),
        (["--max-lag-lookups", "-1"], "0 or more"),
    ):
        r = subprocess.run([sys.executable, "-m", "rmq", "exporter", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and text in r.stderr, r.stderr
