"""Master and slave as real daemons (``rmq standalone`` + ``rmq broker``): kill -9 of a
SYNC_MASTER under load loses no acknowledged message; a bad peer on the HA port hurts neither
a client of the master nor the real slave."""

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys
import threading

import pytest

from rmq._testing import NoisyNeighbour, StandaloneProcess, free_port, wait_for_port, wait_until
from rmq._testing.env import BrokerEnv, phy_offset
from rmq.protocol.codes import ResponseCode
from rmq.protocol.requests.broker import get_broker_runtime_info, parse_kv_table
from rmq.remoting.client import RemotingClient
from rmq.store import MessageStore, StoreConfig

FILE_SIZE = 1024 * 1024
SIZES = [
    f"--mappedFileSizeCommitLog={FILE_SIZE}",
    "--mappedFileSizeConsumeQueue=60000",
    "--maxHashSlotNum=20000",
    "--maxIndexNum=80000",
]


class SlaveProcess:
    """``python -m rmq broker`` as the slave of ``namesrv`` (brokerId 1 of ``b1``)."""

    def __init__(self, store_dir, namesrv_addr: str):
        self.store_dir = str(store_dir)
        self.namesrv_addr = namesrv_addr
        self.port = free_port()
        self.log_path = self.store_dir + ".log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "SlaveProcess":
        os.makedirs(self.store_dir, exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "rmq",
            "broker",
            f"--listenPort={self.port}",
            "--brokerName=b1",
            "--brokerId=1",
            "--brokerRole=SLAVE",
            f"--namesrvAddr={self.namesrv_addr}",
            f"--storePathRootDir={self.store_dir}",
            "--brokerIP1=127.0.0.1",
            *SIZES,
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not wait_for_port("127.0.0.1", self.port):
            with open(self.log_path, errors="replace") as f:
                raise RuntimeError(f"slave did not start: {f.read()[-2000:]}")
        return self

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture
def pair(tmp_path):
    procs = []

    def start(role: str):
        ha_port = free_port()
        master = StandaloneProcess(
            tmp_path / "master",
            extra_args=[f"--brokerRole={role}", "--brokerName=b1", f"--haListenPort={ha_port}", *SIZES],
        ).start()
        procs.append(master)
        slave = SlaveProcess(tmp_path / "slave", master.namesrv_addr).start()
        procs.append(slave)
        return master, slave, ha_port

    yield start
    for p in reversed(procs):
        p.stop()


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    return parse_kv_table(await client.invoke(addr, get_broker_runtime_info(), timeout=5))


async def test_kill_9_sync_master_every_acked_message_is_on_the_slave(pair, tmp_path):
    master, slave, _ha = pair("SYNC_MASTER")
    client = RemotingClient()
    env = BrokerEnv(None, None, client, broker_addr=master.broker_addr, namesrv_addr=master.namesrv_addr)
    try:
        await env.create_topic("KT", 4)

        async def replicated_send() -> bool:
            r = await env.send("KT", b"probe", 0)
            return r.code == ResponseCode.SUCCESS

        await wait_until(replicated_send, 60, what="a send acknowledged by the slave")
        acked: dict[int, bytes] = {}
        stop = asyncio.Event()

        async def producer(n: int) -> None:
            i = 0
            while not stop.is_set():
                body = b"p%d-%06d-" % (n, i) + b"x" * 200
                try:
                    r = await env.send("KT", body, i % 4, wait_dispatch=False)
                except Exception:
                    return  # the master is gone
                if r.code == ResponseCode.SUCCESS:
                    acked[phy_offset(r.ext_fields["msgId"])] = body
                i += 1

        tasks = [asyncio.create_task(producer(n)) for n in range(4)]
        await wait_until(lambda: len(acked) >= 300, 60, what="300 acknowledged sends")
        os.kill(master.pid, signal.SIGKILL)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        stop.set()
        assert len(acked) >= 300
    finally:
        await client.close()
    assert slave.stop() == 0
    # open the slave's store: every acknowledged message is there at its offset
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(tmp_path / "slave"),
            broker_role="SLAVE",
            mapped_file_size_commitlog=FILE_SIZE,
            mapped_file_size_consume_queue=60000,
            max_hash_slot_num=20000,
            max_index_num=80000,
        ),
        ("127.0.0.1", 1),
    )
    await store.start()
    try:
        missing = [
            off for off, body in acked.items() if (m := store.look_message_by_offset(off)) is None or m.body != body
        ]
        assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages are not on the slave"
    finally:
        await store.shutdown()


def _garbage_peer(port: int, stop: threading.Event, done: list[int]) -> None:
    """Connects again and again to the HA port: garbage, a huge offset, half reports, a report
    of 0 then no reads at all. ``done[0]`` counts the connections made."""
    payloads = [b"\xff" * 64, struct.pack(">q", 1 << 62), b"\x00\x00\x00", bytes(8)]
    held = []
    i = 0
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(payloads[i % len(payloads)])
            if i % len(payloads) == 3 and len(held) < 20:
                held.append(s)  # a "slave" that never reads what it asked for
            else:
                s.close()
            i += 1
            done[0] = i
        except OSError:
            pass
        stop.wait(0.002)  # the bad peer's pace: about 500 connections a second
    for s in held:
        s.close()


async def test_bad_peer_on_the_ha_port_hurts_neither_clients_nor_the_slave(pair):
    master, slave, ha_port = pair("ASYNC_MASTER")
    client = RemotingClient()
    env = BrokerEnv(None, None, client, broker_addr=master.broker_addr, namesrv_addr=master.namesrv_addr)
    stop = threading.Event()
    made = [0]
    try:
        await env.create_topic("NT", 1)
        await wait_until(lambda: _connected(client, slave.addr), 60, what="the slave following the master")
        bad = asyncio.get_running_loop().run_in_executor(None, _garbage_peer, ha_port, stop, made)
        try:
            with NoisyNeighbour(master.broker_addr) as probe:
                for i in range(300):
                    r = await env.send("NT", b"n%d" % i + b"." * 500)
                    assert r.code == ResponseCode.SUCCESS
                # the bad peer goes on for 200 more connections while the probe measures
                target = made[0] + 200
                await wait_until(lambda: made[0] >= target, 60, what="200 more bad connections")
            assert probe.worst < 2.0, probe.summary()
        finally:
            stop.set()
            await bad

        await wait_until(lambda: _same_end(client, master.broker_addr, slave.addr), 60, what="the slave caught up")
        s = await runtime(client, slave.addr)
        assert s["haConnectTimes"] == "1", s  # the real slave was never dropped
        m = await runtime(client, master.broker_addr)
        assert int(m["haConnectionCount"]) >= 1
    finally:
        await client.close()


async def _same_end(client: RemotingClient, master_addr: str, slave_addr: str) -> bool:
    """Master and slave report the same CommitLog end (False while either cannot answer)."""
    try:
        m, s = await runtime(client, master_addr), await runtime(client, slave_addr)
    except Exception:
        return False
    return m["commitLogMaxOffset"] == s["commitLogMaxOffset"]


async def _connected(client: RemotingClient, addr: str) -> bool:
    try:
        return (await runtime(client, addr)).get("haMasterConnected") == "true"
    except Exception:
        return False


def _commitlog(store_dir, end: int) -> bytes:
    d = os.path.join(str(store_dir), "commitlog")
    out = bytearray()
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out += f.read()
    assert int(sorted(os.listdir(d))[0]) == 0
    return bytes(out[:end])


async def test_slave_kill_9_and_restart_while_traffic_runs(pair, tmp_path):
    master, slave, _ha = pair("ASYNC_MASTER")
    client = RemotingClient()
    env = BrokerEnv(None, None, client, broker_addr=master.broker_addr, namesrv_addr=master.namesrv_addr)
    try:
        await env.create_topic("RT", 2)
        await wait_until(lambda: _connected(client, slave.addr), 60, what="the slave following the master")
        sent = 0
        stop = asyncio.Event()

        async def producer() -> None:
            nonlocal sent
            while not stop.is_set():
                r = await env.send("RT", b"r%06d" % sent + b"." * 300, sent % 2, wait_dispatch=False)
                assert r.code == ResponseCode.SUCCESS, r.remark
                sent += 1

        task = asyncio.create_task(producer())
        await wait_until(lambda: sent >= 500, 60)
        slave.proc.kill()  # kill -9 while traffic runs
        slave.proc.wait()
        at_kill = sent
        await wait_until(lambda: sent >= at_kill + 500, 60)
        slave.start()  # same store, same port: recovers, resumes at its end
        await wait_until(lambda: _connected(client, slave.addr), 60, what="the restarted slave following")
        await wait_until(lambda: sent >= at_kill + 1500, 60)
        stop.set()
        await task

        await wait_until(lambda: _same_end(client, master.broker_addr, slave.addr), 60, what="the slave caught up")
        end = int((await runtime(client, master.broker_addr))["commitLogMaxOffset"])
    finally:
        await client.close()
    assert slave.stop() == 0
    assert master.stop() == 0
    # no gap, no duplicate: the slave's CommitLog is the master's, byte for byte
    assert _commitlog(tmp_path / "slave", end) == _commitlog(tmp_path / "master", end)


async def test_master_kill_9_and_restart_while_traffic_runs(pair, tmp_path):
    master, slave, _ha_port = pair("ASYNC_MASTER")
    client = RemotingClient()
    env = BrokerEnv(None, None, client, broker_addr=master.broker_addr, namesrv_addr=master.namesrv_addr)
    try:
        await env.create_topic("MT", 2)
        await wait_until(lambda: _connected(client, slave.addr), 60, what="the slave following the master")
        stored = 0
        stop = asyncio.Event()

        async def producer() -> None:
            nonlocal stored
            while not stop.is_set():
                try:
                    r = await env.send("MT", b"m%06d" % stored + b"." * 300, stored % 2, wait_dispatch=False)
                except Exception:
                    # the master is down: send again once it accepts connections
                    host, port = master.broker_addr.rsplit(":", 1)
                    await asyncio.to_thread(wait_for_port, host, int(port), 60.0)
                    continue
                if r.code == ResponseCode.SUCCESS:
                    stored += 1

        task = asyncio.create_task(producer())
        await wait_until(lambda: stored >= 500, 60)
        os.kill(master.pid, signal.SIGKILL)  # kill -9 while traffic runs
        master.proc.wait()
        at_kill = stored
        master._fixed_ports = (master.namesrv_port, master.broker_port)
        master.start()  # same ports, same store: recovers, serves the slave
        await wait_until(lambda: stored >= at_kill + 500, 90, what="traffic after the master's restart")
        stop.set()
        await task

        await wait_until(
            lambda: _same_end(client, master.broker_addr, slave.addr),
            60,
            what="the slave caught up with the restarted master",
        )
        end = int((await runtime(client, master.broker_addr))["commitLogMaxOffset"])
    finally:
        await client.close()
    assert slave.stop() == 0
    assert master.stop() == 0
    assert _commitlog(tmp_path / "slave", end) == _commitlog(tmp_path / "master", end)
