"""The SDK with a master and a slave of one broker name (Java 4.9.8's client behaviour): while the
master is gone from the route consumers pull from the slave (MQClientInstance
.findBrokerAddressInSubscribe falls back to any node) and commit their offsets there
(RemoteBrokerOffsetStore.updateConsumeOffsetToBroker); when the master is back they pull from it
again and its offsets catch up from the consumer's (the periodic persist re-commits them).

The brokers are ``rmq broker -c broker.conf`` processes (the master is killed with SIGKILL); the
name server and the consumer run in this process.
"""

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sdk_support import create_topic, wait_until

import rmq
import rmq.client.instance as client_instance
from rmq._testing import run_namesrv
from rmq._testing.processes import BrokerProcess
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

pytestmark = pytest.mark.timeout(240)
FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _route_ids(rc: RemotingClient, nsaddr: str, topic: str) -> set[int]:
    resp = await rc.invoke(
        nsaddr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=5
    )
    if resp.code != ResponseCode.SUCCESS:
        return set()
    return {int(k) for bd in json.loads(resp.body)["brokerDatas"] for k in bd["brokerAddrs"]}


async def _committed(rc: RemotingClient, addr: str, group: str, topic: str, queues: int) -> int:
    """The sum of ``group``'s committed offsets on the broker at ``addr`` (-1 for a queue without)."""
    total = 0
    for q in range(queues):
        try:
            resp = await rc.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": q}
                ),
                timeout=3,
            )
        except Exception:
            return -1
        total += int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else -1
    return total


async def _produce(nsaddr: str, topic: str, bodies: list[bytes]) -> None:
    async with rmq.Producer(nsaddr, f"PG_{topic}") as p:
        for b in bodies:
            r = await p.send(rmq.Message(topic, b))
            assert r.status is rmq.SendStatus.SEND_OK


@contextlib.asynccontextmanager
async def _master_and_copied_slave(
    tmp_path: Path, nsaddr: str, topic: str, queues: int, bodies: list[bytes]
) -> AsyncIterator[tuple[BrokerProcess, BrokerProcess]]:
    """A master holding ``bodies`` in ``topic`` and a slave started on a copy of its store, taken
    while the master was stopped (the same messages on both; nothing to replicate). Both run
    until the block ends, then are killed."""
    master = await BrokerProcess(tmp_path / "m", nsaddr).astart()
    slave = BrokerProcess(tmp_path / "s", nsaddr, brokerId=1, brokerRole="SLAVE")
    try:
        await create_topic(master.addr, topic, queues=queues)
        await _produce(nsaddr, topic, bodies)
        assert await asyncio.to_thread(master.stop) == 0
        shutil.copytree(tmp_path / "m" / "store", tmp_path / "s" / "store")
        await master.astart()
        await slave.astart()
        yield master, slave
    finally:
        master.kill()
        slave.kill()


@contextlib.asynccontextmanager
async def _consumer_failed_over(
    rc: RemotingClient,
    nsaddr: str,
    group: str,
    topic: str,
    queues: int,
    master: BrokerProcess,
    slave: BrokerProcess,
    first: list[bytes],
) -> AsyncIterator[list[bytes]]:
    """A push consumer that reads 5 of ``first`` from the master; the master is killed and gone
    from the route, the consumer reads the rest from the slave and commits its offsets there.
    Yields the bodies it got (and goes on getting) while it still runs."""
    got: list[bytes] = []
    gate = asyncio.Event()

    async def handler(msg: rmq.MessageExt) -> None:
        if len(got) >= 5:
            await gate.wait()
        got.append(msg.body)

    c = rmq.PushConsumer(
        nsaddr, group, handler=handler, consume_from_where=FIRST, pull_batch_size=1, pull_threshold_for_queue=1
    )
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: len(got) >= 5, what="5 messages from the master")
        master.kill()
        await wait_until(lambda: _ids_are(rc, nsaddr, topic, {1}), what="the master gone from the route")
        gate.set()
        await wait_until(lambda: set(got) == set(first), timeout=60, what=f"all {len(first)} (the rest from the slave)")
        # the offsets went to the slave while the master was away
        await wait_until(
            lambda: _committed_is(rc, slave.addr, group, topic, queues, len(first)),
            timeout=30,
            what="the consumer's offsets committed to the slave",
        )
        yield got


async def test_consumer_reads_the_slave_while_the_master_is_down_and_resumes_on_the_master(tmp_path, monkeypatch):
    """The slave here holds a copy of the master's store taken while the master was stopped (no
    replication needed): 40 messages on both. The consumer reads 5 from the master, the master
    is killed, it reads the other 35 from the slave and commits its offsets there; the master
    restarts, 10 new messages (only on the master) arrive, and the master's offsets catch up."""
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)  # Java's is 30 s
    topic, group, queues = "FailoverT", "CG_Failover", 2
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        first = [b"m%d" % i for i in range(40)]
        async with _master_and_copied_slave(tmp_path, nsaddr, topic, queues, first) as (master, slave):
            rc = RemotingClient()
            try:
                await wait_until(lambda: _route_ids(rc, nsaddr, topic), what="route")
                await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="master and slave in the route")

                async with _consumer_failed_over(rc, nsaddr, group, topic, queues, master, slave, first) as got:
                    await master.astart()
                    await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="the master back in the route")
                    second = [b"n%d" % i for i in range(10)]
                    await _produce(nsaddr, topic, second)  # on the master only: nothing replicates here
                    await wait_until(
                        lambda: set(got) == set(first + second),
                        timeout=60,
                        what="the 10 new messages, read from the master",
                    )
                    # the master's offsets catch up from the consumer (re-committed after its return)
                    await wait_until(
                        lambda: _committed_is(rc, master.addr, group, topic, queues, 50),
                        timeout=30,
                        what="the offsets re-committed to the master",
                    )
                assert sorted(got) == sorted(first + second), "a message was skipped or repeated"
            finally:
                await rc.close()


async def _ids_are(rc: RemotingClient, nsaddr: str, topic: str, ids: set[int]) -> bool:
    return await _route_ids(rc, nsaddr, topic) == ids


async def _committed_is(rc: RemotingClient, addr: str, group: str, topic: str, queues: int, total: int) -> bool:
    return await _committed(rc, addr, group, topic, queues) == total


async def _runtime(rc: RemotingClient, addr: str) -> dict:
    try:
        resp = await rc.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=3)
    except Exception:
        return {}
    return json.loads(resp.body)["table"] if resp.code == ResponseCode.SUCCESS else {}


async def _holds(rc: RemotingClient, addr: str, n: int) -> bool:
    """``addr`` holds at least ``n`` pulls (a push consumer long-polls each queue of its topic and
    the one queue of its group's retry topic)."""
    return int((await _runtime(rc, addr)).get("pullHoldRequestCount", "0")) >= n


async def _has_topic(rc: RemotingClient, addr: str, topic: str) -> bool:
    resp = await rc.invoke(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), timeout=3)
    return resp.code == ResponseCode.SUCCESS and topic in json.loads(resp.body)["topicConfigTable"]


async def _slave_connected(rc: RemotingClient, addr: str) -> bool:
    return int((await _runtime(rc, addr)).get("haConnectionCount", "0")) >= 1


async def _max_offsets(rc: RemotingClient, addr: str, topic: str, queues: int) -> int:
    total = 0
    for q in range(queues):
        resp = await rc.invoke(
            addr, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q}), timeout=3
        )
        total += int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else 0
    return total


async def test_replicated_slave_serves_consumers_after_kill_9_of_the_master(tmp_path, monkeypatch):
    """A SYNC_MASTER and a slave replicating from it (rmq.store.ha), the slave copying the
    master's metadata (rmq.broker.slave_sync): 40 messages acknowledged by the master are on the
    slave; the consumer reads 5 from the master, the master is killed with SIGKILL, the other 35
    come from the slave and the offsets are committed there; the master restarts, the
    consumer long-polls it again, 10 more messages arrive and the master's offsets catch up. No
    message is skipped or repeated."""
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)
    topic, group, queues = "ReplT", "CG_Repl", 2
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        master = await BrokerProcess(tmp_path / "m", nsaddr, brokerRole="SYNC_MASTER").astart()
        slave = await BrokerProcess(
            tmp_path / "s", nsaddr, brokerId=1, brokerRole="SLAVE", slaveSyncIntervalMs=300
        ).astart()
        rc = RemotingClient()
        try:
            await create_topic(master.addr, topic, queues=queues)
            await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="master and slave in the route")
            await wait_until(lambda: _slave_connected(rc, master.addr), what="the slave connected to the master's HA")
            await wait_until(lambda: _has_topic(rc, slave.addr, topic), what="the slave's copy of the topic config")
            first = [b"r%d" % i for i in range(40)]
            await _produce(nsaddr, topic, first)  # SYNC_MASTER: each acknowledged once on the slave
            assert await _max_offsets(rc, slave.addr, topic, queues) == 40
            table = await _runtime(rc, slave.addr)
            assert table["brokerRole"] == "SLAVE" and table["slaveSyncMasterAddr"] == master.addr

            async with _consumer_failed_over(rc, nsaddr, group, topic, queues, master, slave, first) as got:
                await master.astart()
                await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="the master back in the route")
                await wait_until(lambda: _slave_connected(rc, master.addr), what="the slave following it again")
                second = [b"s%d" % i for i in range(10)]
                await _produce(nsaddr, topic, second)
                await wait_until(lambda: set(got) == set(first + second), timeout=60, what="the 10 new messages")
                # its pulls go to the master again: it long-polls both queues there (a pull held
                # on the slave before the master came back may have returned some of the 10)
                await wait_until(lambda: _holds(rc, master.addr, queues + 1), what="the consumer polling the master")
                await wait_until(
                    lambda: _committed_is(rc, master.addr, group, topic, queues, 50),
                    timeout=30,
                    what="the offsets re-committed to the master",
                )
            assert sorted(got) == sorted(first + second), "a message was skipped or repeated"
        finally:
            await rc.close()
            master.kill()
            slave.kill()


async def test_lite_pull_consumer_polls_the_slave_while_the_master_is_down(tmp_path, monkeypatch):
    """rmq.PullConsumer (subscribe mode): polls 4 messages from the master, the master is
    killed, the rest come from the slave (the slave's store is a copy, so nothing
    replicates), and its commit lands on the slave."""
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)
    topic, group, queues = "LiteFailT", "CG_LiteFail", 2
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        bodies = [b"l%d" % i for i in range(40)]
        async with _master_and_copied_slave(tmp_path, nsaddr, topic, queues, bodies) as (master, slave):
            rc = RemotingClient()
            try:
                await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="master and slave in the route")
                c = rmq.PullConsumer(
                    nsaddr,
                    group,
                    consume_from_where=FIRST,
                    pull_batch_size=1,
                    pull_threshold_for_queue=1,
                    auto_commit=False,
                )
                c.subscribe(topic)
                got: list[bytes] = []
                async with c:
                    while len(got) < 4:
                        got.extend(m.body for m in await c.poll(timeout=1.0, max_messages=1))
                    master.kill()
                    await wait_until(lambda: _ids_are(rc, nsaddr, topic, {1}), what="the master gone from the route")

                    async def drained() -> bool:
                        got.extend(m.body for m in await c.poll(timeout=0.5))
                        return set(got) >= set(bodies)

                    await wait_until(drained, timeout=60, what="all 40, the rest from the slave")
                    await c.commit()
                    assert await _committed(rc, slave.addr, group, topic, queues) == 40
                assert sorted(got) == sorted(bodies)
            finally:
                await rc.close()
