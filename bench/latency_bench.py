#!/usr/bin/env python3
"""End-to-end latency against any RocketMQ 4.x broker: born timestamp → consumed.

    python bench/latency_bench.py --namesrv 127.0.0.1:9876 --topic BenchLatency --group BenchLat \
        [--rate 1000] [--duration 10] [--size 1024] [--broker-pid PID] [--json]

A producer sends ``--rate`` messages per second (SEND_MESSAGE_V2, round-robin over the write
queues) for ``--duration`` seconds while a consumer keeps one long-polling PULL_MESSAGE
(suspend flag, ``--suspend-ms``) outstanding on every readable queue, starting at the queue's
max offset. For each record pulled, latency = local clock at arrival − the record's
BORNTIMESTAMP (ms resolution; producer and consumer share this machine's clock). Reports
p50/p99/p999/max in ms, plus the broker's CPU with ``--broker-pid``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time
from argparse import Namespace

import _common as c
import pull_bench

from rmq.protocol.codes import ResponseCode


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="latency_bench.py", description=__doc__.split("\n\n")[0])
    c.add_common_args(ap)
    ap.add_argument("--group", default="BenchmarkLatencyGroup", help="consumer group (default BenchmarkLatencyGroup)")
    ap.add_argument("--rate", type=float, default=1000.0, help="messages per second (default 1000)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds to produce (default 10)")
    ap.add_argument("--suspend-ms", type=int, default=15000, help="long-poll hold of each pull (default 15000)")
    ap.add_argument("--max-msgs", type=int, default=32, help="maxMsgNums of each pull (default 32)")
    return ap


def parse_args(argv=None) -> Namespace:
    args = build_parser().parse_args(argv)
    if args.rate <= 0 or args.duration <= 0:
        raise SystemExit("error: --rate and --duration must be > 0")
    c.positive("size", args.size)
    c.positive("max-msgs", args.max_msgs)
    args.inflight = 1
    return args


async def latency(args, quiet: bool = False) -> dict:
    namesrv = c.namesrv_list(args.namesrv)
    client = c.client(args, namesrv)
    producer = c.client(args, namesrv)
    stats = pull_bench.PullStats()
    lat: list[int] = []
    born_to_store: list[int] = []
    sent = failed = 0

    def on_body(body) -> None:
        now = int(time.time() * 1000)
        for _qo, born, store in c.record_timestamps(body):
            lat.append(now - born)
            born_to_store.append(store - born)

    cpu = c.CpuMeter(args.broker_pid)
    try:
        route = await c.ensure_topic(client, args.topic, args.queues, timeout=args.timeout)
        pullers = await pull_bench.open_pullers(
            args, route, stats, client, drain=False, start_at="max", on_body=on_body
        )
    finally:
        await client.close()
    queues = route.write_queues
    body = (b"latency " * (args.size // 8 + 1))[: args.size]
    seq = itertools.count()
    pending: set[asyncio.Task] = set()

    async def send_one(mq: c.MessageQueue) -> None:
        nonlocal sent, failed
        props = c.properties_string({"UNIQ_KEY": c.uniq_key(next(seq)), "WAIT": "true"})
        cmd = c.send_request(args.group + "_producer", args.topic, mq.queue_id, props, body)
        try:
            resp = await producer.invoke(mq.broker_addr, cmd, timeout=args.timeout)
            if resp.code == ResponseCode.SUCCESS:
                sent += 1
            else:
                failed += 1
        except Exception:
            failed += 1

    cpu.start()
    started = time.perf_counter()
    for p in pullers:
        p.fill()
    try:
        interval = 1.0 / args.rate
        next_t = time.perf_counter()
        end_t = next_t + args.duration
        i = 0
        while next_t < end_t:
            delay = next_t - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(send_one(queues[i % len(queues)]))
            pending.add(task)
            task.add_done_callback(pending.discard)
            i += 1
            next_t += interval
        if pending:
            await asyncio.gather(*pending)
        # let the consumer catch up with the last sends (bounded)
        catch_up = time.perf_counter() + 5.0
        while stats.messages < sent and time.perf_counter() < catch_up:  # noqa: ASYNC110 - a bounded poll of a counter
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - started
    finally:
        cpu.stop()
        for p in pullers:
            p.stop()
            p.transport.close()
        await producer.close()
    lat.sort()
    born_to_store.sort()
    return {
        "bench": "latency",
        "topic": args.topic,
        "size": args.size,
        "rate": args.rate,
        "seconds": round(elapsed, 3),
        "sent": sent,
        "send_failed": failed,
        "consumed": stats.messages,
        "latency_ms_p50": c.percentile(lat, 0.50),
        "latency_ms_p99": c.percentile(lat, 0.99),
        "latency_ms_p999": c.percentile(lat, 0.999),
        "latency_ms_max": float(lat[-1]) if lat else 0.0,
        # the share of it spent before the broker stamped the record (send path + store append)
        "born_to_store_ms_p50": c.percentile(born_to_store, 0.50),
        "born_to_store_ms_p99": c.percentile(born_to_store, 0.99),
        "broker_cpu_s": None if cpu.seconds is None else round(cpu.seconds, 3),
        "broker_cpu_s_per_1m": None if cpu.per_million(sent) is None else round(cpu.per_million(sent), 2),
    }


def print_summary(f: dict) -> None:
    print(
        f"[Complete] Sent: {f['sent']} at {f['rate']:.0f} msg/s, consumed: {f['consumed']}, "
        f"born-to-consume latency (ms) p50: {f['latency_ms_p50']:.0f} p99: {f['latency_ms_p99']:.0f} "
        f"p999: {f['latency_ms_p999']:.0f} max: {f['latency_ms_max']:.0f} (born-to-store p50: "
        f"{f['born_to_store_ms_p50']:.0f} p99: {f['born_to_store_ms_p99']:.0f}) Send Failed: {f['send_failed']}",
        flush=True,
    )
    if f["broker_cpu_s"] is not None:
        print(
            f"Broker CPU: {f['broker_cpu_s']:.2f} s over the run, {f['broker_cpu_s_per_1m']:.2f} CPU-s per 1M messages",
            flush=True,
        )


def main(argv=None) -> int:
    args = parse_args(argv)
    return c.bench_main(
        args, latency(args), print_summary, lambda f: f["sent"] and f["consumed"] >= f["sent"] and not f["send_failed"]
    )


if __name__ == "__main__":
    sys.exit(main())
