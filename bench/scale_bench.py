"""Scale: many topics, groups and client connections against one broker (rmq or any RocketMQ).

Builds ``--topics`` topics × ``--queues`` queues on every master, ``--groups`` subscription groups
and ``--clients`` client connections that heartbeat (each a consumer of one group subscribed to
one topic, as Java's ``MQClientInstance.sendHeartbeatToAllBroker`` sends it; client i is in
group i mod groups, and all of a group's members subscribe to the same topic), then reports:

* broker RSS (MB) before and after, and idle broker CPU per minute with every client connected
  and heartbeating every ``--heartbeat-interval`` s (as real clients do, every 30 s);
* heartbeat cost: broker CPU-ms per 1000 heartbeats, over ``--heartbeat-rounds`` rounds of every
  client after a warm-up round (the first heartbeat of a group creates its retry topic);
* route queries: GET_ROUTEINFO_BY_TOPIC latency p50 / p99 over ``--route-queries`` random topics;
* registration at this size, against the name server: the RegisterBrokerBody of the broker's
  topic table in bytes, JSON and compressed (Java ``compressedRegister``), and the round trip of
  a full REGISTER_BROKER (new version), the same version again, QUERY_DATA_VERSION (what a
  broker that skips an unchanged table sends instead, Java ``needRegister``) and a compressed
  one; and the name server's CPU-ms per full and per compressed registration (its process
  CPU from /proc: rmq's name server this script starts, or ``--namesrv-pid``), which a loaded
  machine moves less than a round trip. A probe broker (cluster ``ScaleBenchProbe``, topics
  ``<prefix>Probe_*``, an address nobody listens on) registers (once first, not measured: that
  one builds every route) and unregisters for this (each new version with one topic's queue
  count changed, as a broker's table changes: a name server that compares tables pays for the
  change, not for an identical table); real
  routes are untouched;
* recovery (rmq started by this script only): a store of ``--store-gb`` GB (one topic, 8
  queues, 4 KiB messages each with its own UNIQ_KEY, as a Java producer sends them) restarted
  after a clean stop and after ``kill -9`` (0.05 GB more sent through the broker first):
  seconds from the broker's start to its first answer (GET_BROKER_RUNTIME_INFO), and the
  store's own "recovered in" figure from its log. The store is written with the broker stopped,
  in this process, through the store API the SEND_BATCH_MESSAGE path calls (batches of 256:
  the same records, queue units, index entries and checkpoint a broker writes; about the
  disk's write speed), or with ``--fill-by-producer`` by SEND_BATCH_MESSAGE to the broker;
* Java's recovery of the same store (``--java-home``, e.g. /work/java4 with its ``lib/*.jar``
  and ``--java-cp`` for its dependencies): after rmq's figures the rmq broker stops cleanly and
  Apache RocketMQ 4.9.8's broker starts on the store itself (its ``storePathRootDir``; no copy:
  the store is thrown away afterwards), then 0.05 GB more, ``kill -9`` and a start again; the
  same two figures, its store's from its store.log ("last shutdown ..." to "load over", Java
  ``DefaultMessageStore.load``). The disk guards are raised to 95/97/98 % for both (a store of
  tens of GB on a half-full disk would otherwise be cleaned or refused while measured).

Against rmq (default) it starts ``rmq namesrv`` and ``rmq broker`` as their own processes on
free ports (so RSS and CPU are the broker's alone) with the daemon's real file sizes unless
``--broker-arg`` says otherwise. Against another RocketMQ (e.g. Java 4.9.8), protocol only:

    python bench/scale_bench.py --namesrv 127.0.0.1:9876 --broker-pid $(pgrep -f BrokerStartup)

(``--broker-pid`` for RSS and CPU from /proc; without it those are not reported; recovery is
not measured: the script does not own that broker). Recovery alone, rmq and Java side by side:

    python bench/scale_bench.py --topics 10 --groups 1 --clients 1 --idle-seconds 1 \\
        --route-queries 10 --store-gb 20 --store-dir /big/disk --java-home /work/java4 \\
        --java-cp "$(ls /work/java5/lib/*.jar | grep -v rocketmq-5 | tr '\\n' :)"

A tiny check run:

    PYTHONPATH=$PWD python bench/scale_bench.py --topics 50 --groups 10 --clients 20 \\
        --idle-seconds 2 --route-queries 100 --store-gb 0.01 --small-files
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import _common as bc

from rmq.client._codec import UniqKeyGenerator
from rmq.common import fastjson
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import check_success
from rmq.protocol.requests.broker import get_all_topic_config, get_broker_runtime_info
from rmq.protocol.requests.client import heart_beat
from rmq.protocol.requests.consumer import create_subscription_group
from rmq.remoting.client import RemotingClient

PROBE_CLUSTER = "ScaleBenchProbe"
PROBE_NAME = "scale-bench-probe"


def rss_mb(pid: int | None) -> float | None:
    """Resident set size of ``pid`` in MB (VmRSS), None when unknown."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


# ---------------------------------------------------------------------------- rmq daemons


class RmqDaemons:
    """``rmq namesrv`` and ``rmq broker`` as separate processes on free ports, one store."""

    def __init__(self, store_dir: str, broker_args: list[str], small_files: bool):
        from rmq._testing import StandaloneProcess, free_broker_port, free_port

        self.store_dir = store_dir
        self.namesrv_port = free_port()
        self.broker_port = free_broker_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_args = list(broker_args)
        if small_files:
            self.broker_args = [*StandaloneProcess.TEST_FILE_SIZES, *self.broker_args]
        self.log_path = os.path.join(store_dir, "daemons.log")
        self.namesrv: subprocess.Popen[bytes] | None = None
        self.broker: subprocess.Popen[bytes] | None = None

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "rmq", *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def start_namesrv(self) -> None:
        from rmq._testing import wait_for_port

        self.namesrv = self._spawn("namesrv", "--port", str(self.namesrv_port))
        if not wait_for_port("127.0.0.1", self.namesrv_port, 60):
            raise bc.BenchError(f"rmq namesrv did not listen within 60 s:\n{self.log_text()[-2000:]}")

    def start_broker(self) -> float:
        """Spawn the broker; returns the spawn time (``time.monotonic``)."""
        t0 = time.monotonic()
        self.broker = self._spawn(
            "broker",
            f"--namesrvAddr={self.namesrv_addr}",
            f"--listenPort={self.broker_port}",
            f"--storePathRootDir={os.path.join(self.store_dir, 'store')}",
            "--metricsPort=0",
            "--grpcServerPort=0",
            *self.broker_args,
        )
        return t0

    @property
    def broker_pid(self) -> int | None:
        return self.broker.pid if self.broker is not None else None

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        from rmq._testing import terminate

        for p in (self.broker, self.namesrv):
            if p is not None:
                terminate(p, 60)


async def wait_broker_answers(addr: str, proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """Until GET_BROKER_RUNTIME_INFO at ``addr`` is answered (BenchError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    client = RemotingClient(connect_timeout=1.0)
    try:
        while True:
            if proc is not None and proc.poll() is not None:
                raise bc.BenchError(f"the broker exited with status {proc.returncode}")
            try:
                resp = await client.invoke(addr, get_broker_runtime_info(), timeout=2.0)
                if resp.code == ResponseCode.SUCCESS:
                    return
            except Exception:  # not listening yet
                pass
            if time.monotonic() > deadline:
                raise bc.BenchError(f"the broker at {addr} did not answer within {timeout:.0f}s")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


# ---------------------------------------------------------------------------- the phases


async def bounded(n: int, limit: int, job) -> None:
    """Run ``job(i)`` for i in range(n), at most ``limit`` at a time."""
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            await job(i)

    await asyncio.gather(*(worker() for _ in range(min(limit, max(n, 1)))))


async def create_topics(client: RemotingClient, masters: dict[str, str], names: list[str], queues: int, conc: int):
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        for addr in masters.values():
            await bc.create_topic(client, addr, names[i], queues, timeout=30.0)

    await bounded(len(names), conc, one)
    created = time.perf_counter() - t0
    # the name server has the last one's route: registered
    deadline = time.monotonic() + 120
    while await bc.get_route(client, names[-1], timeout=10.0) is None:
        if time.monotonic() > deadline:
            raise bc.BenchError(f"no route for {names[-1]} 120 s after its creation")
        await asyncio.sleep(0.1)
    return created, time.perf_counter() - t0


async def create_groups(client: RemotingClient, masters: dict[str, str], groups: list[str], conc: int) -> float:
    t0 = time.perf_counter()

    async def one(i: int) -> None:
        cfg = {"groupName": groups[i], "consumeEnable": True, "consumeBroadcastEnable": True, "retryQueueNums": 1}
        for addr in masters.values():
            resp = await client.invoke(addr, create_subscription_group(cfg), timeout=30.0)
            check_success(resp)

    await bounded(len(groups), conc, one)
    return time.perf_counter() - t0


class _Ignore:
    """Takes a broker's oneway request to a client and answers nothing."""

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: object, cmd: RemotingCommand) -> None:
        return None


def heartbeat_body(client_id: str, group: str, topic: str) -> dict:
    return {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [
                    {
                        "classFilterMode": False,
                        "topic": topic,
                        "subString": "*",
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": int(time.time() * 1000),
                        "expressionType": "TAG",
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }


class Clients:
    """``n`` client connections (one RemotingClient each) heartbeating to every master."""

    def __init__(self, n: int, masters: dict[str, str], groups: list[str], topics: list[str]):
        self.masters = list(masters.values())
        tag = f"{os.getpid()}"
        self.bodies = [
            heartbeat_body(f"127.0.0.1@scale{tag}-{i}", groups[i % len(groups)], topics[i % len(groups) % len(topics)])
            for i in range(n)
        ]
        # Every member of a group subscribes to the same topic (group g to topic g), as a real
        # application's consumers do: members with different subscriptions make each heartbeat
        # a subscription change, which both brokers answer by notifying the whole group
        # (Java ConsumerManager.registerConsumer, updateSubscription), a storm no steady
        # cluster sees.
        self.clients = [RemotingClient(connect_timeout=10.0) for _ in range(n)]
        for c in self.clients:  # the broker's NOTIFY_CONSUMER_IDS_CHANGED: a real client rebalances
            c.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, _Ignore())
        self.in_flight: set[asyncio.Future] = set()
        self.failed = 0  # background heartbeats that failed or were refused

    def _done(self, t: asyncio.Future) -> None:
        self.in_flight.discard(t)
        if t.cancelled() or t.exception() is not None or t.result().code != ResponseCode.SUCCESS:
            self.failed += 1

    async def round(self, conc: int) -> None:
        async def one(i: int) -> None:
            for addr in self.masters:
                resp = await self.clients[i].invoke(addr, heart_beat(self.bodies[i]), timeout=30.0)
                check_success(resp)

        await bounded(len(self.clients), conc, one)

    async def every(self, interval: float, stop: asyncio.Event) -> None:
        """Each client heartbeats every ``interval`` s, spread evenly over the interval."""
        n = len(self.clients)
        i = 0
        gap = interval / max(n, 1)
        loop = asyncio.get_running_loop()
        start = loop.time()
        while not stop.is_set():
            k = i % n
            for addr in self.masters:
                t = asyncio.ensure_future(self.clients[k].invoke(addr, heart_beat(self.bodies[k]), timeout=30.0))
                self.in_flight.add(t)
                t.add_done_callback(self._done)
            i += 1
            delay = start + i * gap - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients), return_exceptions=True)


async def route_latency(client: RemotingClient, topics: list[str], n: int) -> tuple[float, float]:
    samples = []
    rnd = random.Random(7)
    for _ in range(n):
        topic = rnd.choice(topics)
        t0 = time.perf_counter()
        await bc.get_route(client, topic, timeout=10.0)
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return bc.percentile(samples, 0.5), bc.percentile(samples, 0.99)


async def registration(
    client: RemotingClient, namesrv: str, broker_addr: str, prefix: str, repeat: int, namesrv_pid: int | None = None
) -> dict:
    """Registration bytes and round trips at the broker's table size (module docstring); with
    ``namesrv_pid``, the name server's CPU per full and per compressed registration too (a
    figure a loaded machine does not move the way it moves a round trip)."""
    from rmq.broker.namesrv_api import encode_register_body

    resp = await client.invoke(broker_addr, get_all_topic_config(), timeout=60.0)
    check_success(resp)
    table = fastjson.loads(resp.body_bytes())["topicConfigTable"]
    figures: dict = {"broker_topics": len(table)}
    # the broker's own table as it registers it (rmq's encoder writes Java's format)
    t0 = time.perf_counter()
    body = await encode_register_body({"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}})
    figures["register_encode_ms"] = (time.perf_counter() - t0) * 1000
    figures["register_json_bytes"] = len(body)
    t0 = time.perf_counter()
    zbody = await encode_register_body(
        {"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}}, compressed=True
    )
    figures["register_compressed_encode_ms"] = (time.perf_counter() - t0) * 1000
    figures["register_compressed_bytes"] = len(zbody)

    # the probe: the same number of topics under other names, a broker nobody connects to
    probe = {
        f"{prefix}Probe_{i:06d}": dict(tc, topicName=f"{prefix}Probe_{i:06d}")
        for i, tc in enumerate(t for name, t in table.items())
    }
    probe[PROBE_NAME] = {"topicName": PROBE_NAME, "readQueueNums": 1, "writeQueueNums": 1, "perm": 7}
    probe_addr = "127.0.0.1:1"

    first = next(iter(probe))

    async def encoded(version: int, compressed: bool) -> RemotingCommand:
        """REGISTER_BROKER of the probe's table at ``version`` (encoded as rmq's broker does),
        one topic's write queue count following the version."""
        probe[first] = dict(probe[first], writeQueueNums=1 + version % 8)
        wrapper = {"topicConfigTable": probe, "dataVersion": {"timestamp": 1, "counter": version}}
        data = await encode_register_body(wrapper, compressed)
        ext = {
            "brokerAddr": probe_addr,
            "brokerId": "0",
            "brokerName": PROBE_NAME,
            "clusterName": PROBE_CLUSTER,
            "haServerAddr": "127.0.0.1:2",
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(zlib.crc32(data) & 0x7FFFFFFF),
        }
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, data)

    cpu_ms: dict[str, list[float]] = {"full": [], "compressed": []}

    async def timed(cmd: RemotingCommand, kind: str = "") -> float:
        meter = bc.CpuMeter(namesrv_pid)
        meter.start()
        t0 = time.perf_counter()
        r = await client.invoke(namesrv, cmd, timeout=60.0)
        ms = (time.perf_counter() - t0) * 1000
        spent = meter.stop()
        check_success(r)
        if kind and spent is not None:
            cpu_ms[kind].append(spent * 1000)
        return ms

    full, same, query, compressed = [], [], [], []
    version = 1
    try:
        # the probe's first registration builds every route (a broker's start-up, once); the
        # figures are of the periodic registrations that follow, as a running broker's are
        await timed(await encoded(version, False))
        for _ in range(repeat):
            version += 1
            full.append(await timed(await encoded(version, False), "full"))
            same.append(await timed(await encoded(version, False)))
            q = RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION,
                {"brokerAddr": probe_addr, "brokerId": "0", "brokerName": PROBE_NAME, "clusterName": PROBE_CLUSTER},
                json.dumps({"timestamp": 1, "counter": version}).encode(),
            )
            query.append(await timed(q))
            version += 1
            compressed.append(await timed(await encoded(version, True), "compressed"))
    finally:
        unreg = RemotingCommand.request(
            RequestCode.UNREGISTER_BROKER,
            {"brokerAddr": probe_addr, "brokerId": "0", "brokerName": PROBE_NAME, "clusterName": PROBE_CLUSTER},
        )
        try:
            await client.invoke(namesrv, unreg, timeout=30.0)
        except Exception as e:  # reported, the figures stand
            print(f"warning: unregistering the probe broker failed: {e}", file=sys.stderr)
    figures["register_full_ms"] = statistics.median(full)
    figures["register_same_version_ms"] = statistics.median(same)
    figures["query_data_version_ms"] = statistics.median(query)
    figures["register_compressed_ms"] = statistics.median(compressed)
    for kind, values in cpu_ms.items():
        # the mean: /proc counts CPU in 10 ms ticks, a registration is a few of them
        figures[f"register_{kind}_namesrv_cpu_ms"] = statistics.fmean(values) if values else None
    return figures


async def fill_store(client: RemotingClient, masters: dict[str, str], topic: str, gb: float, conc: int) -> int:
    """Send ``gb`` GB of 4 KiB messages (batches of 32) to ``topic`` on every master."""
    body = fill_body()
    per_batch = 32
    batches = max(1, int(gb * (1 << 30) / (len(body) * per_batch)))
    addrs = list(masters.values())
    keys = UniqKeyGenerator()

    async def one(i: int) -> None:
        addr = addrs[i % len(addrs)]
        cmd = bc.send_request("ScaleFillPG", topic, i % 8, "", fill_batch(body, per_batch, keys), batch=True)
        for _ in range(600):  # Java's broker answers SYSTEM_BUSY under flow control: send again
            resp = await client.invoke(addr, cmd, timeout=60.0)
            if resp.code != ResponseCode.SYSTEM_BUSY:
                break
            await asyncio.sleep(0.1)
        check_success(resp)

    await bounded(batches, conc, one)
    return batches * per_batch * len(body)


def fill_body() -> bytes:
    """4 KiB of incompressible text: the body of every message of the recovery store."""
    return os.urandom(2048).hex().encode()


def fill_batch(body: bytes, n: int, keys: UniqKeyGenerator) -> bytes:
    """A SEND_BATCH_MESSAGE body of ``n`` messages, each with its own UNIQ_KEY as a Java
    producer sets it (``MessageClientIDSetter``): the broker indexes each one."""
    return bc.encode_batch(
        [body] * n, [bc.properties_string({"UNIQ_KEY": keys.new_id(), "WAIT": "false"}) for _ in range(n)]
    )


# The store's disk guards (StoreConfig's defaults 75 / 90 / 85 %) would delete or refuse a
# store of tens of GB on a disk already half used: the builder and the restarted brokers (rmq's
# and Java's) run with these instead, so nothing is cleaned while recovery is measured.
DISK_RATIOS = {"diskMaxUsedSpaceRatio": 95, "diskSpaceWarningLevelRatio": 98, "diskSpaceCleanForciblyRatio": 97}


async def build_store(root: str, topic: str, gb: float, queues: int = 8, per_batch: int = 256) -> int:
    """Write ``gb`` GB of 4 KiB messages into the stopped broker's store at ``root``, in this
    process, through the store API the broker's SEND_BATCH_MESSAGE path calls
    (``MessageStore.append_message(msg, batch=True)`` with the same batch body, Java
    ``MessageDecoder.encodeMessages``): the CommitLog records, ConsumeQueue units, index entries
    and checkpoint are the ones a broker writes, without a producer's round trips. The store is
    shut down cleanly at the end (checkpoint written, abort file removed). Returns the bytes of
    message bodies written."""
    from rmq.store import MessageStore, StoreConfig
    from rmq.store.message import MessageInner

    cfg = StoreConfig(
        store_path_root_dir=root,
        disk_max_used_space_ratio=DISK_RATIOS["diskMaxUsedSpaceRatio"],
        disk_space_warning_level_ratio=DISK_RATIOS["diskSpaceWarningLevelRatio"],
        disk_space_clean_forcibly_ratio=DISK_RATIOS["diskSpaceCleanForciblyRatio"],
    )
    store = MessageStore(cfg, ("127.0.0.1", 10911))
    await store.start()
    body = fill_body()
    keys = UniqKeyGenerator()
    batches = max(1, int(gb * (1 << 30) / (len(body) * per_batch)))
    step = max(1, batches // 20)
    t0 = time.monotonic()
    try:
        for i in range(batches):
            batch = fill_batch(body, per_batch, keys)
            msg = MessageInner(topic, i % queues, batch, properties_str="", born_timestamp=int(time.time() * 1000))
            result = store.append_message(msg, batch=True)
            if not result.is_ok:
                raise bc.BenchError(f"the store refused a batch: {result}")
            if i % 4 == 3:
                await asyncio.sleep(0)  # dispatch, flush and warm-ahead run on this loop
            if (i + 1) % step == 0:
                done = (i + 1) * per_batch * len(body)
                progress(f"store: {done / (1 << 30):.2f} of {gb:g} GB written ({time.monotonic() - t0:.0f} s)")
    finally:
        await store.shutdown()
    return batches * per_batch * len(body)


_RECOVERED = re.compile(r"store recovered \([^)]*\) in ([0-9.]+)s")


async def stop_broker(d: RmqDaemons, kill: bool) -> None:
    """Stop the rmq broker: SIGTERM (a clean stop) or, with ``kill``, SIGKILL."""
    assert d.broker is not None
    if kill:
        d.broker.send_signal(signal.SIGKILL)
        d.broker.wait()
    else:
        from rmq._testing import terminate

        if terminate(d.broker, 600) != 0:
            raise bc.BenchError("the broker did not stop cleanly")


async def restart(d: RmqDaemons) -> dict:
    """Start the rmq broker again and time its first answer and the store's own figure."""
    before = len(_RECOVERED.findall(d.log_text()))
    t0 = d.start_broker()
    await wait_broker_answers(f"127.0.0.1:{d.broker_port}", d.broker, 3600)
    answered = time.monotonic() - t0
    found = _RECOVERED.findall(d.log_text())
    store_s = float(found[before]) if len(found) > before else None
    return {"answered_s": answered, "store_recovered_s": store_s}


async def recovery(d: RmqDaemons, kill: bool) -> dict:
    """Stop the broker (SIGTERM, or SIGKILL with ``kill``), start it again, time its first answer."""
    await stop_broker(d, kill)
    return await restart(d)


# ---------------------------------------------------------------------------- Java's broker


class JavaBroker:
    """Apache RocketMQ 4.9.8's broker (built at ``java_home``, e.g. /work/java4: ``lib/`` holds
    rocketmq-4.9.8.jar and its dependencies, or ``lib/*`` plus ``--java-cp``) on the store rmq
    left at ``store_root``: its ``storePathRootDir`` (Java ``DefaultMessageStore.load`` reads
    ``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint`` and ``abort`` there; the
    broker's config/*.json are created when missing). No name server: only its first answer and
    its store's recovery are measured. Logs go to ``work``/logs (store.log with milliseconds)."""

    def __init__(self, java_home: str, extra_cp: str, store_root: str, work: str):
        from rmq._testing import free_broker_port

        self.java_home = os.path.abspath(java_home)
        self.work = work
        self.port = free_broker_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        home = os.path.join(work, "home")
        os.makedirs(os.path.join(home, "conf"), exist_ok=True)
        src_conf = os.path.join(self.java_home, "home", "conf")
        for name in ("logback_broker.xml",):
            text = Path(src_conf, name).read_text() if os.path.exists(os.path.join(src_conf, name)) else ""
            if not text:
                raise bc.BenchError(f"--java-home: no {os.path.join(src_conf, name)}")
            # milliseconds in the log lines: the store's own recovery figure comes from them
            text = re.sub(r"%d\{[^}]*\}", "%d{yyyy-MM-dd HH:mm:ss.SSS}", text)
            Path(home, "conf", name).write_text(text)
        conf = {
            "brokerClusterName": "ScaleBenchJava",
            "brokerName": "scale-bench-java",
            "brokerId": 0,
            "brokerIP1": "127.0.0.1",
            "listenPort": self.port,
            "storePathRootDir": store_root,
            "storePathCommitLog": os.path.join(store_root, "commitlog"),
            "flushDiskType": "ASYNC_FLUSH",
            "autoCreateTopicEnable": "true",
            "diskMaxUsedSpaceRatio": DISK_RATIOS["diskMaxUsedSpaceRatio"],
        }
        self.conf_path = os.path.join(home, "conf", "broker.conf")
        Path(self.conf_path).write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        self.home = home
        jars = sorted(Path(self.java_home, "lib").glob("*.jar"))
        self.classpath = ":".join([*(str(j) for j in jars), *([extra_cp] if extra_cp else [])])
        self.store_log = os.path.join(home, "logs", "rocketmqlogs", "store.log")
        self.out_path = os.path.join(work, "broker.out")

    def start(self) -> float:
        ratios = DISK_RATIOS
        cmd = [
            "java",
            "-Xms512m",
            "-Xmx512m",
            "-XX:MaxDirectMemorySize=1g",
            f"-Duser.home={self.home}",
            f"-Drocketmq.home.dir={self.home}",
            f"-Drocketmq.broker.diskSpaceWarningLevelRatio={ratios['diskSpaceWarningLevelRatio'] / 100}",
            f"-Drocketmq.broker.diskSpaceCleanForciblyRatio={ratios['diskSpaceCleanForciblyRatio'] / 100}",
            *bc.JAVA17_OPENS,
            "--add-exports",
            "java.base/sun.nio.ch=ALL-UNNAMED",
            # MappedFile.clean unmaps through jdk.internal.ref.Cleaner: without these a newer
            # JDK refuses it and the crash recovery's truncation fails ("load exception")
            "--add-opens",
            "java.base/jdk.internal.ref=ALL-UNNAMED",
            "--add-exports",
            "java.base/jdk.internal.ref=ALL-UNNAMED",
            "-cp",
            self.classpath,
            "org.apache.rocketmq.broker.BrokerStartup",
            "-c",
            self.conf_path,
        ]
        env = dict(os.environ, ROCKETMQ_HOME=self.home)
        t0 = time.monotonic()
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        return t0

    def stop(self, kill: bool) -> None:
        from rmq._testing import terminate

        if self.proc is None:
            return
        if kill:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        else:
            rc = terminate(self.proc, 600)
            if rc not in (0, 143, -signal.SIGTERM):  # 143: the JVM's exit after its shutdown hook
                print(f"warning: Java's broker exited with {rc} on SIGTERM (see {self.out_path})", file=sys.stderr)
        self.proc = None

    def store_log_text(self) -> str:
        try:
            return Path(self.store_log).read_text(errors="replace")
        except OSError:
            return ""

    async def restart(self) -> dict:
        """Start, wait for the first answer; the store's own figure is the time from its
        "last shutdown ..." line to its "load over" line (``DefaultMessageStore.load``)."""
        before = len(_JAVA_LOAD.findall(self.store_log_text()))
        t0 = self.start()
        await wait_broker_answers(self.addr, self.proc, 3600)
        answered = time.monotonic() - t0
        found = _JAVA_LOAD.findall(self.store_log_text())
        store_s = None
        if len(found) > before:
            begin, _mode, end = found[before]
            store_s = (_java_ts(end) - _java_ts(begin)).total_seconds()
        return {"answered_s": answered, "store_recovered_s": store_s}


_JAVA_LOAD = re.compile(
    r"^(\S+ \S+) \S+ \S+ - last shutdown (normally|abnormally)$.*?^(\S+ \S+) \S+ \S+ - load over,",
    re.M | re.S,
)


def _java_ts(text: str):
    from datetime import datetime

    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")


async def java_recovery(
    client: RemotingClient, java_home: str, extra_cp: str, store_root: str, topic: str, work: str
) -> dict:
    """Java 4.9.8's broker on the store rmq stopped cleanly: its start after that clean stop,
    then 0.05 GB more sent to it, kill -9, and its crash recovery (the same figures as rmq's)."""
    java = JavaBroker(java_home, extra_cp, store_root, work)
    figures: dict = {}
    try:
        progress("java: starting Java's broker on the store (clean recovery)")
        clean = await java.restart()
        figures["java_recovery_clean_s"] = clean["answered_s"]
        figures["java_recovery_clean_store_s"] = clean["store_recovered_s"]
        await bc.create_topic(client, java.addr, topic, 8, timeout=30.0)
        await fill_store(client, {"java": java.addr}, topic, 0.05, 16)
        java.stop(kill=True)
        progress("java: killed (-9), starting again (crash recovery)")
        killed = await java.restart()
        figures["java_recovery_kill9_s"] = killed["answered_s"]
        figures["java_recovery_kill9_store_s"] = killed["store_recovered_s"]
        figures["java_rss_recovered_mb"] = rss_mb(java.proc.pid if java.proc else None)
    finally:
        java.stop(kill=False)
    return figures


async def recovery_phase(
    client: RemotingClient, d: RmqDaemons, masters: dict[str, str], args: argparse.Namespace, work: str
) -> dict:
    """Build the ``--store-gb`` store, restart rmq's broker after a clean stop and after kill -9,
    then (``--java-home``) Java's broker on the same store, clean and after kill -9."""
    figures: dict = {}
    fill_topic = f"{args.prefix}Fill"
    await bc.create_topic(client, next(iter(masters.values())), fill_topic, 8, timeout=30.0)
    await stop_broker(d, kill=False)
    root = os.path.join(d.store_dir, "store")
    t0 = time.perf_counter()
    by_producer = args.fill_by_producer or args.small_files  # the builder writes the default file sizes
    if by_producer:
        await restart(d)
        figures["store_bytes"] = await fill_store(client, masters, fill_topic, args.store_gb, args.concurrency)
        await stop_broker(d, kill=False)
    else:
        figures["store_bytes"] = await build_store(root, fill_topic, args.store_gb)
    figures["store_fill_s"] = time.perf_counter() - t0
    figures["store_fill_by"] = "producer" if by_producer else "store API"
    progress(f"store: {figures['store_bytes'] / (1 << 30):.2f} GB in {figures['store_fill_s']:.0f} s; restarting")
    clean = await restart(d)
    figures["recovery_clean_s"], figures["recovery_clean_store_s"] = clean["answered_s"], clean["store_recovered_s"]
    progress(f"rmq: clean restart answered after {clean['answered_s']:.2f} s; 0.05 GB more, then kill -9")
    await fill_store(client, masters, fill_topic, min(args.store_gb, 0.05), args.concurrency)
    killed = await recovery(d, kill=True)
    figures["recovery_kill9_s"], figures["recovery_kill9_store_s"] = killed["answered_s"], killed["store_recovered_s"]
    figures["rss_recovered_mb"] = rss_mb(d.broker_pid)
    progress(f"rmq: restart after kill -9 answered after {killed['answered_s']:.2f} s")
    if args.java_home:
        await stop_broker(d, kill=False)  # Java starts on a cleanly stopped store
        figures.update(
            await java_recovery(client, args.java_home, args.java_cp, root, fill_topic, os.path.join(work, "java"))
        )
    return figures


def progress(text: str) -> None:
    """One progress line on stderr (a full-size run takes many minutes)."""
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- main


def raise_fd_limit(need: int) -> None:
    """Raise this process's open-file limit towards ``need`` (up to the hard limit): every client
    connection is a socket here, and the rmq broker this script starts inherits the limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < need:
        print(f"warning: open-file limit {soft} < {need}: raise it (ulimit -n) for this many clients", file=sys.stderr)


async def run(args: argparse.Namespace) -> dict:
    raise_fd_limit(args.clients * 2 + 1024)
    figures: dict = {"bench": "scale", "target": "external" if args.namesrv else "rmq"}
    daemons: RmqDaemons | None = None
    tmp: str | None = None
    pid = args.broker_pid
    if not args.namesrv:
        tmp = tempfile.mkdtemp(prefix="rmq-scale-bench-", dir=args.store_dir)
        guards = [f"--{k}={v}" for k, v in DISK_RATIOS.items()] if args.store_gb > 0 else []
        daemons = RmqDaemons(tmp, [*guards, *args.broker_arg], args.small_files)
        daemons.start_namesrv()
        daemons.start_broker()
        await wait_broker_answers(f"127.0.0.1:{daemons.broker_port}", daemons.broker, 120)
        namesrv = daemons.namesrv_addr
        pid = daemons.broker_pid
    else:
        namesrv = args.namesrv
    client = RemotingClient(bc.namesrv_list(namesrv), connect_timeout=5.0)
    clients: Clients | None = None
    try:
        deadline = time.monotonic() + 60
        while not (masters := await bc.master_brokers(client, timeout=10.0)):
            if time.monotonic() > deadline:
                raise bc.BenchError("no master broker registered with the name server")
            await asyncio.sleep(0.1)
        masters = {k: v for k, v in masters.items() if k != PROBE_NAME}
        figures["masters"] = sorted(masters)
        figures["rss_start_mb"] = rss_mb(pid)
        progress(f"masters {sorted(masters)}; creating {args.topics} topics x {args.queues} queues")

        topics = [f"{args.prefix}T_{i:06d}" for i in range(args.topics)]
        groups = [f"{args.prefix}G_{i:05d}" for i in range(args.groups)]
        created, routed = await create_topics(client, masters, topics, args.queues, args.concurrency)
        figures["topics"], figures["queues"] = args.topics, args.queues
        figures["topic_create_s"], figures["topics_routed_s"] = created, routed
        figures["group_create_s"] = await create_groups(client, masters, groups, args.concurrency)
        figures["groups"] = args.groups
        figures["rss_topics_groups_mb"] = rss_mb(pid)
        progress(f"topics in {created:.1f} s, groups in {figures['group_create_s']:.1f} s; registration")

        figures.update(
            await registration(
                client,
                namesrv,
                next(iter(masters.values())),
                args.prefix,
                args.register_repeat,
                daemons.namesrv.pid if daemons is not None and daemons.namesrv is not None else args.namesrv_pid,
            )
        )

        progress(f"connecting {args.clients} clients (first heartbeat round)")
        clients = Clients(args.clients, masters, groups, topics)
        figures["clients"] = args.clients
        t0 = time.perf_counter()
        await clients.round(args.concurrency)  # connects, and creates each group's retry topic
        figures["heartbeat_warmup_s"] = time.perf_counter() - t0
        progress(f"connected in {figures['heartbeat_warmup_s']:.1f} s; {args.heartbeat_rounds} heartbeat rounds")
        cpu = bc.CpuMeter(pid)
        cpu.start()
        t0 = time.perf_counter()
        for _ in range(args.heartbeat_rounds):
            await clients.round(args.concurrency)
        wall = time.perf_counter() - t0
        spent = cpu.stop()
        beats = args.heartbeat_rounds * args.clients * len(masters)
        figures["heartbeat_round_s"] = wall / args.heartbeat_rounds
        figures["heartbeat_cpu_ms_per_1000"] = spent * 1e6 / beats if spent is not None else None
        figures["rss_loaded_mb"] = rss_mb(pid)

        progress(f"idle CPU over {args.idle_seconds:g} s, heartbeats every {args.heartbeat_interval:g} s")
        stop = asyncio.Event()
        beating = asyncio.ensure_future(clients.every(args.heartbeat_interval, stop))
        cpu = bc.CpuMeter(pid)
        cpu.start()
        await asyncio.sleep(args.idle_seconds)
        spent = cpu.stop()
        stop.set()
        await beating
        if clients.in_flight:
            await asyncio.wait(clients.in_flight, timeout=60)
        figures["idle_heartbeats_failed"] = clients.failed
        figures["idle_seconds"] = args.idle_seconds
        figures["idle_cpu_s_per_min"] = spent * 60 / args.idle_seconds if spent is not None else None
        figures["rss_idle_mb"] = rss_mb(pid)

        progress(f"{args.route_queries} route queries")
        figures["route_p50_ms"], figures["route_p99_ms"] = await route_latency(client, topics, args.route_queries)
        await clients.close()
        clients = None

        if daemons is not None and args.store_gb > 0:
            figures.update(await recovery_phase(client, daemons, masters, args, tmp or ""))
    finally:
        if clients is not None:
            await clients.close()
        await client.close()
        if daemons is not None:
            daemons.stop()
            if args.keep_store:
                print(f"store and daemon log kept in {tmp}", file=sys.stderr)
            elif tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
    return figures


def _fmt(v: object) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.3f}" if v < 10 else f"{v:.1f}"
    return str(v)


def print_summary(f: dict) -> None:
    print(f"scale bench against {f['target']} ({', '.join(f.get('masters', []))})")
    print(
        f"  {f['topics']} topics x {f['queues']} queues: created in {_fmt(f['topic_create_s'])} s, "
        f"routed after {_fmt(f['topics_routed_s'])} s; {f['groups']} groups in {_fmt(f['group_create_s'])} s"
    )
    print(
        f"  broker RSS MB: start {_fmt(f['rss_start_mb'])}, topics+groups {_fmt(f['rss_topics_groups_mb'])}, "
        f"{f['clients']} clients {_fmt(f['rss_loaded_mb'])}, idle {_fmt(f['rss_idle_mb'])}"
    )
    print(
        f"  idle broker CPU: {_fmt(f['idle_cpu_s_per_min'])} s per minute "
        f"({f['clients']} clients heartbeating, measured over {f['idle_seconds']} s)"
    )
    print(
        f"  heartbeat: {_fmt(f['heartbeat_cpu_ms_per_1000'])} broker CPU-ms per 1000; a round of "
        f"{f['clients']} in {_fmt(f['heartbeat_round_s'])} s (warm-up {_fmt(f['heartbeat_warmup_s'])} s)"
    )
    print(f"  route query: p50 {_fmt(f['route_p50_ms'])} ms, p99 {_fmt(f['route_p99_ms'])} ms")
    print(
        f"  registration of {f['broker_topics']} topics: JSON {f['register_json_bytes']} bytes "
        f"(encode {_fmt(f['register_encode_ms'])} ms), compressed {f['register_compressed_bytes']} bytes "
        f"(encode {_fmt(f['register_compressed_encode_ms'])} ms)"
    )
    print(
        f"  name server round trip ms: full {_fmt(f['register_full_ms'])}, same version "
        f"{_fmt(f['register_same_version_ms'])}, QUERY_DATA_VERSION {_fmt(f['query_data_version_ms'])}, "
        f"compressed {_fmt(f['register_compressed_ms'])}"
    )
    print(
        f"  name server CPU-ms per registration: full {_fmt(f.get('register_full_namesrv_cpu_ms'))}, "
        f"compressed {_fmt(f.get('register_compressed_namesrv_cpu_ms'))}"
    )
    if "recovery_clean_s" in f:
        print(
            f"  recovery of {f['store_bytes'] / (1 << 30):.2f} GB: clean stop {_fmt(f['recovery_clean_s'])} s "
            f"(store {_fmt(f['recovery_clean_store_s'])} s), kill -9 {_fmt(f['recovery_kill9_s'])} s "
            f"(store {_fmt(f['recovery_kill9_store_s'])} s)"
        )
        if "java_recovery_clean_s" in f:
            print(
                f"  Java 4.9.8 on the same store: clean stop {_fmt(f['java_recovery_clean_s'])} s "
                f"(store {_fmt(f['java_recovery_clean_store_s'])} s), kill -9 {_fmt(f['java_recovery_kill9_s'])} s "
                f"(store {_fmt(f['java_recovery_kill9_store_s'])} s); RSS after {_fmt(f['java_rss_recovered_mb'])} MB "
                f"(rmq {_fmt(f['rss_recovered_mb'])} MB)"
            )
    else:
        print("  recovery: not measured (needs the rmq broker this script starts, and --store-gb > 0)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--namesrv", default=None, help="an existing cluster's name server (default: start rmq)")
    ap.add_argument("--broker-pid", type=int, default=None, help="with --namesrv: the broker's pid for RSS and CPU")
    ap.add_argument(
        "--namesrv-pid",
        type=int,
        default=None,
        help="with --namesrv: the name server's pid for its CPU per registration",
    )
    ap.add_argument("--topics", type=int, default=10_000)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--groups", type=int, default=1_000)
    ap.add_argument("--clients", type=int, default=5_000)
    ap.add_argument("--heartbeat-rounds", type=int, default=3)
    ap.add_argument("--heartbeat-interval", type=float, default=30.0, help="seconds (Java's default 30)")
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    ap.add_argument("--route-queries", type=int, default=2_000)
    ap.add_argument("--register-repeat", type=int, default=3, help="rounds of registration round trips (median)")
    ap.add_argument("--store-gb", type=float, default=1.0, help="store size for the recovery figures (0 = skip)")
    ap.add_argument("--store-dir", default=None, help="where the rmq store goes (default: the temp directory)")
    ap.add_argument("--keep-store", action="store_true", help="keep the rmq store and daemon log")
    ap.add_argument("--small-files", action="store_true", help="rmq: the tests' small store files (check runs)")
    ap.add_argument("--broker-arg", action="append", default=[], help="rmq: one more --key=value for the broker")
    ap.add_argument(
        "--fill-by-producer",
        action="store_true",
        help="fill the recovery store by SEND_BATCH_MESSAGE to the broker (default: the store API in-process)",
    )
    ap.add_argument(
        "--java-home",
        default=None,
        help="rmq only: also recover the same store with Java 4.9.8's broker built there (its lib/*.jar)",
    )
    ap.add_argument("--java-cp", default="", help="with --java-home: more classpath entries (its dependencies' jars)")
    ap.add_argument("--concurrency", type=int, default=64, help="requests in flight while building (default 64)")
    ap.add_argument("--prefix", default="Scale", help="topic and group name prefix (default Scale)")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    args = ap.parse_args(argv)
    for name in ("topics", "queues", "groups", "clients", "heartbeat_rounds", "route_queries", "register_repeat"):
        bc.positive(name, getattr(args, name))
    return bc.bench_main(args, run(args), print_summary, lambda f: True)


if __name__ == "__main__":
    sys.exit(main())
