#!/usr/bin/env python3
"""Message index benchmark, in one process: key lookup latency in a store holding N messages.

    python bench/index_bench.py [--messages 10000000] [--size 16] [--lookups 20000]
                                [--batch 512] [--dir DIR] [--no-index] [--json]

1. Fill: ``--messages`` records with ``--size``-byte bodies, each with ``KEYS=key-<i>`` and a
   ``UNIQ_KEY``, appended as batches of ``--batch`` (``MessageStore.put_messages``) and
   dispatched (ConsumeQueue units plus the index: two index entries per record). Reported as
   messages/s, with and without the index when ``--no-index`` is given for comparison.
2. Lookups: ``MessageStore.query_message(topic, key, 32, 0, Long.MAX)`` for ``--lookups``
   random keys (index walk plus reading the record from the CommitLog): median, p99 and max
   microseconds, and how many found exactly their record.

Index geometry is the default (maxHashSlotNum 5 000 000, maxIndexNum 20 000 000, a 420 MB file
per 20 M entries), so with 10 M messages (20 M keys) the index spans two files and chains
average 4 entries per slot. Wall clock, nothing asserted; small ``--messages`` is a smoke test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import percentile, print_json, run
from rmq.store import MessageInner, MessageStore, StoreConfig

HOST = ("127.0.0.1", 10911)
TOPIC = "IndexBench"
FOREVER = (1 << 63) - 1


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="index_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=10_000_000, help="records in the store (default 10000000)")
    ap.add_argument("--size", type=int, default=16, help="body size in bytes (default 16)")
    ap.add_argument("--lookups", type=int, default=20_000, help="random key lookups (default 20000)")
    ap.add_argument("--batch", type=int, default=512, help="records per batch append (default 512)")
    ap.add_argument("--dir", default=None, help="store directory (default: a temp dir, removed after)")
    ap.add_argument("--no-index", action="store_true", help="fill with messageIndexEnable=false (no lookups)")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    return ap.parse_args(argv)


def batch_body(first: int, n: int, body: bytes) -> bytes:
    """A SEND_BATCH body (Java MessageDecoder.encodeMessages) of ``n`` items with keys."""
    out = bytearray()
    for i in range(first, first + n):
        props = f"KEYS\x01key-{i}\x02UNIQ_KEY\x01U{i:024X}".encode()
        out += struct.pack(">iiiii", 20 + len(body) + 2 + len(props), 0, 0, 0, len(body)) + body
        out += struct.pack(">h", len(props)) + props
    return bytes(out)


async def main(args) -> dict:
    root = args.dir or tempfile.mkdtemp(prefix="rmq-index-bench-")
    cfg = StoreConfig(
        store_path_root_dir=root,
        message_index_enable=not args.no_index,
        delete_when="99",
        disk_max_used_space_ratio=99,
        disk_space_warning_level_ratio=99,
        disk_space_clean_forcibly_ratio=99,
    )
    store = MessageStore(cfg, HOST)
    await store.start()
    figures: dict = {"messages": args.messages, "index": not args.no_index}
    try:
        body = b"x" * args.size
        t0 = time.perf_counter()
        done = 0
        while done < args.messages:
            n = min(args.batch, args.messages - done)
            r = store.append_message(MessageInner(TOPIC, done % 4, batch_body(done, n, body)), batch=True)
            if not r.is_ok:
                raise SystemExit(f"append failed: {r.status.name} {r.remark}")
            done += n
            if done % (args.batch * 64) == 0:
                store.do_reput()
                await asyncio.sleep(0)
        store.do_reput()
        fill = time.perf_counter() - t0
        figures["fill_msgs_per_s"] = round(args.messages / fill)
        print(
            f"fill: {args.messages} messages in {fill:.1f} s = {args.messages / fill:,.0f} msg/s "
            f"(index {'on' if not args.no_index else 'off'})",
            flush=True,
        )
        if args.no_index:
            return figures
        rnd = random.Random(1)
        lat = []
        exact = 0
        for _ in range(args.lookups):
            i = rnd.randrange(args.messages)
            t = time.perf_counter()
            res = store.query_message(TOPIC, f"key-{i}", 32, 0, FOREVER)
            lat.append((time.perf_counter() - t) * 1e6)
            if len(res.buffers) == 1 and f"key-{i}\x02".encode() in res.buffers[0]:
                exact += 1
        lat.sort()
        figures.update(
            lookup_median_us=round(percentile(lat, 0.5), 1),
            lookup_p99_us=round(percentile(lat, 0.99), 1),
            lookup_max_us=round(lat[-1], 1),
            lookups=args.lookups,
            exact=exact,
            index_files=len(store.index.files) if store.index else 0,
        )
        print(
            f"lookup: {args.lookups} random keys, median {figures['lookup_median_us']} us, "
            f"p99 {figures['lookup_p99_us']} us, max {figures['lookup_max_us']} us; "
            f"{exact} found exactly their record; {figures['index_files']} index files",
            flush=True,
        )
        return figures
    finally:
        await store.shutdown()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    a = parse_args()
    if a.messages < 1 or a.lookups < 0 or a.batch < 1:
        raise SystemExit("error: --messages and --batch must be >= 1, --lookups >= 0")
    out = run(main(a))
    if a.json:
        print_json(out)
    os._exit(0)
