#!/usr/bin/env python3
"""The Jepsen-style fault suite's long form (rmq._testing.jepsen; docs/design.md "Fault
testing"): many randomized fault rounds against controller mode (etcd, ``--controllers`` rmq
controllers, ``--brokers`` controller-mode brokers of one name, each in its own network
namespace), or against a static SYNC_MASTER + slave pair with ``--static``; prints each round
and the checker's report (lost / misplaced acknowledged messages, offsets holding two
messages, producer order, masters per epoch, p50/p99 of the time from a master's death until
writes are acknowledged again) and exits 1 when the check fails.

    sudo python bench/jepsen_bench.py --rounds 30 [--seed S] [--static] [--producers 3]
        [--faults 'name,name,...']   (a fixed sequence instead of a shuffled one)
        [--keep DIR]   (the daemons' logs and stores stay in DIR; tmpfs stores as store.kept)

A wait that times out (a fault never taking effect, a group never whole again) prints the
cluster's state with the error: each broker's role, epoch and SyncStateSet by its own account,
the controller leader's record and which replicas it counts alive, the controllers' last
liveness and election log lines.

Needs root (namespaces, tmpfs), ip(8) and, without ``--static``, Debian's etcd-server. The
producers re-read routes every ``--route-poll`` seconds (default 1; the SDK's default is 30).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import rmq.client.instance as client_instance
from rmq._testing.etcd import etcd_missing
from rmq._testing.faults import Network, netns_unavailable, small_disk_unavailable
from rmq._testing.jepsen import ControllerGroup, StaticPair, failover_faults, run_rounds, static_faults


async def run(args: argparse.Namespace) -> bool:
    client_instance.POLL_NAMESRV_INTERVAL = args.route_poll
    where: contextlib.AbstractContextManager[str] = (
        contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="rmq-jepsen-")
    )
    with where as d, Network.create() as net:
        t0 = time.monotonic()
        if args.static:
            cluster: StaticPair | ControllerGroup = StaticPair(Path(d), net, disk_size=args.disk_mb << 20)
            faults = static_faults()
        else:
            cluster = ControllerGroup(
                Path(d), net, controllers=args.controllers, brokers=args.brokers, disk_size=args.disk_mb << 20
            )
            faults = failover_faults()
        if args.faults:
            by_name = {f.name: f for f in faults}
            faults = [by_name[n] for n in args.faults.split(",")]
        cluster.keep = bool(args.keep)
        if args.keep:
            print(f"jepsen: logs and stores kept in {d}")
        async with cluster:
            report = await run_rounds(
                cluster,
                faults,
                rounds=args.rounds,
                seed=args.seed,
                producers=args.producers,
                out=print,
                shuffle=not args.faults,
            )
        load = os.getloadavg()
        print(f"{args.rounds} rounds in {time.monotonic() - t0:.0f} s; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        return report.ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seed", type=int, default=None, help="replay a schedule (default: random, printed)")
    ap.add_argument("--static", action="store_true", help="a static SYNC_MASTER + slave pair, no election")
    ap.add_argument("--controllers", type=int, default=2)
    ap.add_argument("--brokers", type=int, default=2)
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--route-poll", type=float, default=1.0, help="the producers' route poll, seconds")
    ap.add_argument(
        "--faults",
        default="",
        help="comma-separated fault names to run in this order, again and again, instead of shuffled "
        "(e.g. 'master partitioned from the controllers,slave partitioned from the master')",
    )
    ap.add_argument(
        "--disk-mb",
        type=int,
        default=None,
        help="each broker's tmpfs store, MiB (default 48 + one per round: retention is off, so the stores only grow; "
        "a run fails saying so when they are 75%% full before a round)",
    )
    ap.add_argument("--keep", metavar="DIR", default="", help="run in DIR and leave the logs and stores there")
    args = ap.parse_args()
    if args.disk_mb is None:
        args.disk_mb = 48 + args.rounds
    if args.keep:
        keep = Path(args.keep).resolve()
        keep.mkdir(parents=True, exist_ok=True)
        args.keep = str(keep)
    for reason in (netns_unavailable(), small_disk_unavailable(), None if args.static else etcd_missing()):
        if reason is not None:
            sys.exit(f"jepsen_bench: cannot run here: {reason}")
    logging.basicConfig(level=logging.ERROR)
    sys.exit(0 if asyncio.run(run(args)) else 1)


if __name__ == "__main__":
    main()
