"""Per-message CPU of the broker's SEND path without sockets: frames go through the
connection's FrameDecoder, the broker's Dispatcher and the SEND processor of an in-process
broker (10 frames per read, as the Java benchmark Producer pattern arrives); replies are
counted, not sent. Frames are taken as the connection's loop takes them
(``Connection._process_frames``): offered to the broker's frame hook first (the SEND read
straight from the frame bytes) where the tree has one, decoded and dispatched otherwise.

    python bench/send_path_micro.py [--messages 30000] [--tree DIR] [--ab | --turn-ab]

Prints process CPU per message for binary (ROCKETMQ) and JSON headers (all threads: the
reput and flush services included), and the loop thread's CPU inside the reads alone (frame
decode, dispatch, the store's append, the reply; the median over blocks of 1000 messages). ``--tree`` runs
another checkout's broker (its ``rmq`` first on the path; its extension must be built).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
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


async def measure(serialize: int, n: int, ab: bool = False, turn_ab: bool = False) -> tuple[float, float, float | None]:
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
            hooks = getattr(disp, "frame_hooks", None)  # (trees before the frame hook: none)
            hook = hooks(conn) if hooks is not None else None
            dec.frame_hook = hook
            next_item = getattr(dec, "next_item", dec.next_frame)
            dispatch = disp.dispatch

            def read() -> None:
                dec.feed(data)
                while (item := next_item()) is not None:
                    if type(item) is bytes:
                        if item:
                            conn.send_response_frame(item)
                    else:
                        dispatch(conn, item)

            def read_in_turns() -> None:
                # Connection._process_frames' share of the loop: frames and bytes per turn
                dec.feed(data)
                frames_left = 64
                bytes_stop = dec._pos + 256 * 1024
                while True:
                    if frames_left == 0 or dec._pos >= bytes_stop:
                        break
                    item = next_item()
                    if item is None:
                        break
                    frames_left -= 1
                    if type(item) is bytes:
                        if item:
                            conn.send_response_frame(item)
                    else:
                        dispatch(conn, item)

            plain_read = read

            for _ in range(200):  # warm-up: the topic and its queues
                read()
                await asyncio.sleep(0)
            t0 = time.process_time()
            blocks: tuple[list[float], list[float]] = ([], [])  # the reads' CPU per 1000 messages
            in_read = 0.0
            for i in range(n // 10):
                r0 = time.thread_time()
                (read_in_turns if turn_ab and (i // 100) % 2 == 0 else plain_read)()
                in_read += time.thread_time() - r0
                if i % 100 == 99:
                    off = (ab or turn_ab) and (i // 100) % 2 == 1
                    blocks[off].append(in_read)
                    in_read = 0.0
                    if ab:  # the next block with the hook off / on
                        dec.frame_hook = None if not off else hook
                await asyncio.sleep(0)  # a loop turn: dispatch runs as it would
            us = (time.process_time() - t0) / n * 1e6
            fast = broker.send_processor.fast
            frames = getattr(fast, "frames", 0) if fast is not None else 0
            print(f"  ({conn.out} replies; {frames} SENDs stored from the frame bytes)", file=sys.stderr)
            # the median block: robust to the preemptions and page faults of a shared machine
            return (
                us,
                statistics.median(blocks[0]) / 1000 * 1e6,
                statistics.median(blocks[1]) / 1000 * 1e6 if blocks[1] else None,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=30000)
    ap.add_argument("--tree", default=None, help="a checkout whose rmq to measure")
    ap.add_argument(
        "--ab",
        action="store_true",
        help="alternate 1000-message blocks with the broker's frame hook on and off in one process "
        "(off = the frame decoded into a command and dispatched, as before the hook): the two "
        "medians compare the paths under the same load",
    )
    ap.add_argument(
        "--turn-ab",
        action="store_true",
        help="alternate 1000-message blocks with and without the connection's per-turn share checks "
        "(maxFramesPerTurn / maxBytesPerTurn, as Connection._process_frames makes them)",
    )
    a = ap.parse_args()
    if a.tree:
        sys.path.insert(0, a.tree)
    import uvloop

    for ser, name in ((1, "binary"), (0, "json")):
        us, in_read, off = uvloop.run(measure(ser, a.messages, a.ab, a.turn_ab))
        if off is not None and a.turn_ab:
            print(
                f"{name}: reads {in_read:.2f} us per message with the per-turn checks, {off:.2f} us without "
                f"(medians of alternating 1000-message blocks; {us:.2f} us CPU per message in all)"
            )
        elif off is None:
            print(
                f"{name}: {us:.2f} us CPU per message ({in_read:.2f} us of it in the reads: decode, "
                f"dispatch, store, reply, median of 1000-message blocks)"
            )
        else:
            print(
                f"{name}: reads {in_read:.2f} us per message with the frame hook, {off:.2f} us without "
                f"(medians of alternating 1000-message blocks; {us:.2f} us CPU per message in all)"
            )


if __name__ == "__main__":
    main()
