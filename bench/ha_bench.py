#!/usr/bin/env python3
"""Replication: produce rate, broker CPU and slave lag for ASYNC_MASTER vs SYNC_MASTER with one
slave on the same machine, and the replication throughput of a slave catching up.

    python bench/ha_bench.py [--roles ASYNC_MASTER,SYNC_MASTER] [--duration 10] [--size 1024]
        [--threads 32] [--file-size 268435456] [--json]

For each role: a fresh ``rmq standalone`` master (``--brokerRole=<role>``) and an ``rmq broker``
slave (brokerId 1) registered with its name server, on free ports; the slave must be following
before the run starts. Then:

* **produce**: ``produce_bench``'s raw sender (``--threads`` synchronous senders of ``--size``
  bytes over one connection, Java's benchmark Producer) for ``--duration`` seconds: msgs/s,
  p99 RT, master CPU-s and slave CPU-s per 1M messages (from /proc);
* **lag**: every 0.2 s the master's ``commitLogMaxOffset`` minus the slave's (both from
  GET_BROKER_RUNTIME_INFO): the mean and max lag in bytes during the run;
* **catch-up**: a second slave started empty against the loaded master (it starts at the
  master's last CommitLog file, as Java's) — MB/s and msgs/s of ``--size`` until it has the
  master's end.

Run it briefly on a shared machine (the defaults run about a minute in all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import _common as c
import produce_bench

from rmq._testing import free_port, wait_for_port, wait_until
from rmq.protocol.requests.broker import get_broker_runtime_info, parse_kv_table
from rmq.remoting.client import RemotingClient


class SlaveBroker:
    """``python -m rmq broker`` as brokerId 1 of ``b1`` following the name server's master."""

    def __init__(self, store_dir: str, namesrv_addr: str, file_size: int) -> None:
        self.store_dir = store_dir
        self.port = free_port()
        self.log_path = store_dir + ".log"
        self.cmd = [
            sys.executable,
            "-m",
            "rmq",
            "broker",
            f"--listenPort={self.port}",
            "--brokerName=b1",
            "--brokerId=1",
            "--brokerRole=SLAVE",
            f"--namesrvAddr={namesrv_addr}",
            f"--storePathRootDir={store_dir}",
            "--brokerIP1=127.0.0.1",
            f"--mappedFileSizeCommitLog={file_size}",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> SlaveBroker:
        os.makedirs(self.store_dir, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not wait_for_port("127.0.0.1", self.port, 30):
            raise c.BenchError(f"the slave did not start (log {self.log_path})")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    return parse_kv_table(await client.invoke(addr, get_broker_runtime_info(), timeout=5))


async def wait_following(client: RemotingClient, slave: SlaveBroker, timeout: float = 60.0) -> None:
    async def following() -> bool:
        try:
            return (await runtime(client, slave.addr)).get("haMasterConnected") == "true"
        except Exception:  # (not answering yet)
            return False

    try:
        await wait_until(following, timeout, interval=0.1, what="the slave following")
    except AssertionError:
        raise c.BenchError("the slave did not connect to the master's HA port") from None


async def one_role(args, role: str, root: str) -> dict:
    ha_port = free_port()
    master = c.Standalone(
        store_dir=os.path.join(root, role, "master"),
        extra_args=[
            f"--brokerRole={role}",
            "--brokerName=b1",
            f"--haListenPort={ha_port}",
            f"--mappedFileSizeCommitLog={args.file_size}",
        ],
    )
    await master.start()
    slave = SlaveBroker(os.path.join(root, role, "slave"), master.namesrv_addr, args.file_size).start()
    client = RemotingClient()
    late: SlaveBroker | None = None
    try:
        await wait_following(client, slave)
        lags: list[int] = []
        stop = asyncio.Event()

        async def sample_lag() -> None:
            while not stop.is_set():
                try:
                    m, s = await asyncio.gather(runtime(client, master.broker_addr), runtime(client, slave.addr))
                    lags.append(int(m["commitLogMaxOffset"]) - int(s["commitLogMaxOffset"]))
                except Exception:
                    pass
                with contextlib.suppress(TimeoutError):  # a sample every 0.2 s until stopped
                    async with asyncio.timeout(0.2):
                        await stop.wait()

        pargs = produce_bench.parse_args(
            [
                "--namesrv",
                master.namesrv_addr,
                "--topic",
                "HaBench",
                "--size",
                str(args.size),
                "--threads",
                str(args.threads),
                "--duration",
                str(args.duration),
                "--interval",
                "3600",
                "--broker-pid",
                str(master.pid),
            ]
        )
        slave_cpu = c.CpuMeter(slave.proc.pid if slave.proc else None)
        slave_cpu.start()
        sampler = asyncio.create_task(sample_lag())
        fig = await produce_bench.produce(pargs, quiet=True)
        stop.set()
        await sampler
        slave_cpu.stop()
        end = int((await runtime(client, master.broker_addr))["commitLogMaxOffset"])
        # catch-up: a new empty slave against the loaded master
        late = SlaveBroker(os.path.join(root, role, "late-slave"), master.namesrv_addr, args.file_size)
        late.port = free_port()
        late.cmd = [a if not a.startswith("--brokerId=") else "--brokerId=2" for a in late.cmd]
        late.cmd = [a if not a.startswith("--listenPort=") else f"--listenPort={late.port}" for a in late.cmd]
        late.start()
        # timed from the first bytes the late slave holds (not its process start) to the end
        first: tuple[float, int] | None = None

        async def caught_up() -> bool:
            nonlocal first
            try:
                at = int((await runtime(client, late.addr))["commitLogMaxOffset"])
            except Exception:  # (not answering yet)
                at = 0
            if at and first is None:
                first = (time.monotonic(), at)
            return at >= end

        try:
            await wait_until(caught_up, 120, interval=0.02, what="the late slave at the master's end")
        except AssertionError:
            raise c.BenchError("the late slave did not catch up in 120 s") from None
        assert first is not None
        catch_up_s = max(time.monotonic() - first[0], 1e-3)
        record = (end / fig["messages"]) if fig["messages"] else args.size
        caught = end - first[1]
        return {
            "role": role,
            "produce": fig,
            "tps": fig["tps"],
            "rt_ms_p99": fig["rt_ms_p99"],
            "master_cpu_s_per_1m": fig["broker_cpu_s_per_1m"],
            "slave_cpu_s_per_1m": None
            if slave_cpu.per_million(fig["messages"]) is None
            else round(slave_cpu.per_million(fig["messages"]), 2),
            "lag_bytes_mean": round(statistics.mean(lags)) if lags else None,
            "lag_bytes_max": max(lags) if lags else None,
            "catch_up_bytes": caught,
            "catch_up_s": round(catch_up_s, 3),
            # (None: the late slave had everything at the first look; run longer)
            "catch_up_mb_per_s": round(caught / catch_up_s / 1e6, 1) if caught else None,
            "catch_up_msgs_per_s": round(caught / record / catch_up_s) if caught else None,
        }
    finally:
        await client.close()
        if late is not None:
            late.stop()
        slave.stop()
        master.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ha_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--roles", default="ASYNC_MASTER,SYNC_MASTER")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of produce per role (default 10)")
    ap.add_argument("--size", type=int, default=1024, help="message body bytes (default 1024)")
    ap.add_argument("--threads", type=int, default=32, help="synchronous senders (default 32)")
    ap.add_argument(
        "--file-size",
        type=int,
        default=256 * 1024 * 1024,
        help="mappedFileSizeCommitLog of both brokers (default 256 MiB)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    root = tempfile.mkdtemp(prefix="rmq-ha-bench-")
    results = []
    try:
        for role in args.roles.split(","):
            load = os.getloadavg()
            r = c.run(one_role(args, role.strip(), root))
            r["load_before"] = [round(x, 2) for x in load]
            results.append(r)
            print(
                f"{r['role']}: {r['tps']:.0f} msgs/s, p99 {r['rt_ms_p99']:.2f} ms, master "
                f"{r['master_cpu_s_per_1m']} CPU-s/1M, slave {r['slave_cpu_s_per_1m']}"
                f" CPU-s/1M, lag mean {r['lag_bytes_mean']} max {r['lag_bytes_max']} bytes; catch-up "
                f"{r['catch_up_mb_per_s']} MB/s ({r['catch_up_msgs_per_s']} msgs/s of {args.size} B, "
                f"{r['catch_up_bytes']} bytes in {r['catch_up_s']} s) (load {load[0]:.2f})",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        c.print_json({"bench": "ha", "size": args.size, "threads": args.threads, "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
