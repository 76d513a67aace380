#!/usr/bin/env python3
"""Measure (not a test): what the message-semantics flows cost the broker, in CPU seconds of
the ``rmq standalone`` process (``/proc/<pid>/stat`` utime + stime), with the clients in this
separate process.

    .venv/bin/python bench/measure_schedule_cost.py [--messages 10000] [--json]

Phases, on one fresh broker (default delay levels: level 3 = 10 s, level 4 = 30 s):

1. idle: nothing to do for ``--idle`` seconds (schedule service, transaction checker and the
   broker's own timers);
2. plain: ``--messages`` ordinary sends (the reference cost of a send);
3. parked: ``--messages`` sends with DELAY=4 (30 s), then ``--idle`` seconds while they wait
   (the schedule service must not poll them);
4. delivered: the same messages becoming due and being copied into their real topic;
5. send-back: ``--messages`` CONSUMER_SEND_MSG_BACK (36) of the plain messages (level 1 = 1 s
   retry, so step 6 can see them delivered);
6. retry delivery: the retry copies delivered from SCHEDULE_TOPIC_XXXX into %RETRY%<group>;
7. transactions: ``--messages`` half messages + END_TRANSACTION commits.

Sends are SEND_MESSAGE_V2 from 64 concurrent requests on one connection.
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rmq._testing import StandaloneProcess, phy_offset
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient
from rmq.store.message import properties_to_string

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime, stime (fields 14, 15)


class Bench:
    def __init__(self, proc: StandaloneProcess, client: RemotingClient):
        self.proc, self.client = proc, client
        self.addr = proc.broker_addr

    async def call(self, code, ext=None, body=None):
        resp = await self.client.invoke(self.addr, RemotingCommand.request(code, ext, body), timeout=10.0)
        return resp

    async def sends(self, topic, n, props=None, sys_flag=0, concurrency=64):
        p = {"TAGS": "T", "WAIT": "true"}
        p.update(props or {})
        results = [None] * n
        it = iter(range(n))

        async def worker():
            for i in it:
                ext = {
                    "producerGroup": "PID_cost",
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": 4,
                    "queueId": i % 4,
                    "sysFlag": sys_flag,
                    "bornTimestamp": str(int(time.time() * 1000)),
                    "flag": 0,
                    "properties": properties_to_string(p),
                    "reconsumeTimes": "0",
                    "unitMode": "false",
                }
                r = await self.call(RequestCode.SEND_MESSAGE, ext, b"x" * 256)
                assert r.code == ResponseCode.SUCCESS, r.remark
                results[i] = r

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return results

    async def each(self, items, fn, concurrency=64):
        it = iter(items)

        async def worker():
            for x in it:
                await fn(x)

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async def max_offsets(self, topic, queues=4):
        total = 0
        for q in range(queues):
            r = await self.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q})
            total += int(r.ext_fields.get("offset", 0)) if r.code == ResponseCode.SUCCESS else 0
        return total

    async def wait_count(self, topic, n, queues=4, timeout=120):
        deadline = time.monotonic() + timeout
        while await self.max_offsets(topic, queues) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: fewer than {n} messages after {timeout}s")
            await asyncio.sleep(0.05)


async def run(args) -> dict:
    scratch = tempfile.TemporaryDirectory(prefix="rmq-cost-")
    store = Path(scratch.name) / "store"
    proc = StandaloneProcess(store, ["--transactionCheckInterval=60000"])
    proc.start()
    pid = proc.pid
    out: dict[str, dict] = {}
    n = args.messages
    try:
        async with RemotingClient() as client:
            b = Bench(proc, client)
            for t in ("CostPlain", "CostDelay", "CostTx"):
                r = await b.call(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": t,
                        "defaultTopic": "TBW102",
                        "readQueueNums": 4,
                        "writeQueueNums": 4,
                        "perm": 6,
                        "topicFilterType": "SINGLE_TAG",
                        "topicSysFlag": 0,
                        "order": "false",
                    },
                )
                assert r.code == ResponseCode.SUCCESS, r.remark
            await asyncio.sleep(2.0)

            def phase(name, c0, t0, count=None):
                c1, t1 = cpu_seconds(pid), time.monotonic()
                out[name] = {"cpu_s": round(c1 - c0, 3), "wall_s": round(t1 - t0, 2)}
                if count:
                    out[name]["cpu_us_per_msg"] = round((c1 - c0) / count * 1e6, 1)
                return c1, t1

            c, t = cpu_seconds(pid), time.monotonic()
            await asyncio.sleep(args.idle)
            c, t = phase("idle", c, t)

            plain = await b.sends("CostPlain", n)
            c, t = phase("plain_send", c, t, n)

            await b.sends("CostDelay", n, {"DELAY": "4"})
            parked_at = time.monotonic()
            c, t = phase("delayed_send", c, t, n)
            await asyncio.sleep(args.idle)
            c, t = phase("parked_waiting", c, t)
            await b.wait_count("CostDelay", n, timeout=60)
            out["delivered_after_s"] = round(time.monotonic() - parked_at, 2)
            c, t = phase("delay_delivery", c, t, n)

            async def send_back(r):
                resp = await b.call(
                    RequestCode.CONSUMER_SEND_MSG_BACK,
                    {
                        "offset": str(phy_offset(r.ext_fields["msgId"])),
                        "group": "GID_cost",
                        "delayLevel": "1",
                        "maxReconsumeTimes": "16",
                    },
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark

            await b.each(plain, send_back)
            c, t = phase("send_back", c, t, n)
            await b.wait_count("%RETRY%GID_cost", n, queues=1, timeout=60)
            c, t = phase("retry_delivery", c, t, n)

            halves = await b.sends("CostTx", n, {"TRAN_MSG": "true", "PGROUP": "PID_cost"}, sys_flag=0x4)

            async def commit(r):
                resp = await b.call(
                    RequestCode.END_TRANSACTION,
                    {
                        "producerGroup": "PID_cost",
                        "tranStateTableOffset": r.ext_fields["queueOffset"],
                        "commitLogOffset": str(phy_offset(r.ext_fields["msgId"])),
                        "commitOrRollback": "8",
                        "fromTransactionCheck": "false",
                        "msgId": r.ext_fields["msgId"],
                    },
                )
                assert resp.code == ResponseCode.SUCCESS, resp.remark

            await b.each(halves, commit)
            await b.wait_count("CostTx", n)
            c, t = phase("transaction_half_plus_commit", c, t, n)
    finally:
        proc.stop()
        scratch.cleanup()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the idle and parked windows")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:30s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
