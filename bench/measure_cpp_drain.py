#!/usr/bin/env python3
"""Measure (not a test): how long the real C++ push consumer takes to drain a backlog from
``rmq standalone``, and the broker's CPU seconds per 100,000 messages while it does.

    .venv/bin/python bench/measure_cpp_drain.py [--messages 200000] [--size 1024] [--json]

Starts ``rmq standalone`` on free ports with a fresh store, prefills a 4-queue topic with
bench/produce_bench.py (SEND_MESSAGE_V2), then runs the C++ client (PyPI rocketmq==0.4.4)
as a push consumer of a NEW group in quiet mode (it only counts) and times it from
``start()`` until the last message was handed to the callback.
"""

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))  # interop_support: installs and drives the C++ client

import _common as c
import interop_support as support


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    clients = support.ensure_clients()
    standalone = c.Standalone()
    asyncio.run(standalone.start())
    try:
        topic, group = "CppDrainTopic", f"GID_cpp_drain_{int(time.time())}"
        prefill = subprocess.run(
            [
                sys.executable,
                str(REPO / "bench" / "produce_bench.py"),
                "--namesrv",
                standalone.namesrv_addr,
                "--topic",
                topic,
                "--size",
                str(args.size),
                "--count",
                str(args.messages),
                "--json",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        produced = json.loads(prefill.stdout.strip().splitlines()[-1])
        print(f"prefilled {produced['messages']} x {args.size} B in {produced['seconds']:.1f} s", flush=True)
        cpu0 = c.process_cpu_seconds(standalone.pid)
        with tempfile.TemporaryDirectory() as home:
            result = support.cpp(
                clients,
                Path(home),
                "push",
                "--quiet",
                "--namesrv",
                standalone.namesrv_addr,
                "--group",
                group,
                "--topic",
                topic,
                "--expect",
                str(args.messages),
                "--timeout",
                str(args.timeout),
                timeout=args.timeout + 30,
            ).result()
            cpu = c.process_cpu_seconds(standalone.pid) - cpu0
            done = result.of("done")
            if result.returncode != 0 or not done:
                print(result.describe() + "\n" + result.cpp_log(), file=sys.stderr)
                return 1
        d = done[0]
        figures = {
            "messages": d["received"],
            "drain_seconds": d["seconds"],
            "first_message_after_s": d["first_message_after"],
            "msgs_per_s": round(d["received"] / d["seconds"], 1),
            "broker_cpu_s": round(cpu, 2),
            "broker_cpu_s_per_100k": round(cpu * 100_000 / d["received"], 3),
        }
        print(
            f"C++ push consumer drained {d['received']} messages in {d['seconds']:.1f} s "
            f"({figures['msgs_per_s']:.0f} msg/s; first message after {d['first_message_after']} s); "
            f"broker CPU {cpu:.1f} s = {figures['broker_cpu_s_per_100k']:.2f} CPU-s per 100k messages",
            flush=True,
        )
        if args.json:
            print(json.dumps(figures, sort_keys=True))
        return 0
    finally:
        standalone.cleanup()


if __name__ == "__main__":
    sys.exit(main())
