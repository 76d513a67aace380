"""Shared pieces of the bench harness: protocol helpers, record walking, CPU and percentiles.

Everything here speaks only the public RocketMQ 4.x remoting protocol (through
``rmq.remoting``), so the same benchmarks measure rmq and Apache RocketMQ alike. Nothing
depends on rmq's broker internals; :class:`Standalone` merely starts ``rmq standalone`` for
``make bench`` and the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field

from rmq.common.constants import PermName, TopicValidator
from rmq.common.message import encode_batch as encode_batch_items
from rmq.common.message import properties_to_string
from rmq.common.route import TopicRouteData
from rmq.errors import RMQError
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests import topic as rq
from rmq.protocol.requests.consumer import get_max_offset, get_min_offset, parse_offset
from rmq.protocol.requests.message import send_message
from rmq.protocol.requests.namesrv import get_broker_cluster_info, get_route_info, parse_cluster_info, parse_topic_route
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.client import RemotingClient

#: The module opens Java 17 must grant RocketMQ 4.9.8's broker and client (its own start scripts
#: pass them: direct buffers, the NIO selector, reflection on java.lang).
JAVA17_OPENS = [
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
]

# ------------------------------------------------------------------------------ records
#
# A PULL_MESSAGE body is CommitLog records back to back (Java v1 layout, big-endian). The
# benchmarks only need each record's length and, for latency, its born/store timestamps:
#
#  0        4        8        12       16       20                28                36
#  +--------+--------+--------+--------+--------+----------------+----------------+
#  |TOTALSZ |MAGIC   |BODYCRC |QUEUEID |FLAG    |QUEUEOFFSET (8) |PHYSOFFSET (8)  |
#  +--------+--------+--------+--------+--------+----------------+----------------+
#  36       40               48                  48+B              56+B (B = 8, or 20 for IPv6)
#  +--------+----------------+-------------------+----------------+--------------------+
#  |SYSFLAG |BORNTIMESTAMP(8)|BORNHOST (B)       |STORETIMESTAMP 8|STOREHOST ... rest  |
#  +--------+----------------+-------------------+----------------+--------------------+
#
# TOTALSIZE counts the whole record including itself. SYSFLAG bit 0x10 widens BORNHOST to
# 16+4 bytes (IPv6); 0x20 does the same for STOREHOST, which comes after STORETIMESTAMP.

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
MIN_RECORD_SIZE = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
MESSAGE_MAGIC_CODE_V1 = -626843481  # 0xDAA320A7, Java MessageDecoder.MESSAGE_MAGIC_CODE
BORNHOST_V6_FLAG = 0x10


class RecordFormatError(ValueError):
    """A PULL body whose record sizes do not add up (truncated or not CommitLog records)."""


def count_records(body) -> int:
    """Count the CommitLog records in a PULL body by walking their TOTALSIZE fields.

    No per-message objects are built. Raises :class:`RecordFormatError` when a size is below
    the minimal record size or runs past the end of the body.
    """
    end = len(body)
    pos = 0
    n = 0
    unpack = _I32.unpack_from
    while pos < end:
        if end - pos < 4:
            raise RecordFormatError(f"{end - pos} stray bytes at offset {pos}")
        size = unpack(body, pos)[0]
        if size < MIN_RECORD_SIZE or pos + size > end:
            raise RecordFormatError(f"record at offset {pos} claims {size} bytes, {end - pos} left")
        pos += size
        n += 1
    return n


def record_timestamps(body):
    """Yield ``(queue_offset, born_timestamp_ms, store_timestamp_ms)`` per record of a PULL body."""
    end = len(body)
    pos = 0
    unpack_head = _HEAD.unpack_from
    unpack_i64 = _I64.unpack_from
    while pos < end:
        size, _magic, _crc, _qid, _flag, queue_offset, _phy, sys_flag, born = unpack_head(body, pos)
        if size < MIN_RECORD_SIZE or pos + size > end:
            raise RecordFormatError(f"record at offset {pos} claims {size} bytes, {end - pos} left")
        born_host_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
        store = unpack_i64(body, pos + 48 + born_host_len)[0]
        yield queue_offset, born, store
        pos += size


# ------------------------------------------------------------------------------ figures


def percentile(sorted_values, q: float) -> float:
    """The q-quantile (0..1) of an already sorted sequence, nearest rank; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    # nearest rank: the smallest value with at least q of the values at or below it
    k = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values) - 1e-9) - 1))
    return float(sorted_values[k])


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process (all its threads) from /proc/PID/stat, in seconds: user
    space and the kernel's work on its behalf (syscalls, page faults, socket copies)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read().decode()
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = data[data.rindex(")") + 2 :].split()
    return int(fields[11]) / _CLK_TCK, int(fields[12]) / _CLK_TCK


def process_write_bytes(pid: int) -> int:
    """Bytes a process caused to be written to storage (/proc/PID/io ``write_bytes``): for files
    and mappings, each page counted when it is dirtied, so a page dirtied, written back and
    dirtied again counts twice."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise ValueError(f"/proc/{pid}/io has no write_bytes")


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc/PID/stat, in seconds."""
    user, system = process_cpu_split(pid)
    return user + system


def cpu_seconds_or_none(pid: int | None) -> float | None:
    """:func:`process_cpu_seconds`, or None without a pid or when /proc cannot say."""
    if not pid:
        return None
    try:
        return process_cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return None


def pid_list(text: str) -> int | list[int]:
    """``--broker-pid``: one pid, or several comma-separated (``rmq standalone --brokers N``: the
    standalone and its broker processes), whose CPU seconds add up."""
    try:
        pids = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a pid or comma-separated pids: {text!r}") from None
    if not pids:
        raise argparse.ArgumentTypeError("no pid given")
    return pids[0] if len(pids) == 1 else pids


class CpuMeter:
    """Broker CPU seconds over a window (``--broker-pid``: one pid or a list, summed); inert
    when pid is None."""

    def __init__(self, pid: int | list[int] | None):
        self.pid = pid
        self.pids = [pid] if isinstance(pid, int) else list(pid or [])
        self.start_value = None
        self.start_split = (0.0, 0.0)
        self.seconds = None
        #: user-space and kernel seconds of the window (their sum is ``seconds``)
        self.user_seconds = None
        self.system_seconds = None
        #: bytes the processes dirtied for writing to storage in the window (None: /proc/PID/io
        #: not readable, e.g. another user's process)
        self.write_bytes: int | None = None
        self._start_write: int | None = None

    def _split(self) -> tuple[float, float]:
        splits = [process_cpu_split(p) for p in self.pids]
        return sum(u for u, _ in splits), sum(s for _, s in splits)

    def _now(self) -> float:
        return sum(self._split())

    def _written(self) -> int | None:
        try:
            return sum(process_write_bytes(p) for p in self.pids)
        except (OSError, ValueError):
            return None

    def start(self) -> None:
        if self.pids:
            self.start_split = self._split()
            self.start_value = sum(self.start_split)
            self._start_write = self._written()

    def stop(self) -> float | None:
        if self.pids and self.start_value is not None:
            user, system = self._split()
            self.user_seconds = user - self.start_split[0]
            self.system_seconds = system - self.start_split[1]
            self.seconds = self.user_seconds + self.system_seconds
            written = self._written()
            if written is not None and self._start_write is not None:
                self.write_bytes = written - self._start_write
        return self.seconds

    def per_million(self, messages: int) -> float | None:
        if self.seconds is None or not messages:
            return None
        return self.seconds * 1_000_000 / messages


def add_common_args(ap, namesrv_required: bool = True) -> None:
    ap.add_argument(
        "--namesrv", required=namesrv_required, help="name server address host:port (';' separates several)"
    )
    ap.add_argument("--topic", required=True)
    ap.add_argument("--size", type=int, default=1024, help="message body size in bytes (default 1024)")
    ap.add_argument(
        "--queues", type=int, default=4, help="read/write queue count when the topic has to be created (default 4)"
    )
    ap.add_argument(
        "--broker-pid",
        type=pid_list,
        default=None,
        help="pid of the broker process (or comma-separated pids, summed): report its CPU seconds "
        "over the measured window",
    )
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the figures")
    ap.add_argument("--timeout", type=float, default=5.0, help="per-request timeout in seconds (default 5)")
    ap.add_argument(
        "--tls",
        action="store_true",
        help="connect over TLS (the broker must run permissive or enforcing; see Standalone(tls=True))",
    )
    ap.add_argument(
        "--tls-ca",
        default=None,
        metavar="PEM",
        help="CA certificate(s) the server's certificate must chain to (default: the system's "
        "trust store); implies --tls",
    )
    ap.add_argument("--access-key", default=None, help="ACL accessKey: sign every request (brokers with aclEnable)")
    ap.add_argument("--secret-key", default=None, help="the secretKey of --access-key")


def client_tls(args) -> ssl.SSLContext | None:
    """The client context ``--tls`` / ``--tls-ca`` ask for (None: plain TCP)."""
    if not (getattr(args, "tls", False) or getattr(args, "tls_ca", None)):
        return None
    from rmq.remoting.tls import client_context

    return client_context(trust_cert_path=args.tls_ca)


def make_bench_certificate(directory: str) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (EC P-256, one day) made with the ``openssl``
    command: ``(cert_path, key_path)``. The certificate is also the trust anchor clients use."""
    cert = os.path.join(directory, "bench-cert.pem")
    key = os.path.join(directory, "bench-key.pem")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            key,
            "-out",
            cert,
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def credentials(args) -> SessionCredentials | None:
    """The ACL credentials of ``--access-key``/``--secret-key`` (None when not given)."""
    return SessionCredentials.of(getattr(args, "access_key", None), getattr(args, "secret_key", None))


def client(args, namesrv=None) -> RemotingClient:
    """A RemotingClient for a bench run: over TLS with ``--tls``/``--tls-ca``, signing with
    ``--access-key``/``--secret-key`` if given."""
    rc = RemotingClient(namesrv, tls=client_tls(args))
    creds = credentials(args)
    if creds is not None:
        rc.add_rpc_hook(AclClientRPCHook(creds))
    return rc


def positive(name, value, minimum=1):
    if value < minimum:
        raise SystemExit(f"error: --{name} must be >= {minimum}, got {value}")


def run(coro):
    """Run the benchmark coroutine on uvloop (the figures in bench/README.md are with uvloop)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def print_json(figures: dict) -> None:
    print(json.dumps(figures, sort_keys=True), flush=True)


# ------------------------------------------------------------------------------ protocol

# JSON bodies as fastjson writes them: maps may have bare integer keys ({0:"addr"}).


@dataclass(frozen=True)
class MessageQueue:
    broker_name: str
    broker_addr: str
    queue_id: int


@dataclass
class Route:
    topic: str
    read_queues: list[MessageQueue] = field(default_factory=list)
    write_queues: list[MessageQueue] = field(default_factory=list)
    brokers: dict[str, str] = field(default_factory=dict)  # master brokerName → address


class BenchError(RuntimeError):
    """A protocol step of the harness failed; the message says which and why."""


def route_view(topic: str, data: TopicRouteData) -> Route:
    """The bench's view of a route: the queues of brokers that have a master, with its address."""
    route = Route(topic)
    for bd in data.broker_datas:
        if bd.master_addr:
            route.brokers[bd.broker_name] = bd.master_addr
    for qd in data.queue_datas:  # sorted by broker name
        addr = route.brokers.get(qd.broker_name)
        if not addr:
            continue
        if PermName.is_readable(qd.perm):
            route.read_queues += [MessageQueue(qd.broker_name, addr, i) for i in range(qd.read_queue_nums)]
        if PermName.is_writeable(qd.perm):
            route.write_queues += [MessageQueue(qd.broker_name, addr, i) for i in range(qd.write_queue_nums)]
    return route


def parse_route(topic: str, body: bytes) -> Route:
    """:func:`route_view` of a GET_ROUTEINFO_BY_TOPIC body (fastjson's integer keys accepted)."""
    return route_view(topic, TopicRouteData.from_body(body))


def namesrv_list(addr: str) -> list[str]:
    return [a.strip() for a in addr.split(";") if a.strip()]


async def get_route(client: RemotingClient, topic: str, timeout: float = 3.0) -> Route | None:
    """The topic's route from the name server, or None when it has none (TOPIC_NOT_EXIST)."""
    resp = await client.invoke_namesrv(get_route_info(topic), timeout=timeout)
    try:
        data = parse_topic_route(resp)
    except RMQError as exc:
        raise BenchError(f"GET_ROUTEINFO_BY_TOPIC {topic}: {exc}") from None
    return None if data is None else route_view(topic, data)


async def master_brokers(client: RemotingClient, timeout: float = 3.0) -> dict[str, str]:
    """Master brokers known to the name server (GET_BROKER_CLUSTER_INFO), brokerName → address.

    Transport errors propagate as they are; a refusal or a malformed answer is a BenchError
    (so are those of the helpers below)."""
    resp = await client.invoke_namesrv(get_broker_cluster_info(), timeout=timeout)
    try:
        info = parse_cluster_info(resp)
    except RMQError as exc:
        raise BenchError(f"GET_BROKER_CLUSTER_INFO: {exc}") from None
    return info.master_addrs()


async def ensure_topic(
    client: RemotingClient, topic: str, queues: int = 4, timeout: float = 3.0, wait: float = 15.0
) -> Route:
    """Return the topic's route, creating the topic on every master broker when it is unknown.

    Creation is UPDATE_AND_CREATE_TOPIC (code 17) sent to each master listed by the name
    server's cluster info; we then wait up to ``wait`` seconds for the route to appear (the
    broker registers the new topic with the name server).
    """
    route = await get_route(client, topic, timeout)
    if route is not None and route.read_queues:
        return route
    brokers = await master_brokers(client, timeout)
    if not brokers:
        raise BenchError("the name server knows no master broker to create the topic on")
    for _name, addr in sorted(brokers.items()):
        await create_topic(client, addr, topic, queues, timeout)
    deadline = time.monotonic() + wait
    while True:
        route = await get_route(client, topic, timeout)
        if route is not None and route.read_queues:
            return route
        if time.monotonic() > deadline:
            raise BenchError(f"topic {topic} created but no route appeared within {wait:.0f}s")
        await asyncio.sleep(0.2)


def create_topic_request(topic: str, queues: int = 4, order: bool = False) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17) with ``queues`` read and write queues, read + write."""
    return rq.create_topic(
        CreateTopicRequestHeader(
            topic=topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=PermName.READ_WRITE,
            topic_sys_flag=0,
            order=order,
        )
    )


async def create_topic(
    client: RemotingClient, broker_addr: str, topic: str, queues: int = 4, timeout: float = 3.0, order: bool = False
) -> None:
    """UPDATE_AND_CREATE_TOPIC (17) on one broker with ``queues`` read and write queues, perm 6."""
    resp = await client.invoke(broker_addr, create_topic_request(topic, queues, order), timeout=timeout)
    try:
        check_success(resp)
    except RMQError as exc:
        raise BenchError(f"UPDATE_AND_CREATE_TOPIC {topic} on {broker_addr}: {exc}") from None


async def queue_offset(client: RemotingClient, mq: MessageQueue, code: int, topic: str, timeout: float = 3.0) -> int:
    """GET_MAX_OFFSET (30) / GET_MIN_OFFSET (31) of one queue."""
    build = get_min_offset if code == RequestCode.GET_MIN_OFFSET else get_max_offset
    resp = await client.invoke(mq.broker_addr, build(topic, mq.queue_id), timeout=timeout)
    try:
        return parse_offset(resp)
    except RMQError as exc:
        raise BenchError(f"offset query {code} for {topic}/{mq.queue_id}: {exc}") from None


def send_header(
    group: str, topic: str, queue_id: int, properties: str, batch: bool = False, broker_name: str | None = None
) -> SendMessageRequestHeader:
    """A SEND header as Java's producer fills it (sent with V2's one-letter names by
    :func:`rmq.protocol.requests.message.send_message`)."""
    return SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        queue_id=queue_id,
        born_timestamp=int(time.time() * 1000),
        properties=properties,
        reconsume_times=0,
        unit_mode=False,
        batch=batch,
        broker_name=broker_name,
    )


#: ``--serialize`` names → the frame's serialize type (0 JSON, 1 ROCKETMQ binary).
SERIALIZE_TYPES = {"json": 0, "rocketmq": 1}


def send_request(
    group: str,
    topic: str,
    queue_id: int,
    properties: str,
    body: bytes,
    batch: bool = False,
    serialize: int = 0,
    broker_name: str | None = None,
) -> RemotingCommand:
    """SEND_MESSAGE_V2 (310), or SEND_BATCH_MESSAGE (320) with ``batch``.

    ``serialize=1`` sends the header as ROCKETMQ binary the way the Java client does with
    ``rocketmq.serialize.type=ROCKETMQ`` (language JAVA, the broker name in V2's ``n``); the
    broker answers in kind."""
    cmd = send_message(send_header(group, topic, queue_id, properties, batch, broker_name), body)
    if serialize:
        cmd.serialize_type = serialize
        cmd.language = "JAVA"
    return cmd


_uniq_prefix = uuid.uuid4().hex[:16].upper()


def uniq_key(seq: int) -> str:
    """A client-side message id (UNIQ_KEY) like the Java client's: 32 hex characters."""
    return f"{_uniq_prefix}{seq & 0xFFFFFFFFFFFFFFFF:016X}"


def properties_string(props: dict[str, str]) -> str:
    """The SEND header's properties string, as clients write it (trailing separator)."""
    return properties_to_string(props, trailing_separator=True)


def encode_batch(bodies: list[bytes], props: list[str]) -> bytes:
    """The SEND_BATCH_MESSAGE body: items as ``TOTALSIZE MAGIC BODYCRC FLAG BODYLEN body PROPLEN props``."""
    return encode_batch_items((0, body, prop) for body, prop in zip(bodies, props, strict=False))


def bench_main(args, coro, print_summary, succeeded) -> int:
    """Run one benchmark coroutine to its figures, print the summary (and, with ``--json``,
    the JSON line). Exit status: 0 when ``succeeded(figures)``, 1 when the run finished but
    failed, 2 when it could not run (unreachable name server or broker, refused request)."""
    try:
        figures = run(coro)
    except (BenchError, RMQError, OSError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print_summary(figures)
    if args.json:
        print_json(figures)
    return 0 if succeeded(figures) else 1


# ------------------------------------------------------------------------------ rmq standalone


def free_port() -> int:
    """A 127.0.0.1 port that was free a moment ago."""
    from rmq._testing import free_port as _free_port

    return _free_port()


class Standalone:
    """``python -m rmq standalone`` on free 127.0.0.1 ports with a fresh store, for ``make bench``.

    A thin layer over ``rmq._testing.StandaloneProcess`` (which launches the daemon, retries
    on a port clash and logs to a file): ``start()`` additionally waits until the name server
    routes TBW102 or lists a broker, i.e. the broker has registered, because the benchmarks
    find brokers through the name server. ``stop()`` sends SIGTERM and waits; ``cleanup()``
    also removes a store directory this object created. ``grpc=True`` (default False) serves
    the gRPC endpoint on a free port (``grpc_port``), retried as a clash if it is taken.
    """

    def __init__(
        self,
        store_dir: str | None = None,
        extra_args: list[str] | None = None,
        ready_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        tree: str | None = None,
        tls: bool = False,
        brokers: int = 1,
        grpc: bool = False,
    ):
        from rmq._testing import StandaloneProcess

        self._own_dir = store_dir is None
        self.store_dir = store_dir or tempfile.mkdtemp(prefix="rmq-bench-store-")
        # tls: enforcing, with a self-signed certificate made now; clients pass --tls-ca tls_ca.
        self.tls_ca: str | None = None
        extra_args = list(extra_args or [])
        if tls:
            cert, key = make_bench_certificate(self.store_dir)
            self.tls_ca = cert
            extra_args += [
                "--tls.server.mode=enforcing",
                f"--tls.server.certPath={cert}",
                f"--tls.server.keyPath={key}",
                f"--tls.client.trustCertPath={cert}",
            ]
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        # The daemon's real defaults (1 GiB CommitLog files), not the test harness's small files;
        # ``tree``: run the broker of another checkout (bench/rounds.py compares two).
        env = {"PYTHONPATH": os.path.abspath(tree)} if tree else None
        if tree:
            # an older checkout may not know properties the harness passes (--consolePort=0,
            # --metricsPort=0): it warns about them instead of refusing to start
            extra_args = ["--lenient-config", *extra_args]
        self.process = StandaloneProcess(
            os.path.join(self.store_dir, "store"),
            extra_args,
            start_timeout=ready_timeout,
            small_files=False,
            env=env,
            cwd=tree,
            brokers=brokers,
            grpc=grpc,
        )

    @property
    def namesrv_addr(self) -> str:
        return self.process.namesrv_addr

    @property
    def broker_addr(self) -> str:
        return self.process.broker_addr

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def grpc_port(self) -> int:
        """The gRPC endpoint's port (``grpc=True``), once started."""
        return self.process.grpc_port

    @property
    def pids(self) -> list[int]:
        """The standalone and, with ``brokers`` > 1, its broker processes (for ``--broker-pid``)."""
        return [self.process.pid, *self.process.broker_pids().values()]

    @property
    def log_path(self) -> str:
        return self.process.log_path

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.process.log_text().splitlines()[-lines:]) or "(no log)"

    async def start(self) -> Standalone:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.process.start)
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        deadline = time.monotonic() + self.ready_timeout
        tls = None
        if self.tls_ca is not None:
            from rmq.remoting.tls import client_context

            tls = client_context(trust_cert_path=self.tls_ca)
        client = RemotingClient([self.namesrv_addr], connect_timeout=1.0, tls=tls)
        try:
            while True:
                if self.process.proc.poll() is not None:
                    raise BenchError(f"rmq standalone exited with {self.process.proc.returncode}:\n{self.log_tail()}")
                try:
                    if await get_route(client, TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, timeout=1.0) is not None:
                        break
                    if await master_brokers(client, timeout=1.0):
                        break
                except Exception:  # the broker has not registered yet
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise BenchError(
                        f"the broker did not register with the name server within "
                        f"{self.ready_timeout:.0f}s:\n{self.log_tail()}"
                    )
                await asyncio.sleep(0.1)
        finally:
            await client.close()
        return self

    def stop(self) -> int | None:
        return self.process.stop(self.stop_timeout)

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)
