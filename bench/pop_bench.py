"""POP benchmark: receive+ack throughput and broker CPU per 1M messages of RocketMQ 5's POP
consumption beside the 4.x PULL drain, through the rmq SDK.

    .venv/bin/python bench/pop_bench.py                          # own `rmq standalone`, 3 rounds
    .venv/bin/python bench/pop_bench.py --backlog 200000 --rounds 3 --json
    .venv/bin/python bench/pop_bench.py --namesrv 127.0.0.1:9876 --broker-pid 1234

One topic is prefilled with ``--backlog`` messages of ``--size`` bytes (batch sends, not
measured). Each round then drains all of it once per mode, each mode with a new consumer group
from the first message, so every mode reads the same prefill:

  pull    ``rmq.PushConsumer`` (4.x PULL: client rebalance, offsets committed every 5 s), a
          no-op handler: msgs/s from start() to the last message handled.
  pop     ``rmq.PushConsumer(consume_mode=POP)``: popped (batches of 32), handled, each acked
          (ACK_MESSAGE): msgs/s until the last ack is answered.
  simple  ``rmq.SimpleConsumer``: ``--simple-receivers`` tasks each ``receive(32)`` and ack
          every message: msgs/s until the last ack is answered.

Figures per mode: the median of ``--rounds`` with min–max, of msgs/s and of broker CPU-seconds
per 1M messages (the broker process's utime+stime over the window, from /proc; the own broker
or ``--broker-pid``). Figures are printed, never asserted. The lead measures on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _common as c
from sdk_bench import create_topic, prefill

import rmq

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
MODES = ("pull", "pop", "simple")


async def _drain_push(namesrv: str, topic: str, backlog: int, group: str, *, pop: bool, concurrency: int) -> int:
    done = asyncio.Event()
    seen: set[tuple[int, int]] = set()

    async def handler(msg: rmq.MessageExt) -> None:
        seen.add((msg.queue_id, msg.queue_offset))
        if len(seen) >= backlog:
            done.set()

    consumer = rmq.PushConsumer(
        namesrv,
        group,
        handler=handler,
        consume_from_where=FIRST,
        consume_concurrency=concurrency,
        consume_mode=rmq.ConsumeMode.POP if pop else rmq.ConsumeMode.PULL,
    )
    consumer.subscribe(topic)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout=max(120.0, backlog / 300))
    except TimeoutError:
        pass
    finally:
        # close() waits for the acks in flight: the POP window ends with the last ack answered
        await consumer.close()
    return len(seen)


async def _drain_simple(namesrv: str, topic: str, backlog: int, group: str, receivers: int) -> int:
    seen: set[tuple[int, int]] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(120.0, backlog / 300)
    done = asyncio.Event()
    async with rmq.SimpleConsumer(namesrv, group, {topic: "*"}, await_duration=2.0, consume_from_where=FIRST) as sc:

        async def receiver() -> None:
            while len(seen) < backlog:
                msgs = await sc.receive(32, 60.0)
                await asyncio.gather(*(sc.ack(m) for m in msgs))
                seen.update((m.queue_id, m.queue_offset) for m in msgs)
            done.set()

        tasks = [asyncio.create_task(receiver()) for _ in range(receivers)]
        try:
            # the window ends with the last ack answered, not with the other receivers' held polls
            await asyncio.wait_for(done.wait(), timeout=max(1.0, deadline - loop.time()))
        except TimeoutError:
            pass
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return len(seen)


async def one_mode(mode: str, args: argparse.Namespace, namesrv: str, topic: str, pid: int | None, rnd: int) -> dict:
    group = f"PopBench_{mode}_{rnd}_{os.getpid()}"
    cpu0 = c.cpu_seconds_or_none(pid)
    t0 = time.monotonic()
    if mode == "simple":
        n = await _drain_simple(namesrv, topic, args.backlog, group, args.simple_receivers)
    else:
        n = await _drain_push(
            namesrv, topic, args.backlog, group, pop=mode == "pop", concurrency=args.consume_concurrency
        )
    elapsed = time.monotonic() - t0
    cpu1 = c.cpu_seconds_or_none(pid)
    fig: dict = {"mode": mode, "round": rnd, "consumed": n, "seconds": round(elapsed, 3)}
    fig["msgs_per_s"] = round(n / elapsed, 1) if elapsed else 0.0
    if cpu0 is not None and cpu1 is not None and n:
        fig["broker_cpu_s_per_1M"] = round((cpu1 - cpu0) / n * 1e6, 1)
    return fig


def summarize(runs: list[dict]) -> list[dict]:
    out = []
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        s: dict = {"mode": mode, "rounds": len(mine), "complete": all(r["consumed"] >= r["backlog"] for r in mine)}
        for key in ("msgs_per_s", "broker_cpu_s_per_1M"):
            vals = [r[key] for r in mine if key in r]
            if vals:
                s[key] = {"median": round(statistics.median(vals), 1), "min": min(vals), "max": max(vals)}
        out.append(s)
    return out


async def main(args: argparse.Namespace) -> dict:
    proc = None
    namesrv, pid = args.namesrv, args.broker_pid
    if not namesrv:
        from rmq._testing import StandaloneProcess

        store = tempfile.mkdtemp(prefix="rmq-pop-bench-")
        proc = StandaloneProcess(os.path.join(store, "store"))
        proc.start()
        namesrv, pid = proc.namesrv_addr, proc.pid
        print(f"# rmq standalone pid {proc.pid}: namesrv {namesrv}, store {store}", file=sys.stderr)
    runs: list[dict] = []
    try:
        topic = f"PopBench_{os.getpid()}_{int(time.time())}"
        await create_topic(namesrv, topic, args.queues)
        t = time.monotonic()
        await prefill(namesrv, topic, args.size, args.backlog)
        print(f"# prefilled {args.backlog} x {args.size} B in {time.monotonic() - t:.1f} s", file=sys.stderr)
        for rnd in range(args.rounds):
            for mode in args.modes:
                fig = await one_mode(mode, args, namesrv, topic, pid, rnd)
                fig["backlog"] = args.backlog
                runs.append(fig)
                cpu = fig.get("broker_cpu_s_per_1M")
                print(
                    f"round {rnd} {mode:<6} {fig['consumed']}/{args.backlog} in {fig['seconds']:.1f} s: "
                    f"{fig['msgs_per_s']:>9.1f} msgs/s"
                    + (f", broker {cpu:.1f} CPU-s per 1M" if cpu is not None else ""),
                    flush=True,
                )
    finally:
        if proc is not None:
            proc.stop()
    summary = summarize(runs)
    for s in summary:
        rate = s.get("msgs_per_s", {})
        cpu = s.get("broker_cpu_s_per_1M")
        print(
            f"{s['mode']:<6} median {rate.get('median', 0):>9.1f} msgs/s ({rate.get('min')}–{rate.get('max')})"
            + (f", broker {cpu['median']:.1f} CPU-s per 1M ({cpu['min']}–{cpu['max']})" if cpu else "")
            + ("" if s["complete"] else "  INCOMPLETE")
        )
    result = {
        "bench": "pop",
        "size": args.size,
        "backlog": args.backlog,
        "queues": args.queues,
        "load_avg": os.getloadavg(),
        "summary": summary,
        "runs": runs,
    }
    if args.json:
        print(json.dumps(result))
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namesrv", help="use this name server (default: start rmq standalone)")
    ap.add_argument("--broker-pid", type=int, help="broker pid for CPU accounting")
    ap.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    ap.add_argument("--queues", type=int, default=4, help="queues of the bench topic (default 4)")
    ap.add_argument("--backlog", type=int, default=100_000, help="prefilled messages (default 100000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds; figures are their medians (default 3)")
    ap.add_argument(
        "--modes",
        default=",".join(MODES),
        type=lambda s: [m for m in s.split(",") if m],
        help="comma-separated of pull, pop, simple (default all)",
    )
    ap.add_argument("--consume-concurrency", type=int, default=20, help="push handler tasks (default 20)")
    ap.add_argument("--simple-receivers", type=int, default=4, help="SimpleConsumer receive tasks (default 4)")
    ap.add_argument("--uvloop", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--json", action="store_true", help="print one JSON line with all figures")
    args = ap.parse_args(argv)
    bad = [m for m in args.modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    return args


if __name__ == "__main__":
    a = parse_args()
    if a.uvloop:
        import uvloop

        uvloop.run(main(a))
    else:
        asyncio.run(main(a))
