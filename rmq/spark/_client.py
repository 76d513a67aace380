"""The calls the Spark connector makes, over the blocking transport.

Spark calls the data source from plain (non-asyncio) Python worker processes, so the connector
uses :class:`rmq.remoting.blocking.BlockingRemotingClient`; each call here is build → invoke →
parse with the shared :mod:`rmq.protocol.requests` (the asyncio SDK uses the same builders and
parsers). A non-success answer raises the matching :class:`~rmq.errors.BrokerResponseError`
with a note saying what was being done and where.

Workers are reused across tasks and micro-batches, so :func:`shared_client` keeps one client
per name-server list in the process, like Spark's Kafka consumer pool. Nothing here may be
pickled: readers and writers open (or look up) their client inside ``read()`` / ``write()``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from rmq.common.constants import ExpressionType
from rmq.common.message import PullSysFlag
from rmq.common.route import TopicRouteData
from rmq.errors import RMQError, TopicNotExistError
from rmq.protocol.codes import ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.consumer import (
    PullReply,
    get_max_offset,
    get_min_offset,
    parse_offset,
    parse_pull,
    parse_query_consumer_offset,
    pull_message,
    query_consumer_offset,
    search_offset,
    update_consumer_offset,
)
from rmq.protocol.requests.message import parse_send
from rmq.protocol.requests.namesrv import (
    get_all_topic_list,
    get_broker_cluster_info,
    get_route_info,
    parse_cluster_info,
    parse_topic_list,
    parse_topic_route,
)
from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
from rmq.remoting.blocking import BlockingRemotingClient
from rmq.spark.options import TlsProperties, client_tls_context
from rmq.types import MessageQueue, SendResult

__all__ = ["RocketMQClient", "close_shared_clients", "shared_client"]

log = logging.getLogger("rmq.spark")

T = TypeVar("T")


def _parse(addr: str, resp: RemotingCommand, parse: Callable[[RemotingCommand], T], what: str) -> T:
    try:
        return parse(resp)
    except RMQError as e:
        e.add_note(f"while {what} at {addr}")
        raise


class RocketMQClient(BlockingRemotingClient):
    """Blocking name-server and broker calls used by the Spark source and sink.

    Args:
        name_servers: ``host:port`` addresses, tried in order on failure.
        timeout: seconds allowed for each call (default 10.0).
        connect_timeout: seconds allowed for each TCP connect (default 3.0).
    """

    # ------------------------------------------------------------------ name server

    def topic_route(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC. Raises ``TopicNotExistError`` (code 17) for unknown topics."""
        resp = self.invoke_namesrv(get_route_info(topic))
        route = _parse(self.name_servers[0], resp, parse_topic_route, f"looking up the route of topic {topic!r}")
        if route is None:
            raise TopicNotExistError(
                ResponseCode.TOPIC_NOT_EXIST,
                resp.remark or f"No topic route info in name server for the topic: {topic}",
            )
        return route

    def all_topics(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name servers know."""
        return _parse(
            self.name_servers[0], self.invoke_namesrv(get_all_topic_list()), parse_topic_list, "listing topics"
        )

    def cluster_names(self) -> set[str]:
        """Cluster and broker names (GET_BROKER_CLUSTER_INFO): RocketMQ lists them as topics
        too, so a subscribePattern must skip them. Empty if the name server cannot say."""
        try:
            return parse_cluster_info(self.invoke_namesrv(get_broker_cluster_info())).names()
        except RMQError as e:
            log.warning("could not read the cluster info: %s", e)
            return set()

    # ------------------------------------------------------------------ broker: offsets

    def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MIN_OFFSET: the smallest queue offset still stored."""
        return self.queue_offsets(addr, [("min", topic, queue_id, None)])[0]

    def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET: the next queue offset to be written."""
        return self.queue_offsets(addr, [("max", topic, queue_id, None)])[0]

    def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: first offset stored at or after ``timestamp_ms`` (else the max)."""
        return self.queue_offsets(addr, [("time", topic, queue_id, timestamp_ms)])[0]

    def queue_offsets(self, addr: str, queries: Sequence[tuple[str, str, int, int | None]]) -> list[int]:
        """Many offset lookups against one broker in one pipelined round trip.

        ``queries`` holds ``(kind, topic, queue_id, timestamp)`` with kind ``"min"``, ``"max"``
        or ``"time"``. Planning a read over hundreds of queues costs one round trip per broker.
        """
        cmds = []
        for kind, topic, qid, ts in queries:
            if kind == "time":
                cmds.append(search_offset(topic, qid, int(ts or 0)))
            elif kind == "min":
                cmds.append(get_min_offset(topic, qid))
            elif kind == "max":
                cmds.append(get_max_offset(topic, qid))
            else:
                raise ValueError(f"unknown offset query kind {kind!r}")
        return [
            _parse(addr, resp, parse_offset, f"reading the {kind} offset of {topic}/{qid}")
            for (kind, topic, qid, _), resp in zip(queries, self.invoke_all(addr, cmds), strict=True)
        ]

    # ------------------------------------------------------------------ broker: pull

    @staticmethod
    def pull_request(
        group: str, topic: str, queue_id: int, offset: int, max_nums: int, subscription: str
    ) -> RemotingCommand:
        """A PULL_MESSAGE that is answered at once: a range read never waits for new messages,
        so only ``FLAG_SUBSCRIPTION`` is set (no suspend, no commit)."""
        return pull_message(
            PullMessageRequestHeader(
                consumer_group=group,
                topic=topic,
                queue_id=queue_id,
                queue_offset=offset,
                max_msg_nums=max_nums,
                sys_flag=PullSysFlag.FLAG_SUBSCRIPTION,
                subscription=subscription,
                expression_type=ExpressionType.TAG,
            )
        )

    @staticmethod
    def pull_response(addr: str, resp: RemotingCommand, topic: str, queue_id: int) -> PullReply:
        """Parse a PULL_MESSAGE answer (:func:`rmq.protocol.requests.consumer.parse_pull`); other codes raise."""
        return _parse(addr, resp, parse_pull, f"pulling {topic}/{queue_id}")

    # ------------------------------------------------------------------ broker: send

    def send_requests(
        self, addr: str, sends: Sequence[tuple[RemotingCommand, MessageQueue, str]], timeout: float | None = None
    ) -> list[SendResult]:
        """Pipelined sends of ``(request, queue, description)``; any failure raises the broker's
        error (with its remark and the description)."""
        # A send is not idempotent: a failed connection is reported, not silently retried
        # (Spark retries the task; delivery is at-least-once either way).
        answers = self.invoke_all(addr, [cmd for cmd, _, _ in sends], timeout, idempotent=False)
        return [
            _parse(addr, resp, lambda r: parse_send(r, mq), desc)  # noqa: B023 - called at once
            for (_, mq, desc), resp in zip(sends, answers, strict=True)
        ]

    # ------------------------------------------------------------------ broker: consumer offsets

    def update_consumer_offsets(self, addr: str, group: str, items: Sequence[tuple[str, int, int]]) -> None:
        """UPDATE_CONSUMER_OFFSET for many ``(topic, queue_id, offset)`` in one pipelined round trip."""
        cmds = [update_consumer_offset(group, t, q, o) for t, q, o in items]
        for (t, q, o), resp in zip(items, self.invoke_all(addr, cmds), strict=True):
            _parse(addr, resp, check_success, f"committing offset {o} of {t}/{q} for group {group!r}")

    def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET, waiting for the broker's answer."""
        self.update_consumer_offsets(addr, group, [(topic, queue_id, offset)])

    def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int | None:
        """QUERY_CONSUMER_OFFSET; None when the group has no offset stored (code 22)."""
        return _parse(
            addr,
            self.invoke(addr, query_consumer_offset(group, topic, queue_id)),
            parse_query_consumer_offset,
            f"querying the offset of {topic}/{queue_id} for group {group!r}",
        )


# --------------------------------------------------------------------------- per-process cache

_shared: dict[tuple[tuple[str, ...], float, SessionCredentials | None, TlsProperties], RocketMQClient] = {}
_shared_pid = os.getpid()
_shared_lock = threading.Lock()


def shared_client(
    name_servers: Sequence[str],
    timeout: float,
    *,
    credentials: SessionCredentials | None = None,
    tls: TlsProperties = (),
) -> RocketMQClient:
    """The process's client for these name servers, ACL credentials and TLS options (created
    on first use); with ``credentials`` every request it sends is signed (``accessKey`` /
    ``secretKey`` options).

    Spark reuses Python workers across tasks, so connections outlive one task; a forked
    child never inherits its parent's sockets (the cache is reset when the pid changes).
    """
    global _shared_pid
    key = (tuple(name_servers), float(timeout), credentials, tuple(tls))
    with _shared_lock:
        if os.getpid() != _shared_pid:
            _shared.clear()
            _shared_pid = os.getpid()
        c = _shared.get(key)
        if c is None:
            c = _shared[key] = RocketMQClient(name_servers, timeout=timeout, tls=client_tls_context(tls))
            if credentials is not None:
                c.add_rpc_hook(AclClientRPCHook(credentials))
        return c


def close_shared_clients() -> None:
    """Close every cached client (tests, and the streaming source's ``stop()``)."""
    with _shared_lock:
        for c in _shared.values():
            c.close()
        _shared.clear()
