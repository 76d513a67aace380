#!/usr/bin/env python3
"""``make bench``: start ``rmq standalone`` on free ports with a fresh store, run a short produce,
a prefill + drain and a latency run against it, print the figures, stop the broker.

    python bench/run_all.py [--produce-seconds 10] [--prefill 200000] [--latency-seconds 5]
                            [--full] [--keep-store] [--json-out FILE]

``--full`` runs the sizes quoted in bench/README.md (30 s produce; 1,000,000 × 1 KiB drained
from 4 queues). Each benchmark runs as its own process, exactly the command printed before
it, with ``--broker-pid`` pointing at the standalone process so its CPU is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import _common as c

HERE = Path(__file__).resolve().parent


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="run_all.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--produce-seconds", type=float, default=10.0, help="produce bench duration (default 10)")
    ap.add_argument("--prefill", type=int, default=200_000, help="messages to prefill then drain (default 200000)")
    ap.add_argument("--prefill-batch", type=int, default=1, help="messages per prefill request (default 1)")
    ap.add_argument("--latency-seconds", type=float, default=5.0, help="latency bench duration, 0 skips (default 5)")
    ap.add_argument("--size", type=int, default=1024, help="message size (default 1024)")
    ap.add_argument("--full", action="store_true", help="30 s produce and a 1,000,000 message drain")
    ap.add_argument("--keep-store", action="store_true", help="leave the store directory behind")
    ap.add_argument("--json-out", default=None, help="also write all figures to this file as JSON")
    args = ap.parse_args(argv)
    if args.full:
        args.produce_seconds, args.prefill = 30.0, 1_000_000
    return args


def run_bench(script: str, bench_args: list[str]) -> dict:
    cmd = [sys.executable, str(HERE / script), *bench_args, "--json"]
    shown = " ".join(["python", f"bench/{script}", *bench_args, "--json"])
    print(f"\n$ {shown}", flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    figures = None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            figures = json.loads(line)
        else:
            print(line, flush=True)
    if figures is None:
        raise c.BenchError(f"{script} exited with {proc.returncode} and printed no figures")
    figures["command"] = shown
    figures["exit_code"] = proc.returncode
    return figures


def main(argv=None) -> int:
    args = parse_args(argv)
    standalone = c.Standalone()
    print(f"starting rmq standalone (store {standalone.store_dir}) ...", flush=True)
    try:
        c.run(standalone.start())
    except c.BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        standalone.cleanup()
        return 2
    ns, pid = standalone.namesrv_addr, str(standalone.pid)
    print(f"rmq standalone pid {pid}: name server {ns}, broker {standalone.broker_addr}", flush=True)
    results = []
    rc = 0
    try:
        results.append(
            run_bench(
                "produce_bench.py",
                [
                    "--namesrv",
                    ns,
                    "--topic",
                    "BenchProduce",
                    "--size",
                    str(args.size),
                    "--connections",
                    "4",
                    "--inflight",
                    "16",
                    "--duration",
                    str(args.produce_seconds),
                    "--interval",
                    str(min(10.0, max(1.0, args.produce_seconds / 2))),
                    "--broker-pid",
                    pid,
                ],
            )
        )
        results.append(
            run_bench(
                "pull_bench.py",
                [
                    "--namesrv",
                    ns,
                    "--topic",
                    "BenchPull",
                    "--group",
                    "BenchPullGroup",
                    "--size",
                    str(args.size),
                    "--prefill",
                    str(args.prefill),
                    "--prefill-batch",
                    str(args.prefill_batch),
                    "--inflight",
                    "4",
                    "--max-msgs",
                    "32",
                    "--drain",
                    "--broker-pid",
                    pid,
                ],
            )
        )
        if args.latency_seconds > 0:
            results.append(
                run_bench(
                    "latency_bench.py",
                    [
                        "--namesrv",
                        ns,
                        "--topic",
                        "BenchLatency",
                        "--group",
                        "BenchLatencyGroup",
                        "--size",
                        str(args.size),
                        "--rate",
                        "1000",
                        "--duration",
                        str(args.latency_seconds),
                        "--broker-pid",
                        pid,
                    ],
                )
            )
        rc = max(r["exit_code"] for r in results)
    except c.BenchError as exc:
        print(f"error: {exc}\n--- rmq standalone log ---\n{standalone.log_tail()}", file=sys.stderr)
        rc = 2
    finally:
        exit_code = standalone.stop()
        if not args.keep_store:
            standalone.cleanup()
    print(f"\nrmq standalone stopped (exit code {exit_code})")
    print(
        f"\n== figures ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}) =="
    )
    for r in results:
        if r["bench"] == "produce":
            print(
                f"produce  {r['size']} B, {r['connections']}x{r['inflight']} in flight, {r['seconds']:.0f} s: "
                f"{r['tps']:.0f} msg/s, {r['mb_per_s']:.1f} MB/s, RT p50/p99/p999 {r['rt_ms_p50']:.2f}/"
                f"{r['rt_ms_p99']:.2f}/{r['rt_ms_p999']:.2f} ms, broker {r['broker_cpu_s_per_1m']} CPU-s/1M msgs"
            )
        elif r["bench"] == "pull":
            print(
                f"drain    {r['backlog']} x {r['size']} B from {r['queues']} queues: {r['drain_seconds']:.2f} s, "
                f"{r['msgs_per_s']:.0f} msg/s, {r['mb_per_s']:.1f} MB/s, {r['pulls_per_s']:.0f} pulls/s, "
                f"broker {r['broker_cpu_s_per_1m']} CPU-s/1M msgs (prefill {r.get('prefill_seconds')} s)"
            )
        elif r["bench"] == "latency":
            print(
                f"latency  {r['rate']:.0f} msg/s for {r['seconds']:.0f} s: born-to-consume p50/p99/p999 "
                f"{r['latency_ms_p50']:.0f}/{r['latency_ms_p99']:.0f}/{r['latency_ms_p999']:.0f} ms"
            )
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, sort_keys=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
