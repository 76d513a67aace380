#!/usr/bin/env python3
"""Repeated produce and drain rounds against fresh brokers: medians with their min–max.

    .venv/bin/python bench/rounds.py [--rounds 3] [--duration 30] [--prefill 1000000]
                                     [--tree PATH ...] [--variant plain|noindex|acl|tls ...]
                                     [--serialize rocketmq] [--threads 16] [--json-out FILE] [--tls]
                                     [--brokers N]

Each round starts a fresh ``rmq standalone`` (free ports, new store, the daemon's defaults:
1 GiB CommitLog files, ASYNC_FLUSH) for ``produce_bench.py`` (1 KiB, 4 connections × 16 in
flight, ``--duration`` s) and another for ``pull_bench.py`` (``--prefill`` messages in batches
of 32, then a drain with 4 pulls of 32 in flight per queue), both with ``--broker-pid`` so the
broker's CPU is measured. ``--tree`` (repeatable) runs the broker of another checkout — e.g.
``git worktree add ../base <commit>`` with its extension built — and the rounds alternate the
trees, so that two brokers are compared on the same machine at the same time; the client is
always this checkout's. ``--variant`` (repeatable) compares configurations of each tree the same
way: ``plain`` (the defaults), ``noindex`` (``messageIndexEnable=false``), ``acl`` (``aclEnable``
with one admin account in a fresh ``plain_acl.yml``; the clients sign every request) and ``tls``
(enforcing TLS with a self-signed certificate; the clients connect over TLS). Prints one line
per run, then per tree (and variant) the median (min–max) of each figure, and the load average
before each run (say it next to the figures). ``--tls`` starts
each broker with ``tls.server.mode=enforcing`` and a self-signed certificate made with
``openssl`` for the run, and runs both benchmarks with ``--tls --tls-ca`` that certificate.
``--brokers N`` runs ``rmq standalone --brokers N`` (a broker per core): the topics are created on
every broker and the benchmarks use all of them; the CPU figures add up the standalone's and its
brokers' processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as c

HERE = Path(__file__).resolve().parent
VARIANTS = ("plain", "noindex", "acl", "tls")
# The account the acl variant's brokers know and its clients sign with (admin: it creates topics).
ACL_ACCESS_KEY, ACL_SECRET_KEY = "benchAccessKey", "benchSecretKey"
FIGURES = {
    "produce": ("tps", "broker_cpu_s_per_1m", "rt_ms_p99", "broker_disk_kb_per_msg"),
    "drain": ("msgs_per_s", "broker_cpu_s_per_1m"),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds per tree (default 3)")
    ap.add_argument("--duration", type=int, default=30, help="produce seconds per round (default 30)")
    ap.add_argument("--prefill", type=int, default=1_000_000, help="messages to drain per round")
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        help="a checkout whose broker to measure (default: this one); repeat to compare",
    )
    ap.add_argument(
        "--serialize",
        choices=("json", "rocketmq"),
        default="json",
        help="produce rounds: request header encoding (produce_bench.py --serialize)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="produce rounds: N synchronous senders over one connection (produce_bench.py --threads) "
        "instead of 4 connections x 16 in flight",
    )
    ap.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="rmq standalone --brokers N (default 1); the broker CPU is the standalone's and its brokers' together",
    )
    ap.add_argument("--json-out", help="write every run's figures to this file")
    ap.add_argument(
        "--tls",
        action="store_true",
        help="brokers enforce TLS (self-signed certificate per run), clients connect over TLS "
        "(the same as --variant tls alone)",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        choices=VARIANTS,
        help="a broker configuration to measure (default plain); repeat to compare, alternating",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    return args


def _acl_home() -> str:
    """A ``rocketmqHome`` whose conf/plain_acl.yml has the bench's admin account."""
    home = tempfile.mkdtemp(prefix="rmq-bench-acl-")
    os.makedirs(os.path.join(home, "conf"))
    with open(os.path.join(home, "conf", "plain_acl.yml"), "w") as f:
        f.write(f"accounts:\n  - accessKey: {ACL_ACCESS_KEY}\n    secretKey: {ACL_SECRET_KEY}\n    admin: true\n")
    return home


def one_run(kind: str, tree: str | None, args: argparse.Namespace, variant: str = "plain") -> dict:
    """A fresh broker, one benchmark against it, the benchmark's JSON figures."""
    extra: list[str] = []
    client_args: list[str] = []
    acl_home = None
    if variant == "noindex":
        extra.append("--messageIndexEnable=false")
    elif variant == "acl":
        acl_home = _acl_home()
        extra += ["--aclEnable=true", f"--rocketmqHome={acl_home}"]
        client_args += ["--access-key", ACL_ACCESS_KEY, "--secret-key", ACL_SECRET_KEY]
    standalone = c.Standalone(tree=tree, tls=args.tls or variant == "tls", extra_args=extra, brokers=args.brokers)
    c.run(standalone.start())
    try:
        ns, pid = standalone.namesrv_addr, ",".join(str(p) for p in standalone.pids)
        if kind == "produce":
            shape = ["--threads", str(args.threads)] if args.threads else ["--connections", "4", "--inflight", "16"]
            cmd = [
                sys.executable,
                str(HERE / "produce_bench.py"),
                "--namesrv",
                ns,
                "--topic",
                "BenchP",
                "--size",
                "1024",
                *shape,
                "--serialize",
                args.serialize,
                "--duration",
                str(args.duration),
                "--broker-pid",
                pid,
                "--json",
            ]
        else:
            cmd = [
                sys.executable,
                str(HERE / "pull_bench.py"),
                "--namesrv",
                ns,
                "--topic",
                "BenchD",
                "--group",
                "G",
                "--prefill",
                str(args.prefill),
                "--prefill-batch",
                "32",
                "--size",
                "1024",
                "--inflight",
                "4",
                "--max-msgs",
                "32",
                "--drain",
                "--broker-pid",
                pid,
                "--json",
            ]
        if standalone.tls_ca is not None:
            cmd += ["--tls-ca", standalone.tls_ca]
        cmd += client_args
        out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False).stdout
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise c.BenchError(f"{kind} printed no figures:\n{out[-2000:]}\n{standalone.log_tail()}")
        return dict(json.loads(lines[-1]))
    finally:
        standalone.stop()
        standalone.cleanup()
        if acl_home is not None:
            shutil.rmtree(acl_home, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trees: list[str | None] = list(args.tree) or [None]
    variants: list[str] = list(dict.fromkeys(args.variant)) or ["plain"]

    def label(tree: str | None, variant: str) -> str:
        return str(tree or ".") + ("" if variants == ["plain"] else f" [{variant}]")

    runs: dict[str, dict[str, list[dict]]] = {label(t, v): {k: [] for k in FIGURES} for t in trees for v in variants}
    for rnd in range(args.rounds):
        for tree in trees:
            for variant in variants:
                name = label(tree, variant)
                for kind in FIGURES:
                    load = os.getloadavg()[0]
                    fig = one_run(kind, tree, args, variant)
                    fig["load_before"] = round(load, 2)
                    runs[name][kind].append(fig)
                    shown = ", ".join(f"{f} {fig.get(f)}" for f in FIGURES[kind])
                    print(f"round {rnd + 1} {name} {kind}: {shown} (load {load:.2f})", flush=True)
    print()
    for tree_name, kinds in runs.items():
        for kind, figs in kinds.items():
            for f in FIGURES[kind]:
                values = [x[f] for x in figs if isinstance(x.get(f), (int, float))]
                if values:
                    print(
                        f"{tree_name} {kind} {f}: median {statistics.median(values):g} "
                        f"({min(values):g}–{max(values):g}) over {len(values)} runs"
                    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
