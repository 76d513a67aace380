#!/usr/bin/env python3
"""The broker's instructions per message under valgrind's callgrind: a figure a busy machine
does not move (wall-clock CPU seconds do), for before/after comparisons of the drain and the
SEND paths.

    python bench/instr_bench.py [--workload drain|send-json|send-binary ...] [--messages N]
        [--tree DIR] [--keep DIR] [--top K]

Starts ``rmq standalone`` (the checkout's own, or ``--tree``'s) under ``valgrind
--tool=callgrind --instr-atstart=no`` (not instrumented until asked: start-up and the
prefill run at valgrind's plain speed), then for each workload: an unmeasured warm-up of the
same shape (the topic, the group, caches, the first CommitLog pages), ``callgrind_control -i
on``, the measured run, ``-i off`` and a dump. The dump's total of instructions (Ir, every
thread of the broker, user space only: no syscalls, no page-cache work) is divided by the
messages of the measured run and printed per 1M messages.

Workloads (each through the bench clients, as ``rounds.py`` runs them):

* ``drain``: ``pull_bench.py --drain`` of a prefilled topic (``--messages`` × 1 KiB, 4
  queues, 4 pulls of 32 in flight per queue);
* ``send-json``: ``produce_bench.py --count`` with JSON headers, 4 connections × 16 in flight
  (``--client raw``: pre-encoded frames);
* ``send-binary``: the same with ``--threads 16 --serialize rocketmq`` (Java's benchmark
  Producer pattern).

``--top K`` prints the K functions of the dump with the most instructions of their own
(``callgrind_annotate``; ``--inclusive`` counts their callees too): Python frames show as the interpreter's, Cython
functions by their C names. Valgrind slows the broker 30–100×: keep ``--messages`` small
(20,000 to 200,000), but not smaller: the broker's background work over the run's wall time
(periodic tasks) is divided by the messages, so 5,000 reads 5–20 % higher than 20,000.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WORKLOADS = ("drain", "send-json", "send-binary")


def _free_port() -> int:
    sys.path.insert(0, ROOT)
    from rmq._testing import free_port

    return free_port()


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> str:
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True, timeout=600)


def _total_ir(out_dir: str, pid: int, before: set[str]) -> tuple[int, str]:
    """The Ir total of the newest dump of ``pid`` (one file per thread with
    ``--separate-threads=no``: one file)."""
    files = sorted(set(glob.glob(os.path.join(out_dir, f"callgrind.out.{pid}*"))) - before, key=os.path.getmtime)
    if not files:
        raise SystemExit(f"no callgrind dump in {out_dir}")
    path = files[-1]
    total = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"totals:\s+(\d+)", line)  # ("summary:" is 0 when instrumentation was toggled)
            if m:
                total = int(m.group(1))
    if total is None:
        raise SystemExit(f"no total in {path}")
    return total, path


def _wait_ready(namesrv: str, proc: subprocess.Popen[bytes], timeout: float, env: dict[str, str]) -> None:
    probe = (
        "import asyncio,sys\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "import _common as c\n"
        "from rmq.remoting.client import RemotingClient\n"
        "async def main():\n"
        f"    cl = RemotingClient([{namesrv!r}], connect_timeout=2.0)\n"
        "    try:\n"
        "        return bool(await c.master_brokers(cl, timeout=5.0))\n"
        "    finally:\n"
        "        await cl.close()\n"
        "sys.exit(0 if asyncio.run(main()) else 1)\n"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode}")
        if subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, timeout=60).returncode == 0:
            return
        time.sleep(1.0)  # polling a daemon starting under valgrind, not synchronising a test
    raise SystemExit(f"the broker did not register within {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", action="append", choices=WORKLOADS, help="repeatable (default: all three)")
    ap.add_argument("--messages", type=int, default=50_000, help="messages of each measured run (default 50,000)")
    ap.add_argument("--warmup", type=int, default=None, help="messages of each warm-up run (default messages / 5)")
    ap.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    ap.add_argument("--tree", default=None, help="the checkout whose broker to run (default this one)")
    ap.add_argument("--keep", default=None, help="write the dumps to this directory and keep them")
    ap.add_argument("--top", type=int, default=0, help="print the K functions with the most instructions (self)")
    ap.add_argument("--inclusive", action="store_true", help="with --top: count the callees' instructions too")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    a = ap.parse_args()
    workloads = a.workload or list(WORKLOADS)
    warm = a.warmup if a.warmup is not None else max(1000, a.messages // 5)
    tree = os.path.abspath(a.tree or ROOT)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind (with callgrind_control) is not installed")

    out_dir = a.keep or tempfile.mkdtemp(prefix="rmq-instr-")
    os.makedirs(out_dir, exist_ok=True)
    store = tempfile.mkdtemp(prefix="rmq-instr-store-")
    ns_port, broker_port = _free_port(), _free_port()
    namesrv = f"127.0.0.1:{ns_port}"
    broker_env = dict(os.environ, PYTHONPATH=tree)
    client_env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--dump-instr=no",
        f"--callgrind-out-file={out_dir}/callgrind.out.%p",
        sys.executable,
        "-m",
        "rmq",
        "standalone",
        "--lenient-config",  # an older --tree may not know the ports turned off below
        "--namesrv-port",
        str(ns_port),
        "--broker-port",
        str(broker_port),
        "--store-dir",
        store,
        "--consolePort=0",
        "--metricsPort=0",
        "--grpcServerPort=0",
    ]
    log = open(os.path.join(out_dir, "valgrind.log"), "wb")  # noqa: SIM115 - open for the broker's life
    proc = subprocess.Popen(cmd, env=broker_env, cwd=tree, stdout=log, stderr=subprocess.STDOUT)
    figures: dict[str, float] = {}
    try:
        _wait_ready(namesrv, proc, 600.0, client_env)
        py = sys.executable
        common = ["--namesrv", namesrv, "--size", str(a.size), "--timeout", "120"]
        for wl in workloads:
            if wl == "drain":
                # prefill both topics before instrumenting; the warm-up drain is not measured
                for topic, n in (("InstrWarm", warm), ("InstrDrain", a.messages)):
                    _run(
                        [
                            py,
                            f"{HERE}/produce_bench.py",
                            *common,
                            "--topic",
                            topic,
                            "--count",
                            str(n),
                            "--threads",
                            "16",
                            "--serialize",
                            "rocketmq",
                            "--interval",
                            "3600",
                        ],
                        client_env,
                        3600,
                    )
                steps = [
                    [py, f"{HERE}/pull_bench.py", *common, "--topic", t, "--group", "InstrGroup", "--drain"]
                    for t in ("InstrWarm", "InstrDrain")
                ]
            else:
                shape = (
                    ["--connections", "4", "--inflight", "16", "--client", "raw"]
                    if wl == "send-json"
                    else ["--threads", "16", "--serialize", "rocketmq"]
                )
                steps = [
                    [
                        py,
                        f"{HERE}/produce_bench.py",
                        *common,
                        "--topic",
                        f"Instr-{wl}",
                        "--count",
                        str(n),
                        *shape,
                        "--interval",
                        "3600",
                    ]
                    for n in (warm, a.messages)
                ]
            _run(steps[0], client_env, 3600)
            before = set(glob.glob(os.path.join(out_dir, "callgrind.out.*")))
            _control(proc.pid, "-z")
            _control(proc.pid, "-i", "on")
            _run(steps[1], client_env, 7200)
            _control(proc.pid, "-i", "off")
            _control(proc.pid, "-d", wl)
            total, path = _total_ir(out_dir, proc.pid, before)
            per_m = total / a.messages * 1e6
            figures[wl] = per_m
            print(f"{wl}: {total:,} instructions for {a.messages:,} messages: {per_m / 1e9:.2f} G per 1M ({path})")
            if a.top:
                ann = subprocess.run(
                    ["callgrind_annotate", f"--inclusive={'yes' if a.inclusive else 'no'}", "--threshold=99", path],
                    capture_output=True,
                    text=True,
                )
                lines = [ln for ln in ann.stdout.splitlines() if re.match(r"\s*[\d,]+ \(", ln)]
                for ln in lines[: a.top]:
                    print("   ", ln.strip()[:160])
    finally:
        proc.terminate()
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(store, ignore_errors=True)
        if a.keep is None:
            shutil.rmtree(out_dir, ignore_errors=True)
    if a.json:
        print(json.dumps({f"{k}_ginstr_per_1m": round(v / 1e9, 3) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
