#!/usr/bin/env python3
"""Produce throughput against any RocketMQ 4.x broker (rmq or Apache), over the protocol only.

    python bench/produce_bench.py --namesrv 127.0.0.1:9876 --topic BenchTopic \
        [--size 1024] [--connections 4] [--inflight 16] [--duration 30] [--batch 1] \
        [--broker-pid PID] [--json]

Every ``--interval`` seconds (default 10) prints a line with the columns of RocketMQ's own
benchmark producer (Send TPS, Max RT, Average RT, Send Failed, Response Failed); at the end a
summary (TPS, MB/s, p50/p99/p999 RT) and, with ``--json``, one JSON line of the same figures.
Messages go round-robin over the topic's write queues on every master broker in its route,
each as SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE when ``--batch`` > 1). ``--connections``
separate TCP connections each keep ``--inflight`` requests outstanding. The topic is created
with UPDATE_AND_CREATE_TOPIC when the name server does not know it.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import time

import _common as c

from rmq.remoting.client import RemotingClient
from rmq.remoting.codes import ResponseCode
from rmq.remoting.command import RemotingCommand

# SEND results that still count as stored (Java SendStatus other than OK)
_SENT_CODES = {ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
               ResponseCode.SLAVE_NOT_AVAILABLE}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="produce_bench.py", description=__doc__.split("\n\n")[0])
    c.add_common_args(ap)
    ap.add_argument("--group", default="BenchmarkProducerGroup", help="producer group (default BenchmarkProducerGroup)")
    ap.add_argument("--connections", type=int, default=4, help="TCP connections (default 4)")
    ap.add_argument("--inflight", type=int, default=16, help="requests in flight per connection (default 16)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds to send (default 30)")
    ap.add_argument("--count", type=int, default=None,
                    help="send exactly this many messages instead of running for --duration")
    ap.add_argument("--batch", type=int, default=1, help="messages per request; >1 uses SEND_BATCH_MESSAGE (default 1)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines (default 10)")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    c.positive("size", args.size)
    c.positive("connections", args.connections)
    c.positive("inflight", args.inflight)
    c.positive("batch", args.batch)
    c.positive("queues", args.queues)
    if args.count is not None:
        c.positive("count", args.count)
    if args.duration <= 0:
        raise SystemExit("error: --duration must be > 0")
    if args.interval <= 0:
        raise SystemExit("error: --interval must be > 0")
    return args


class ProduceStats:
    """Counters shaped like Java's StatsBenchmarkProducer, plus every RT for the percentiles."""

    def __init__(self) -> None:
        self.requests_ok = 0
        self.messages_ok = 0
        self.send_failed = 0        # no usable answer: timeout, connection error
        self.response_failed = 0    # the broker answered with an error code
        self.rt_total_ms = 0.0
        self.rt_max_ms = 0.0
        self.rts: list[float] = []
        self.last_error: str | None = None

    def snapshot(self) -> tuple[int, int, float]:
        return self.messages_ok, self.requests_ok, self.rt_total_ms


class Producer:
    """Sends fixed-size messages over several connections until told to stop."""

    def __init__(self, args, route: c.Route, stats: ProduceStats, namesrv: list[str]):
        self.args = args
        self.queues = route.write_queues
        if not self.queues:
            raise c.BenchError(f"topic {route.topic} has no writable queue")
        self.stats = stats
        self.clients = [RemotingClient(namesrv, tls=c.client_tls(args)) for _ in range(args.connections)]
        self.body = (b"RocketMQ benchmark " * (args.size // 19 + 1))[: args.size]
        self._rr = itertools.count()
        self._seq = itertools.count()
        self._stop = False
        self._budget: int | None = None   # messages left to send in run_count(); None = no limit

    def _command(self) -> tuple[RemotingCommand, int]:
        mq = self.queues[next(self._rr) % len(self.queues)]
        if self.args.batch == 1:
            props = c.properties_string({"UNIQ_KEY": c.uniq_key(next(self._seq)), "WAIT": "true"})
            return c.send_request(self.args.group, self.args.topic, mq.queue_id, props, self.body), mq
        items = [c.properties_string({"UNIQ_KEY": c.uniq_key(next(self._seq))}) for _ in range(self.args.batch)]
        blob = c.encode_batch([self.body] * self.args.batch, items)
        return c.send_request(self.args.group, self.args.topic, mq.queue_id,
                              c.properties_string({"WAIT": "true"}), blob, batch=True), mq

    async def _worker(self, client: RemotingClient) -> None:
        stats, timeout, batch = self.stats, self.args.timeout, self.args.batch
        perf = time.perf_counter
        while not self._stop:
            if self._budget is not None:
                if self._budget <= 0:
                    return
                self._budget -= batch
            cmd, mq = self._command()
            t0 = perf()
            try:
                resp = await client.invoke(mq.broker_addr, cmd, timeout=timeout)
            except Exception as exc:  # timeouts and connection errors count as "Send Failed"
                stats.send_failed += 1
                if self._budget is not None:
                    self._stop = True  # a counted run (prefill) must not silently lose messages
                stats.last_error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.05)
                continue
            rt = (perf() - t0) * 1000.0
            if resp.code in _SENT_CODES:
                stats.requests_ok += 1
                stats.messages_ok += batch
                stats.rt_total_ms += rt
                stats.rts.append(rt)
                if rt > stats.rt_max_ms:
                    stats.rt_max_ms = rt
            else:
                stats.response_failed += 1
                stats.last_error = f"code {resp.code} {resp.remark or ''}"

    async def run(self, duration: float) -> float:
        tasks = [asyncio.create_task(self._worker(cl)) for cl in self.clients for _ in range(self.args.inflight)]
        started = time.perf_counter()
        try:
            await asyncio.sleep(duration)
        finally:
            self._stop = True
            await asyncio.gather(*tasks, return_exceptions=True)
        return time.perf_counter() - started

    async def run_count(self, count: int) -> float:
        """Send exactly ``count`` messages (in ``--batch`` sized requests); return the seconds taken."""
        self._budget = count
        if self.args.batch > 1 and count % self.args.batch:
            raise c.BenchError(f"a count of {count} is not a multiple of the batch size {self.args.batch}")
        tasks = [asyncio.create_task(self._worker(cl)) for cl in self.clients for _ in range(self.args.inflight)]
        started = time.perf_counter()
        await asyncio.gather(*tasks)
        return time.perf_counter() - started

    async def close(self) -> None:
        for cl in self.clients:
            await cl.close()


async def _reporter(stats: ProduceStats, interval: float, out) -> None:
    last = stats.snapshot()
    last_t = time.perf_counter()
    while True:
        await asyncio.sleep(interval)
        now = stats.snapshot()
        t = time.perf_counter()
        msgs, reqs, rt_total = (now[i] - last[i] for i in range(3))
        avg = rt_total / reqs if reqs else 0.0
        print(f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} Send TPS: {msgs / (t - last_t):.0f} "
              f"Max RT(ms): {stats.rt_max_ms:.0f} Average RT(ms): {avg:7.3f} "
              f"Send Failed: {stats.send_failed} Response Failed: {stats.response_failed}", file=out, flush=True)
        last, last_t = now, t


def summarize(args, stats: ProduceStats, elapsed: float, cpu: c.CpuMeter) -> dict:
    rts = sorted(stats.rts)
    figures = {
        "bench": "produce", "topic": args.topic, "size": args.size, "connections": args.connections,
        "inflight": args.inflight, "batch": args.batch, "seconds": round(elapsed, 3),
        "messages": stats.messages_ok, "requests": stats.requests_ok,
        "tps": round(stats.messages_ok / elapsed, 1) if elapsed else 0.0,
        "mb_per_s": round(stats.messages_ok * args.size / elapsed / 1e6, 2) if elapsed else 0.0,
        "rt_ms_avg": round(stats.rt_total_ms / stats.requests_ok, 3) if stats.requests_ok else 0.0,
        "rt_ms_p50": round(c.percentile(rts, 0.50), 3), "rt_ms_p99": round(c.percentile(rts, 0.99), 3),
        "rt_ms_p999": round(c.percentile(rts, 0.999), 3), "rt_ms_max": round(stats.rt_max_ms, 3),
        "send_failed": stats.send_failed, "response_failed": stats.response_failed,
        "broker_cpu_s": None if cpu.seconds is None else round(cpu.seconds, 3),
        "broker_cpu_s_per_1m": None if cpu.per_million(stats.messages_ok) is None
        else round(cpu.per_million(stats.messages_ok), 2),
    }
    if stats.last_error:
        figures["last_error"] = stats.last_error
    return figures


def print_summary(f: dict, out=None) -> None:
    out = out or sys.stdout
    print(f"[Complete] Send Total: {f['messages']} Send TPS: {f['tps']:.0f} MB/s: {f['mb_per_s']:.2f} "
          f"RT(ms) p50: {f['rt_ms_p50']:.3f} p99: {f['rt_ms_p99']:.3f} p999: {f['rt_ms_p999']:.3f} "
          f"max: {f['rt_ms_max']:.3f} Send Failed: {f['send_failed']} Response Failed: {f['response_failed']}",
          file=out, flush=True)
    if f["broker_cpu_s"] is not None:
        print(f"Broker CPU: {f['broker_cpu_s']:.2f} s over the run, "
              f"{f['broker_cpu_s_per_1m']:.2f} CPU-s per 1M messages", file=out, flush=True)
    if f.get("last_error"):
        print(f"last error: {f['last_error']}", file=out, flush=True)


async def produce(args, quiet: bool = False) -> dict:
    """Run the produce benchmark with parsed ``args``; return the figures."""
    namesrv = c.namesrv_list(args.namesrv)
    admin = RemotingClient(namesrv, tls=c.client_tls(args))
    try:
        route = await c.ensure_topic(admin, args.topic, args.queues, timeout=args.timeout)
    finally:
        await admin.close()
    stats = ProduceStats()
    producer = Producer(args, route, stats, namesrv)
    cpu = c.CpuMeter(args.broker_pid)
    reporter = None if quiet else asyncio.create_task(_reporter(stats, args.interval, sys.stdout))
    cpu.start()
    try:
        if args.count is not None:
            elapsed = await producer.run_count(args.count)
        else:
            elapsed = await producer.run(args.duration)
    finally:
        cpu.stop()
        if reporter:
            reporter.cancel()
        await producer.close()
    return summarize(args, stats, elapsed, cpu)


def main(argv=None) -> int:
    args = parse_args(argv)
    return c.bench_main(args, produce(args), print_summary,
                        lambda f: f["messages"] and not f["send_failed"] + f["response_failed"])


if __name__ == "__main__":
    sys.exit(main())
