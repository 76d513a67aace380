#!/usr/bin/env python3
"""Cost of SQL92 property filters on the pull path, next to the TAG path.

    python bench/filter_bench.py [--messages N] [--no-broker] [--before TREE] [--json]

Two parts, each with the same four subscriptions over the same messages (10 % of them match
every filter; every message carries TAGS, KEYS, UNIQ_KEY and five user properties):

  tag_all   TAG "*"
  tag_one   TAG "TagA"
  sql_1     SQL92 "bucket = 0"                                         (one comparison)
  sql_5     SQL92 "n >= 0 AND price < 1000.0 AND color IN ('red', 'blue')
                   AND vip IS NOT NULL AND bucket = 0"                  (five predicates, the
                                                                         selective one last)

scan    in this process: ``rmq._store.get_message_scan`` over an in-memory CommitLog and
        ConsumeQueue of N records, in 32-message pulls from the first to the last unit, timed
        with ``time.thread_time`` (best of 5). Figure: CPU seconds per 1M scanned messages.
broker  ``rmq standalone`` (``--enablePropertyFilter=true``) filled with N messages by batch
        sends; each subscription drains the topic from offset 0 with raw PULL_MESSAGE (four
        queues, one pull in flight per queue, the subscription in the request), ``--repeat``
        times with fresh groups. Figures: the broker's CPU seconds (utime + stime of its
        process, summed over the drains) per 1M scanned messages, the mean drain time, and the
        matched and scanned messages per second.

``--before TREE`` runs the scan part's TAG cases again with ``rmq`` imported from another
checkout (e.g. ``/work/main``, before the SQL92 change) in a subprocess, so the TAG path can be
compared before and after. Nothing is asserted; figures from a loaded machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import timeit
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, os.environ.get("FILTER_BENCH_TREE") or str(_HERE.parent))
sys.path.insert(1, str(_HERE))

from rmq import _store

HOST = b"\x7f\x00\x00\x01\x00\x00\x2a\x9f"
TOPIC = "FilterBench"
SQL_1 = "bucket = 0"
SQL_5 = "n >= 0 AND price < 1000.0 AND color IN ('red', 'blue') AND vip IS NOT NULL AND bucket = 0"
CASES = (("tag_all", "TAG", "*"), ("tag_one", "TAG", "TagA"), ("sql_1", "SQL92", SQL_1), ("sql_5", "SQL92", SQL_5))


def message_properties(i: int) -> dict[str, str]:
    return {
        "TAGS": "TagA" if i % 10 == 0 else "TagB",
        "KEYS": f"key-{i}",
        "UNIQ_KEY": f"{i:032X}",
        "bucket": str(i % 10),
        "n": str(i),
        "price": f"{i % 100}.5",
        "color": "red" if i % 2 else "blue",
        "vip": "true" if i % 3 else "false",
    }


def encode_properties(props: dict[str, str]) -> bytes:
    return "\x02".join(f"{k}\x01{v}" for k, v in props.items()).encode()


# ------------------------------------------------------------------------------------ scan
def scan_figures(n: int, cases: tuple[tuple[str, str, str], ...]) -> dict[str, float]:
    body = b"x" * 256
    records = [encode_properties(message_properties(i)) for i in range(n)]
    sizes = [_store.record_size(len(body), len(TOPIC), len(p)) for p in records]
    cl = bytearray(sum(sizes) + 64)
    cq = bytearray(20 * n)
    pos = 0
    for i, props in enumerate(records):
        s = _store.encode_record(cl, pos, body, TOPIC.encode(), props, 0, 0, i, pos, 0, 1, HOST, 2, HOST, 0, 0)
        tag = "TagA" if i % 10 == 0 else "TagB"
        _store.put_cq_unit(cq, i * 20, pos, s, _store.java_hash_code(tag))
        pos += s
    table = _store.CommitLogTable()
    table.reset(len(cl), 0, [cl])
    out: dict[str, float] = {}
    for name, etype, expr in cases:
        codes = tag_bytes = None
        extra: tuple[object, ...] = ()
        if etype == "TAG" and expr != "*":
            codes, tag_bytes = frozenset({_store.java_hash_code(expr)}), [expr.encode()]
        elif etype == "SQL92":
            from rmq.common.sql92 import compile_sql92

            f = compile_sql92(expr)
            extra = (_store.SqlProgram(f.plan, f.key_bytes), f.match_values)
        found = [0]

        def drain(codes=codes, tag_bytes=tag_bytes, extra=extra, found=found) -> None:
            start, end, got = 0, len(cq), 0
            while start < end:
                _st, scanned, count, *_ = _store.get_message_scan(
                    cq, start, end, table, pos, 32, pos, 1 << 40, codes, tag_bytes, 256 * 1024, 32, 64 * 1024, 8, *extra
                )
                got += count
                start += scanned
            found[0] = got

        best = min(timeit.repeat(drain, number=1, repeat=5, timer=time.thread_time))
        out[f"scan_{name}_cpu_s_per_1m"] = round(best * 1_000_000 / n, 3)
        out[f"scan_{name}_matched"] = found[0]
    table.release()
    return out


# ---------------------------------------------------------------------------------- broker
async def broker_figures(n: int, repeat: int) -> dict[str, float]:
    import _common as c

    from rmq._testing import wait_until
    from rmq.common.message import PullSysFlag
    from rmq.protocol.codes import ResponseCode
    from rmq.protocol.headers.consumer import PullMessageRequestHeader
    from rmq.protocol.requests.consumer import get_max_offset, parse_offset, pull_message
    from rmq.remoting.client import RemotingClient

    proc = c.Standalone(extra_args=["--enablePropertyFilter=true"])
    await proc.start()
    out: dict[str, float] = {}
    try:
        async with RemotingClient(proc.namesrv_addr) as client:
            await c.create_topic(client, proc.broker_addr, TOPIC, queues=4)
            batch = 200
            for first in range(0, n, batch):
                items = list(range(first, min(n, first + batch)))
                body = c.encode_batch(
                    [b"x" * 256] * len(items), [c.properties_string(message_properties(i)) for i in items]
                )
                q = (first // batch) % 4
                resp = await client.invoke(
                    proc.broker_addr, c.send_request("FilterBenchP", TOPIC, q, "", body, batch=True), timeout=10
                )
                if resp.code != ResponseCode.SUCCESS:
                    raise c.BenchError(f"send failed: {resp.code} {resp.remark}")
            expected = [0] * 4
            for first in range(0, n, batch):
                expected[(first // batch) % 4] += min(n, first + batch) - first

            async def dispatched() -> bool:
                for q in range(4):
                    resp = await client.invoke(proc.broker_addr, get_max_offset(TOPIC, q), timeout=10)
                    if parse_offset(resp) < expected[q]:
                        return False
                return True

            await wait_until(dispatched, 120, interval=0.05, what="every batch dispatched")
            for name, etype, expr in CASES:
                matched = [0]

                async def drain_queue(qid: int, group: str, etype=etype, expr=expr, matched=matched) -> None:
                    offset = 0
                    while True:
                        h = PullMessageRequestHeader(
                            consumer_group=group,
                            topic=TOPIC,
                            queue_id=qid,
                            queue_offset=offset,
                            max_msg_nums=32,
                            sys_flag=PullSysFlag.build(False, False, True),
                            commit_offset=0,
                            suspend_timeout_millis=0,
                            subscription=expr,
                            sub_version=0,
                            expression_type=etype,
                        )
                        resp = await client.invoke(proc.broker_addr, pull_message(h), timeout=10)
                        if resp.code == ResponseCode.SUCCESS:
                            matched[0] += c.count_records(resp.body)
                        elif resp.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY,):
                            return  # PULL_NOT_FOUND at the end of the queue
                        offset = int(resp.ext_fields["nextBeginOffset"])

                cpu0 = c.process_cpu_seconds(proc.pid)
                t0 = time.monotonic()
                for r in range(repeat):  # each round a new group, from offset 0
                    group = f"FilterBench_{name}_{r}"
                    await asyncio.gather(*(drain_queue(q, group) for q in range(4)))
                wall = (time.monotonic() - t0) / repeat
                cpu = c.process_cpu_seconds(proc.pid) - cpu0
                out[f"broker_{name}_cpu_s_per_1m"] = round(cpu * 1_000_000 / (n * repeat), 3)
                out[f"broker_{name}_drain_s"] = round(wall, 3)
                out[f"broker_{name}_matched_per_s"] = round(matched[0] / repeat / wall)
                out[f"broker_{name}_scanned_per_s"] = round(n / wall)
                out[f"broker_{name}_matched"] = matched[0] // repeat
    finally:
        proc.stop()
        proc.cleanup()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=20_000, help="messages scanned per case (20 000)")
    ap.add_argument("--no-broker", action="store_true", help="only the in-process scan part")
    ap.add_argument(
        "--repeat",
        type=int,
        default=10,
        help="broker drains per subscription, CPU summed over them (10; /proc counts 10 ms ticks)",
    )
    ap.add_argument("--before", metavar="TREE", help="also run the scan's TAG cases with rmq from TREE")
    ap.add_argument("--tag-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases = CASES[:2] if args.tag_only else CASES
    figures: dict[str, float] = {"messages": args.messages, **scan_figures(args.messages, cases)}
    if args.tag_only:
        print(json.dumps(figures))
        return
    if args.before:
        env = dict(os.environ, FILTER_BENCH_TREE=os.path.abspath(args.before))
        done = subprocess.run(
            [sys.executable, __file__, "--tag-only", "--messages", str(args.messages)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        before = json.loads(done.stdout.strip().splitlines()[-1])
        figures.update({f"before_{k}": v for k, v in before.items() if k.startswith("scan_")})
    if not args.no_broker:
        figures.update(asyncio.run(broker_figures(args.messages, max(1, args.repeat))))
    if args.json:
        print(json.dumps({"bench": "filter", **figures}))
    else:
        for k, v in figures.items():
            print(f"{k:40} {v}")


if __name__ == "__main__":
    main()
