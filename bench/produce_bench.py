#!/usr/bin/env python3
"""Produce throughput against any RocketMQ 4.x broker (rmq or Apache), over the protocol only.

    python bench/produce_bench.py --namesrv 127.0.0.1:9876 --topic BenchTopic \
        [--size 1024] [--connections 4] [--inflight 16] [--duration 30] [--batch 1] \
        [--serialize json|rocketmq] [--threads N] [--broker-pid PID] [--json]
    python bench/produce_bench.py --repeat 3 --topic BenchTopic [--tree PATH] \
        [--broker-arg=--flushDiskType=SYNC_FLUSH] [same options]

Every ``--interval`` seconds (default 10) prints a line with the columns of RocketMQ's own
benchmark producer (Send TPS, Max RT, Average RT, Send Failed, Response Failed); at the end a
summary (TPS, MB/s, p50/p99/p999 RT) and, with ``--json``, one JSON line of the same figures.
Messages go round-robin over the topic's write queues on every master broker in its route,
each as SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE when ``--batch`` > 1). ``--connections``
separate TCP connections each keep ``--inflight`` requests outstanding. The topic is created
with UPDATE_AND_CREATE_TOPIC when the name server does not know it.

``--serialize rocketmq`` sends ROCKETMQ binary request headers (serialize type 1 in the high
byte of the header-length word, Java ``RocketMQSerializable``) as the Java client does with
``-Drocketmq.serialize.type=ROCKETMQ``; the broker answers in kind. ``--threads N`` is the
pattern of Java's benchmark ``Producer``: N threads each calling the synchronous
``producer.send``, i.e. N requests in flight, one per sender, over the ONE connection that
Java's ``MQClientInstance`` keeps per broker (it overrides ``--connections``/``--inflight``).

``--repeat K`` runs K rounds, each against a fresh ``rmq standalone`` (bench/_common.py's
``Standalone``: free ports, new store, the daemon's real defaults; ``--tree`` runs another
checkout's broker, ``--broker-arg`` passes daemon arguments), measures the broker's CPU, and
prints each round and the median (min–max) of msgs/s, broker CPU-s per 1M and p99 with the
load average before each round.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import itertools
import os
import socket
import statistics
import struct
import sys
import time

import _common as c

from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient
from rmq.remoting.codec import decode_binary_header, decode_json_header, encode

# SEND results that still count as stored (Java SendStatus other than OK)
_SENT_CODES = {
    ResponseCode.SUCCESS,
    ResponseCode.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE,
}
_LENGTHS = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_BIN_CODE = struct.Struct(">h")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="produce_bench.py", description=__doc__.split("\n\n")[0])
    c.add_common_args(ap, namesrv_required=False)
    ap.add_argument("--group", default="BenchmarkProducerGroup", help="producer group (default BenchmarkProducerGroup)")
    ap.add_argument("--connections", type=int, default=4, help="TCP connections (default 4)")
    ap.add_argument("--inflight", type=int, default=16, help="requests in flight per connection (default 16)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds to send (default 30)")
    ap.add_argument(
        "--count", type=int, default=None, help="send exactly this many messages instead of running for --duration"
    )
    ap.add_argument("--batch", type=int, default=1, help="messages per request; >1 uses SEND_BATCH_MESSAGE (default 1)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines (default 10)")
    ap.add_argument(
        "--serialize",
        choices=sorted(c.SERIALIZE_TYPES),
        default="json",
        help="request header encoding: json (default) or rocketmq (binary, as Java's client "
        "with rocketmq.serialize.type=ROCKETMQ)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="N synchronous senders, one request in flight each, over ONE connection (Java's "
        "benchmark Producer); replaces --connections/--inflight",
    )
    ap.add_argument(
        "--client",
        choices=("sdk", "raw"),
        default=None,
        help="sdk: rmq's RemotingClient per request; raw: pre-encoded frames patched per request "
        "(cheap on the client, so the broker sets the pace). Default raw with --threads, "
        "sdk otherwise; raw sends single messages only",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="K rounds, each against a fresh rmq standalone; prints median (min-max)",
    )
    ap.add_argument("--tree", default=None, help="with --repeat: run the broker of this checkout")
    ap.add_argument(
        "--broker-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --repeat: a daemon argument, e.g. --broker-arg=--flushDiskType=SYNC_FLUSH (repeatable)",
    )
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    c.positive("size", args.size)
    c.positive("connections", args.connections)
    c.positive("inflight", args.inflight)
    c.positive("batch", args.batch)
    c.positive("queues", args.queues)
    if args.count is not None:
        c.positive("count", args.count)
    if args.duration <= 0:
        raise SystemExit("error: --duration must be > 0")
    if args.interval <= 0:
        raise SystemExit("error: --interval must be > 0")
    if args.threads is not None:
        c.positive("threads", args.threads)
        args.connections, args.inflight = 1, args.threads
    if args.client is None:
        args.client = "raw" if args.threads is not None and args.batch == 1 else "sdk"
    if args.client == "raw" and args.batch != 1:
        ap.error("--client raw sends single messages (--batch 1)")
    if args.repeat is not None:
        c.positive("repeat", args.repeat)
        if args.namesrv or args.broker_pid:
            ap.error("--repeat starts its own brokers: no --namesrv or --broker-pid")
    elif not args.namesrv:
        ap.error("the following arguments are required: --namesrv (or --repeat K to start fresh brokers)")
    elif args.tree or args.broker_arg:
        ap.error("--tree and --broker-arg go with --repeat")
    return args


class ProduceStats:
    """Counters shaped like Java's StatsBenchmarkProducer, plus every RT for the percentiles."""

    def __init__(self) -> None:
        self.requests_ok = 0
        self.messages_ok = 0
        self.send_failed = 0  # no usable answer: timeout, connection error
        self.response_failed = 0  # the broker answered with an error code
        self.rt_total_ms = 0.0
        self.rt_max_ms = 0.0
        self.rts: list[float] = []
        self.last_error: str | None = None

    def snapshot(self) -> tuple[int, int, float]:
        return self.messages_ok, self.requests_ok, self.rt_total_ms

    def answered(self, code: int, remark: str | None, messages: int, rt: float) -> None:
        """Count one answered request: sent (Java's sent codes) or refused by the broker."""
        if code in _SENT_CODES:
            self.requests_ok += 1
            self.messages_ok += messages
            self.rt_total_ms += rt
            self.rts.append(rt)
            if rt > self.rt_max_ms:
                self.rt_max_ms = rt
        else:
            self.response_failed += 1
            self.last_error = f"code {code} {remark or ''}"


class Producer:
    """Sends fixed-size messages over several connections until told to stop."""

    def __init__(self, args, route: c.Route, stats: ProduceStats, namesrv: list[str]):
        self.args = args
        self.queues = route.write_queues
        if not self.queues:
            raise c.BenchError(f"topic {route.topic} has no writable queue")
        self.stats = stats
        self.clients = [c.client(args, namesrv) for _ in range(args.connections)]
        self.body = (b"RocketMQ benchmark " * (args.size // 19 + 1))[: args.size]
        self._rr = itertools.count()
        self._seq = itertools.count()
        self._stop = False
        self._budget: int | None = None  # messages left to send in run_count(); None = no limit
        self.serialize = c.SERIALIZE_TYPES[getattr(args, "serialize", "json")]

    def _command(self) -> tuple[RemotingCommand, int]:
        mq = self.queues[next(self._rr) % len(self.queues)]
        if self.args.batch == 1:
            props = c.properties_string({"UNIQ_KEY": c.uniq_key(next(self._seq)), "WAIT": "true"})
            return c.send_request(
                self.args.group,
                self.args.topic,
                mq.queue_id,
                props,
                self.body,
                serialize=self.serialize,
                broker_name=mq.broker_name,
            ), mq
        items = [c.properties_string({"UNIQ_KEY": c.uniq_key(next(self._seq))}) for _ in range(self.args.batch)]
        blob = c.encode_batch([self.body] * self.args.batch, items)
        return c.send_request(
            self.args.group,
            self.args.topic,
            mq.queue_id,
            c.properties_string({"WAIT": "true"}),
            blob,
            batch=True,
            serialize=self.serialize,
            broker_name=mq.broker_name,
        ), mq

    async def _worker(self, client: RemotingClient) -> None:
        stats, timeout, batch = self.stats, self.args.timeout, self.args.batch
        perf = time.perf_counter
        while not self._stop:
            if self._budget is not None:
                if self._budget <= 0:
                    return
                self._budget -= batch
            cmd, mq = self._command()
            t0 = perf()
            try:
                resp = await client.invoke(mq.broker_addr, cmd, timeout=timeout)
            except Exception as exc:  # timeouts and connection errors count as "Send Failed"
                stats.send_failed += 1
                if self._budget is not None:
                    self._stop = True  # a counted run (prefill) must not silently lose messages
                stats.last_error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.05)
                continue
            stats.answered(resp.code, resp.remark, batch, (perf() - t0) * 1000.0)

    async def run(self, duration: float) -> float:
        tasks = [asyncio.create_task(self._worker(cl)) for cl in self.clients for _ in range(self.args.inflight)]
        started = time.perf_counter()
        try:
            await asyncio.sleep(duration)
        finally:
            self._stop = True
            await asyncio.gather(*tasks, return_exceptions=True)
        return time.perf_counter() - started

    async def run_count(self, count: int) -> float:
        """Send exactly ``count`` messages (in ``--batch`` sized requests); return the seconds taken."""
        self._budget = count
        if self.args.batch > 1 and count % self.args.batch:
            raise c.BenchError(f"a count of {count} is not a multiple of the batch size {self.args.batch}")
        tasks = [asyncio.create_task(self._worker(cl)) for cl in self.clients for _ in range(self.args.inflight)]
        started = time.perf_counter()
        await asyncio.gather(*tasks)
        return time.perf_counter() - started

    async def close(self) -> None:
        for cl in self.clients:
            await cl.close()


# ------------------------------------------------------------------------------ raw sender
#
# The SDK's RemotingClient costs the bench process ~150 us of CPU per request (a command
# object, header encoding, a future under asyncio.timeout, decoding the reply), so on a
# shared 2-core machine a single client process, not the broker, set the pace of the
# 16-sender pattern. The raw sender encodes one SEND frame per queue once and, per request,
# patches a copy: opaque, bornTimestamp and the UNIQ_KEY's sequence (fixed-width fields:
# opaques start at 10**9 so the JSON decimal keeps 10 digits). Replies are matched by
# opaque, read straight from the frame (binary) or through the codec (JSON). The broker
# sees the same bytes a per-request encoding would produce.

_OPAQUE_BASE = 1_000_000_000
_TS_MARKER = 1_000_000_000_000  # 13 digits like every millisecond timestamp until 2286
_BIN_OPAQUE_AT = 8 + 5  # frame words, then code int16, language int8, version int16


class _Template:
    """One queue's SEND frame with the offsets of the fields patched per request."""

    __slots__ = ("frame", "opaque_at", "ts_at", "seq_at", "binary")

    def __init__(self, producer: RawProducer, mq: c.MessageQueue):
        args = producer.args
        props = c.properties_string({"UNIQ_KEY": c.uniq_key(0), "WAIT": "true"})
        cmd = c.send_request(
            args.group,
            args.topic,
            mq.queue_id,
            props,
            producer.body,
            serialize=producer.serialize,
            broker_name=mq.broker_name,
        )
        cmd.opaque = _OPAQUE_BASE
        ext = cmd.ext_fields
        ts_key = next(k for k, v in ext.items() if v == str(ext.get("g", ext.get("bornTimestamp"))))
        ext[ts_key] = str(_TS_MARKER)
        self.frame = b"".join(bytes(p) for p in encode(cmd))
        self.binary = producer.serialize == 1
        hlen = struct.unpack_from(">i", self.frame, 4)[0] & 0xFFFFFF
        header = self.frame[: 8 + hlen]
        if self.binary:
            self.opaque_at = _BIN_OPAQUE_AT
        else:
            self.opaque_at = header.index(b'"opaque":%d' % _OPAQUE_BASE) + len(b'"opaque":')
        self.ts_at = header.index(b"%d" % _TS_MARKER)
        self.seq_at = header.index(c.uniq_key(0).encode()) + 16
        for at in (self.ts_at, self.seq_at):  # each marker must occur once
            if header.count(header[at - 1 : at + 13]) != 1:
                raise c.BenchError("ambiguous SEND template")

    def build(self, opaque: int, seq: int, now_ms: int) -> bytearray:
        buf = bytearray(self.frame)
        if self.binary:
            _I32.pack_into(buf, self.opaque_at, opaque)
        else:
            buf[self.opaque_at : self.opaque_at + 10] = b"%010d" % opaque
        buf[self.ts_at : self.ts_at + 13] = b"%013d" % now_ms
        buf[self.seq_at : self.seq_at + 16] = b"%016X" % (seq & 0xFFFFFFFFFFFFFFFF)
        return buf


class _RawConnection(asyncio.Protocol):
    """One socket of the raw sender: writes request frames, matches replies by opaque."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, tuple[asyncio.Future, float]] = {}
        self.buf = bytearray()
        self.lost: BaseException | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos, n = 0, len(buf)
        pending = self.pending
        while n - pos >= 8:
            length, word = _LENGTHS.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > n:
                break
            hlen = word & 0xFFFFFF
            if word >> 24 == 1:
                code, opaque = _BIN_CODE.unpack_from(buf, pos + 8)[0], _I32.unpack_from(buf, pos + _BIN_OPAQUE_AT)[0]
                remark = None
                if code not in _SENT_CODES:
                    remark = decode_binary_header(buf, pos + 8, hlen).remark
            else:
                cmd = decode_json_header(bytes(buf[pos + 8 : pos + 8 + hlen]))
                code, opaque, remark = cmd.code, cmd.opaque, cmd.remark
            entry = pending.pop(opaque, None)
            if entry is not None and not entry[0].done():
                entry[0].set_result((code, remark))
            pos = end
        if pos:
            del buf[:pos]

    def connection_lost(self, exc) -> None:
        self.lost = exc or ConnectionResetError("connection closed")
        self.fail_all(self.lost)

    def fail_all(self, exc: BaseException) -> None:
        pending, self.pending = self.pending, {}
        for fut, _t in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    def expire(self, now: float, timeout: float) -> None:
        late = [op for op, (_f, t) in self.pending.items() if now - t > timeout]
        for op in late:
            fut, _t = self.pending.pop(op)
            if not fut.done():
                fut.set_exception(TimeoutError(f"no reply within {timeout} s"))


class RawProducer:
    """The raw sender (see above): ``--connections`` sockets per broker, ``--inflight``
    senders per socket, each with one request outstanding. Single messages only."""

    def __init__(self, args, route: c.Route, stats: ProduceStats):
        self.args = args
        self.queues = route.write_queues
        if not self.queues:
            raise c.BenchError(f"topic {route.topic} has no writable queue")
        self.stats = stats
        self.serialize = c.SERIALIZE_TYPES[args.serialize]
        self.body = (b"RocketMQ benchmark " * (args.size // 19 + 1))[: args.size]
        self.templates = {mq: _Template(self, mq) for mq in self.queues}
        self.conns: dict[tuple[str, int], _RawConnection] = {}
        self._rr = itertools.count()
        self._seq = itertools.count(1)
        self._opaque = itertools.count(_OPAQUE_BASE)
        self._stop = False
        self._budget: int | None = None

    async def _conn(self, addr: str, index: int) -> _RawConnection:
        conn = self.conns.get((addr, index))
        if conn is None or conn.lost is not None:
            host, _, port = addr.rpartition(":")
            _t, conn = await asyncio.get_running_loop().create_connection(_RawConnection, host, int(port))
            self.conns[(addr, index)] = conn
        return conn

    async def _worker(self, index: int) -> None:
        stats = self.stats
        loop = asyncio.get_running_loop()
        perf = time.perf_counter
        while not self._stop:
            if self._budget is not None:
                if self._budget <= 0:
                    return
                self._budget -= 1
            mq = self.queues[next(self._rr) % len(self.queues)]
            t0 = perf()
            try:
                conn = await self._conn(mq.broker_addr, index)
                opaque = next(self._opaque) & 0x7FFFFFFF
                fut = loop.create_future()
                conn.pending[opaque] = (fut, t0)
                conn.transport.write(self.templates[mq].build(opaque, next(self._seq), int(time.time() * 1000)))
                code, remark = await fut
            except Exception as exc:  # timeouts and connection errors count as "Send Failed"
                stats.send_failed += 1
                if self._budget is not None:
                    self._stop = True
                stats.last_error = f"{type(exc).__name__}: {exc}"
                await asyncio.sleep(0.05)
                continue
            stats.answered(code, remark, 1, (perf() - t0) * 1000.0)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            now = time.perf_counter()
            for conn in list(self.conns.values()):
                conn.expire(now, self.args.timeout)

    async def _run(self, count: int | None, duration: float | None) -> float:
        self._budget = count
        n = self.args.connections * self.args.inflight
        expirer = asyncio.create_task(self._expire())
        tasks = [asyncio.create_task(self._worker(i % self.args.connections)) for i in range(n)]
        started = time.perf_counter()
        try:
            if duration is not None:
                await asyncio.sleep(duration)
                self._stop = True
            await asyncio.gather(*tasks, return_exceptions=duration is not None)
        finally:
            self._stop = True
            expirer.cancel()
        return time.perf_counter() - started

    async def run(self, duration: float) -> float:
        return await self._run(None, duration)

    async def run_count(self, count: int) -> float:
        return await self._run(count, None)

    async def close(self) -> None:
        for conn in self.conns.values():
            if conn.transport is not None:
                conn.transport.close()


async def _reporter(stats: ProduceStats, interval: float, out) -> None:
    last = stats.snapshot()
    last_t = time.perf_counter()
    while True:
        await asyncio.sleep(interval)
        now = stats.snapshot()
        t = time.perf_counter()
        msgs, reqs, rt_total = (now[i] - last[i] for i in range(3))
        avg = rt_total / reqs if reqs else 0.0
        print(
            f"Current Time: {time.strftime('%Y-%m-%d %H:%M:%S')} Send TPS: {msgs / (t - last_t):.0f} "
            f"Max RT(ms): {stats.rt_max_ms:.0f} Average RT(ms): {avg:7.3f} "
            f"Send Failed: {stats.send_failed} Response Failed: {stats.response_failed}",
            file=out,
            flush=True,
        )
        last, last_t = now, t


def summarize(args, stats: ProduceStats, elapsed: float, cpu: c.CpuMeter) -> dict:
    rts = sorted(stats.rts)
    figures = {
        "bench": "produce",
        "topic": args.topic,
        "size": args.size,
        "connections": args.connections,
        "inflight": args.inflight,
        "batch": args.batch,
        "serialize": getattr(args, "serialize", "json"),
        "threads": getattr(args, "threads", None),
        "client": getattr(args, "client", "sdk"),
        "seconds": round(elapsed, 3),
        "messages": stats.messages_ok,
        "requests": stats.requests_ok,
        "tps": round(stats.messages_ok / elapsed, 1) if elapsed else 0.0,
        "mb_per_s": round(stats.messages_ok * args.size / elapsed / 1e6, 2) if elapsed else 0.0,
        "rt_ms_avg": round(stats.rt_total_ms / stats.requests_ok, 3) if stats.requests_ok else 0.0,
        "rt_ms_p50": round(c.percentile(rts, 0.50), 3),
        "rt_ms_p99": round(c.percentile(rts, 0.99), 3),
        "rt_ms_p999": round(c.percentile(rts, 0.999), 3),
        "rt_ms_max": round(stats.rt_max_ms, 3),
        "send_failed": stats.send_failed,
        "response_failed": stats.response_failed,
        "broker_cpu_s": None if cpu.seconds is None else round(cpu.seconds, 3),
        "broker_user_s": None if cpu.user_seconds is None else round(cpu.user_seconds, 3),
        "broker_system_s": None if cpu.system_seconds is None else round(cpu.system_seconds, 3),
        "broker_cpu_s_per_1m": None
        if cpu.per_million(stats.messages_ok) is None
        else round(cpu.per_million(stats.messages_ok), 2),
        # what the broker dirtied for the disk per message (record, ConsumeQueue unit, index)
        "broker_disk_kb_per_msg": None
        if cpu.write_bytes is None or not stats.messages_ok
        else round(cpu.write_bytes / stats.messages_ok / 1024, 3),
    }
    if stats.last_error:
        figures["last_error"] = stats.last_error
    return figures


def print_summary(f: dict, out=None) -> None:
    out = out or sys.stdout
    print(
        f"[Complete] Send Total: {f['messages']} Send TPS: {f['tps']:.0f} MB/s: {f['mb_per_s']:.2f} "
        f"RT(ms) p50: {f['rt_ms_p50']:.3f} p99: {f['rt_ms_p99']:.3f} p999: {f['rt_ms_p999']:.3f} "
        f"max: {f['rt_ms_max']:.3f} Send Failed: {f['send_failed']} Response Failed: {f['response_failed']}",
        file=out,
        flush=True,
    )
    if f["broker_cpu_s"] is not None:
        print(
            f"Broker CPU: {f['broker_cpu_s']:.2f} s over the run"
            + (
                f" ({f['broker_user_s']:.2f} user, {f['broker_system_s']:.2f} system)"
                if f.get("broker_user_s") is not None
                else ""
            )
            + f", {f['broker_cpu_s_per_1m']:.2f} CPU-s per 1M messages",
            file=out,
            flush=True,
        )
    if f.get("last_error"):
        print(f"last error: {f['last_error']}", file=out, flush=True)


async def produce(args, quiet: bool = False) -> dict:
    """Run the produce benchmark with parsed ``args``; return the figures."""
    namesrv = c.namesrv_list(args.namesrv)
    admin = c.client(args, namesrv)
    try:
        route = await c.ensure_topic(admin, args.topic, args.queues, timeout=args.timeout)
    finally:
        await admin.close()
    stats = ProduceStats()
    if getattr(args, "client", "sdk") == "raw":
        producer = RawProducer(args, route, stats)
    else:
        producer = Producer(args, route, stats, namesrv)
    cpu = c.CpuMeter(args.broker_pid)
    reporter = None if quiet else asyncio.create_task(_reporter(stats, args.interval, sys.stdout))
    cpu.start()
    try:
        if args.count is not None:
            elapsed = await producer.run_count(args.count)
        else:
            elapsed = await producer.run(args.duration)
    finally:
        cpu.stop()
        if reporter:
            reporter.cancel()
        await producer.close()
    return summarize(args, stats, elapsed, cpu)


REPEAT_FIGURES = ("tps", "broker_cpu_s_per_1m", "rt_ms_p99")


async def _one_round(args) -> dict:
    """A fresh ``rmq standalone``, one produce run against it with its CPU measured."""
    standalone = c.Standalone(extra_args=list(args.broker_arg), tree=args.tree)
    await standalone.start()
    try:
        rargs = copy.copy(args)
        rargs.namesrv, rargs.broker_pid = standalone.namesrv_addr, standalone.pid
        return await produce(rargs, quiet=True)
    finally:
        await asyncio.get_running_loop().run_in_executor(None, standalone.cleanup)


def run_repeat(args) -> int:
    """``--repeat K``: K rounds against fresh brokers, then the median (min–max) of each figure."""
    rounds: list[dict] = []
    for k in range(args.repeat):
        load = os.getloadavg()
        try:
            fig = c.run(_one_round(args))
        except (c.BenchError, OSError) as exc:
            print(f"error: round {k + 1}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        fig["load_before"] = [round(x, 2) for x in load]
        rounds.append(fig)
        print(
            f"round {k + 1}/{args.repeat}: tps {fig['tps']:.0f} broker CPU-s/1M {fig['broker_cpu_s_per_1m']} "
            f"p99 {fig['rt_ms_p99']:.3f} ms failed {fig['send_failed'] + fig['response_failed']} "
            f"(load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
            flush=True,
        )
    summary: dict = {
        "bench": "produce-repeat",
        "rounds": args.repeat,
        "serialize": args.serialize,
        "threads": args.threads,
        "connections": args.connections,
        "inflight": args.inflight,
        "batch": args.batch,
        "size": args.size,
        "tree": args.tree or ".",
        "broker_args": list(args.broker_arg),
        "runs": rounds,
    }
    for f in REPEAT_FIGURES:
        values = [r[f] for r in rounds if isinstance(r.get(f), (int, float))]
        if values:
            summary[f] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
            print(
                f"{f}: median {statistics.median(values):g} ({min(values):g}–{max(values):g}) "
                f"over {len(values)} rounds",
                flush=True,
            )
    if args.json:
        c.print_json(summary)
    ok = all(r["messages"] and not r["send_failed"] + r["response_failed"] for r in rounds)
    return 0 if ok else 1


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.repeat is not None:
        return run_repeat(args)
    return c.bench_main(
        args, produce(args), print_summary, lambda f: f["messages"] and not f["send_failed"] + f["response_failed"]
    )


if __name__ == "__main__":
    sys.exit(main())
