#!/usr/bin/env python3
"""Measure (not a test): timer messages at scale. Each round starts a fresh ``rmq standalone``,
schedules ``--timers`` timer messages (TIMER_DELIVER_MS) spread evenly over ``--span``
seconds starting ``--lead`` seconds after the sends begin, waits until every one is delivered
and reports:

* the broker's RSS (peak while the timers are pending, from /proc/<pid>/status VmHWM, and at
  the end) and its timer-store files;
* broker CPU seconds per 1M timers scheduled + delivered (utime + stime of the broker process
  from the first send to the last delivery, idle waiting included);
* lateness p50 / p99 / max in ms: the delivered copy's store timestamp minus its TIMER_OUT_MS
  (both broker-side times, read back by PULL).

Figures are medians of ``--rounds`` rounds with min–max.

    .venv/bin/python bench/timer_bench.py [--timers 1000000] [--span 3600] [--rounds 3] [--json]
    .venv/bin/python bench/timer_bench.py --timers 10000 --span 30 --rounds 1   # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import percentile, process_cpu_seconds, properties_string

from rmq._testing import StandaloneProcess
from rmq.client._codec import decode_messages
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

TOPIC = "TimerBench"
QUEUES = 4


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timers", type=int, default=1_000_000, help="timer messages per round (default 1M)")
    ap.add_argument("--span", type=float, default=3600.0, help="seconds the delivery times spread over (1 h)")
    ap.add_argument("--lead", type=float, default=5.0, help="seconds from the first send to the first due time")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (fresh broker each; default 3)")
    ap.add_argument("--concurrency", type=int, default=128, help="sends in flight (default 128)")
    ap.add_argument("--body", type=int, default=128, help="body bytes (default 128)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    if a.timers < 1 or a.span <= 0 or a.rounds < 1 or a.concurrency < 1:
        ap.error("--timers, --span, --rounds and --concurrency must be positive")
    return a


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _disk_bytes(path: Path) -> int:
    """Bytes on disk (allocated blocks) of a file or of the files under a directory."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) if path.exists() else 0


async def _call(client: RemotingClient, addr: str, code: int, ext: dict, body: bytes | None = None):
    return await client.invoke(addr, RemotingCommand.request(code, ext, body), timeout=30.0)


async def _delivered(client: RemotingClient, addr: str) -> int:
    total = 0
    for q in range(QUEUES):
        r = await _call(client, addr, RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q})
        total += int(r.ext_fields.get("offset", 0)) if r.code == ResponseCode.SUCCESS else 0
    return total


async def _lateness(client: RemotingClient, addr: str) -> list[int]:
    late: list[int] = []
    for q in range(QUEUES):
        offset = 0
        while True:
            ext = {
                "consumerGroup": "TimerBenchCG",
                "topic": TOPIC,
                "queueId": q,
                "queueOffset": str(offset),
                "maxMsgNums": 32,
                "sysFlag": 4,
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
            }
            r = await _call(client, addr, RequestCode.PULL_MESSAGE, ext)
            if r.code != ResponseCode.SUCCESS or not r.body:
                break
            msgs = decode_messages(r.body)
            for m in msgs:
                late.append(m.store_timestamp - int(m.properties["TIMER_OUT_MS"]))
            offset = msgs[-1].queue_offset + 1
    return late


async def one_round(args: argparse.Namespace) -> dict:
    scratch = tempfile.TemporaryDirectory(prefix="rmq-timer-bench-")
    store = Path(scratch.name) / "store"
    proc = StandaloneProcess(store)
    proc.start()
    pid = proc.pid
    assert pid is not None
    try:
        async with RemotingClient() as client:
            addr = proc.broker_addr
            r = await _call(
                client,
                addr,
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
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            n = args.timers
            body = b"x" * args.body
            cpu0 = process_cpu_seconds(pid)
            start_ms = time.time_ns() // 1_000_000
            first_due = start_ms + int(args.lead * 1000)
            step = args.span * 1000 / n
            it = iter(range(n))

            async def sender() -> None:
                for i in it:
                    props = {"WAIT": "true", "TIMER_DELIVER_MS": str(first_due + int(i * step))}
                    ext = {
                        "producerGroup": "TimerBenchPG",
                        "topic": TOPIC,
                        "defaultTopic": "TBW102",
                        "defaultTopicQueueNums": QUEUES,
                        "queueId": i % QUEUES,
                        "sysFlag": 0,
                        "bornTimestamp": str(time.time_ns() // 1_000_000),
                        "flag": 0,
                        "properties": properties_string(props),
                        "reconsumeTimes": "0",
                        "unitMode": "false",
                    }
                    resp = await _call(client, addr, RequestCode.SEND_MESSAGE, ext, body)
                    if resp.code != ResponseCode.SUCCESS:
                        raise RuntimeError(f"send refused: {resp.code} {resp.remark}")

            await asyncio.gather(*(sender() for _ in range(args.concurrency)))
            sent_s = time.time_ns() / 1e9 - start_ms / 1000
            due_end = (first_due + args.span * 1000) / 1000
            while (got := await _delivered(client, addr)) < n:
                if time.time() > due_end + 120:
                    raise RuntimeError(f"only {got} of {n} timers delivered 120 s after the last was due")
                await asyncio.sleep(min(1.0, max(0.05, args.span / 100)))
            cpu = process_cpu_seconds(pid) - cpu0
            peak_kib = _status_kib(pid, "VmHWM")
            rss_kib = _status_kib(pid, "VmRSS")
            late = sorted(await _lateness(client, addr))
            files = _disk_bytes(store / "timerlog") + _disk_bytes(store / "timerwheel")
    finally:
        proc.stop()
        scratch.cleanup()
    return {
        "timers": n,
        "send_s": round(sent_s, 2),
        "cpu_s_per_1m": round(cpu * 1_000_000 / n, 1),
        "rss_peak_mib": round(peak_kib / 1024, 1),
        "rss_end_mib": round(rss_kib / 1024, 1),
        "timer_files_mib": round(files / 2**20, 1),
        "lateness_p50_ms": percentile(late, 0.50),
        "lateness_p99_ms": percentile(late, 0.99),
        "lateness_max_ms": float(late[-1]) if late else 0.0,
        "early": sum(1 for x in late if x < 0),
    }


def summarize(rounds: list[dict]) -> dict:
    out: dict = {"rounds": len(rounds)}
    for key in rounds[0]:
        vals = [r[key] for r in rounds]
        out[key] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rounds = []
    for i in range(args.rounds):
        r = asyncio.run(one_round(args))
        rounds.append(r)
        if not args.json:
            print(f"round {i + 1}: {r}", file=sys.stderr)
    s = summarize(rounds)
    s["load_avg"] = os.getloadavg()
    s["span_s"], s["lead_s"] = args.span, args.lead
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        for key, v in s.items():
            if isinstance(v, dict):
                print(f"{key:>18}: {v['median']} (min {v['min']}, max {v['max']})")
            else:
                print(f"{key:>18}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
