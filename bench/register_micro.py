"""In-process cost of one REGISTER_BROKER at size on the name server's side: the body's decode
(JSON, msgspec; compressed, inflate and the topic-line reader) and ``RouteInfoManager.register_broker``
(checks, queue data, the topics the table no longer lists), as process CPU-ms.

A broker of ``--topics`` topics (8 queues each, as the scale bench creates them) registers with
a new data version each round, one topic's queue count changed per version (a new version means
the table changed); full (JSON) and compressed rounds alternate, after a first registration
that builds every route. Medians of ``--rounds`` with min–max; ``--profile`` prints the top of a
cProfile of one compressed round. The network, the CRC and the frame are the scale bench's
(``bench/scale_bench.py``, name server CPU per registration); this one isolates the decode and
the tables.

    PYTHONPATH=$PWD python bench/register_micro.py --topics 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from rmq.broker.namesrv_api import encode_register_body
from rmq.namesrv.processor import NamesrvProcessor
from rmq.namesrv.route_manager import RouteInfoManager
from rmq.protocol.body.register import decode_compressed_register_body

BROKER = "RegisterMicro"


def table_of(n: int, version: int) -> dict[str, dict[str, Any]]:
    """The broker's table at ``version``: ``n`` topics, one of them with ``version``'s queue count."""
    table = {
        f"T_{i:06d}": {"topicName": f"T_{i:06d}", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6} for i in range(n)
    }
    table["T_000000"]["writeQueueNums"] = 1 + version % 8
    table[BROKER] = {"topicName": BROKER, "readQueueNums": 1, "writeQueueNums": 1, "perm": 7}
    return table


def body(n: int, version: int, compressed: bool) -> bytes:
    wrapper = {"topicConfigTable": table_of(n, version), "dataVersion": {"timestamp": 1, "counter": version}}
    return asyncio.run(encode_register_body(wrapper, compressed))


def one(route: RouteInfoManager, data: bytes, version: int, compressed: bool) -> tuple[float, float]:
    """(decode, register) CPU-ms of one registration."""
    t0 = time.process_time()
    if compressed:
        table, dv = decode_compressed_register_body(data, route.limits.max_topics_per_broker)
    else:
        table, dv = NamesrvProcessor._json_register_body(data)
    t1 = time.process_time()
    route.register_broker("C", "127.0.0.1:1", BROKER, 0, "", table, dv)
    t2 = time.process_time()
    held = route.topic_queue_table["T_000000"][BROKER].write_queue_nums
    assert dv == {"timestamp": 1, "counter": version} and held == 1 + version % 8, (dv, held)
    return (t1 - t0) * 1000, (t2 - t1) * 1000


def summary(xs: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(xs), 2), "min": round(min(xs), 2), "max": round(max(xs), 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    versions = range(2, 2 + 2 * args.rounds)
    bodies = {v: body(args.topics, v, compressed=v % 2 == 1) for v in versions}
    route = RouteInfoManager()
    first = one(route, body(args.topics, 1, False), 1, False)
    costs: dict[str, list[tuple[float, float]]] = {"full": [], "compressed": []}
    for v in versions:
        costs["compressed" if v % 2 else "full"].append(one(route, bodies[v], v, v % 2 == 1))
    figures: dict[str, Any] = {"topics": args.topics, "first_registration_ms": round(sum(first), 2)}
    for kind, xs in costs.items():
        figures[kind] = {
            "decode_ms": summary([d for d, _ in xs]),
            "register_ms": summary([r for _, r in xs]),
            "total_ms": summary([d + r for d, r in xs]),
        }
    if args.profile:
        import cProfile
        import pstats

        v = versions[-1] + 1
        data = body(args.topics, v, True)
        prof = cProfile.Profile()
        prof.runcall(one, route, data, v, True)
        pstats.Stats(prof).sort_stats("tottime").print_stats(10)
    if args.json:
        print(json.dumps(figures))
    else:
        for k, val in figures.items():
            print(f"{k}: {val}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
