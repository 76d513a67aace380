#!/usr/bin/env python3
"""Measure (not a test): what the web console costs, in wall and CPU time of this one process
(an in-process name server and broker and the console's service, as in ``rmq standalone``
where the console shares the broker's loop).

    .venv/bin/python bench/measure_console_cost.py [--topics 100] [--rounds 5]

Figures: one dashboard sampling round (every broker's runtime info, then the stats of up to 64
normal topics: what the console does every ``--sample-interval`` seconds, default 10), and the
cluster, topic-list and group-list API calls, each averaged over ``--rounds``.
"""

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rmq._testing import run_standalone
from rmq.client.admin import Admin
from rmq.console.sampler import TpsSampler
from rmq.console.service import ConsoleService


async def measure(topics: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        async with run_standalone(d) as (ns, _):
            async with Admin(f"127.0.0.1:{ns.port}") as admin:
                addr = (await admin.master_addrs())[0]
                for i in range(topics):
                    await admin.create_and_update_topic_config(addr, f"T{i:05d}", read_queue_nums=8, write_queue_nums=8)
                svc = ConsoleService(admin)
                sampler = TpsSampler(svc)
                await sampler.sample_once()  # the first round only records totals
                calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                    (f"sampling round ({min(topics, sampler.max_topics)} topics)", sampler.sample_once),
                    ("/api/cluster", svc.cluster),
                    ("/api/topics", svc.topics),
                    ("/api/groups", svc.groups),
                ]
                for what, fn in calls:
                    w0, c0 = time.perf_counter(), time.process_time()
                    for _ in range(rounds):
                        await fn()
                    wall = (time.perf_counter() - w0) / rounds * 1000
                    cpu = (time.process_time() - c0) / rounds * 1000
                    print(f"{topics} topics x 8 queues: {what}: {wall:.1f} ms wall, {cpu:.1f} ms CPU")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(measure(args.topics, args.rounds))


if __name__ == "__main__":
    main()
