#!/usr/bin/env python3
"""Consumer failover to the slave: how long after ``kill -9`` of a SYNC_MASTER a push consumer
(rmq's SDK, default settings: 30 s route poll) receives messages again, from the slave.

    python bench/failover_bench.py [--runs 3] [--messages 40]

Each run: an in-process name server, ``rmq broker`` master (SYNC_MASTER) and slave (brokerId 1)
processes on free ports; ``--messages`` messages sent (each acknowledged once on the slave); a
push consumer pulling one message at a time (``pull_batch_size=1``, ``pull_threshold_for_queue=1``)
is held after 5; the master is killed with SIGKILL and the consumer released. Printed: seconds
from the kill until the consumer has 12 messages (at least 3 served by the slave: at most
one per queue and one in hand were pulled from the master) and until it has them all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import rmq
from rmq._testing import run_namesrv, wait_until
from rmq._testing.processes import BrokerProcess
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

TOPIC, QUEUES = "FailoverBench", 2


async def _ready(rc: RemotingClient, master: str, slave: str) -> bool:
    r = await rc.invoke(master, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout=3)
    connected = int(json.loads(r.body)["table"].get("haConnectionCount", "0")) >= 1
    t = await rc.invoke(slave, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), timeout=3)
    return connected and TOPIC in json.loads(t.body)["topicConfigTable"]


async def one_run(n: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="rmq-failover-") as d:
        return await _one_run(Path(d), n)


async def _one_run(tmp: Path, n: int) -> tuple[float, float]:
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        master = await BrokerProcess(tmp / "m", nsaddr, brokerRole="SYNC_MASTER").astart()
        slave = await BrokerProcess(tmp / "s", nsaddr, brokerId=1, brokerRole="SLAVE", slaveSyncIntervalMs=300).astart()
        rc = RemotingClient()
        try:
            resp = await rc.invoke(
                master.addr,
                RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": TOPIC,
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
            await wait_until(lambda: _ready(rc, master.addr, slave.addr), timeout=60, what="the slave following")
            async with rmq.Producer(nsaddr, "PG_FailoverBench") as p:
                for i in range(n):
                    await p.send(rmq.Message(TOPIC, b"%d" % i))
            got: list[bytes] = []
            gate = asyncio.Event()

            async def handler(msg: rmq.MessageExt) -> None:
                if len(got) >= 5:
                    await gate.wait()
                got.append(msg.body)

            c = rmq.PushConsumer(
                nsaddr,
                "CG_FailoverBench",
                handler=handler,
                consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                pull_batch_size=1,
                pull_threshold_for_queue=1,
            )
            c.subscribe(TOPIC)
            async with c:
                await wait_until(lambda: len(got) >= 5, what="5 messages from the master")
                t0 = time.monotonic()
                master.kill()
                gate.set()
                await wait_until(lambda: len(got) >= 12, timeout=120, what="messages from the slave")
                t1 = time.monotonic()
                await wait_until(lambda: len(set(got)) >= n, timeout=120, what="every message")
                return t1 - t0, time.monotonic() - t0
        finally:
            await rc.close()
            master.kill()
            slave.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--messages", type=int, default=40)
    args = ap.parse_args()
    first, whole = [], []
    for _ in range(args.runs):
        a, b = asyncio.run(one_run(args.messages))
        first.append(a)
        whole.append(b)
        print(f"kill -9 -> messages from the slave {a:.2f} s, all {args.messages} {b:.2f} s", flush=True)
    print(f"median: from the slave after {statistics.median(first):.2f} s, all after {statistics.median(whole):.2f} s")


if __name__ == "__main__":
    main()
