"""``rmq standalone --brokers N`` as a real process: N broker processes behind the embedded name
server in one cluster; rmq's SDK (a Java-protocol client) produces to and consumes from every
broker; a broker killed with SIGKILL is restarted; a broker that cannot start stops the
standalone naming it; SIGTERM stops every broker. (The real 4.x C++ client against the same
layout: tests/interop/test_interop_brokers.py.)"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket

import pytest

import rmq
from rmq._testing import StandaloneProcess, free_broker_port, free_port, wait_until
from rmq.cli.cluster import BROKER_PORT_STEP

pytestmark = pytest.mark.slow

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def broker_pids(proc: StandaloneProcess) -> dict[str, int]:
    return proc.broker_pids()


async def masters(namesrv: str) -> dict[str, str]:
    """broker name -> master address, as the name server's cluster info has them."""
    async with rmq.Admin(namesrv) as admin:
        info = await admin.examine_broker_cluster_info()
    return {name: data.broker_addrs[0] for name, data in info.broker_addr_table.items() if 0 in data.broker_addrs}


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("brokers") / "store", brokers=2)
    proc.start()
    yield proc
    proc.stop()


async def test_one_cluster_of_two_brokers_each_with_its_store(two):
    got = await masters(two.namesrv_addr)
    assert sorted(got) == ["broker-a", "broker-b"]
    assert len(set(got.values())) == 2
    async with rmq.Admin(two.namesrv_addr) as admin:
        info = await admin.examine_broker_cluster_info()
    assert sorted(info.cluster_addr_table["DefaultCluster"]) == ["broker-a", "broker-b"]
    for i in (0, 1):
        # each broker's own store: its metadata files are written off the loop after start
        config = os.path.join(two.store_dir, f"broker-{i}", "config")
        await wait_until(lambda c=config: os.path.isdir(c), timeout=60, what=f"{config} written")
    pids = broker_pids(two)
    assert sorted(pids) == ["broker-a", "broker-b"] and two.pid not in pids.values()


async def test_an_auto_created_topic_spreads_and_every_broker_is_produced_to_and_consumed(two):
    topic = "Spread_auto"
    async with rmq.Producer(two.namesrv_addr, "PID_spread") as producer:
        sent = [await producer.send(rmq.Message(topic, f"m{i}".encode())) for i in range(16)]
    # sent round-robin over TBW102's queues, which every broker lists: both auto-created it
    assert {s.message_queue.broker_name for s in sent} == {"broker-a", "broker-b"}
    async with rmq.Admin(two.namesrv_addr) as admin:

        async def routed_on_both() -> bool:
            route = await admin.examine_topic_route_info(topic)
            return {q.broker_name for q in route.queue_datas} == {"broker-a", "broker-b"}

        await wait_until(routed_on_both, what="the topic routed on both brokers")

    got: asyncio.Queue[rmq.MessageExt] = asyncio.Queue()
    consumer = rmq.PushConsumer(two.namesrv_addr, "GID_spread", handler=got.put, consume_from_where=FIRST)
    consumer.subscribe(topic, "*")
    received: dict[str, rmq.MessageExt] = {}
    async with consumer:
        while len(received) < len(sent):
            m = await asyncio.wait_for(got.get(), 30)
            received[m.msg_id] = m
    assert set(received) == {s.msg_id for s in sent}
    addrs = await masters(two.namesrv_addr)
    assert {m.store_host for m in received.values()} == set(addrs.values())


async def test_a_killed_broker_is_restarted_and_serves_again(two):
    before = broker_pids(two)
    old_addr = (await masters(two.namesrv_addr))["broker-b"]
    os.kill(before["broker-b"], signal.SIGKILL)
    await wait_until(lambda: broker_pids(two)["broker-b"] != before["broker-b"], timeout=60, what="broker-b restarted")
    log = two.log_text()
    assert re.search(rf"broker broker-b \(pid {before['broker-b']}, store \S+\) exited with status -9; restarting", log)
    assert two.proc is not None and two.proc.poll() is None
    assert broker_pids(two)["broker-a"] == before["broker-a"]  # the other one untouched
    now = await masters(two.namesrv_addr)
    assert sorted(now) == ["broker-a", "broker-b"]
    # on an ephemeral port it came back on a new one; either way it answers sends
    topic = "Spread_after_restart"
    async with rmq.Admin(two.namesrv_addr) as admin:
        for addr in now.values():
            await admin.create_and_update_topic_config(addr, topic, read_queue_nums=2, write_queue_nums=2)
    async with rmq.Producer(two.namesrv_addr, "PID_restart") as producer:
        r = await producer.send(rmq.Message(topic, b"after"), queue=rmq.MessageQueue(topic, "broker-b", 1))
    assert r.status is rmq.SendStatus.SEND_OK and r.message_queue.broker_name == "broker-b"
    assert old_addr == now["broker-b"] or old_addr not in now.values()


def test_sigterm_stops_every_broker(tmp_path):
    proc = StandaloneProcess(tmp_path / "store", brokers=2)
    proc.start()
    pids = broker_pids(proc)
    assert proc.stop() == 0
    for pid in pids.values():  # reaped by the standalone before it exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # each stopped cleanly: no abort marker left in its store
    for i in (0, 1):
        assert not os.path.exists(os.path.join(proc.store_dir, f"broker-{i}", "abort"))


def test_a_broker_that_cannot_start_stops_the_standalone_naming_it(tmp_path):
    # broker-b's port (--broker-port + 10) is taken: broker-a starts, broker-b exits 3
    while True:
        port = free_broker_port()
        blocker = socket.socket()
        try:
            blocker.bind(("127.0.0.1", port + BROKER_PORT_STEP))
        except OSError:
            blocker.close()
            continue
        break
    blocker.listen()
    try:
        proc = StandaloneProcess(tmp_path / "store", brokers=2, namesrv_port=free_port(), broker_port=port)
        with pytest.raises(RuntimeError):
            proc.start()
        assert proc.returncode == 3
        text = proc.log_text()
        assert "rmq standalone: broker broker-b" in text and "exited with status 3 at start" in text
        assert f"{port + BROKER_PORT_STEP}" in text  # the broker's own line names the port
        assert "broker broker-a stopped" in text  # the one that had started was stopped cleanly
    finally:
        blocker.close()


def test_broker_properties_layout():
    from rmq.cli.cluster import broker_properties
    from rmq.config import ConfigError

    props = {"listenHost": "127.0.0.1", "grpcServerPort": "8081", "flushDiskType": "SYNC_FLUSH"}
    got = broker_properties(props, 3, 10911, "/data", "127.0.0.1:9876")
    assert [p["brokerName"] for p in got] == ["broker-a", "broker-b", "broker-c"]
    assert [p["listenPort"] for p in got] == ["10911", "10921", "10931"]
    assert [p["storePathRootDir"] for p in got] == ["/data/broker-0", "/data/broker-1", "/data/broker-2"]
    assert [p["grpcServerPort"] for p in got] == ["8081", "8082", "8083"]
    assert [p["metricsPort"] for p in got] == ["5557", "5558", "5559"]
    assert all(p["namesrvAddr"] == "127.0.0.1:9876" and p["flushDiskType"] == "SYNC_FLUSH" for p in got)
    # a given brokerName gets an index; 0 ports stay 0 (ephemeral / off); a given namesrvAddr stays
    got = broker_properties(
        {"brokerName": "node1", "metricsPort": "0", "namesrvAddr": "10.0.0.1:9876"}, 2, 0, "/d", "x:1"
    )
    assert [(p["brokerName"], p["listenPort"], p["metricsPort"], p["grpcServerPort"]) for p in got] == [
        ("node1-0", "0", "0", "0"),
        ("node1-1", "0", "0", "0"),
    ]
    assert {p["namesrvAddr"] for p in got} == {"10.0.0.1:9876"}
    with pytest.raises(ConfigError, match="--broker-port 65530 for 2 brokers"):
        broker_properties({}, 2, 65530, "/d", "x:1")
    with pytest.raises(ConfigError, match="--brokers: 0"):
        broker_properties({}, 0, 10911, "/d", "x:1")
    with pytest.raises(ConfigError, match="metricsPort"):
        broker_properties({"metricsPort": "65535"}, 2, 10911, "/d", "x:1")


async def test_a_broker_that_keeps_failing_is_given_up_naming_it(tmp_path, monkeypatch):
    """The supervisor in-process over a real name server and a real broker process: once its
    restarts keep exiting before they register, wait_failed() names it (the standalone exits
    with that message and status 1)."""
    from rmq._testing import run_namesrv
    from rmq.cli import cluster

    monkeypatch.setattr(cluster, "FIRST_RESTART_BACKOFF", 0.05)
    monkeypatch.setattr(cluster, "MAX_FAILED_RESTARTS", 2)
    async with run_namesrv() as ns:
        [props] = cluster.broker_properties(
            {"listenHost": "127.0.0.1", "metricsPort": "0", "mappedFileSizeCommitLog": "67108864"},
            1,
            0,
            str(tmp_path / "store"),
            f"127.0.0.1:{ns.port}",
        )
        slot = cluster.BrokerSlot(0, props["brokerName"], props)
        sup = cluster.BrokerSupervisor([slot], ns)
        await sup.start()
        try:
            assert slot.pid is not None and slot.starts == 1
            # from now on every restart exits at once with a bad configuration (exit 2)
            slot.props["listenPort"] = "70000"
            os.kill(slot.pid, signal.SIGKILL)
            failed = await asyncio.wait_for(sup.wait_failed(), 120)
        finally:
            await sup.shutdown()
        assert "broker broker-a" in str(failed) and "its last 2 restarts all exited before registering" in str(failed)
        assert failed.status == 1 and slot.starts == 3
