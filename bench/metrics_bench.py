#!/usr/bin/env python3
"""Measure (not a test): what the Prometheus endpoint costs the broker.

    .venv/bin/python bench/metrics_bench.py [--queues 1000 10000] [--scrapes 5] [--idle 10]
                                            [--produce 10] [--json]

For each queue count, on a fresh ``rmq standalone`` (its real defaults, ``--metricsPort`` on a
free port):

Store files are small (64 MiB CommitLog, 300-unit ConsumeQueue files) so 10 000 queues fit
on a test machine's disk; the metrics path does not depend on their size.

1. setup: ``queues / 8`` topics of 8 queues, one message in every queue and a consumer group
   that committed offset 0 on every queue, so every queue has a lag series and a lag-latency
   lookup (the worst case: every queue lags);
2. idle: the broker's CPU seconds per second with nothing to do (``--idle`` s);
3. scrapes: ``--scrapes`` sequential ``GET /metrics`` over HTTP; the broker's CPU seconds per
   scrape (``/proc/<pid>/stat`` utime + stime: loop and metrics thread together), the wall
   time, the body size, the phases the broker reports (``rmq_metrics_collect_seconds``), and
   the worst round trip of a NoisyNeighbour (GET_MAX_OFFSET every 10 ms) meanwhile: how long
   the loop was held. The first scrape (cold: label texts built, store times read) is
   reported apart from the others (warm);
4. load: ``bench/produce_bench.py`` for ``--produce`` s (4 connections × 16 in flight,
   1 KiB) without scrapes, then again with a scrape every second: the broker's CPU per second
   and the send TPS both ways.

The shares printed: one warm scrape every 15 s (Prometheus' default interval) as a fraction of
the idle broker's CPU and of the broker under the produce load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import process_cpu_seconds

from rmq._testing import NoisyNeighbour, StandaloneProcess, free_port
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

GROUP = "BenchMetricsGroup"
SCRAPE_EVERY = 15.0


def scrape(port: int) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as r:
        body = r.read()
    return time.perf_counter() - t0, body


def phases(body: bytes) -> dict[str, float]:
    return {
        m.group(1).decode(): float(m.group(2))
        for m in re.finditer(rb'rmq_metrics_collect_seconds\{phase="(\w+)"\} (\S+)', body)
    }


async def setup(addr: str, queues: int) -> None:
    client = RemotingClient()
    sem = asyncio.Semaphore(64)

    async def call(code: int, ext: dict, body: bytes | None = None) -> None:
        async with sem:
            resp = await client.invoke(addr, RemotingCommand.request(code, ext, body), timeout=60)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"code {code}: {resp.code} {resp.remark}")

    topics = [f"BenchMetrics{i:05d}" for i in range(max(1, queues // 8))]
    try:
        for i in range(0, len(topics), 64):
            await asyncio.gather(
                *(
                    call(
                        RequestCode.UPDATE_AND_CREATE_TOPIC,
                        {"topic": t, "readQueueNums": 8, "writeQueueNums": 8, "perm": 6},
                    )
                    for t in topics[i : i + 64]
                )
            )
        jobs = [(t, q) for t in topics for q in range(8)]
        for i in range(0, len(jobs), 512):
            await asyncio.gather(
                *(
                    call(
                        RequestCode.SEND_MESSAGE,
                        {
                            "producerGroup": "BenchMetricsPG",
                            "topic": t,
                            "defaultTopic": "TBW102",
                            "defaultTopicQueueNums": 8,
                            "queueId": q,
                            "sysFlag": 0,
                            "bornTimestamp": str(int(time.time() * 1000)),
                            "flag": 0,
                            "properties": "",
                            "reconsumeTimes": "0",
                            "unitMode": "false",
                        },
                        b"x" * 64,
                    )
                    for t, q in jobs[i : i + 512]
                )
            )
        for i in range(0, len(jobs), 512):
            await asyncio.gather(
                *(
                    call(
                        RequestCode.UPDATE_CONSUMER_OFFSET,
                        {"consumerGroup": GROUP, "topic": t, "queueId": str(q), "commitOffset": "0"},
                    )
                    for t, q in jobs[i : i + 512]
                )
            )
    finally:
        await client.close()


def cpu_rate(pid: int, seconds: float) -> float:
    c0, t0 = process_cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (process_cpu_seconds(pid) - c0) / (time.monotonic() - t0)


def produce(namesrv: str, pid: int, seconds: float, scrape_port: int | None) -> dict:
    """Broker CPU per second and send TPS during a produce run (scraping every second when
    ``scrape_port`` is given)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve().parent / "produce_bench.py"),
        "--namesrv",
        namesrv,
        "--topic",
        "BenchMetricsLoad",
        "--duration",
        str(seconds),
        "--json",
        "--interval",
        str(seconds),
    ]
    c0, t0 = process_cpu_seconds(pid), time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    scrapes = 0
    while proc.poll() is None:
        if scrape_port:
            scrape(scrape_port)
            scrapes += 1
        time.sleep(1.0)
    out = proc.stdout.read() if proc.stdout else ""
    cpu = (process_cpu_seconds(pid) - c0) / (time.monotonic() - t0)
    figures = {}
    for line in out.splitlines():
        if line.startswith("{"):
            figures = json.loads(line)
    return {"broker_cpu_per_s": cpu, "send_tps": figures.get("tps"), "scrapes": scrapes}


def measure(queues: int, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="rmq-metrics-bench-") as d:  # a 10k-queue store is ~600 MB
        return _measure(Path(d), queues, args)


def _measure(root: Path, queues: int, args) -> dict:
    port = free_port()
    # small store files: 10 000 queues of the default 6 MB ConsumeQueue files would take 60 GB of disk
    with StandaloneProcess(
        root / "store", [f"--metricsPort={port}", "--mappedFileSizeConsumeQueue=6000"], start_timeout=60
    ) as proc:
        t0 = time.monotonic()
        asyncio.run(setup(proc.broker_addr, queues))
        setup_s = time.monotonic() - t0
        pid = proc.pid
        assert pid is not None
        idle = cpu_rate(pid, args.idle)
        with NoisyNeighbour(proc.broker_addr) as probe:
            time.sleep(args.scrapes * 1.0)
            baseline_worst = probe.worst
        rows = []
        with NoisyNeighbour(proc.broker_addr) as probe:
            for _ in range(args.scrapes):
                c0 = process_cpu_seconds(pid)
                wall, body = scrape(port)
                rows.append(
                    {
                        "cpu_s": process_cpu_seconds(pid) - c0,
                        "wall_s": wall,
                        "bytes": len(body),
                        "series": body.count(b"\n") - body.count(b"\n#"),
                        "lag_series": body.count(b"rocketmq_consumer_lag_messages{"),
                    }
                )
                time.sleep(0.5)
            worst = probe.worst
        last_phases = phases(scrape(port)[1])
        load = produce(proc.namesrv_addr, pid, args.produce, None) if args.produce else {}
        load_scraped = produce(proc.namesrv_addr, pid, args.produce, port) if args.produce else {}
    cold, warm = rows[0], rows[1:] or rows
    warm_cpu = sorted(r["cpu_s"] for r in warm)[len(warm) // 2]
    per_s = warm_cpu / SCRAPE_EVERY
    return {
        "queues": queues,
        "setup_s": round(setup_s, 1),
        "idle_broker_cpu_per_s": round(idle, 4),
        "cold_scrape_cpu_s": round(cold["cpu_s"], 4),
        "cold_scrape_wall_s": round(cold["wall_s"], 4),
        "warm_scrape_cpu_s": round(warm_cpu, 4),
        "warm_scrape_wall_s": round(sorted(r["wall_s"] for r in warm)[len(warm) // 2], 4),
        "scrape_bytes": warm[-1]["bytes"],
        "series": warm[-1]["series"],
        "lag_series": warm[-1]["lag_series"],
        "phases_s": {k: round(v, 4) for k, v in last_phases.items()},
        "worst_neighbour_rtt_during_scrapes_s": round(worst, 4),
        "worst_neighbour_rtt_without_scrapes_s": round(baseline_worst, 4),
        "metrics_cpu_per_s_at_15s": round(per_s, 5),
        "share_of_idle_broker": round(per_s / idle, 3) if idle > 0 else None,
        "produce": load,
        "produce_with_1s_scrapes": load_scraped,
        "share_of_loaded_broker": (
            round(per_s / load["broker_cpu_per_s"], 4) if load.get("broker_cpu_per_s") else None
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--scrapes", type=int, default=5)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measurement (default 10)")
    ap.add_argument(
        "--produce", type=float, default=10.0, help="seconds of produce load, each way (default 10; 0 skips it)"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    for n in args.queues:
        r = measure(n, args)
        results.append(r)
        print(
            f"{n} queues ({r['lag_series']} lag series, {r['scrape_bytes'] / 1e6:.1f} MB): "
            f"scrape CPU cold {r['cold_scrape_cpu_s'] * 1000:.0f} ms, warm {r['warm_scrape_cpu_s'] * 1000:.0f} ms "
            f"(wall {r['warm_scrape_wall_s'] * 1000:.0f} ms; phases {r['phases_s']}); "
            f"worst neighbour round trip {r['worst_neighbour_rtt_during_scrapes_s'] * 1000:.0f} ms "
            f"(without scrapes {r['worst_neighbour_rtt_without_scrapes_s'] * 1000:.0f} ms); "
            f"at one scrape per {SCRAPE_EVERY:.0f} s: {r['metrics_cpu_per_s_at_15s'] * 1000:.2f} ms CPU/s = "
            f"{r['share_of_idle_broker'] or 0:.1%} of the idle broker "
            f"({r['idle_broker_cpu_per_s'] * 1000:.1f} ms/s), "
            f"{r['share_of_loaded_broker'] or 0:.2%} of the broker under produce load; "
            f"produce {r['produce'].get('send_tps')} TPS, with 1 s scrapes "
            f"{r['produce_with_1s_scrapes'].get('send_tps')} TPS",
            flush=True,
        )
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
