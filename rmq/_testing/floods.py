"""Blocking raw-socket clients for floods and hardening, shared by the tests
(tests/remoting/test_remoting_floods.py, the connection-abuse, long-polling and bounded-log
tests, tests/namesrv/test_namesrv_hardening.py) and bench/flood_bench.py.

A bad client is written with plain sockets so that it can do what no SDK does: never read,
trickle bytes, stop inside a frame, pipeline thousands of requests in one write::

    wire = Wire(proc.broker_addr)
    assert send_message(wire, "T", b"x").code == ResponseCode.SUCCESS
    reader = flood(wire, [pull("T", 1) for _ in range(10_000)])  # sent and read by threads
    reader.join(120); reader.codes                                 # {PULL_NOT_FOUND: 10000}

Only the public protocol is spoken, so every helper works against Apache RocketMQ as well.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import zlib
from collections.abc import Iterable, Mapping

from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.remoting.codec import FrameDecoder, encode

__all__ = [
    "FloodReader",
    "Wire",
    "flood",
    "frame",
    "held_pulls",
    "log_size",
    "pull",
    "register_broker_body",
    "register_broker_cmd",
    "rss_bytes",
    "runtime_info",
    "send_message",
    "server_side_established",
]

# PullSysFlag: FLAG_SUBSCRIPTION (4), plus FLAG_SUSPEND (2) for a long poll
_FLAG_SUBSCRIPTION = 4
_FLAG_SUSPEND = 2


def frame(cmd: RemotingCommand) -> bytes:
    """``cmd`` as the bytes of one frame."""
    return b"".join(bytes(p) for p in encode(cmd))


class Wire:
    """One blocking connection speaking frames.

    Args:
        addr: ``"host:port"``.
        rcvbuf: SO_RCVBUF set before connecting (so loopback autotuning cannot absorb the
            replies of a client that never reads); default None = the kernel's.
        timeout: seconds any one socket operation may take; default 20.
    """

    def __init__(self, addr: str, *, rcvbuf: int | None = None, timeout: float = 20.0) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, so loopback autotuning cannot absorb replies
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, int(port)))
        self.decoder = FrameDecoder()

    @property
    def local_port(self) -> int:
        return int(self.sock.getsockname()[1])

    def send(self, *cmds: RemotingCommand) -> None:
        """All of ``cmds`` in one write (pipelined)."""
        self.sock.sendall(b"".join(frame(c) for c in cmds))

    def read_frame(self) -> RemotingCommand:
        """The next frame from the peer; ConnectionResetError when it closed."""
        while True:
            cmd = self.decoder.next_frame()
            if cmd is not None:
                return cmd
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("peer closed the connection")
            self.decoder.feed(chunk)

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        """Send ``cmd`` and return its answer (frames with other opaques are skipped)."""
        self.send(cmd)
        while True:
            reply = self.read_frame()
            if reply.opaque == cmd.opaque:
                return reply

    def drain_until_closed(self, limit: int) -> int:
        """Read until the peer closes (EOF or reset); returns the bytes read. Raises
        AssertionError if more than ``limit`` bytes arrive (the peer kept the connection)."""
        got = 0
        while True:
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return got
            if not chunk:
                return got
            got += len(chunk)
            assert got <= limit, f"received {got} bytes, more than {limit}: the connection was not dropped"

    def close(self) -> None:
        self.sock.close()


class FloodReader(threading.Thread):
    """Reads ``n`` answers from ``wire`` and counts them by response code.

    Attributes:
        count: answers read so far.
        codes: ``{response code: answers}``.
    """

    def __init__(self, wire: Wire, n: int) -> None:
        super().__init__(daemon=True, name="flood-reader")
        self.wire, self.n = wire, n
        self.count = 0
        self.codes: dict[int, int] = {}

    def run(self) -> None:
        while self.count < self.n:
            code = self.wire.read_frame().code
            self.codes[code] = self.codes.get(code, 0) + 1
            self.count += 1


def flood(wire: Wire, requests: list[RemotingCommand]) -> FloodReader:
    """Send ``requests`` on ``wire`` in one write from a thread, and read their answers in
    another: returns the started reader (``join`` it; ``count`` says how far it got)."""
    reader = FloodReader(wire, len(requests))
    reader.start()
    threading.Thread(target=wire.send, args=tuple(requests), daemon=True, name="flood-sender").start()
    return reader


def send_message(
    wire: Wire, topic: str, body: bytes, queue_id: int = 0, group: str = "hardening-producer"
) -> RemotingCommand:
    """One SEND_MESSAGE of ``body`` to ``topic``/``queue_id``; its answer."""
    header = SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        queue_id=queue_id,
        born_timestamp=int(time.time() * 1000),
        properties="",
    )
    return wire.call(RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body))


def pull(
    topic: str,
    offset: int,
    *,
    group: str = "hardening-group",
    suspend_millis: int | None = None,
    max_msg_nums: int = 32,
    expression: str = "*",
    expression_type: str = "TAG",
    sub_version: int = 0,
) -> RemotingCommand:
    """A PULL_MESSAGE of queue 0 from ``offset``, committing nothing; ``suspend_millis`` sets
    the suspend bit (long polling). Defaults: 32 messages, TAG ``*``, subVersion 0."""
    sys_flag = _FLAG_SUBSCRIPTION | (_FLAG_SUSPEND if suspend_millis is not None else 0)
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": group,
            "topic": topic,
            "queueId": "0",
            "queueOffset": str(offset),
            "maxMsgNums": str(max_msg_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_millis or 0),
            "subscription": expression,
            "subVersion": str(sub_version),
            "expressionType": expression_type,
        },
    )


def register_broker_body(topics: Mapping[str, int] | Iterable[str], counter: int = 1) -> bytes:
    """Java's ``RegisterBrokerBody`` JSON for a topic table: ``topics`` maps each name to its
    queue count (an iterable of names means 4 queues each), perm 6, data version ``counter``."""
    queues = topics if isinstance(topics, Mapping) else dict.fromkeys(topics, 4)
    table = {
        t: {"topicName": t, "readQueueNums": q, "writeQueueNums": q, "perm": 6, "topicSysFlag": 0}
        for t, q in queues.items()
    }
    return json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": table,
                "dataVersion": {"timestamp": 1, "counter": counter},
            },
            "filterServerList": [],
        }
    ).encode()


def register_broker_cmd(
    body: bytes,
    *,
    addr: str = "127.0.0.1:1",
    name: str = "broker-a",
    broker_id: int = 0,
    cluster: str = "DefaultCluster",
) -> RemotingCommand:
    """A REGISTER_BROKER of ``body`` (e.g. ``register_broker_body``) with its ``bodyCrc32``,
    as a broker at ``addr`` named ``name`` in ``cluster`` sends it."""
    ext = {
        "brokerAddr": addr,
        "brokerId": str(broker_id),
        "brokerName": name,
        "clusterName": cluster,
        "haServerAddr": "",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


def runtime_info(addr: str) -> dict[str, str]:
    """The broker's GET_BROKER_RUNTIME_INFO table, on a connection of its own."""
    w = Wire(addr)
    try:
        reply = w.call(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
        return dict(json.loads(reply.body_bytes())["table"])
    finally:
        w.close()


def held_pulls(addr: str) -> int:
    """How many long polls the broker holds (``pullHoldRequestCount``)."""
    return int(runtime_info(addr)["pullHoldRequestCount"])


def server_side_established(server_port: int, client_port: int) -> bool:
    """Is the server's end of the connection from ``client_port`` still ESTABLISHED?"""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                lines = f.readlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if local_port == server_port and remote_port == client_port and fields[3] == "01":
                return True
    return False


def rss_bytes(pid: int) -> int:
    """Process ``pid``'s resident set size in bytes (``/proc/<pid>/status`` VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def log_size(path: str) -> int:
    """The size of the file at ``path``; 0 when it does not exist."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
