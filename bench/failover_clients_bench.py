#!/usr/bin/env python3
"""Java 4.9.8's benchmark Producer and Consumer (``org.apache.rocketmq.example.benchmark``)
through an automatic failover of rmq in controller mode (docs/design.md "Controller mode",
"Clients through a failover"): etcd, one ``rmq controller``, a name server, a master and a
slave of one broker name with ``allAckInSyncStateSet`` (rmq._testing.jepsen.ControllerGroup on
loopback). The Consumer starts first; the Producer sends ``--messages`` SYNC messages from
``--threads`` threads (its ``-q``); once a quarter of them are stored the master is ``kill -9``ed,
and once the route names the new master and the producer wrote to it, the old master is
restarted and waited for as a slave. Reported: sends acknowledged and failed (the Producer's own
``[Complete]`` line), the time from the kill to the election and route change and to the first
write on the new master (the write gap), messages stored on the final master and consumed by
the Consumer's group (its committed offsets), what was acknowledged but is not stored, and
the Consumer's longest born-to-consume time (how long it was cut off).

Java 4.9.8's clients re-read a route only every 30 s (``pollNameServerInterval``; its producer
retries a failed send on the same dead broker name), so the write gap and the consumer's stall
are up to 30 s, depending on where that period stands when the master dies.

    python bench/failover_clients_bench.py --java-classpath 'JARS' [--messages 20000] [--threads 4]

Nothing Java is part of rmq: ``--java-classpath`` names a RocketMQ 4.9.8 build with its
example module and dependencies (e.g. ``/work/java4/lib/*:<its dependency jars>``). Needs
``java`` and Debian's etcd-server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common as bc

from rmq._testing import wait_until
from rmq._testing.etcd import etcd_missing
from rmq._testing.faults import Network, kill9
from rmq._testing.jepsen import ControllerGroup
from rmq.protocol.body.stats import ConsumeStats
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.consumer import get_consume_stats
from rmq.protocol.requests.topic import get_topic_stats_info, parse_topic_stats

TOPIC = "FailoverClientsBench"
GROUP = "CG_failover_clients_bench"
#: What Java 17 needs to run RocketMQ 4.9.8's client (as its own start scripts pass).
JAVA_OPTS = ["-Xms256m", "-Xmx256m", *bc.JAVA17_OPENS]
COMPLETE = re.compile(
    r"\[Complete\] Send Total: (\d+).*?Send Failed: (\d+) Response Failed: (\d+)",
)


def java(classpath: str, home: Path, main: str, *args: str) -> subprocess.Popen[bytes]:
    """``java -cp classpath org.apache.rocketmq.example.benchmark.<main> args``, its output in
    ``<home>/<main>.out`` and its client log under ``home`` (``user.home``)."""
    home.mkdir(parents=True, exist_ok=True)
    argv = [
        "java",
        *JAVA_OPTS,
        f"-Duser.home={home}",
        "-cp",
        classpath,
        f"org.apache.rocketmq.example.benchmark.{main}",
        *args,
    ]
    with open(home / f"{main}.out", "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


async def route(group: ControllerGroup) -> dict[int, str]:
    resp = await group.client.invoke(
        group.namesrv_addr, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), timeout=3
    )
    if resp.code != 0:
        return {}
    return {int(k): v for bd in json.loads(resp.body)["brokerDatas"] for k, v in bd["brokerAddrs"].items()}


async def stored(group: ControllerGroup, addr: str) -> int | None:
    """Messages of the topic stored on the broker at ``addr`` (the sum of its queues' max
    offsets), None when it does not answer."""
    try:
        table = parse_topic_stats(await group.client.invoke(addr, get_topic_stats_info(TOPIC), timeout=2))
    except Exception:  # down, or not serving the topic yet
        return None
    return sum(o.max_offset for o in table.offset_table.values())


async def consume_stats(group: ControllerGroup, addr: str) -> ConsumeStats | None:
    resp = await group.client.invoke(addr, get_consume_stats(GROUP, TOPIC), timeout=3)
    if resp.code != 0:
        return None
    return ConsumeStats.decode(resp.body_bytes())


async def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    procs: list[subprocess.Popen[bytes]] = []
    with Network.create(isolated=False) as net:
        async with ControllerGroup(tmp / "cluster", net, controllers=1, brokers=2, topic=TOPIC) as group:
            old, new = group.master(), group.slaves()[0]
            ns = group.namesrv_addr
            try:
                consumer = java(args.java_classpath, tmp / "consumer", "Consumer", "-n", ns, "-t", TOPIC, "-g", GROUP)
                procs.append(consumer)

                async def polling() -> bool:
                    rt = await group.runtime(old)
                    return int(rt.get("pullHoldRequestCount", "0")) >= group.queues

                await wait_until(polling, 120, 0.2, "the Java consumer long-polling every queue")
                producer = java(
                    args.java_classpath,
                    tmp / "producer",
                    "Producer",
                    *("-n", ns, "-t", TOPIC, "-w", str(args.threads), "-s", str(args.size), "-q", str(args.messages)),
                )
                procs.append(producer)

                async def quarter() -> bool:
                    if producer.poll() is not None:
                        raise RuntimeError("the Java producer ended before the kill")
                    return (await stored(group, old.addr) or 0) >= args.messages // 4

                await wait_until(quarter, 300, 0.1, "a quarter of the messages stored")
                out["stored_at_kill"] = await stored(group, old.addr)
                t_kill = time.monotonic()
                kill9(old)

                async def routed() -> bool:
                    return (await route(group)).get(0) == new.addr

                await wait_until(routed, 120, 0.05, "the route naming the new master")
                out["elected_and_routed_s"] = round(time.monotonic() - t_kill, 2)
                base = await stored(group, new.addr) or 0

                async def written() -> bool:
                    return (await stored(group, new.addr) or 0) > base

                await wait_until(written, 300, 0.05, "a write on the new master")
                out["write_gap_s"] = round(time.monotonic() - t_kill, 2)
                await old.astart()
                await wait_until(group.whole, 120, 0.2, "the old master back as a slave")
                out["rejoined_after_s"] = round(time.monotonic() - t_kill, 2)
                out["old_master_role"] = (await group.runtime(old)).get("brokerRole")
                await wait_until(
                    lambda: producer.poll() is not None or COMPLETE.search(_text(tmp / "producer")) is not None,
                    600,
                    0.5,
                    "the Java producer's [Complete] line",
                )
                m = COMPLETE.search(_text(tmp / "producer"))
                if m is None:
                    raise RuntimeError(f"no [Complete] line:\n{_text(tmp / 'producer')[-2000:]}")
                total, send_failed, response_failed = map(int, m.groups())
                out["sends"] = total + response_failed
                out["acknowledged"] = total - send_failed
                out["send_failed"], out["response_failed"] = send_failed, response_failed
                out["stored"] = await stored(group, new.addr)

                async def consumed() -> bool:
                    cs = await consume_stats(group, new.addr)
                    if cs is None:
                        return False
                    out["consumed"] = sum(o.consumer_offset for o in cs.offset_table.values())
                    return cs.compute_total_diff() == 0

                await wait_until(consumed, 120, 0.5, "the Java consumer's committed offsets at the queues' ends")
                out["acknowledged_not_stored"] = max(0, out["acknowledged"] - out["stored"])
                # the Consumer prints, every 10 s, the longest born-to-consume time of the window
                b2c = [int(x) for x in re.findall(r"MAX\(B2C\) RT\(ms\): (\d+)", _text(tmp / "consumer", "Consumer"))]
                out["consumer_max_born_to_consume_s"] = round(max(b2c, default=0) / 1000, 1)
            finally:
                for p in procs:
                    if p.poll() is None:
                        p.terminate()
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            p.wait(10)
                    if p.poll() is None:
                        p.kill()
                        p.wait()
    return out


def _text(home: Path, main: str = "Producer") -> str:
    p = home / f"{main}.out"
    return p.read_text(errors="replace") if p.exists() else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--java-classpath", required=True, help="RocketMQ 4.9.8 with its example module and dependencies")
    ap.add_argument("--messages", type=int, default=20_000, help="the Producer's -q (default 20000)")
    ap.add_argument("--threads", type=int, default=4, help="the Producer's -w (default 4)")
    ap.add_argument("--size", type=int, default=128, help="the Producer's -s, body bytes (default 128)")
    ap.add_argument("--keep", action="store_true", help="keep the directory with the logs (printed)")
    args = ap.parse_args()
    why = etcd_missing()
    if why is not None:
        sys.exit(f"failover_clients_bench: {why}")
    tmp = Path(tempfile.mkdtemp(prefix="rmq-failover-clients-"))
    t0 = time.monotonic()
    try:
        result = asyncio.run(run(args, tmp))
    finally:
        if not args.keep:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    load = os.getloadavg()
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["load"] = f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    if args.keep:
        result["dir"] = str(tmp)
    print(json.dumps(result))
    sys.exit(0 if result.get("acknowledged_not_stored") == 0 else 1)


if __name__ == "__main__":
    main()
