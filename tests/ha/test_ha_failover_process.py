"""Automatic failover with real processes (docs/design.md "Controller mode"): etcd, ``rmq
controller``, a master and a slave ``rmq broker`` in controller mode. SYNC sends acknowledged
by every in-sync replica, ``kill -9`` of the master, the slave elected, rmq's producer and push
consumer carry on through the name server without being told, every acknowledged message is
consumed, and the old master, restarted, rejoins as a slave after truncating to the last
common epoch. Prints the failover time."""

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import pytest

import rmq
from rmq._testing import free_broker_port, run_namesrv, wait_for_port, wait_until
from rmq._testing.controller import ControllerProcess
from rmq._testing.etcd import EtcdProcess, etcd_missing
from rmq.errors import RMQError
from rmq.protocol.body.controller import EpochEntryCache
from rmq.protocol.requests.broker import get_broker_runtime_info, parse_kv_table
from rmq.protocol.requests.controller import get_broker_epoch_cache, get_replica_info, parse_replica_info
from rmq.remoting.client import RemotingClient

pytestmark = [pytest.mark.skipif(etcd_missing() is not None, reason=str(etcd_missing())), pytest.mark.slow]

NAME = "bf"
TOPIC = "TopicAutoFailover"
GROUP = "CID_autofailover"


class ControllerModeBroker:
    """``python -m rmq broker`` in controller mode, on a fixed port (a restart comes back there)."""

    def __init__(self, store_dir, namesrv: str, controller: str):
        self.store_dir = str(store_dir)
        self.namesrv = namesrv
        self.controller = controller
        self.port = free_broker_port()
        self.log_path = self.store_dir + ".log"
        self.proc: subprocess.Popen | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ControllerModeBroker":
        os.makedirs(self.store_dir, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "rmq",
            "broker",
            f"--listenPort={self.port}",
            f"--brokerName={NAME}",
            "--brokerRole=SYNC_MASTER",
            "--enableControllerMode=true",
            f"--controllerAddr={self.controller}",
            "--allAckInSyncStateSet=true",
            f"--namesrvAddr={self.namesrv}",
            f"--storePathRootDir={self.store_dir}",
            "--brokerIP1=127.0.0.1",
            "--syncBrokerMetadataPeriod=200",
            "--checkSyncStateSetPeriod=200",
            "--brokerHeartbeatInterval=200",
            "--controllerHeartBeatTimeoutMills=1500",
            "--slaveSyncIntervalMs=200",
            "--haSendHeartbeatInterval=200",
            "--registerNameServerPeriod=1000",
            "--metricsPort=0",
            "--mappedFileSizeCommitLog=1048576",
            "--mappedFileSizeConsumeQueue=60000",
            "--maxHashSlotNum=20000",
            "--maxIndexNum=80000",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not wait_for_port("127.0.0.1", self.port):
            raise RuntimeError(f"broker did not start: {self.log()[-3000:]}")
        return self

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def replica_info(rc: RemotingClient, controller: str):
    return parse_replica_info(await rc.invoke(controller, get_replica_info(NAME), timeout=3.0))


async def runtime(rc: RemotingClient, addr: str) -> dict[str, str]:
    return parse_kv_table(await rc.invoke(addr, get_broker_runtime_info(), timeout=3.0))


async def test_kill_9_of_the_master_fails_over_and_the_old_master_rejoins(tmp_path):
    etcd = EtcdProcess(tmp_path / "etcd").start()
    ctl = ControllerProcess(
        tmp_path / "ctl", etcd.endpoint, scanNotActiveBrokerInterval=100, controllerHeartBeatTimeoutMills=1500
    ).start()
    brokers: list[ControllerModeBroker] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            ns = await stack.enter_async_context(run_namesrv())
            nsaddr = f"127.0.0.1:{ns.port}"
            rc = await stack.enter_async_context(RemotingClient())
            a = await asyncio.to_thread(ControllerModeBroker(tmp_path / "a", nsaddr, ctl.addr).start)
            brokers.append(a)

            async def master_is(addr):
                try:
                    h, sss = await replica_info(rc, ctl.addr)
                except RMQError:  # not registered yet
                    return None
                return (h, sss) if h.master_address == addr else None

            await wait_until(lambda: master_is(a.addr), timeout=30, what="a elected")
            b = await asyncio.to_thread(ControllerModeBroker(tmp_path / "b", nsaddr, ctl.addr).start)
            brokers.append(b)

            async def isr_full():
                _h, sss = await replica_info(rc, ctl.addr)
                return len(sss.sync_state_set) == 2

            await wait_until(isr_full, timeout=30, what="b in the controller's SyncStateSet")
            admin = await stack.enter_async_context(rmq.Admin(nsaddr, timeout=10))
            await admin.create_and_update_topic_config(a.addr, TOPIC, read_queue_nums=4, write_queue_nums=4)

            received: set[bytes] = set()

            async def handler(msg):
                received.add(msg.body)

            consumer = rmq.PushConsumer(
                nsaddr, GROUP, handler=handler, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            )
            consumer.subscribe(TOPIC, "*")
            await stack.enter_async_context(consumer)
            producer = await stack.enter_async_context(rmq.Producer(nsaddr, "PID_autofailover", send_timeout=3))
            acked: list[tuple[float, bytes]] = []
            failed = 0
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()

            async def produce():
                nonlocal failed
                i = 0
                while not stop.is_set():
                    body = b"m-%06d" % i
                    i += 1
                    try:
                        r = await producer.send(rmq.Message(TOPIC, body))
                    except RMQError:
                        failed += 1
                        await asyncio.sleep(0.05)  # a paced retry loop, not a synchronization
                        continue
                    if r.status == rmq.SendStatus.SEND_OK:
                        acked.append((loop.time(), body))

            task = asyncio.create_task(produce())
            await wait_until(lambda: len(acked) >= 100, timeout=30, what="100 acknowledged sends")
            # every SYNC acknowledgement waited for b: b has all a has acknowledged
            a_info, b_info = await runtime(rc, a.addr), await runtime(rc, b.addr)
            assert int(b_info["commitLogMaxOffset"]) > 0 and a_info["brokerRole"] == "SYNC_MASTER"

            await asyncio.to_thread(a.kill9)  # (returns once the process is gone)
            killed_at = loop.time()
            await wait_until(lambda: master_is(b.addr), timeout=60, what="b elected")
            elected = loop.time() - killed_at
            n = len(acked)
            await wait_until(lambda: len(acked) > n + 50, timeout=60, what="sends acknowledged by the new master")
            resumed = next(t for t, _ in acked if t > killed_at) - killed_at
            print(
                f"\nfailover after kill -9 of the master: new master elected in {elected:.2f}s, "
                f"SYNC sends acknowledged again {resumed:.2f}s after the kill ({failed} sends failed meanwhile)"
            )
            b_info = await runtime(rc, b.addr)
            assert b_info["brokerRole"] == "SYNC_MASTER" and b_info["masterEpoch"] == "2"
            assert b_info["controllerBrokerId"] == "2"

            # the old master comes back: it rejoins as a slave of b, truncating to the common epoch
            await asyncio.to_thread(a.start)  # (the name server runs on this loop)
            await wait_until(isr_full, timeout=60, what="a back in the SyncStateSet")
            h, _sss = await replica_info(rc, ctl.addr)
            assert h.master_address == b.addr
            n = len(acked)
            await wait_until(lambda: len(acked) > n + 20, timeout=30, what="sends with a as slave")
            stop.set()
            await task
            want = {body for _, body in acked}
            await wait_until(lambda: want <= received, timeout=90, what="every acknowledged message consumed")

            async def same_end():
                ai, bi = await runtime(rc, a.addr), await runtime(rc, b.addr)
                return ai["commitLogMaxOffset"] == bi["commitLogMaxOffset"] and ai["brokerRole"] == "SLAVE"

            await wait_until(same_end, timeout=30, what="a caught up with b")
            assert "is now a slave of" in a.log()
            # a holds b's epoch: its epoch file says where epoch 2 (b's) starts
            cache = EpochEntryCache.decode((await rc.invoke(a.addr, get_broker_epoch_cache())).body_bytes())
            assert [e.epoch for e in cache.epoch_list] == [1, 2] and cache.broker_id == 1
    finally:
        for br in brokers:
            br.stop()
        ctl.stop()
        etcd.stop()
