#!/usr/bin/env python3
"""Pull throughput against any RocketMQ 4.x broker (rmq or Apache), over the protocol only.

    python bench/pull_bench.py --namesrv 127.0.0.1:9876 --topic BenchTopic --group BenchPull \
        [--prefill N] [--size 1024] [--inflight 4] [--max-msgs 32] [--duration S | --drain] \
        [--broker-pid PID] [--json]

Optionally prefills the topic with N messages (SEND_MESSAGE_V2 over 4 connections), then
pulls every readable queue of every master broker in the route with raw PULL_MESSAGE: one TCP
connection per queue, ``--inflight`` pulls pipelined on it at consecutive offsets. Records
are counted by walking their TOTALSIZE fields in the receive buffer; no per-message objects
are built. ``--drain`` pulls each queue from its min offset up to the max offset seen when the
pull phase starts and reports the drain time; ``--duration S`` pulls for S seconds (long
polling when caught up). Prints msgs/s, MB/s, pulls/s and empty pulls; ``--json`` adds one
JSON line of the same figures.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import struct
import sys
import time
from argparse import Namespace

import _common as c

from rmq.common.constants import ExpressionType
from rmq.common.message import PullSysFlag
from rmq.errors import RMQError
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.requests.consumer import parse_pull, pull_message
from rmq.remoting.acl import sign_request
from rmq.remoting.client import RemotingClient
from rmq.remoting.codec import decode_binary_header, decode_json_header, encode
from rmq.types import PullStatus

SYS_FLAG_SUBSCRIPTION = PullSysFlag.FLAG_SUBSCRIPTION
SYS_FLAG_SUSPEND = PullSysFlag.FLAG_SUSPEND

_LENGTHS = struct.Struct(">ii")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pull_bench.py", description=__doc__.split("\n\n")[0])
    c.add_common_args(ap)
    ap.add_argument("--group", required=True, help="consumer group named in the pulls")
    ap.add_argument("--prefill", type=int, default=0, help="messages to send before pulling (default 0)")
    ap.add_argument(
        "--prefill-batch",
        type=int,
        default=1,
        help="messages per prefill request; >1 uses SEND_BATCH_MESSAGE (default 1)",
    )
    ap.add_argument("--inflight", type=int, default=4, help="pulls in flight per queue connection (default 4)")
    ap.add_argument("--max-msgs", type=int, default=32, help="maxMsgNums of each pull (default 32)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--duration", type=float, default=None, help="pull for this many seconds")
    mode.add_argument("--drain", action="store_true", help="pull every queue up to its current max offset (default)")
    ap.add_argument(
        "--suspend-ms",
        type=int,
        default=1000,
        help="long-poll hold asked for when caught up in --duration mode (default 1000)",
    )
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines (default 10)")
    return ap


def parse_args(argv=None) -> Namespace:
    args = build_parser().parse_args(argv)
    if args.duration is None:
        args.drain = True
    elif args.duration <= 0:
        raise SystemExit("error: --duration must be > 0")
    c.positive("inflight", args.inflight)
    c.positive("max-msgs", args.max_msgs)
    c.positive("prefill", args.prefill, 0)
    c.positive("prefill-batch", args.prefill_batch)
    c.positive("size", args.size)
    c.positive("queues", args.queues)
    return args


class PullStats:
    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.pulls = 0
        self.empty_pulls = 0
        self.errors = 0
        self.last_error: str | None = None


class QueuePuller(asyncio.BufferedProtocol):
    """One connection pulling one queue, ``inflight`` PULL_MESSAGE requests pipelined.

    Requests go out at consecutive offsets (cursor, cursor+max, ...). A reply that returns
    fewer messages than asked leaves a hole [nextBeginOffset, requested end) which is asked
    again before the cursor moves on, so every offset is counted exactly once.

    Replies are framed in a private receive buffer: the length words are read in place, the
    header is handed to ``rmq.remoting.codec``, and the body is only walked by TOTALSIZE.
    """

    def __init__(
        self,
        mq: c.MessageQueue,
        args,
        stats: PullStats,
        start: int,
        target: int | None,
        on_body=None,
        known_max: int | None = None,
    ):
        self.mq = mq
        self.args = args
        self.stats = stats
        self.cursor = start
        self.target = target  # drain: stop at this offset; None: pull forever
        # Highest maxOffset the broker reported. Without a target, new pulls never start past
        # it: a pull at exactly maxOffset is held (long poll), one beyond it is answered
        # PULL_OFFSET_MOVED (OFFSET_OVERFLOW_BADLY) by Java and rmq alike.
        self.known_max = start if known_max is None else known_max
        self.holes: list[tuple[int, int]] = []
        self.in_flight: dict[int, tuple[int, int]] = {}  # opaque → (offset, max_nums)
        self.on_body = on_body  # latency bench: called with each FOUND body
        self.buf = bytearray(1 << 20)
        self.view = memoryview(self.buf)
        self.read_pos = 0
        self.write_pos = 0
        self.transport = None
        self.done = asyncio.get_running_loop().create_future()
        self.stopping = False
        self.sys_flag = SYS_FLAG_SUBSCRIPTION | (SYS_FLAG_SUSPEND if target is None else 0)
        self.suspend_ms = args.suspend_ms if target is None else 0
        self.credentials = c.credentials(args)  # --access-key/--secret-key: each pull signed

    # ------------------------------------------------------------------ requests

    def _send_pull(self, offset: int, n: int) -> None:
        cmd = pull_message(
            PullMessageRequestHeader(
                consumer_group=self.args.group,
                topic=self.args.topic,
                queue_id=self.mq.queue_id,
                queue_offset=offset,
                max_msg_nums=n,
                sys_flag=self.sys_flag,
                suspend_timeout_millis=self.suspend_ms,
                subscription="*",
                expression_type=ExpressionType.TAG,
            )
        )
        if self.credentials is not None:
            sign_request(cmd, self.credentials)
        self.in_flight[cmd.opaque] = (offset, n)
        self._out.extend(encode(cmd))

    def fill(self) -> None:
        if self.stopping:
            self._maybe_done()
            return
        max_msgs = self.args.max_msgs
        self._out = out = []  # every pull of this round leaves in one write (one syscall)
        try:
            self._fill(max_msgs)
        finally:
            if out:
                self.transport.writelines(out)
        self._maybe_done()

    def _fill(self, max_msgs: int) -> None:
        while len(self.in_flight) < self.args.inflight:
            if self.holes:
                offset, n = self.holes.pop()
            elif self.target is not None:
                if self.cursor >= self.target:
                    break
                offset, n = self.cursor, min(max_msgs, self.target - self.cursor)
                self.cursor += n
            else:
                if self.cursor > self.known_max:
                    break  # caught up: the pull at the old max is being held until messages arrive
                offset, n = self.cursor, max_msgs
                self.cursor += n
            self._send_pull(offset, n)

    def _maybe_done(self) -> None:
        if self.done.done() or self.in_flight:
            return
        if self.stopping or (self.target is not None and self.cursor >= self.target and not self.holes):
            self.done.set_result(None)

    def stop(self) -> None:
        """Send no more pulls; ``done`` resolves once the outstanding ones are answered."""
        self.stopping = True
        self._maybe_done()

    # ------------------------------------------------------------------ replies

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int):
        if len(self.buf) - self.write_pos < 65536:
            self._compact(65536)
        return self.view[self.write_pos :]

    def _compact(self, need: int) -> None:
        pending = self.write_pos - self.read_pos
        if pending + need > len(self.buf):  # a frame bigger than the buffer: grow it
            bigger = bytearray(max(2 * len(self.buf), pending + need))
            bigger[:pending] = self.view[self.read_pos : self.write_pos]
            self.buf, self.view = bigger, memoryview(bigger)
        elif pending:
            self.buf[:pending] = self.view[self.read_pos : self.write_pos]
        self.read_pos, self.write_pos = 0, pending

    def buffer_updated(self, nbytes: int) -> None:
        self.write_pos += nbytes
        buf, pos, end = self.buf, self.read_pos, self.write_pos
        big = 0
        while end - pos >= 8:
            length, word = _LENGTHS.unpack_from(buf, pos)
            frame_end = pos + 4 + length
            if frame_end > end:
                if 4 + length > len(buf):
                    big = 4 + length  # make room for the whole frame below
                break
            hlen = word & 0xFFFFFF
            hstart = pos + 8
            if word >> 24:
                cmd = decode_binary_header(buf, hstart, hlen)
            else:
                cmd = decode_json_header(bytes(self.view[hstart : hstart + hlen]))
            self._on_reply(cmd, self.view[hstart + hlen : frame_end])
            pos = frame_end
        if pos == end:
            self.read_pos = self.write_pos = 0
        else:
            self.read_pos = pos
            if big:
                self._compact(big)
        self.fill()

    def _on_reply(self, cmd: RemotingCommand, body: memoryview) -> None:
        if not cmd.flag & 1:
            return  # a request from the broker (e.g. NOTIFY_CONSUMER_IDS_CHANGED): not ours to answer
        req = self.in_flight.pop(cmd.opaque, None)
        if req is None:
            return
        offset, n = req
        stats = self.stats
        stats.pulls += 1
        code = cmd.code
        try:
            reply = parse_pull(cmd)  # the body travels apart (zero copy): `body`
        except RMQError as exc:
            reply = None
            error = str(exc)
        if reply is not None and reply.max_offset > self.known_max:
            self.known_max = reply.max_offset
        if reply is not None and reply.status is PullStatus.FOUND:
            count = c.count_records(body)
            stats.messages += count
            stats.bytes += len(body)
            if self.on_body is not None:
                self.on_body(body)
            nxt = reply.next_begin_offset
            if nxt <= offset:
                stats.errors += 1
                stats.last_error = f"PULL {self.mq.queue_id}@{offset}: FOUND but nextBeginOffset {nxt}"
                nxt = offset + count
            if nxt < offset + n and not (self.target is not None and nxt >= self.target):
                self.holes.append((nxt, offset + n - nxt))
        elif reply is not None and reply.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            stats.empty_pulls += 1
            if self.target is not None and reply.status is PullStatus.NO_NEW_MSG:
                # draining below the max offset the broker reported: a message is missing
                stats.errors += 1
                stats.last_error = f"PULL {self.mq.queue_id}@{offset}: no message below max offset {self.target}"
                if stats.errors > 1000:
                    self.stopping = True
                    return
            nxt = reply.next_begin_offset
            if nxt < offset + n:
                self.holes.append((max(nxt, offset), offset + n - max(nxt, offset)))
        else:
            stats.errors += 1
            stats.last_error = f"PULL {self.mq.queue_id}@{offset}: " + (
                error if reply is None else f"code {code} {cmd.remark or ''}"
            )
            if (reply is not None and reply.status is PullStatus.OFFSET_ILLEGAL) or stats.errors > 1000:
                self.stopping = True
                self.holes.clear()
                self.cursor = self.target if self.target is not None else self.cursor
            else:
                self.holes.append((offset, n))

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            if self.in_flight and not self.stopping:
                self.done.set_exception(
                    c.BenchError(f"connection to {self.mq.broker_addr} for queue {self.mq.queue_id} lost: {exc}")
                )
            else:
                self.done.set_result(None)


async def open_pullers(
    args, route: c.Route, stats: PullStats, client: RemotingClient, drain: bool, start_at: str = "min", on_body=None
) -> list[QueuePuller]:
    """One connected :class:`QueuePuller` per readable queue, positioned at its min (or max) offset."""
    loop = asyncio.get_running_loop()
    pullers = []
    tls = c.client_tls(args)
    for mq in route.read_queues:
        lo = await c.queue_offset(client, mq, RequestCode.GET_MIN_OFFSET, args.topic, args.timeout)
        hi = await c.queue_offset(client, mq, RequestCode.GET_MAX_OFFSET, args.topic, args.timeout)
        start = lo if start_at == "min" else hi
        host, port = mq.broker_addr.rsplit(":", 1)
        # partial binds this queue's mq, start and hi now (a lambda would read the loop's latest)
        _, puller = await asyncio.wait_for(
            loop.create_connection(
                functools.partial(QueuePuller, mq, args, stats, start, hi if drain else None, on_body, known_max=hi),
                host,
                int(port),
                ssl=tls,
                server_hostname=host if tls else None,
            ),
            args.timeout,
        )
        pullers.append(puller)
    return pullers


async def prefill(args, quiet: bool) -> dict:
    """Send ``args.prefill`` messages with the produce bench's sender; return its figures."""
    import produce_bench

    pargs = Namespace(
        namesrv=args.namesrv,
        topic=args.topic,
        size=args.size,
        queues=args.queues,
        broker_pid=None,
        json=False,
        timeout=args.timeout,
        group="BenchmarkPrefillGroup",
        connections=4,
        inflight=16,
        duration=None,
        batch=args.prefill_batch,
        interval=args.interval,
        access_key=args.access_key,
        secret_key=args.secret_key,
        tls=args.tls,
        tls_ca=args.tls_ca,
    )
    namesrv = c.namesrv_list(args.namesrv)
    admin = c.client(args, namesrv)
    try:
        route = await c.ensure_topic(admin, args.topic, args.queues, timeout=args.timeout)
    finally:
        await admin.close()
    stats = produce_bench.ProduceStats()
    producer = produce_bench.Producer(pargs, route, stats, namesrv)
    started = time.perf_counter()
    try:
        await producer.run_count(args.prefill)
    finally:
        await producer.close()
    elapsed = time.perf_counter() - started
    if stats.send_failed or stats.response_failed:
        raise c.BenchError(
            f"prefill: {stats.send_failed} sends failed, {stats.response_failed} refused ({stats.last_error})"
        )
    if not quiet:
        print(
            f"Prefill: {stats.messages_ok} messages of {args.size} bytes in {elapsed:.1f} s "
            f"({stats.messages_ok / elapsed:.0f} msg/s)",
            flush=True,
        )
    return {"prefill_messages": stats.messages_ok, "prefill_seconds": round(elapsed, 3)}


async def _reporter(stats: PullStats, interval: float) -> None:
    last_m, last_p, last_t = 0, 0, time.perf_counter()
    while True:
        await asyncio.sleep(interval)
        t = time.perf_counter()
        dt = t - last_t
        print(
            f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} Pull TPS: {(stats.messages - last_m) / dt:.0f} "
            f"Pulls/s: {(stats.pulls - last_p) / dt:.0f} Empty Pulls: {stats.empty_pulls} Errors: {stats.errors}",
            flush=True,
        )
        last_m, last_p, last_t = stats.messages, stats.pulls, t


async def pull(args, quiet: bool = False) -> dict:
    """Run the pull benchmark with parsed ``args``; return the figures."""
    figures: dict = {
        "bench": "pull",
        "topic": args.topic,
        "group": args.group,
        "size": args.size,
        "inflight": args.inflight,
        "max_msgs": args.max_msgs,
        "mode": "drain" if args.drain else "duration",
    }
    if args.prefill:
        figures.update(await prefill(args, quiet))
    client = c.client(args, c.namesrv_list(args.namesrv))
    stats = PullStats()
    cpu = c.CpuMeter(args.broker_pid)
    try:
        route = await c.ensure_topic(client, args.topic, args.queues, timeout=args.timeout)
        if not route.read_queues:
            raise c.BenchError(f"topic {args.topic} has no readable queue")
        pullers = await open_pullers(args, route, stats, client, drain=args.drain)
    finally:
        await client.close()
    backlog = sum((p.target - p.cursor) for p in pullers) if args.drain else None
    reporter = None if quiet else asyncio.create_task(_reporter(stats, args.interval))
    cpu.start()
    started = time.perf_counter()
    try:
        for p in pullers:
            p.fill()
        waiter = asyncio.gather(*(p.done for p in pullers))
        if args.drain:
            await waiter
        else:
            await asyncio.sleep(args.duration)
            for p in pullers:
                p.stop()
            await asyncio.wait_for(waiter, args.suspend_ms / 1000 + args.timeout)
        elapsed = time.perf_counter() - started
    finally:
        cpu.stop()
        if reporter:
            reporter.cancel()
        for p in pullers:
            p.transport.close()
    figures.update(
        {
            "queues": len(pullers),
            "backlog": backlog,
            "seconds": round(elapsed, 3),
            "messages": stats.messages,
            "bytes": stats.bytes,
            "msgs_per_s": round(stats.messages / elapsed, 1) if elapsed else 0.0,
            "mb_per_s": round(stats.bytes / elapsed / 1e6, 2) if elapsed else 0.0,
            "pulls": stats.pulls,
            "pulls_per_s": round(stats.pulls / elapsed, 1) if elapsed else 0.0,
            "empty_pulls": stats.empty_pulls,
            "errors": stats.errors,
            "drain_seconds": round(elapsed, 3) if args.drain else None,
            "broker_cpu_s": None if cpu.seconds is None else round(cpu.seconds, 3),
            "broker_cpu_s_per_1m": None
            if cpu.per_million(stats.messages) is None
            else round(cpu.per_million(stats.messages), 2),
            # the split of broker_cpu_s: user space and the kernel's (utime / stime)
            "broker_user_s": None if cpu.user_seconds is None else round(cpu.user_seconds, 3),
            "broker_system_s": None if cpu.system_seconds is None else round(cpu.system_seconds, 3),
        }
    )
    if stats.last_error:
        figures["last_error"] = stats.last_error
    return figures


def print_summary(f: dict) -> None:
    drain = f" (drained {f['backlog']} in {f['drain_seconds']:.2f} s)" if f["drain_seconds"] is not None else ""
    print(
        f"[Complete] Pulled: {f['messages']} msgs in {f['seconds']:.2f} s{drain} "
        f"Pull TPS: {f['msgs_per_s']:.0f} MB/s: {f['mb_per_s']:.2f} Pulls/s: {f['pulls_per_s']:.0f} "
        f"Empty Pulls: {f['empty_pulls']} Errors: {f['errors']}",
        flush=True,
    )
    if f["broker_cpu_s"] is not None:
        print(
            f"Broker CPU: {f['broker_cpu_s']:.2f} s over the run ({f['broker_user_s']:.2f} user, "
            f"{f['broker_system_s']:.2f} system), {f['broker_cpu_s_per_1m']:.2f} CPU-s per 1M messages",
            flush=True,
        )
    if f.get("last_error"):
        print(f"last error: {f['last_error']}", flush=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    return c.bench_main(
        args,
        pull(args),
        print_summary,
        lambda f: not f["errors"] and not (args.drain and f["messages"] != f["backlog"]),
    )


if __name__ == "__main__":
    sys.exit(main())
