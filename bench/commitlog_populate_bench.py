"""What a new CommitLog file costs the CPU: allocation (posix_fallocate or a sparse ftruncate)
and pre-faulting (MADV_POPULATE_WRITE / _READ, or none) ahead of 1 KiB writes through the
mapping, with a flush thread calling fdatasync every 50 ms as the store's does.

    python bench/commitlog_populate_bench.py [--mib 256] [--rounds 3]

Prints, per variant, the median (min-max) of the writer thread's CPU, the process CPU (all
threads, user + system) and the bytes written to disk. The first rounds after boot also pay
the hypervisor's first touch of guest memory: compare medians of several rounds.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import tempfile
import threading
import time

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
MADV_POPULATE_READ, MADV_POPULATE_WRITE = 22, 23
CHUNK = 4 << 20  # WarmAheadService's WARM_CHUNK


def _disk_written() -> int:
    with open("/proc/self/io") as f:
        return int(dict(line.split(": ") for line in f.read().splitlines())["write_bytes"])


def run(directory: str, size: int, alloc: str, populate: str) -> tuple[float, float, int]:
    path = os.path.join(directory, f"{alloc}-{populate}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if alloc == "fallocate":
            os.posix_fallocate(fd, 0, size)
        else:
            os.ftruncate(fd, size)
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        stop = threading.Event()

        def flusher() -> None:
            while not stop.wait(0.05):
                os.fdatasync(fd)

        ft = threading.Thread(target=flusher)
        ft.start()
        io0, c0, w0 = _disk_written(), time.process_time(), time.thread_time()
        advice = {"write": MADV_POPULATE_WRITE, "read": MADV_POPULATE_READ}.get(populate)
        warmed, blk = 0, b"x" * 1024
        for off in range(0, size, 1024):
            if advice is not None and warmed - off <= CHUNK // 2 and warmed < size:
                _libc.madvise(base + warmed, CHUNK, advice)
                warmed += CHUNK
            mm[off : off + 1024] = blk
        w1 = time.thread_time()
        stop.set()
        ft.join()
        os.fdatasync(fd)
        c1, io1 = time.process_time(), _disk_written()
        del base
        mm.close()
        return w1 - w0, c1 - c0, io1 - io0
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to create the files (default: a temp dir)")
    a = ap.parse_args()
    variants = [(al, po) for al in ("fallocate", "ftruncate") for po in ("write", "read", "none")]
    res: dict[tuple[str, str], list[tuple[float, float, int]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        for _ in range(a.rounds):
            for v in variants:  # interleaved, so load changes hit all alike
                res[v].append(run(d, a.mib << 20, *v))

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"

    print(f"{a.mib} MiB in 1 KiB writes, {a.rounds} rounds; CPU seconds, median (min-max)")
    for (al, po), rs in res.items():
        print(
            f"{al:9s} populate={po:5s} writer {fmt([r[0] for r in rs])}  process {fmt([r[1] for r in rs])}"
            f"  disk {statistics.median([r[2] for r in rs]) / (1 << 20):.0f} MiB"
        )


if __name__ == "__main__":
    main()
