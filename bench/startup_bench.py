"""Start-up time of ``rmq`` processes: medians (min–max) of wall and user+system CPU seconds over
``--runs`` cold starts of each command, beside a bare interpreter (docs/design.md "Start-up time").

    python bench/startup_bench.py                       # this tree, 5 runs of each command
    python bench/startup_bench.py --tree /path/to/other --runs 7

Commands: ``rmq admin topicList -n 127.0.0.1:1`` (a whole admin run: parse, import the admin
client, fail to connect to a closed port), ``rmq admin --help``, ``rmq broker --help`` and
``python -c pass``; with ``--broker``, also ``rmq broker -c <conf>`` (a fresh store, metrics and
gRPC off, no name server) until it logs that it listens, then SIGTERM: what every daemon a test
starts costs before it serves. Run it on a quiet machine: the load is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("rmq broker --help", ["-m", "rmq", "broker", "--help"]),
    ("rmq admin --help", ["-m", "rmq", "admin", "--help"]),
    ("rmq admin topicList -n 127.0.0.1:1", ["-m", "rmq", "admin", "topicList", "-n", "127.0.0.1:1"]),
]


def run_once(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """One cold start in ``cwd`` (``-m`` puts it first on sys.path: the tree measured): (wall
    seconds, user+system CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def broker_once(env: dict[str, str], cwd: str) -> tuple[float, float]:
    """``rmq broker`` from start to its "listening" log line: (wall seconds, user+system CPU
    seconds it used by then, from /proc)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="rmq-startup-") as d:
        conf = os.path.join(d, "broker.conf")
        with open(conf, "w") as f:
            f.write(
                f"listenPort={port}\nstorePathRootDir={d}/store\nnamesrvAddr=127.0.0.1:1\n"
                "metricsPort=0\ngrpcServerPort=0\nmappedFileSizeCommitLog=4194304\n"
            )
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq", "broker", "-c", conf],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        try:
            text = b""
            while True:  # its output line by line: the read returns when a line is there
                line = proc.stdout.readline()
                if not line:
                    proc.wait(60)
                    raise RuntimeError(f"rmq broker exited with {proc.returncode}: {text[-2000:]!r}")
                text += line
                if b"listening" in line and b"rmq broker" in text:
                    wall = time.perf_counter() - start
                    break
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=60)  # drains its shutdown lines
    return wall, cpu


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}–{max(values):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="cold starts per command (default 5)")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        help="another checkout to measure (its rmq on PYTHONPATH); repeatable; default: this tree only",
    )
    ap.add_argument("--broker", action="store_true", help="also time rmq broker until it listens")
    args = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [here, *args.tree]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.runs} runs per command; wall s, CPU s: median (min–max)")
    # PYTHONDONTWRITEBYTECODE would make every run compile every module: measure with the
    # bytecode cache, as an installed rmq runs (a warm-up run per tree and command writes it)
    envs = {}
    for tree in trees:
        envs[tree] = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        envs[tree]["PYTHONPATH"] = tree
    commands: list[tuple[str, list[str] | None]] = [*COMMANDS]
    if args.broker:
        commands.append(("rmq broker -c conf, until listening", None))
    for name, cmd in commands:
        walls: dict[str, list[float]] = {t: [] for t in trees}
        cpus: dict[str, list[float]] = {t: [] for t in trees}

        def once(tree: str, cmd: list[str] | None = cmd) -> tuple[float, float]:
            return broker_once(envs[tree], tree) if cmd is None else run_once(cmd, envs[tree], tree)

        for tree in trees:
            once(tree)  # warm-up: the bytecode cache and the page cache
        for _ in range(args.runs):
            for tree in trees:  # alternating, so a change of load falls on every tree alike
                wall, cpu = once(tree)
                walls[tree].append(wall)
                cpus[tree].append(cpu)
        print(name)
        for tree in trees:
            print(f"  {tree:40s} wall {fmt(walls[tree])}  CPU {fmt(cpus[tree])}")
    print(f"\nload average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
