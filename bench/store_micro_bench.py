#!/usr/bin/env python3
"""Per-call cost of rmq._store's hot functions, in thread CPU time (robust on a loaded machine).

    python bench/store_micro_bench.py [--json]

Times, in this process, on 4000 records of 1 KiB written into a bytearray:
  encode_record_ns               one record written (CRC included): the put path
  scan_records_crc_ns_per_rec    the recovery scan (CRC checked) per record
  scan_records_nocrc_ns_per_rec  the reput/dispatch scan per record
  get_message_scan_ns_per_msg    the getMessage loop per message (32-message pulls)
  decode_record_ns               one record to a dict
Each figure is the best of 9 repeats of ``time.thread_time`` (CPU time of this thread, so
time spent waiting for a core on a busy machine is left out). For an A/B, run it from two
trees (``PYTHONPATH=tree``), alternating. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rmq import _store

HOST = b"\x7f\x00\x00\x01\x00\x00\x2a\x9f"
N = 4000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    body = bytes(range(256)) * 4
    props = b"TAGS\x01TagA\x02KEYS\x01k\x02UNIQ_KEY\x01ABCDEF0123"
    props += b"x" * (40 - len(props))
    size = _store.record_size(len(body), 9, len(props))
    cl = bytearray(size * N + 64)
    cq = bytearray(20 * N)
    pos = 0
    for i in range(N):
        s = _store.encode_record(cl, pos, body, b"TopicTest", props, 0, 0, i, pos, 0, 1, HOST, 2, HOST, 0, 0)
        _store.put_cq_unit(cq, i * 20, pos, s, 123)
        pos += s
    one = bytearray(size)
    table = _store.CommitLogTable()
    table.reset(len(cl), 0, [cl])
    starts = range(0, 20 * (N - 32), 20 * 32 * 8)

    def pull() -> None:
        for start in starts:
            _store.get_message_scan(
                cq, start, len(cq), table, pos, 32, pos, 1 << 40, None, None, 256 * 1024, 32, 64 * 1024, 8
            )

    def best(fn, number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=9, timer=time.thread_time)) / number

    figures = {
        "encode_record_ns": round(
            best(
                lambda: _store.encode_record(one, 0, body, b"TopicTest", props, 0, 0, 1, 0, 0, 1, HOST, 2, HOST, 0, 0),
                20000,
            )
            * 1e9
        ),
        "scan_records_crc_ns_per_rec": round(best(lambda: _store.scan_records(cl, 0, pos, 0, True), 5) / N * 1e9),
        "scan_records_nocrc_ns_per_rec": round(best(lambda: _store.scan_records(cl, 0, pos, 0, False), 10) / N * 1e9),
        "get_message_scan_ns_per_msg": round(best(pull, 100) / len(starts) / 32 * 1e9, 1),
        "decode_record_ns": round(best(lambda: _store.decode_record(cl, size * 5, False), 20000) * 1e9),
    }
    table.release()
    print(json.dumps({"bench": "store_micro", **figures}) if args.json else figures)


if __name__ == "__main__":
    main()
