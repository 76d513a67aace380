"""Run every fuzz target in this directory for a bounded time and summarise (``make fuzz``).

    python tests/fuzz/run_all.py [--seconds 60] [--only frame_decoder,route_json]

Each target runs in its own process (``-max_total_time``, ``FUZZ_SECONDS`` or ``--seconds``)
and keeps going past crashes: the first input of each distinct crash is written under
``build/fuzz/<target>/``. Prints one line per target: executions, executions per second,
crashing inputs (a lower bound: the count is saved at each power of two) and distinct crashes,
then each distinct crash. Exit status 1 when any target
crashed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def targets() -> list[str]:
    return sorted(p.stem[len("fuzz_") :] for p in HERE.glob("fuzz_*.py"))


def run_one(name: str, seconds: int, out_dir: Path) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in [*out_dir.glob("crash-*"), *out_dir.glob("counts.txt")]:
        old.unlink()
    cmd = [
        sys.executable,
        str(HERE / f"fuzz_{name}.py"),
        f"-max_total_time={seconds}",
        f"-artifact_prefix={out_dir}/",
        "-print_final_stats=1",
    ]
    env = dict(
        os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), FUZZ_CONTINUE=str(out_dir)
    )
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=seconds * 3 + 120)
    wall = time.monotonic() - t0
    log = proc.stdout + proc.stderr
    (out_dir / "log.txt").write_text(log)
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"#(\d+)\s", log)
    execs = int(runs[-1]) if runs else 0
    counts = out_dir / "counts.txt"
    distinct = [line.split("\t", 1) for line in counts.read_text().splitlines()] if counts.exists() else []
    found = re.findall(r"=== CRASH \(continuing\): (.*)", log)
    why = ""
    if proc.returncode != 0:  # an escape the guard could not catch (a hang, OOM, a fatal signal)
        tail = log.strip().splitlines()[-1][:160] if log.strip() else ""
        why = f"libFuzzer exit {proc.returncode}: {tail}"
    return {
        "target": name,
        "execs": execs,
        "seconds": wall,
        "inputs": sum(int(n) for n, _ in distinct),
        "distinct": found,
        "why": why,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--seconds",
        type=int,
        default=int(os.environ.get("FUZZ_SECONDS", "60")),
        help="seconds per target (default FUZZ_SECONDS or 60)",
    )
    ap.add_argument("--only", default="", help="comma-separated target names")
    ap.add_argument("--out", default=str(ROOT / "build" / "fuzz"), help="crash inputs and logs (default build/fuzz)")
    args = ap.parse_args(argv)
    names = [n for n in targets() if not args.only or n in args.only.split(",")]
    print(f"{'target':<16}{'execs':>12}{'exec/s':>10}{'crashing':>10}{'distinct':>10}")
    failed = False
    for name in names:
        r = run_one(name, args.seconds, Path(args.out) / name)
        rate = r["execs"] / r["seconds"] if r["seconds"] else 0
        print(f"{name:<16}{r['execs']:>12}{rate:>10.0f}{r['inputs']:>10}{len(r['distinct']):>10}", flush=True)
        for d in r["distinct"]:
            print(f"    crash: {d}", flush=True)
        if r["why"]:
            print(f"    {r['why']}", flush=True)
        failed |= bool(r["distinct"] or r["why"])
    print(f"crash inputs and logs: {args.out}/<target>/")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
