"""CPU of dispatch alone (CommitLog -> ConsumeQueue units + index keys), per record, in one
process: records are appended ``--per-run`` at a time (as the SENDs of one read arrive) and
each batch is dispatched by one ``do_reput`` call, timed with the thread's CPU clock.

    python bench/dispatch_micro.py [--messages 200000] [--per-run 10] [--queues 4]
                                   [--python] [--tree DIR]

``--python`` runs every record through the Python path (StoreConfig ``dispatch_fast_path``
False; a tree without that setting always does). ``--tree`` measures another checkout (its
``rmq`` first on the path; its extension must be built). Prints microseconds of CPU per record.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time


async def measure(n: int, per_run: int, queues: int, python: bool) -> float:
    from rmq.store import MessageInner, MessageStore, StoreConfig

    with tempfile.TemporaryDirectory() as d:
        kw = {"store_path_root_dir": d, "mapped_file_size_commitlog": 256 << 20}
        if python:
            kw["dispatch_fast_path"] = False
        store = MessageStore(StoreConfig(**kw), ("127.0.0.1", 10911))
        await store.start()
        body = b"x" * 1024
        msgs = [
            MessageInner(
                "BenchmarkTest", i % queues, body, properties={"UNIQ_KEY": f"7F000001{i:024X}", "WAIT": "true"}
            )
            for i in range(per_run)
        ]
        spent = 0.0
        done = 0
        try:
            for rnd in range(-200, n // per_run):  # the first 200 rounds: warm-up
                for m in msgs:
                    store.append_message(m)
                t0 = time.thread_time()
                done += store.do_reput()
                if rnd >= 0:
                    spent += time.thread_time() - t0
        finally:
            await store.shutdown()
        return spent / (n // per_run * per_run) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200000, help="records appended and dispatched (default 200000)")
    ap.add_argument("--per-run", type=int, default=10, help="records appended per dispatch run (default 10)")
    ap.add_argument("--queues", type=int, default=4, help="queues the records are spread over (default 4)")
    ap.add_argument("--python", action="store_true", help="every record through the Python path")
    ap.add_argument("--tree", default=None, help="a checkout whose rmq to measure")
    a = ap.parse_args()
    if a.tree:
        sys.path.insert(0, a.tree)
    import uvloop

    us = uvloop.run(measure(a.messages, a.per_run, a.queues, a.python))
    print(
        f"dispatch: {us:.2f} us CPU per record ({a.per_run} per run, {a.queues} queues"
        f"{', Python path' if a.python else ''})"
    )


if __name__ == "__main__":
    main()
