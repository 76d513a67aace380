#!/usr/bin/env python3
"""The fastjson reader (rmq.common.fastjson.loads) on the two kinds of body it reads: plain JSON
(a GET_ALL_CONSUMER_OFFSET-like table; msgspec's path) against json.loads, and a ConsumeStats
keyed by MessageQueue objects (the fastjson parser's path).

    PYTHONPATH=$PWD python bench/fastjson_bench.py [--queues 4000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from rmq.common import fastjson
from rmq.protocol.body._mq import dumps_mq_map
from rmq.types import MessageQueue


def best_ms(f: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, default=4000, help="queues in each body (default 4000)")
    ap.add_argument("--rounds", type=int, default=5, help="best of this many runs (default 5)")
    args = ap.parse_args()
    n = args.queues
    table = {
        MessageQueue(f"T{i // 8}", "broker-a", i % 8): {
            "brokerOffset": i * 10,
            "consumerOffset": i,
            "lastTimestamp": 1_700_000_000_000 + i,
        }
        for i in range(n)
    }
    keyed = ('{"consumeTps":1.5,"offsetTable":' + dumps_mq_map(table) + "}").encode()
    plain = json.dumps({"offsetTable": {f"T{i}@G": {str(q): i * q for q in range(8)} for i in range(n)}}).encode()
    ours, stdlib = best_ms(lambda: fastjson.loads(plain), args.rounds), best_ms(lambda: json.loads(plain), args.rounds)
    print(f"plain {len(plain) // 1024} KiB: fastjson.loads {ours:.1f} ms, json.loads {stdlib:.1f} ms")
    print(
        f"MessageQueue-keyed {len(keyed) // 1024} KiB ({n} queues): fastjson.loads "
        f"{best_ms(lambda: fastjson.loads(keyed), args.rounds):.1f} ms"
    )


if __name__ == "__main__":
    main()
