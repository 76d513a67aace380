"""Subprocess for the SIGKILL crash test: appends in SYNC_FLUSH mode and records every
acknowledged message in an ack file, until it is killed.

usage: crash_writer.py <store root> <ack file> <seed> [async]
Each ack line: ``phy size topic queue_id queue_offset seed seq``.
"""

import asyncio
import os
import random
import sys

import uvloop
from store_support import STORE_HOST, small_config

from rmq.store import MessageInner, MessageStore


def body_for(seed: int, seq: int) -> bytes:
    rng = random.Random(seed * 1_000_003 + seq)
    return f"{seed}:{seq}:".encode() + bytes(rng.randrange(256) for _ in range(rng.randint(0, 1500)))


async def main(root, ack_path, seed, mode):
    cfg = small_config(
        root,
        mapped_file_size_commitlog=32 * 1024,
        mapped_file_size_consume_queue=20 * 64,
        flush_disk_type=mode,
        flush_interval_consume_queue=50,
    )
    store = MessageStore(cfg, STORE_HOST)
    await store.start()
    ack = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)
    seq = 0

    async def producer(p):
        nonlocal seq
        rng = random.Random(seed * 31 + p)
        while True:
            my = seq
            seq += 1
            topic, qid = f"T{rng.randrange(3)}", rng.randrange(3)
            props = {"TAGS": f"tag{my % 4}", "KEYS": f"k{seed}-{my}"}
            r = await store.put_message(MessageInner(topic, qid, body_for(seed, my), properties=props))
            if r.is_ok:
                a = r.append
                line = f"{a.wrote_offset} {a.wrote_bytes} {topic} {qid} {a.logics_offset} {seed} {my}\n"
                os.write(ack, line.encode())

    await asyncio.gather(*(producer(p) for p in range(4)))


if __name__ == "__main__":
    mode = "ASYNC_FLUSH" if len(sys.argv) > 4 and sys.argv[4] == "async" else "SYNC_FLUSH"
    uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), mode))
