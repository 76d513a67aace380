"""SDK benchmark: producer send throughput and push-consumer drain throughput of the rmq SDK.

Measures what a Python application sees through ``rmq.Producer`` / ``rmq.PushConsumer`` (route
cache, queue selection, UNIQ_KEY, properties encoding, decoding of pulled records, process
queues, offset commits), not the raw protocol (``produce_bench.py`` / ``pull_bench.py`` do that).

    .venv/bin/python bench/sdk_bench.py                      # own `rmq standalone`, all phases
    .venv/bin/python bench/sdk_bench.py --namesrv 127.0.0.1:9876 --phases send
    .venv/bin/python bench/sdk_bench.py --backlog 200000 --json

Phases:
  send   1 KiB messages with 1 send in flight, then with 16 (``--concurrency 1,16``), each for
         ``--duration`` seconds: msgs/s and round-trip percentiles; ``--linger-ms 5`` lets the
         producer batch the sends in flight automatically (one SEND_BATCH_MESSAGE each).
  drain  prefill ``--backlog`` messages (batch sends, not measured), then a new PushConsumer
         group with a no-op handler drains them from the first offset: msgs/s from start() to
         the last message handled.

With ``--cpp-python PATH`` (the interpreter of a virtualenv holding PyPI ``rocketmq==0.4.4``, the
Apache C++ core; ``tests/interop`` installs one in ``~/.cache/rmq-interop/cpp-venv``) the same two
phases also run with the C++ client against the same broker, for a side-by-side figure. Its
Python wrapper has only a blocking ``send_sync``, so "16 in flight" is 16 threads.

Figures are printed, never asserted. With its own broker the daemon runs in a separate process
(``rmq standalone``) so broker and SDK do not share an interpreter; ``--broker-pid`` (or the own
broker) adds broker CPU-seconds per million messages.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common as c

import rmq
from rmq.remoting import RemotingClient


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * len(values) + 0.5) - 1))]


async def create_topic(namesrv: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on every master the name server knows."""
    async with RemotingClient(namesrv) as rc:
        for addr in (await c.master_brokers(rc, 5.0)).values():
            await c.create_topic(rc, addr, topic, queues, timeout=5.0)
    await asyncio.sleep(0.5)  # let the broker's registration reach the name server


async def send_phase(
    namesrv: str,
    topic: str,
    size: int,
    concurrency: int,
    duration: float,
    broker_pid: int | None,
    linger_ms: float = 0,
) -> dict:
    body = os.urandom(size // 2).hex().encode()[:size]
    latencies: list[float] = []
    failed = 0
    async with rmq.Producer(namesrv, f"SdkBenchPG_{concurrency}_{os.getpid()}", linger_ms=linger_ms) as p:
        await p.send(rmq.Message(topic, body))  # warm up: route, connection
        stop_at = time.monotonic() + duration
        cpu0 = c.cpu_seconds_or_none(broker_pid)

        async def worker() -> None:
            nonlocal failed
            msg = rmq.Message(topic, body, tags="bench")
            while time.monotonic() < stop_at:
                t0 = time.perf_counter()
                try:
                    await p.send(msg)
                except rmq.RMQError:
                    failed += 1
                    continue
                latencies.append(time.perf_counter() - t0)

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - t0
        cpu1 = c.cpu_seconds_or_none(broker_pid)
    n = len(latencies)
    fig = {
        "phase": "send",
        "concurrency": concurrency,
        "linger_ms": linger_ms,
        "size": size,
        "messages": n,
        "failed": failed,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(n / elapsed, 1),
        "rt_p50_ms": round(pct(latencies, 0.50) * 1000, 3),
        "rt_p99_ms": round(pct(latencies, 0.99) * 1000, 3),
    }
    if cpu0 is not None and cpu1 is not None and n:
        fig["broker_cpu_s_per_1M"] = round((cpu1 - cpu0) / n * 1e6, 1)
    return fig


async def prefill(namesrv: str, topic: str, size: int, count: int) -> None:
    body = os.urandom(size // 2).hex().encode()[:size]
    batch = max(1, min(256, (3 * 1024 * 1024) // (size + 200)))
    async with rmq.Producer(namesrv, f"SdkBenchFill_{os.getpid()}", send_timeout=10.0) as p:
        sem = asyncio.Semaphore(8)
        sent = 0

        async def one(n: int) -> None:
            async with sem:
                await p.send_batch([rmq.Message(topic, body, tags="bench")] * n)

        tasks = []
        while sent < count:
            n = min(batch, count - sent)
            tasks.append(asyncio.create_task(one(n)))
            sent += n
        await asyncio.gather(*tasks)


async def drain_phase(
    namesrv: str, topic: str, size: int, backlog: int, broker_pid: int | None, concurrency: int
) -> dict:
    t_fill = time.monotonic()
    await prefill(namesrv, topic, size, backlog)
    fill_s = time.monotonic() - t_fill
    done = asyncio.Event()
    count = 0
    seen: set[tuple[int, int]] = set()

    async def handler(msg: rmq.MessageExt) -> None:
        nonlocal count
        count += 1
        seen.add((msg.queue_id, msg.queue_offset))
        if len(seen) >= backlog:
            done.set()

    consumer = rmq.PushConsumer(
        namesrv,
        f"SdkBenchCG_{os.getpid()}",
        handler=handler,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_concurrency=concurrency,
    )
    consumer.subscribe(topic)
    cpu0 = c.cpu_seconds_or_none(broker_pid)
    t0 = time.monotonic()
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=max(120.0, backlog / 500))
    except TimeoutError:
        pass
    elapsed = time.monotonic() - t0
    cpu1 = c.cpu_seconds_or_none(broker_pid)
    await consumer.close()
    fig = {
        "phase": "drain",
        "size": size,
        "backlog": backlog,
        "consumed": count,
        "distinct": len(seen),
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(count / elapsed, 1),
        "prefill_seconds": round(fill_s, 1),
        "consume_concurrency": concurrency,
        "flow_controlled": consumer.stats["flow_controlled"],
    }
    if cpu0 is not None and cpu1 is not None and count:
        fig["broker_cpu_s_per_1M"] = round((cpu1 - cpu0) / count * 1e6, 1)
    return fig


# Runs under the C++ client's interpreter (imports nothing from rmq). argv: mode namesrv topic
# size param duration; prints one JSON line.
_CPP_SCRIPT = r"""
import json, os, sys, threading, time
from rocketmq.client import Message, Producer, PushConsumer
mode, namesrv, topic, size, param, duration = sys.argv[1:7]
size, param, duration = int(size), int(param), float(duration)
body = ("x" * size)
if mode == "send":
    p = Producer("SdkBenchCppPG_%d_%d" % (param, os.getpid()))
    p.set_namesrv_addr(namesrv)
    p.start()
    m = Message(topic); m.set_body(body); p.send_sync(m)   # warm up
    lat, lock, stop_at = [], threading.Lock(), time.monotonic() + duration
    def worker():
        mine = []
        while time.monotonic() < stop_at:
            msg = Message(topic); msg.set_body(body); msg.set_tags("bench")
            t0 = time.perf_counter(); p.send_sync(msg); mine.append(time.perf_counter() - t0)
        with lock: lat.extend(mine)
    ts = [threading.Thread(target=worker) for _ in range(param)]
    t0 = time.monotonic(); [t.start() for t in ts]; [t.join() for t in ts]; el = time.monotonic() - t0
    lat.sort()
    print(json.dumps({"messages": len(lat), "seconds": el, "p50": lat[len(lat)//2], "p99": lat[int(len(lat)*0.99)]}))
    sys.stdout.flush(); os._exit(0)
else:
    done, count, lock = threading.Event(), [0], threading.Lock()
    def cb(msg):
        with lock:
            count[0] += 1
            if count[0] >= param: done.set()
        return None
    c = PushConsumer("SdkBenchCppCG_%d" % os.getpid())
    c.set_namesrv_addr(namesrv)
    c.subscribe(topic, cb)
    t0 = time.monotonic(); c.start()
    done.wait(duration); el = time.monotonic() - t0
    print(json.dumps({"consumed": count[0], "seconds": el}))
    sys.stdout.flush(); os._exit(0)
"""


async def cpp_run(cpp_python: str, *argv: object, timeout: float) -> dict:
    proc = await asyncio.create_subprocess_exec(
        cpp_python,
        "-c",
        _CPP_SCRIPT,
        *map(str, argv),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith("{")]
    if not lines:
        raise SystemExit(f"the C++ client run {argv[:1]} printed nothing (exit {proc.returncode})")
    return json.loads(lines[-1])


async def cpp_phases(args: argparse.Namespace, namesrv: str, suffix: str) -> list[dict]:
    figures = []
    if "send" in args.phases:
        topic = f"SdkBenchCppSend_{suffix}"
        await create_topic(namesrv, topic, args.queues)
        for conc in args.concurrency:
            d = await cpp_run(
                args.cpp_python, "send", namesrv, topic, args.size, conc, args.duration, timeout=args.duration + 60
            )
            fig = {
                "phase": "send",
                "client": "cpp-0.4.4",
                "concurrency": conc,
                "messages": d["messages"],
                "seconds": round(d["seconds"], 3),
                "msgs_per_s": round(d["messages"] / d["seconds"], 1),
                "rt_p50_ms": round(d["p50"] * 1000, 3),
                "rt_p99_ms": round(d["p99"] * 1000, 3),
            }
            figures.append(fig)
            print(
                f"C++ send {conc:>3} threads: {fig['msgs_per_s']:>9.1f} msgs/s  p50 {fig['rt_p50_ms']:.2f} ms  "
                f"p99 {fig['rt_p99_ms']:.2f} ms",
                flush=True,
            )
    if "drain" in args.phases:
        topic = f"SdkBenchCppDrain_{suffix}"
        await create_topic(namesrv, topic, args.queues)
        await prefill(namesrv, topic, args.size, args.backlog)
        limit = max(120.0, args.backlog / 500)
        d = await cpp_run(args.cpp_python, "drain", namesrv, topic, args.size, args.backlog, limit, timeout=limit + 60)
        fig = {
            "phase": "drain",
            "client": "cpp-0.4.4",
            "backlog": args.backlog,
            "consumed": d["consumed"],
            "seconds": round(d["seconds"], 3),
            "msgs_per_s": round(d["consumed"] / d["seconds"], 1),
        }
        figures.append(fig)
        print(
            f"C++ drain {fig['consumed']}/{args.backlog} msgs in {fig['seconds']:.1f} s: "
            f"{fig['msgs_per_s']:.1f} msgs/s",
            flush=True,
        )
    return figures


async def main(args: argparse.Namespace) -> list[dict]:
    proc = None
    namesrv, broker_pid = args.namesrv, args.broker_pid
    if not namesrv:
        from rmq._testing import StandaloneProcess

        store = tempfile.mkdtemp(prefix="rmq-sdk-bench-")
        proc = StandaloneProcess(os.path.join(store, "store"))
        proc.start()
        namesrv, broker_pid = proc.namesrv_addr, proc.pid
        print(f"# rmq standalone pid {proc.pid}: namesrv {namesrv}, store {store}", file=sys.stderr)
    figures = []
    try:
        suffix = f"{os.getpid()}_{int(time.time())}"
        if "send" in args.phases:
            topic = f"SdkBenchSend_{suffix}"
            await create_topic(namesrv, topic, args.queues)
            for conc in args.concurrency:
                fig = await send_phase(namesrv, topic, args.size, conc, args.duration, broker_pid, args.linger_ms)
                figures.append(fig)
                print(
                    f"send  {conc:>3} in flight: {fig['msgs_per_s']:>9.1f} msgs/s  "
                    f"p50 {fig['rt_p50_ms']:.2f} ms  p99 {fig['rt_p99_ms']:.2f} ms  "
                    f"({fig['messages']} msgs, {fig['failed']} failed)",
                    flush=True,
                )
        if "drain" in args.phases:
            topic = f"SdkBenchDrain_{suffix}"
            await create_topic(namesrv, topic, args.queues)
            fig = await drain_phase(namesrv, topic, args.size, args.backlog, broker_pid, args.consume_concurrency)
            figures.append(fig)
            print(
                f"drain {fig['consumed']}/{fig['backlog']} msgs in {fig['seconds']:.1f} s: "
                f"{fig['msgs_per_s']:.1f} msgs/s (prefill {fig['prefill_seconds']} s)",
                flush=True,
            )
        if args.cpp_python:
            figures += await cpp_phases(args, namesrv, suffix)
    finally:
        if proc is not None:
            proc.stop()
    if args.json:
        print(json.dumps({"bench": "sdk", "figures": figures}))
    return figures


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namesrv", help="use this name server (default: start rmq standalone)")
    ap.add_argument("--broker-pid", type=int, help="broker pid for CPU accounting")
    ap.add_argument("--phases", default="send,drain", type=lambda s: s.split(","))
    ap.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    ap.add_argument("--queues", type=int, default=4, help="queues of the bench topics (default 4)")
    ap.add_argument(
        "--concurrency",
        default="1,16",
        type=lambda s: [int(x) for x in s.split(",")],
        help="sends in flight, comma-separated (default 1,16)",
    )
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per send run (default 10)")
    ap.add_argument(
        "--linger-ms",
        type=float,
        default=0,
        help="the send phase's Producer(linger_ms=): > 0 batches the in-flight sends automatically (default 0)",
    )
    ap.add_argument("--backlog", type=int, default=200_000, help="drain backlog (default 200000)")
    ap.add_argument("--consume-concurrency", type=int, default=20, help="handler tasks (default 20)")
    ap.add_argument("--cpp-python", help="interpreter of a venv with rocketmq==0.4.4: also measure the C++ client")
    ap.add_argument("--uvloop", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--json", action="store_true", help="print one JSON line with all figures")
    return ap.parse_args(argv)


if __name__ == "__main__":
    a = parse_args()
    if a.uvloop:
        import uvloop

        uvloop.run(main(a))
    else:
        asyncio.run(main(a))
