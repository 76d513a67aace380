"""Blocking raw-socket helpers for the hardening tests against an ``rmq standalone`` subprocess.

A bad client is written with plain sockets so that it can do what no SDK does: never read,
trickle bytes, stop inside a frame.
"""

from __future__ import annotations

import json
import os
import socket
import time

from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.remoting.codec import FrameDecoder, encode

SYSTEM_BUSY = 2
PULL_NOT_FOUND = 19
FLAG_SUSPEND_AND_SUBSCRIPTION = 2 | 4


def frame(cmd: RemotingCommand) -> bytes:
    return b"".join(bytes(p) for p in encode(cmd))


class Wire:
    """One blocking connection speaking frames."""

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
        self.sock.sendall(b"".join(frame(c) for c in cmds))

    def read_frame(self) -> RemotingCommand:
        while True:
            cmd = self.decoder.next_frame()
            if cmd is not None:
                return cmd
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionResetError("peer closed the connection")
            self.decoder.feed(chunk)

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
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


def send_message(wire: Wire, topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="hardening-producer",
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
) -> RemotingCommand:
    """A PULL_MESSAGE request; ``suspend_millis`` sets the suspend bit (long polling)."""
    sys_flag = FLAG_SUSPEND_AND_SUBSCRIPTION if suspend_millis is not None else 4
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
            "subscription": "*",
            "subVersion": "0",
        },
    )


def runtime_info(addr: str) -> dict[str, str]:
    w = Wire(addr)
    try:
        reply = w.call(RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
        return dict(json.loads(bytes(reply.body))["table"])
    finally:
        w.close()


def held_pulls(addr: str) -> int:
    return int(runtime_info(addr)["pullHoldRequestCount"])


def server_side_established(server_port: int, client_port: int) -> bool:
    """Is the broker's end of the connection from ``client_port`` still ESTABLISHED?"""
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
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def log_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
