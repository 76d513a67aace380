"""The real C++ client (PyPI rocketmq==0.4.4) with a master and a slave of one broker name: a push
consumer long-polling the master goes on consuming from the slave after the master is killed
(its findBrokerAddressInSubscribe falls back to the slave once the route has no master).

So that the messages are on the slave only (the consumer would otherwise have read them from
the master before it dies), the slave's store is a copy of the master's taken after 30 sends,
and the master restarts from a copy taken before them: the consumer finds nothing on the master,
and everything it receives after the kill came from the slave. The brokers are ``rmq broker -c``
processes; the master dies by SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import shutil

import interop_support as support
import pytest

import rmq
from rmq._testing import run_namesrv, wait_until
from rmq._testing.processes import BrokerProcess
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]
QUEUES = 2
N = 30


async def _held_pulls(rc: RemotingClient, addr: str) -> int:
    resp = await rc.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=3)
    return int(json.loads(resp.body)["table"]["pullHoldRequestCount"])


async def _route_ids(rc: RemotingClient, nsaddr: str, topic: str) -> set[int]:
    resp = await rc.invoke(
        nsaddr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=3
    )
    if resp.code != 0:
        return set()
    return {int(k) for bd in json.loads(resp.body)["brokerDatas"] for k in bd["brokerAddrs"]}


async def test_cpp_push_consumer_keeps_consuming_from_the_slave_after_the_master_dies(real_clients, names, tmp_path):
    topic, group = names.topic, names.group
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        master = await BrokerProcess(tmp_path / "m", nsaddr).astart()
        slave = BrokerProcess(tmp_path / "s", nsaddr, brokerId=1, brokerRole="SLAVE")
        rc = RemotingClient()
        consumer = None
        try:
            resp = await rc.invoke(
                master.addr,
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": topic,
                        "defaultTopic": "TBW102",
                        "readQueueNums": QUEUES,
                        "writeQueueNums": QUEUES,
                        "perm": 6,
                        "topicFilterType": "SINGLE_TAG",
                        "topicSysFlag": 0,
                        "order": "false",
                    },
                ),
                timeout=5,
            )
            assert resp.code == 0, resp.remark
            assert await asyncio.to_thread(master.stop) == 0
            shutil.copytree(tmp_path / "m" / "store", tmp_path / "before")  # the topic, no message
            await master.astart()
            bodies = [f"{names.marker}{i}" for i in range(N)]
            async with rmq.Producer(nsaddr, names.producer_group) as p:
                for b in bodies:
                    assert (await p.send(rmq.Message(topic, b.encode()))).status is rmq.SendStatus.SEND_OK
            assert await asyncio.to_thread(master.stop) == 0
            shutil.copytree(tmp_path / "m" / "store", tmp_path / "s" / "store")  # the slave: 30 messages
            shutil.rmtree(tmp_path / "m" / "store")
            shutil.copytree(tmp_path / "before", tmp_path / "m" / "store")  # the master: none
            await master.astart()
            await slave.astart()
            await wait_until(lambda: _ids_are(rc, nsaddr, topic, {0, 1}), what="master and slave routed")

            consumer = support.cpp(
                real_clients,
                tmp_path / "cpp",
                "push",
                "--namesrv",
                nsaddr,
                "--group",
                group,
                "--topic",
                topic,
                "--expect",
                str(N),
                "--marker",
                names.marker,
                "--timeout",
                "150",
                timeout=200,
            )
            await wait_until(
                lambda: _at_least(_held_pulls(rc, master.addr), QUEUES),
                timeout=60,
                what="the C++ consumer long-polling both queues on the master",
            )
            master.kill()
            result = await asyncio.to_thread(consumer.result)
            got = sorted({e["body"] for e in result.of("recv")})
            assert got == sorted(bodies), (
                f"received {len(got)} of {N} from the slave\n{result.describe()}\n{result.cpp_log()}"
            )
            assert result.returncode == 0, result.describe()
        finally:
            if consumer is not None and consumer.proc.poll() is None:
                consumer.proc.kill()
            await rc.close()
            master.kill()
            slave.kill()


async def _ids_are(rc: RemotingClient, nsaddr: str, topic: str, ids: set[int]) -> bool:
    return await _route_ids(rc, nsaddr, topic) == ids


async def _at_least(value, n: int) -> bool:
    try:
        return await value >= n
    except Exception:
        return False
