"""Subprocess for the kill -9 truncation test: opens a store as a SLAVE and truncates it,
stopping (forever) at the point named on the command line after printing "at <point>", so the
parent kills it there.

usage: truncate_child.py <store root> <offset> <point: marker | cut>
"""

import sys

import uvloop
from store_support import STORE_HOST, small_config

from rmq.store import MessageStore

CRASH_CFG = dict(mapped_file_size_commitlog=32 * 1024, mapped_file_size_consume_queue=20 * 64)


async def main(root: str, offset: int, point: str) -> None:
    store = MessageStore(small_config(root, broker_role="SLAVE", **CRASH_CFG), STORE_HOST)
    await store.start()

    def stop_here(*_a: object) -> None:
        print(f"at {point}", flush=True)
        import time

        while True:  # the parent's SIGKILL ends this process here
            time.sleep(3600)

    if point == "marker":
        store._truncate_now = stop_here  # marker written, nothing cut yet
    else:
        store._finish_truncation_blocking = stop_here  # cut in memory (mapped files), not synced
    await store.truncate_files(offset)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
