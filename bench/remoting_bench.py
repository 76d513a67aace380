#!/usr/bin/env python3
"""Remoting layer round trips: PULL-shaped requests against a bare RemotingServer.

    python bench/remoting_bench.py [--connections 4] [--in-flight 16] [--seconds 5]
                                   [--warmup 1] [--slices 32] [--server-loop uvloop]
                                   [--handler rmq|bare|bare-json] [--py-codec] [--json]
    python bench/remoting_bench.py --codec-micro [--json]

What it measures: N connections each keep M requests in flight. A request is a ~350-byte
JSON header shaped like a C++ client's PULL_MESSAGE; the answer is a ~200-byte header plus a
38 KiB body handed to the transport as ``--slices`` memoryview slices of an mmap (32 × 1.2 KiB
by default, like a pull reply built from CommitLog records; ``--slices 1`` is one contiguous
slice). The server runs in its own process pinned to CPU 0, the client in another pinned to
CPU 1 (``os.sched_setaffinity``), so "server CPU seconds per 100k round trips" (utime + stime
from /proc/<pid>/stat over the measured window) is the server's cost alone.

Handlers (server side):
  rmq        RemotingServer + Dispatcher; the processor parses PullMessageRequestHeader and
             answers with PullMessageResponseHeader (what the broker's pull path costs in the
             remoting layer).
  bare       an asyncio.Protocol that finds frame boundaries and answers with a canned
             header + the slices, no parsing (the floor for this machine).
  bare-json  bare plus json.loads of the request header and json.dumps of the reply header.

``--py-codec`` runs the server with RMQ_NO_EXTENSIONS=1: the pure-Python header codec instead
of the Cython one (rmq/protocol/_codec.pyx), for A/B figures. ``--codec-micro`` runs no sockets: it
times, in this process, the header work of one SEND_MESSAGE_V2 round trip (decode the request
header, parse SendMessageRequestHeader, build and encode the reply) and of one PULL request,
fast path (msgspec decoder, Cython encoder) against the pure-Python reference, in microseconds per call.

The client is a minimal pipelining protocol that only counts frames, so it is not the
bottleneck. Performance is reported, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import mmap
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

BODY_SIZE = 38 * 1024
PULL_CODE = 11


def pull_ext() -> dict:
    """A C++ push consumer's PULL_MESSAGE ext fields, padded with the signature keys it always
    sends: about 350 bytes of JSON header. The C++ client writes queueId, maxMsgNums and
    sysFlag as JSON numbers, the rest as strings."""
    from rmq.protocol.headers.consumer import PullMessageRequestHeader

    h = PullMessageRequestHeader(
        consumer_group="GID_bench_consumer",
        topic="BenchTopic",
        queue_id=0,
        queue_offset=0,
        max_msg_nums=32,
        sys_flag=6,
        commit_offset=0,
        suspend_timeout_millis=15000,
        subscription="*",
        sub_version=1795294299665,
    )
    ext: dict = h.to_ext_fields()
    for name in ("queue_id", "max_msg_nums", "sys_flag"):
        ext[PullMessageRequestHeader.WIRE_NAMES[name]] = getattr(h, name)
    ext.update({"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "u9JItlQkBWYpUOviEj8UpknuZLY="})
    return ext


def _clk_tck() -> int:
    return os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` in seconds (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _clk_tck()


def make_body_parts(slices: int) -> tuple[mmap.mmap, list[memoryview]]:
    mm = mmap.mmap(-1, BODY_SIZE)
    mm.write(os.urandom(BODY_SIZE))
    view = memoryview(mm)
    step = -(-BODY_SIZE // slices)
    return mm, [view[i : i + step] for i in range(0, BODY_SIZE, step)]


def request_frame(opaque: int) -> bytes:
    from rmq.protocol.command import RemotingCommand
    from rmq.remoting.codec import encode

    cmd = RemotingCommand(PULL_CODE, language="CPP", version=63, opaque=opaque, ext_fields=pull_ext())
    cmd.remark = ""
    return b"".join(encode(cmd))


# ============================================================================ server


def run_server(args) -> None:
    os.sched_setaffinity(0, {0})
    if args.server_loop == "uvloop":
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    else:
        runner = asyncio.Runner()
    with runner:
        runner.run(_serve(args))


async def _serve(args) -> None:
    mm, parts = make_body_parts(args.slices)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    if args.handler == "rmq":
        from rmq.protocol.headers.consumer import PullMessageRequestHeader, PullMessageResponseHeader
        from rmq.remoting import RemotingServer

        class PullProcessor:
            """Parse the pull header and answer FOUND with the mmap slices (no store)."""

            def process_request(self, conn, cmd):
                h = PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
                rh = PullMessageResponseHeader(
                    suggest_which_broker_id=0,
                    next_begin_offset=h.queue_offset + 32,
                    min_offset=0,
                    max_offset=h.queue_offset + 1000,
                )
                return cmd.response(ext_fields=rh.to_ext_fields(), body=parts)

        server = RemotingServer("127.0.0.1", 0, name="bench")
        server.register_processor(PULL_CODE, PullProcessor())
        await server.start()
        port = server.port
    else:
        srv = await loop.create_server(lambda: BareProtocol(parts, args.handler == "bare-json"), "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
    print(port, flush=True)
    # the parent closes our stdin to stop us
    await loop.run_in_executor(None, sys.stdin.read)
    del stop, mm


class BareProtocol(asyncio.Protocol):
    """Frame boundaries only; a canned reply header per request (optionally JSON round trip)."""

    def __init__(self, parts, use_json):
        self.parts = parts
        self.use_json = use_json
        self.buf = b""
        from rmq.protocol.headers.consumer import PullMessageResponseHeader

        self.reply_ext = PullMessageResponseHeader(
            suggest_which_broker_id=0, next_begin_offset=32, min_offset=0, max_offset=1000
        ).to_ext_fields()
        header = json.dumps(
            {
                "code": 0,
                "extFields": self.reply_ext,
                "flag": 1,
                "language": "JAVA",
                "opaque": 0,
                "serializeTypeCurrentRPC": "JSON",
                "version": 409,
            },
            separators=(",", ":"),
        ).encode()
        self.canned = struct.pack(">ii", 4 + len(header) + BODY_SIZE, len(header)) + header

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        buf = self.buf + data if self.buf else data
        pos, n = 0, len(buf)
        out = []
        while n - pos >= 8:
            length, hword = struct.unpack_from(">ii", buf, pos)
            if n - pos < 4 + length:
                break
            if self.use_json:
                hlen = hword & 0xFFFFFF
                req = json.loads(buf[pos + 8 : pos + 8 + hlen])
                header = json.dumps(
                    {
                        "code": 0,
                        "extFields": self.reply_ext,
                        "flag": 1,
                        "language": "JAVA",
                        "opaque": req["opaque"],
                        "serializeTypeCurrentRPC": "JSON",
                        "version": 409,
                    },
                    separators=(",", ":"),
                ).encode()
                out.append(struct.pack(">ii", 4 + len(header) + BODY_SIZE, len(header)) + header)
            else:
                out.append(self.canned)
            out.extend(self.parts)
            pos += 4 + length
        self.buf = buf[pos:]
        if out:
            self.transport.writelines(out)


# ============================================================================ client


class CountingClient(asyncio.Protocol):
    """Keeps ``in_flight`` requests outstanding; counts whole reply frames by their length word."""

    def __init__(self, frame: bytes, in_flight: int, stats: dict):
        self.frame = frame
        self.in_flight = in_flight
        self.stats = stats
        self.need = 0  # bytes still missing of the current frame
        self.head = b""

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.frame * self.in_flight)

    def data_received(self, data):
        pos, n, done = 0, len(data), 0
        self.stats["bytes"] += n
        while pos < n:
            if self.need:
                take = min(self.need, n - pos)
                self.need -= take
                pos += take
                if self.need == 0:
                    done += 1
                continue
            # need the 4-byte length word (it may be split across reads)
            missing = 4 - len(self.head)
            self.head += data[pos : pos + missing]
            pos += min(missing, n - pos)
            if len(self.head) == 4:
                self.need = struct.unpack(">i", self.head)[0]
                self.head = b""
        if done:
            self.stats["round_trips"] += done
            self.transport.write(self.frame * done)


def run_client(args) -> None:
    os.sched_setaffinity(0, {1})
    import uvloop

    print(json.dumps(uvloop.run(_client(args))), flush=True)


async def _client(args) -> dict:
    loop = asyncio.get_running_loop()
    stats = {"round_trips": 0, "bytes": 0}
    frame = request_frame(1)
    transports = []
    for _ in range(args.connections):
        t, _ = await loop.create_connection(
            lambda: CountingClient(frame, args.in_flight, stats), "127.0.0.1", args.port
        )
        transports.append(t)
    await asyncio.sleep(args.warmup)
    rt0, b0, cpu0, t0 = stats["round_trips"], stats["bytes"], cpu_seconds(args.server_pid), time.perf_counter()
    await asyncio.sleep(args.seconds)
    rt1, b1, cpu1, t1 = stats["round_trips"], stats["bytes"], cpu_seconds(args.server_pid), time.perf_counter()
    for t in transports:
        t.close()
    elapsed = t1 - t0
    rts = rt1 - rt0
    return {
        "round_trips": rts,
        "seconds": round(elapsed, 3),
        "round_trips_per_s": round(rts / elapsed, 1),
        "mb_per_s": round((b1 - b0) / elapsed / 1e6, 1),
        "server_cpu_s": round(cpu1 - cpu0, 2),
        "server_cpu_s_per_100k": round((cpu1 - cpu0) / rts * 100_000, 3) if rts else None,
        "request_bytes": len(frame),
    }


# ============================================================================ codec micro


def send_v2_ext() -> dict[str, str]:
    """What a Java 4.9.8 producer sends for SEND_MESSAGE_V2 (fastjson: every extFields value a
    string, under SendMessageRequestHeaderV2's one-letter names)."""
    from rmq.protocol.headers.message import SendMessageRequestHeader

    return SendMessageRequestHeader(
        producer_group="please_rename_unique_group_name",
        topic="BenchTopic",
        queue_id=3,
        born_timestamp=1763769600000,
        properties="UNIQ_KEY\u0001C0A8000100002A9F00000000000000A1\u0002WAIT\u0001true\u0002TAGS\u0001TagA",
        reconsume_times=0,
        max_reconsume_times=None,
        broker_name="broker-a",
    ).to_ext_fields_v2()


def send_reply_ext() -> dict[str, str]:
    """A 4.9.8 broker's SEND reply header (with the two keys it adds beside the typed ones)."""
    from rmq.protocol.headers.message import SendMessageResponseHeader

    return {
        **SendMessageResponseHeader(
            msg_id="7F00000100002A9F0000000000A1B2C3", queue_id=3, queue_offset=123456
        ).to_ext_fields(),
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


def codec_micro() -> dict:
    import timeit

    from rmq.protocol.command import RemotingCommand
    from rmq.protocol.headers.consumer import PullMessageRequestHeader
    from rmq.protocol.headers.message import SendMessageRequestHeader
    from rmq.remoting import codec

    if codec._fast_decode is None or codec._fast_encode is None:
        raise SystemExit("the fast codec is off (RMQ_NO_EXTENSIONS=1 or not built)")
    out = {}
    reply_ext = send_reply_ext()
    for name, code, ext, read in (
        ("send_v2", 310, send_v2_ext(), SendMessageRequestHeader.from_ext_fields_v2),
        ("pull", PULL_CODE, pull_ext(), PullMessageRequestHeader.from_ext_fields),
    ):
        req = RemotingCommand(code, opaque=4711, ext_fields=dict(ext), body=b"x" * 1024)
        frame = b"".join(codec.encode(req))
        hlen = struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF
        cmd = codec._fast_decode(frame, 8, 8 + hlen, RemotingCommand)
        reply = cmd.response(0, ext_fields=dict(reply_ext))

        def per_call(fn, n=100_000):
            fn()
            return round(min(timeit.repeat(fn, number=n, repeat=3)) / n * 1e6, 3)

        fast_decode = codec._fast_decode
        out[name] = {
            "header_bytes": hlen,
            "decode_fast_us": per_call(lambda: fast_decode(frame, 8, 8 + hlen, RemotingCommand)),
            "decode_python_us": per_call(lambda: codec._decode_json_header_py(frame[8 : 8 + hlen])),
            "from_ext_fields_us": per_call(lambda: read(cmd.ext_fields)),
            "response_us": per_call(lambda: cmd.response(0, ext_fields=reply_ext)),
            "encode_reply_fast_us": per_call(lambda: codec.encode(reply)),
        }
        saved = codec._fast_encode
        codec._fast_encode = None
        try:
            out[name]["encode_reply_python_us"] = per_call(lambda: codec.encode(reply))
        finally:
            codec._fast_encode = saved
    return out


# ============================================================================ driver


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="remoting_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=4, help="client connections (default 4)")
    ap.add_argument("--in-flight", type=int, default=16, help="requests in flight per connection (default 16)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured window (default 5)")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured warm-up (default 1)")
    ap.add_argument("--slices", type=int, default=32, help="memoryview slices per 38 KiB body (default 32)")
    ap.add_argument("--handler", choices=["rmq", "bare", "bare-json"], default="rmq", help="server side (default rmq)")
    ap.add_argument(
        "--server-loop", choices=["uvloop", "asyncio"], default="uvloop", help="server loop (default uvloop)"
    )
    ap.add_argument(
        "--py-codec", action="store_true", help="server uses the pure-Python header codec (RMQ_NO_EXTENSIONS=1)"
    )
    ap.add_argument("--codec-micro", action="store_true", help="time the header codec in-process, no sockets")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    ap.add_argument("--role", choices=["driver", "server", "client"], default="driver", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.role == "server":
        run_server(args)
        return 0
    if args.role == "client":
        run_client(args)
        return 0
    if args.codec_micro:
        figures = codec_micro()
        if args.json:
            print(json.dumps({"bench": "remoting_codec_micro", **figures}))
        else:
            for name, f in figures.items():
                print(
                    f"{name} ({f['header_bytes']} B header), us per call: "
                    + ", ".join(f"{k[:-3]} {v}" for k, v in f.items() if k.endswith("_us"))
                )
        return 0

    common = ["--slices", str(args.slices), "--handler", args.handler, "--server-loop", args.server_loop]
    env = dict(os.environ, RMQ_NO_EXTENSIONS="1") if args.py_codec else None
    server = subprocess.Popen(
        [sys.executable, __file__, "--role", "server", *common],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        port = int(server.stdout.readline())
        client = subprocess.run(
            [
                sys.executable,
                __file__,
                "--role",
                "client",
                "--port",
                str(port),
                "--server-pid",
                str(server.pid),
                "--connections",
                str(args.connections),
                "--in-flight",
                str(args.in_flight),
                "--seconds",
                str(args.seconds),
                "--warmup",
                str(args.warmup),
            ],
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
        figures = json.loads(client.stdout.strip().splitlines()[-1])
    finally:
        server.stdin.close()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    figures.update(
        bench="remoting",
        handler=args.handler,
        slices=args.slices,
        connections=args.connections,
        in_flight=args.in_flight,
        server_loop=args.server_loop,
        codec="python" if args.py_codec else "cython",
    )
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"remoting {args.handler} ({args.server_loop}, {figures['codec']} codec, {args.slices} slices, "
            f"{args.connections}x{args.in_flight} in flight): {figures['round_trips_per_s']:.0f} round trips/s, "
            f"{figures['mb_per_s']:.0f} MB/s, server CPU {figures['server_cpu_s_per_100k']} s per 100k round trips"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
