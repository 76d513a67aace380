#!/usr/bin/env python3
"""Store benchmark, in one process (no network): what the CommitLog / ConsumeQueue layer costs.

    python bench/store_bench.py [--messages 200000] [--size 1024] [--producers 64]
                                [--sync-messages 20000] [--pulls 20000] [--dir DIR] [--json]

1. Append, 1 KiB messages, ASYNC_FLUSH: ``MessageStore.put_message`` back to back, dispatch
   included (messages/s, MB/s of records written);
2. Append, SYNC_FLUSH: ``--producers`` concurrent producers, each acknowledged only after the
   group-commit fdatasync;
3. getMessage, 32-message pulls from page cache (the queue filled by 1.), messages/s and
   nanoseconds per message, ``release()`` included.

Each figure is shown beside (a) the same loop written in pure Python on the same data (the
record encoder with ``struct.pack_into``; the getMessage unit scan with ``struct.unpack_from``)
and (b) a raw memcpy of the same bytes on this machine (slice assignment into an mmap of the
same record sizes; copying the 32 records of a pull), as ratios. Timings are wall clock on an
otherwise idle machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import shutil
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop

from rmq import _store
from rmq.store import GetMessageStatus, MessageInner, MessageStore, StoreConfig
from rmq.store.message import host_bytes

HOST = ("127.0.0.1", 10911)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="store_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000, help="ASYNC appends (default 200000)")
    ap.add_argument("--size", type=int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--producers", type=int, default=64, help="concurrent SYNC producers (default 64)")
    ap.add_argument("--sync-messages", type=int, default=20_000, help="SYNC appends (default 20000)")
    ap.add_argument("--pulls", type=int, default=20_000, help="getMessage calls (default 20000)")
    ap.add_argument("--dir", default=None, help="store directory (default: a temp dir, removed after)")
    ap.add_argument("--json", action="store_true", help="print one JSON line with every figure at the end")
    return ap.parse_args(argv)


# ------------------------------------------------------------------------------------------
# (a) pure-Python twins of the measured loops
# ------------------------------------------------------------------------------------------
_HEAD = struct.Struct(">iiiiiqqiq8sq8siqi")  # TOTALSIZE .. BODYLEN (88 bytes)


def py_encode_record(dst, pos, body, topic, props, queue_id, queue_offset, phy, born_host, store_ts, store_host):
    size = 91 + len(body) + len(topic) + len(props)
    _HEAD.pack_into(
        dst,
        pos,
        size,
        -626843481,
        zlib.crc32(body) & 0x7FFFFFFF,
        queue_id,
        0,
        queue_offset,
        phy,
        0,
        0,
        born_host,
        store_ts,
        store_host,
        0,
        0,
        len(body),
    )
    p = pos + 88
    dst[p : p + len(body)] = body
    p += len(body)
    dst[p] = len(topic)
    dst[p + 1 : p + 1 + len(topic)] = topic
    p += 1 + len(topic)
    struct.pack_into(">h", dst, p, len(props))
    dst[p + 2 : p + 2 + len(props)] = props
    return size


_UNIT = struct.Struct(">qiq")


def py_get_message_scan(
    cq, start, end, files, file_size, first_from, readable, max_msg_nums, max_offset_py, memory, codes, limits
):
    """The same unit loop as rmq._store.get_message_scan, in Python."""
    max_bytes_mem, max_count_mem, max_bytes_disk, max_count_disk = limits
    budget = max(16000, max_msg_nums * 20)
    i, n = 0, end - start
    status, count, total = 1, 0, 0
    next_phy_file_start = None
    max_phy = 0
    segments = []
    seg = None
    while i < n and i < budget:
        phy, size, tags = _UNIT.unpack_from(cq, start + i)
        max_phy = phy
        if next_phy_file_start is not None and phy < next_phy_file_start:
            i += 20
            continue
        in_disk = max_offset_py - phy > memory
        if total and count:
            if max_msg_nums <= count:
                break
            if in_disk:
                if total + size > max_bytes_disk or count > max_count_disk - 1:
                    break
            elif total + size > max_bytes_mem or count > max_count_mem - 1:
                break
        if codes is not None and tags not in codes:
            i += 20
            continue
        rel = phy - first_from
        idx = rel // file_size
        if rel < 0 or phy + size > readable or idx >= len(files):
            status = 2 if total == 0 else status
            next_phy_file_start = phy + file_size - phy % file_size
            i += 20
            continue
        pos = rel - idx * file_size
        if seg is not None and seg[0] == idx and seg[2] == pos:
            seg[2] = pos + size
        else:
            if seg is not None:
                segments.append(tuple(seg))
            seg = [idx, pos, pos + size]
        count += 1
        total += size
        status = 0
        next_phy_file_start = None
        i += 20
    if seg is not None:
        segments.append(tuple(seg))
    return status, i, count, total, max_phy, [memoryview(files[s[0]])[s[1] : s[2]] for s in segments]


# ------------------------------------------------------------------------------------------
def rate(n, seconds):
    return n / seconds if seconds > 0 else float("inf")


async def bench_async_append(root, args):
    cfg = StoreConfig(store_path_root_dir=root, flush_disk_type="ASYNC_FLUSH")
    store = MessageStore(cfg, HOST)
    await store.start()
    body = os.urandom(args.size)
    props = {"TAGS": "TagA", "UNIQ_KEY": "7F0000010000000000000000000000AB"}
    msgs = [MessageInner("BenchTopic", 0, body, properties=props, born_host=("127.0.0.1", 5555)) for _ in range(1000)]
    t0 = time.perf_counter()
    wrote = 0
    for i in range(args.messages):
        r = await store.put_message(msgs[i % 1000])
        wrote += r.append.wrote_bytes
    store.do_reput()
    dt = time.perf_counter() - t0
    record_size = r.append.wrote_bytes
    return store, {
        "async_append_msgs_per_s": rate(args.messages, dt),
        "async_append_mb_per_s": wrote / dt / 1e6,
        "record_size": record_size,
        "async_append_seconds": dt,
    }


def bench_append_baselines(args, record_size):
    n = min(args.messages, 100_000)
    body = os.urandom(args.size)
    topic = b"BenchTopic"
    props = b"TAGS\x01TagA\x02UNIQ_KEY\x017F0000010000000000000000000000AB"
    hb = host_bytes(HOST)
    mm = mmap.mmap(-1, n * record_size + 4096)
    _store.populate_write(mm, 0, len(mm))  # no first-touch faults in the baselines
    t0 = time.perf_counter()
    pos = 0
    for i in range(n):
        pos += py_encode_record(mm, pos, body, topic, props, 0, i, pos, hb, 0, hb)
    py_dt = time.perf_counter() - t0
    t0 = time.perf_counter()
    pos = 0
    for i in range(n):
        pos += _store.encode_record(mm, pos, body, topic, props, 0, 0, i, pos, 0, 0, hb, 0, hb, 0, 0)
    cy_dt = time.perf_counter() - t0
    rec = bytes(mm[:record_size])
    t0 = time.perf_counter()
    pos = 0
    for _ in range(n):
        mm[pos : pos + record_size] = rec
        pos += record_size
    copy_dt = time.perf_counter() - t0
    big = bytes(n * record_size)
    t0 = time.perf_counter()
    mm[: len(big)] = big
    bulk_dt = time.perf_counter() - t0
    mm.close()
    return {
        "py_encode_msgs_per_s": rate(n, py_dt),
        "cy_encode_msgs_per_s": rate(n, cy_dt),
        "memcpy_per_record_msgs_per_s": rate(n, copy_dt),
        "memcpy_bulk_mb_per_s": len(big) / bulk_dt / 1e6,
    }


async def bench_sync_append(root, args):
    cfg = StoreConfig(store_path_root_dir=root, flush_disk_type="SYNC_FLUSH")
    store = MessageStore(cfg, HOST)
    await store.start()
    body = os.urandom(args.size)
    per = max(1, args.sync_messages // args.producers)
    syncs = [0]
    real = os.fdatasync

    def counting(fd):
        syncs[0] += 1
        real(fd)

    os.fdatasync = counting
    wrote = [0]
    timeouts = [0]

    async def producer(p):
        m = MessageInner("SyncTopic", p % 8, body, properties={"TAGS": "TagA"})
        for _ in range(per):
            r = await store.put_message(m)
            wrote[0] += r.append.wrote_bytes
            timeouts[0] += r.status.name == "FLUSH_DISK_TIMEOUT"

    t0 = time.perf_counter()
    await asyncio.gather(*(producer(p) for p in range(args.producers)))
    dt = time.perf_counter() - t0
    os.fdatasync = real
    await store.shutdown()
    n = per * args.producers
    return {
        "sync_append_msgs_per_s": rate(n, dt),
        "sync_append_mb_per_s": wrote[0] / dt / 1e6,
        "sync_fsyncs": syncs[0],
        "sync_msgs_per_fsync": n / max(1, syncs[0]),
        "sync_flush_timeouts": timeouts[0],
        "sync_producers": args.producers,
    }


def bench_pull(store, args):
    cfg = store.config
    hi = store.get_max_offset_in_queue("BenchTopic", 0)
    pulls = args.pulls
    step = 32
    span = max(1, hi // step)
    # warm: touch every page once so this measures page-cache reads
    for k in range(min(pulls, span)):
        res = store.get_message("G", "BenchTopic", 0, k * step, 32)
        res.release()
    t0 = time.perf_counter()
    got = 0
    for k in range(pulls):
        res = store.get_message("G", "BenchTopic", 0, (k % span) * step, 32)
        got += res.message_count
        res.release()
    dt = time.perf_counter() - t0
    assert res.status == GetMessageStatus.FOUND

    # (a) the same scan in pure Python on the same mapped files
    cq = store.find_consume_queue("BenchTopic", 0, create=False)
    cl = store.commit_log
    files = [mf.mm for mf in cl.table_files]
    memory = int(cfg.total_physical_memory * cfg.access_message_in_memory_max_ratio / 100)
    limits = (
        cfg.max_transfer_bytes_on_message_in_memory,
        cfg.max_transfer_count_on_message_in_memory,
        cfg.max_transfer_bytes_on_message_in_disk,
        cfg.max_transfer_count_on_message_in_disk,
    )
    t0 = time.perf_counter()
    py_got = 0
    for k in range(pulls):
        cq_file, start, end = cq.get_index_buffer((k % span) * step)
        _st, _i, count, _total, _mp, _views = py_get_message_scan(
            cq_file.mm,
            start,
            end,
            files,
            cl.file_size,
            cl.table_files[0].file_from_offset,
            cl.max_offset,
            32,
            cl.max_offset,
            memory,
            None,
            limits,
        )
        py_got += count
    py_dt = time.perf_counter() - t0

    # (b) raw memcpy of the same bytes: copy each pull's 32 records out of the mapping
    res = store.get_message("G", "BenchTopic", 0, 0, 32)
    pull_bytes = res.buffer_total_size
    res.release()
    src = memoryview(cl.table_files[0].mm)
    dst = bytearray(pull_bytes)
    t0 = time.perf_counter()
    for k in range(pulls):
        off = ((k % span) * pull_bytes) % (cl.file_size - pull_bytes)
        dst[:] = src[off : off + pull_bytes]
    copy_dt = time.perf_counter() - t0
    src.release()
    return {
        "pull_msgs_per_s": rate(got, dt),
        "pull_ns_per_msg": dt / got * 1e9,
        "pull_us_per_call": dt / pulls * 1e6,
        "py_pull_msgs_per_s": rate(py_got, py_dt),
        "memcpy_pull_msgs_per_s": rate(pulls * 32, copy_dt),
        "pull_bytes_per_call": pull_bytes,
    }


async def main(args):
    root = args.dir or tempfile.mkdtemp(prefix="rmq-store-bench-")
    try:
        store, fig = await bench_async_append(os.path.join(root, "async"), args)
        fig.update(bench_append_baselines(args, fig["record_size"]))
        fig.update(bench_pull(store, args))
        await store.shutdown()
        fig.update(await bench_sync_append(os.path.join(root, "sync"), args))
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return fig


def report(fig, args):
    print(f"store bench: {args.size} B bodies, records of {fig['record_size']} B, one process, uvloop")
    print(
        f"  append ASYNC  {fig['async_append_msgs_per_s']:>12,.0f} msg/s  {fig['async_append_mb_per_s']:8.1f} MB/s"
        f"   (whole put_message: checks, encode, ids, result, dispatch to the ConsumeQueue)"
    )
    print(
        f"    record encoder alone: Cython {fig['cy_encode_msgs_per_s']:,.0f} msg/s"
        f" | pure Python {fig['py_encode_msgs_per_s']:,.0f} msg/s"
        f" (Cython x{fig['cy_encode_msgs_per_s'] / fig['py_encode_msgs_per_s']:.1f})"
        f" | memcpy per record {fig['memcpy_per_record_msgs_per_s']:,.0f} msg/s"
        f" (Cython x{fig['cy_encode_msgs_per_s'] / fig['memcpy_per_record_msgs_per_s']:.2f})"
        f" | bulk memcpy {fig['memcpy_bulk_mb_per_s']:,.0f} MB/s"
    )
    print(
        f"  append SYNC   {fig['sync_append_msgs_per_s']:>12,.0f} msg/s  {fig['sync_append_mb_per_s']:8.1f} MB/s"
        f"   | {fig['sync_producers']} producers, {fig['sync_fsyncs']} fdatasyncs,"
        f" {fig['sync_msgs_per_fsync']:.1f} msgs per fsync, {fig['sync_flush_timeouts']} timeouts"
    )
    print(
        f"  getMessage    {fig['pull_msgs_per_s']:>12,.0f} msg/s  {fig['pull_ns_per_msg']:8.0f} ns/msg"
        f"  ({fig['pull_us_per_call']:.2f} us per 32-message pull)"
        f" | pure-Python scan {fig['py_pull_msgs_per_s']:>10,.0f} msg/s"
        f" (x{fig['pull_msgs_per_s'] / fig['py_pull_msgs_per_s']:.1f})"
        f" | memcpy of the pulled bytes {fig['memcpy_pull_msgs_per_s']:>11,.0f} msg/s"
        f" (x{fig['pull_msgs_per_s'] / fig['memcpy_pull_msgs_per_s']:.2f})"
    )
    if args.json:
        print(json.dumps(fig))


if __name__ == "__main__":
    a = parse_args()
    report(uvloop.run(main(a)), a)
