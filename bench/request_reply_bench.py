#!/usr/bin/env python3
"""Request-reply round trip of the rmq SDK: ``Producer.request`` answered by a PushConsumer
with ``rmq.reply`` (Java DefaultMQProducer.request / ReplyMessageProcessor).

    .venv/bin/python bench/request_reply_bench.py                       # own `rmq standalone`
    .venv/bin/python bench/request_reply_bench.py --namesrv 127.0.0.1:9876 --duration 10 \
        --concurrency 1,16 [--size 128] [--json]

For each concurrency, that many requesters loop for ``--duration`` seconds: request (send to
the broker, delivered to the responder by its long-polling pull, reply sent with
SEND_REPLY_MESSAGE_V2, pushed back with PUSH_REPLY_MESSAGE_TO_CLIENT) and wait for the reply.
Prints requests/s and round-trip p50/p99/max in ms. Requester and responder run in one
process on one event loop (two client instances), the broker in its own process. Figures are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common as c

import rmq


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="request_reply_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--namesrv", default=None, help="name server; default: start an own rmq standalone")
    ap.add_argument("--topic", default="BenchRequestReply", help="request topic (default BenchRequestReply)")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per concurrency (default 5)")
    ap.add_argument("--concurrency", default="1,16", help="requests in flight, comma-separated (default 1,16)")
    ap.add_argument("--size", type=int, default=128, help="request and reply body bytes (default 128)")
    ap.add_argument("--timeout", type=float, default=10.0, help="request timeout, s (default 10)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    return ap.parse_args(argv)


async def bench(namesrv: str, args: argparse.Namespace) -> dict[str, object]:
    async with rmq.Admin(namesrv) as admin:
        for addr in await admin.master_addrs():
            await admin.create_and_update_topic_config(addr, args.topic, read_queue_nums=4, write_queue_nums=4)
    reply_body = b"r" * args.size

    async def handler(msg: rmq.MessageExt) -> None:
        await rmq.reply(msg, reply_body)

    responder = rmq.PushConsumer(
        namesrv, "BenchReplyGroup", handler=handler, instance_name="bench-responder", consume_concurrency=64
    )
    responder.subscribe(args.topic)
    figures: dict[str, object] = {"size": args.size, "runs": []}
    async with responder, rmq.Producer(namesrv, "BenchRequestGroup", instance_name="bench-requester") as p:
        body = b"q" * args.size
        # warm-up: routes, heartbeats, the responder's rebalance
        await p.request(rmq.Message(topic=args.topic, body=body), timeout=30)
        for conc in (int(x) for x in args.concurrency.split(",")):
            rtts: list[float] = []
            errors = 0
            deadline = time.monotonic() + args.duration

            async def loop(rtts: list[float] = rtts, deadline: float = deadline) -> None:
                nonlocal errors
                while time.monotonic() < deadline:
                    t0 = time.perf_counter()
                    try:
                        await p.request(rmq.Message(topic=args.topic, body=body), timeout=args.timeout)
                    except rmq.RMQError:
                        errors += 1
                        continue
                    rtts.append((time.perf_counter() - t0) * 1000)

            start = time.monotonic()
            await asyncio.gather(*(loop() for _ in range(conc)))
            elapsed = time.monotonic() - start
            rtts.sort()
            run = {
                "concurrency": conc,
                "requests": len(rtts),
                "errors": errors,
                "per_s": round(len(rtts) / elapsed, 1),
                "p50_ms": round(c.percentile(rtts, 0.50), 2) if rtts else None,
                "p99_ms": round(c.percentile(rtts, 0.99), 2) if rtts else None,
                "max_ms": round(rtts[-1], 2) if rtts else None,
            }
            figures["runs"].append(run)  # type: ignore[attr-defined]
    return figures


async def run_bench(args: argparse.Namespace) -> dict[str, object]:
    if args.namesrv is not None:
        return await bench(args.namesrv, args)
    own = c.Standalone()
    try:
        await own.start()
        return await bench(own.namesrv_addr, args)
    finally:
        own.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures = asyncio.run(run_bench(args))
    for run in figures["runs"]:  # type: ignore[attr-defined]
        print(
            f"request-reply  {run['concurrency']:>3} in flight  {run['per_s']:>8} req/s  "
            f"p50 {run['p50_ms']} ms  p99 {run['p99_ms']} ms  max {run['max_ms']} ms  "
            f"({run['requests']} requests, {run['errors']} errors)"
        )
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
