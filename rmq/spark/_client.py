"""A small blocking RocketMQ client for Spark's Python workers.

Spark calls the data source from plain (non-asyncio) Python worker processes, one task at a
time, so the connector talks to the name server and the brokers over ordinary blocking sockets
driven by the sans-IO codec in :mod:`rmq.remoting.codec`. Every call has a deadline; a dead or
silent peer becomes a :class:`~rmq.errors.RemotingConnectError` /
:class:`~rmq.errors.RemotingTimeoutError` (both retriable), and a non-success answer becomes the
matching :class:`~rmq.errors.BrokerResponseError` carrying the broker's remark.

Workers are reused across tasks and micro-batches, so :func:`shared_client` keeps one client
per name-server list in the process, like Spark's Kafka consumer pool. Nothing here may be
pickled: readers and writers open (or look up) their client inside ``read()`` / ``write()``.
"""
from __future__ import annotations

import json
import logging
import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from rmq.common.message import PullSysFlag
from rmq.errors import (
    RemotingCommandError,
    RemotingConnectError,
    RemotingTimeoutError,
    for_code,
)
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand

__all__ = [
    "BrokerData",
    "QueueData",
    "TopicRoute",
    "PullResponse",
    "SendResponse",
    "BlockingConnection",
    "RocketMQClient",
    "shared_client",
    "close_shared_clients",
    "PERM_READ",
    "PERM_WRITE",
    "MASTER_ID",
]

log = logging.getLogger("rmq.spark")

PERM_READ = 4  # Java PermName.PERM_READ
PERM_WRITE = 2  # Java PermName.PERM_WRITE
MASTER_ID = "0"  # MixAll.MASTER_ID, as a brokerAddrs key

# PullSysFlag: FLAG_SUBSCRIPTION says the subscription expression is present. We never set
# FLAG_SUSPEND: a range read must answer at once, it never waits for new messages.
_PULL_FLAG_SUBSCRIPTION = PullSysFlag.FLAG_SUBSCRIPTION


@dataclass(frozen=True)
class QueueData:
    """One broker's share of a topic (Java ``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclass(frozen=True)
class BrokerData:
    """One broker name and its addresses by broker id (Java ``BrokerData``); id "0" is the master."""

    broker_name: str
    broker_addrs: dict

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass(frozen=True)
class TopicRoute:
    """Route of a topic as the name server returns it for GET_ROUTEINFO_BY_TOPIC."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]

    def master_addr(self, broker_name: str) -> str | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b.master_addr
        return None

    def readable_queues(self) -> list[tuple[str, int]]:
        """``(broker_name, queue_id)`` of every readable queue whose broker has a master, sorted."""
        out = []
        for q in self.queue_datas:
            if q.perm & PERM_READ and self.master_addr(q.broker_name):
                out.extend((q.broker_name, i) for i in range(q.read_queue_nums))
        return sorted(out)

    def writable_queues(self) -> list[tuple[str, int]]:
        """``(broker_name, queue_id)`` of every writable queue whose broker has a master, sorted."""
        out = []
        for q in self.queue_datas:
            if q.perm & PERM_WRITE and self.master_addr(q.broker_name):
                out.extend((q.broker_name, i) for i in range(q.write_queue_nums))
        return sorted(out)

    @classmethod
    def from_json(cls, topic: str, body: bytes) -> "TopicRoute":
        """Parse the route JSON body (wire-contract §4); raises ``RemotingCommandError`` if malformed."""
        try:
            d = json.loads(body)
            qds = tuple(
                QueueData(
                    str(q["brokerName"]),
                    int(q.get("readQueueNums", 0)),
                    int(q.get("writeQueueNums", 0)),
                    int(q.get("perm", PERM_READ | PERM_WRITE)),
                )
                for q in d.get("queueDatas") or ()
            )
            bds = tuple(
                BrokerData(str(b["brokerName"]), {str(k): str(v) for k, v in (b.get("brokerAddrs") or {}).items()})
                for b in d.get("brokerDatas") or ()
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise RemotingCommandError(f"malformed route data for topic {topic!r}: {e}") from e
        return cls(topic, qds, bds)


@dataclass
class PullResponse:
    """What a PULL_MESSAGE answered: the code (0 found, 19 not found, 20 retry/filtered,
    21 offset moved) and the offsets the broker reported, plus the raw message records."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes
    remark: str | None = None


@dataclass
class SendResponse:
    """A successful send: the queue it landed in and the broker's message id(s)."""

    code: int
    msg_id: str
    queue_id: int
    queue_offset: int


def _ext_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    v = cmd.ext_fields.get(name)
    if v is None or v == "":
        if default is None:
            raise RemotingCommandError(f"response to code {cmd.code} lacks {name!r}: {cmd.ext_fields!r}")
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        raise RemotingCommandError(f"response field {name!r} is not a number: {v!r}") from None


def _raise_for(addr: str, cmd: RemotingCommand, what: str) -> None:
    err = for_code(cmd.code)(cmd.code, cmd.remark)
    err.add_note(f"while {what} at {addr}")
    raise err


class BlockingConnection:
    """One TCP connection to a broker or name server, used by one thread at a time.

    Requests may be pipelined (:meth:`invoke_all`): they are all written, then the answers are
    matched back by ``opaque``, which is what the RocketMQ protocol is built for.
    """

    def __init__(self, addr: str, connect_timeout: float = 3.0) -> None:
        self.addr = addr
        host, _, port = addr.rpartition(":")
        try:
            self._sock = socket.create_connection((host, int(port)), timeout=connect_timeout)
        except (OSError, ValueError) as e:
            raise RemotingConnectError(addr, f"connect to {addr} failed: {e}") from e
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder(max_frame_length=64 * 1024 * 1024)
        self.closed = False

    def looks_dead(self) -> bool:
        """True when the peer has closed the connection (e.g. the broker's idle timeout while
        a Spark worker sat between tasks): the socket reads EOF without blocking."""
        if self.closed:
            return True
        try:
            readable, _, _ = select.select([self._sock], [], [], 0)
            if not readable:
                return False
            return self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._sock.close()
            except OSError:
                pass

    def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send one request and wait up to ``timeout`` seconds for its response."""
        return self.invoke_all([cmd], timeout)[0]

    def invoke_all(self, cmds: Sequence[RemotingCommand], timeout: float) -> list[RemotingCommand]:
        """Write every request, then wait up to ``timeout`` seconds (in total) for all answers.

        Returns the responses in the order of ``cmds``. Any transport failure closes the
        connection (its stream position is unknown afterwards) and raises.
        """
        if self.closed:
            raise RemotingConnectError(self.addr, f"connection to {self.addr} is closed")
        deadline = time.monotonic() + timeout
        want = {c.opaque: i for i, c in enumerate(cmds)}
        out: list[RemotingCommand | None] = [None] * len(cmds)
        try:
            parts = []
            for c in cmds:
                parts.extend(encode(c))
            self._sock.settimeout(timeout)
            self._sock.sendall(b"".join(parts) if len(parts) > 1 else parts[0])
            missing = len(cmds)
            while missing:
                for resp in self._decoder:
                    i = want.pop(resp.opaque, None)
                    if i is None or not resp.is_response:
                        # A late answer to an abandoned call, or a broker->client request
                        # (e.g. NOTIFY_CONSUMER_IDS_CHANGED) that a range reader can ignore.
                        log.debug("ignoring unexpected command from %s: %r", self.addr, resp)
                        continue
                    out[i] = resp
                    missing -= 1
                if not missing:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                self._sock.settimeout(left)
                data = self._sock.recv(1 << 20)
                if not data:
                    raise ConnectionResetError("peer closed the connection")
                self._decoder.feed(data)
        except socket.timeout:
            self.close()
            raise RemotingTimeoutError(self.addr, timeout) from None
        except OSError as e:
            self.close()
            raise RemotingConnectError(self.addr, f"connection to {self.addr} failed: {e}") from e
        except RemotingCommandError:
            self.close()
            raise
        return out  # type: ignore[return-value]


class RocketMQClient:
    """Blocking name-server and broker calls used by the Spark source and sink.

    Args:
        name_servers: ``host:port`` addresses, tried in order on failure.
        timeout: seconds allowed for each call (default 10.0).
        connect_timeout: seconds allowed for each TCP connect (default 3.0).
    """

    def __init__(self, name_servers: Sequence[str], *, timeout: float = 10.0, connect_timeout: float = 3.0) -> None:
        if not name_servers:
            raise ValueError("at least one name server address is required")
        self.name_servers = list(name_servers)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._conns: dict[str, BlockingConnection] = {}
        self._lock = threading.Lock()  # the streaming runner may call from more than one thread

    # ------------------------------------------------------------------ plumbing

    def _conn(self, addr: str) -> BlockingConnection:
        c = self._conns.get(addr)
        if c is not None and not c.closed and c.looks_dead():
            log.info("connection to %s was closed by the peer; reconnecting", addr)
            c.close()
        if c is None or c.closed:
            c = BlockingConnection(addr, self.connect_timeout)
            self._conns[addr] = c
        return c

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None, *, idempotent: bool = True) -> RemotingCommand:
        """One request to ``addr``. A cached connection that turns out dead (the peer restarted
        since the last task) is replaced and an idempotent request retried once."""
        return self.invoke_all(addr, [cmd], timeout, idempotent=idempotent)[0]

    def invoke_all(self, addr: str, cmds: Sequence[RemotingCommand], timeout: float | None = None, *, idempotent: bool = True) -> list[RemotingCommand]:
        """Pipelined requests to one address; see :meth:`BlockingConnection.invoke_all`."""
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            conn = self._conns.get(addr)
            reused = conn is not None and not conn.closed
            try:
                return self._conn(addr).invoke_all(cmds, timeout)
            except RemotingConnectError:
                if not (reused and idempotent):
                    raise
                log.info("connection to %s went away; reconnecting once", addr)
                return self._conn(addr).invoke_all(cmds, timeout)

    def invoke_namesrv(self, cmd: RemotingCommand) -> RemotingCommand:
        """A request to the first name server that answers."""
        last: Exception | None = None
        for addr in self.name_servers:
            try:
                return self.invoke(addr, cmd)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                log.warning("name server %s failed: %s", addr, e)
                last = e
        assert last is not None
        raise last

    def close(self) -> None:
        with self._lock:
            for c in self._conns.values():
                c.close()
            self._conns.clear()

    # ------------------------------------------------------------------ name server

    def topic_route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC. Raises ``TopicNotExistError`` (code 17) for unknown topics."""
        resp = self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(self.name_servers[0], resp, f"looking up the route of topic {topic!r}")
        return TopicRoute.from_json(topic, resp.body_bytes())

    def all_topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name servers know."""
        resp = self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(self.name_servers[0], resp, "listing topics")
        try:
            return sorted(str(t) for t in json.loads(resp.body_bytes()).get("topicList") or ())
        except (ValueError, AttributeError) as e:
            raise RemotingCommandError(f"malformed topic list: {e}") from e

    def cluster_names(self) -> set[str]:
        """Cluster and broker names (GET_BROKER_CLUSTER_INFO): RocketMQ lists them as topics
        too, so a subscribePattern must skip them. Empty if the name server cannot say."""
        try:
            resp = self.invoke_namesrv(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
            if resp.code != ResponseCode.SUCCESS:
                return set()
            d = json.loads(resp.body_bytes())
            names = set(d.get("brokerAddrTable") or ())
            for cluster, brokers in (d.get("clusterAddrTable") or {}).items():
                names.add(cluster)
                names.add(f"{cluster}_REPLY_TOPIC")
                names.update(brokers or ())
            return names
        except (RemotingCommandError, ValueError, AttributeError, TypeError) as e:
            log.warning("could not read the cluster info: %s", e)
            return set()

    # ------------------------------------------------------------------ broker: offsets

    def _offset_call(self, addr: str, code: int, fields: dict, what: str) -> int:
        resp = self.invoke(addr, RemotingCommand.request(code, fields))
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(addr, resp, what)
        return _ext_int(resp, "offset")

    def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MIN_OFFSET: the smallest queue offset still stored."""
        return self._offset_call(addr, RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id},
                                 f"reading the min offset of {topic}/{queue_id}")

    def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET: the next queue offset to be written."""
        return self._offset_call(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id},
                                 f"reading the max offset of {topic}/{queue_id}")

    def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: first offset stored at or after ``timestamp_ms`` (else the max)."""
        return self._offset_call(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms},
            f"searching {topic}/{queue_id} for timestamp {timestamp_ms}")

    def queue_offsets(self, addr: str, queries: Sequence[tuple[str, str, int, int | None]]) -> list[int]:
        """Many offset lookups against one broker in one pipelined round trip.

        ``queries`` holds ``(kind, topic, queue_id, timestamp)`` with kind ``"min"``, ``"max"``
        or ``"time"``. Planning a read over hundreds of queues costs one round trip per broker.
        """
        codes = {"min": RequestCode.GET_MIN_OFFSET, "max": RequestCode.GET_MAX_OFFSET,
                 "time": RequestCode.SEARCH_OFFSET_BY_TIMESTAMP}
        cmds = []
        for kind, topic, qid, ts in queries:
            fields = {"topic": topic, "queueId": qid}
            if kind == "time":
                fields["timestamp"] = ts
            cmds.append(RemotingCommand.request(codes[kind], fields))
        out = []
        for (kind, topic, qid, _), resp in zip(queries, self.invoke_all(addr, cmds) if cmds else []):
            if resp.code != ResponseCode.SUCCESS:
                _raise_for(addr, resp, f"reading the {kind} offset of {topic}/{qid}")
            out.append(_ext_int(resp, "offset"))
        return out

    # ------------------------------------------------------------------ broker: pull

    def pull_request(self, group: str, topic: str, queue_id: int, offset: int, max_nums: int,
                     subscription: str) -> RemotingCommand:
        """A non-suspended PULL_MESSAGE request (answered at once, never held)."""
        return RemotingCommand.request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": group,
            "topic": topic,
            "queueId": queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": _PULL_FLAG_SUBSCRIPTION,
            "commitOffset": 0,
            "suspendTimeoutMillis": 0,
            "subscription": subscription,
            "subVersion": 0,
            "expressionType": "TAG",
        })

    @staticmethod
    def pull_response(addr: str, resp: RemotingCommand, topic: str, queue_id: int) -> PullResponse:
        """Turn a PULL_MESSAGE answer into a :class:`PullResponse`; other codes raise."""
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                             ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
            _raise_for(addr, resp, f"pulling {topic}/{queue_id}")
        body = resp.body
        if body is not None and type(body) is not bytes:
            body = resp.body_bytes()
        return PullResponse(
            code=resp.code,
            next_begin_offset=_ext_int(resp, "nextBeginOffset"),
            min_offset=_ext_int(resp, "minOffset", 0),
            max_offset=_ext_int(resp, "maxOffset", 0),
            body=body or b"",
            remark=resp.remark,
        )

    def pull(self, addr: str, group: str, topic: str, queue_id: int, offset: int, max_nums: int,
             subscription: str = "*") -> PullResponse:
        """One PULL_MESSAGE without the suspend flag."""
        resp = self.invoke(addr, self.pull_request(group, topic, queue_id, offset, max_nums, subscription))
        return self.pull_response(addr, resp, topic, queue_id)

    # ------------------------------------------------------------------ broker: send

    def send_requests(self, addr: str, cmds: Sequence[RemotingCommand], what: Iterable[str],
                      timeout: float | None = None) -> list[SendResponse]:
        """Pipelined sends; any failure raises the broker's error (with its remark)."""
        out = []
        # A send is not idempotent: a failed connection is reported, not silently retried
        # (Spark retries the task; delivery is at-least-once either way).
        for resp, desc in zip(self.invoke_all(addr, cmds, timeout, idempotent=False), what):
            if resp.code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                                 ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE):
                _raise_for(addr, resp, desc)
            out.append(SendResponse(resp.code, str(resp.ext_fields.get("msgId", "")),
                                    _ext_int(resp, "queueId", -1), _ext_int(resp, "queueOffset", -1)))
        return out

    # ------------------------------------------------------------------ broker: consumer offsets

    def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int,
                               timeout: float | None = None) -> None:
        """UPDATE_CONSUMER_OFFSET, waiting for the broker's answer."""
        resp = self.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}), timeout)
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(addr, resp, f"committing offset {offset} of {topic}/{queue_id} for group {group!r}")

    def update_consumer_offsets(self, addr: str, group: str, items: Sequence[tuple[str, int, int]]) -> None:
        """UPDATE_CONSUMER_OFFSET for many ``(topic, queue_id, offset)`` in one pipelined round trip."""
        cmds = [RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": t, "queueId": q, "commitOffset": o}) for t, q, o in items]
        for (t, q, o), resp in zip(items, self.invoke_all(addr, cmds)):
            if resp.code != ResponseCode.SUCCESS:
                _raise_for(addr, resp, f"committing offset {o} of {t}/{q} for group {group!r}")

    def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the group has no offset stored (code 22)."""
        resp = self.invoke(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id}))
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            _raise_for(addr, resp, f"querying the offset of {topic}/{queue_id} for group {group!r}")
        return _ext_int(resp, "offset")


# --------------------------------------------------------------------------- per-process cache

_shared: dict[tuple, RocketMQClient] = {}
_shared_pid = os.getpid()
_shared_lock = threading.Lock()


def shared_client(name_servers: Sequence[str], timeout: float) -> RocketMQClient:
    """The process's client for these name servers (created on first use).

    Spark reuses Python workers across tasks, so connections outlive one task; a forked
    child never inherits its parent's sockets (the cache is reset when the pid changes).
    """
    global _shared_pid
    key = (tuple(name_servers), float(timeout))
    with _shared_lock:
        if os.getpid() != _shared_pid:
            _shared.clear()
            _shared_pid = os.getpid()
        c = _shared.get(key)
        if c is None:
            c = _shared[key] = RocketMQClient(name_servers, timeout=timeout)
        return c


def close_shared_clients() -> None:
    """Close every cached client (tests, and the streaming source's ``stop()``)."""
    with _shared_lock:
        for c in _shared.values():
            c.close()
        _shared.clear()

