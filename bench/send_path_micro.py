"""Per-message CPU of the broker's SEND path without sockets: frames go through the
connection's FrameDecoder, the broker's Dispatcher and the SEND processor of an in-process
broker (10 frames per read, as the Java benchmark Producer pattern arrives); replies are
counted, not sent.

    python bench/send_path_micro.py [--messages 30000] [--tree DIR]

Prints process CPU per message for binary (ROCKETMQ) and JSON headers. ``--tree`` runs
another checkout's broker (its ``rmq`` first on the path; its extension must be built).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from typing import Any


class _Replies:
    """The broker side of a connection, minus the socket: counts what would be written."""

    remote_addr = "127.0.0.1:50000"
    closed = False

    def __init__(self) -> None:
        self.out = 0
        self.attributes: dict[str, Any] = {}

    def send_response_frame(self, frame: bytes) -> None:
        self.out += 1

    def send_response(self, cmd: Any) -> None:
        from rmq.remoting.codec import encode
        encode(cmd)
        self.out += 1


async def measure(serialize: int, n: int) -> float:
    import _common as c

    from rmq._testing import run_broker
    from rmq.remoting.codec import FrameDecoder, encode
    with tempfile.TemporaryDirectory() as d:
        # 64 MiB CommitLog files: few rolls inside the measurement
        async with run_broker(d, mapped_file_size_commitlog=64 << 20) as broker:
            frames = []
            for i in range(200):
                props = c.properties_string({"UNIQ_KEY": c.uniq_key(i), "WAIT": "true"})
                cmd = c.send_request("G", "T", i % 4, props, b"x" * 1024, serialize=serialize, broker_name="broker-a")
                frames.append(b"".join(bytes(p) for p in encode(cmd)))
            data = b"".join(frames[:10])
            disp = broker.server.dispatcher
            conn = _Replies()
            dec = FrameDecoder()
            for _ in range(200):                    # warm-up: the topic and its queues
                dec.feed(data)
                for cmd in dec:
                    disp.dispatch(conn, cmd)
                await asyncio.sleep(0)
            t0 = time.process_time()
            for _ in range(n // 10):
                dec.feed(data)
                for cmd in dec:
                    disp.dispatch(conn, cmd)
                await asyncio.sleep(0)              # a loop turn: dispatch runs as it would
            return (time.process_time() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=30000)
    ap.add_argument("--tree", default=None, help="a checkout whose rmq to measure")
    a = ap.parse_args()
    if a.tree:
        sys.path.insert(0, a.tree)
    import uvloop
    for ser, name in ((1, "binary"), (0, "json")):
        us = uvloop.run(measure(ser, a.messages))
        print(f"{name}: {us:.2f} us CPU per message")


if __name__ == "__main__":
    main()
