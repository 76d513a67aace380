"""rmq.remoting.blocking: the blocking transport, against a real ``rmq standalone`` (with the
shared builders and parsers of rmq.protocol.requests) and against small socket peers that
misbehave on purpose (answers out of order, silence, a hang-up)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from rmq._testing import StandaloneProcess, wait_until_sync
from rmq.errors import RemotingConnectError, RemotingTimeoutError
from rmq.protocol.headers.consumer import PullMessageRequestHeader
from rmq.protocol.headers.message import SendMessageRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader
from rmq.protocol.requests import check_success
from rmq.protocol.requests.consumer import (
    get_max_offset,
    get_min_offset,
    parse_offset,
    parse_pull,
    parse_query_consumer_offset,
    pull_message,
    query_consumer_offset,
    update_consumer_offset,
)
from rmq.protocol.requests.message import parse_send, send_message
from rmq.protocol.requests.namesrv import get_all_topic_list, get_route_info, parse_topic_list, parse_topic_route
from rmq.protocol.requests.topic import create_topic
from rmq.remoting.blocking import BlockingConnection, BlockingRemotingClient
from rmq.remoting.codec import FrameDecoder, encode
from rmq.types import MessageQueue, PullStatus, SendStatus

pytestmark = pytest.mark.integration  # servers and brokers to call


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    proc = StandaloneProcess(tmp_path_factory.mktemp("blocking") / "store").start()
    try:
        yield proc
    finally:
        assert proc.stop() == 0, proc.log_text()[-2000:]


def test_calls_against_a_real_broker(standalone):
    client = BlockingRemotingClient([standalone.namesrv_addr], timeout=10.0)
    broker = standalone.broker_addr
    try:
        check_success(
            client.invoke(
                broker, create_topic(CreateTopicRequestHeader(topic="BlockingT", read_queue_nums=2, write_queue_nums=2))
            )
        )
        route = None

        def routed() -> bool:
            nonlocal route
            route = parse_topic_route(client.invoke_namesrv(get_route_info("BlockingT")))
            return route is not None and len(route.writable_queues()) == 2

        wait_until_sync(routed, timeout=10, what="the route of BlockingT")
        assert route.master_addr(route.queue_datas[0].broker_name) == broker

        # pipelined sends: all written at once, answers matched by opaque
        sends = [
            send_message(
                SendMessageRequestHeader(
                    producer_group="PG", topic="BlockingT", queue_id=i % 2, properties="WAIT\x01true\x02"
                ),
                f"m{i}".encode(),
            )
            for i in range(10)
        ]
        results = [parse_send(r, MessageQueue("BlockingT", "b", -1)) for r in client.invoke_all(broker, sends)]
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert sorted(r.queue_offset for r in results if r.queue_id == 0) == [0, 1, 2, 3, 4]

        offsets = client.invoke_all(
            broker, [get_min_offset("BlockingT", 0), get_max_offset("BlockingT", 0), get_max_offset("BlockingT", 1)]
        )
        assert [parse_offset(r) for r in offsets] == [0, 5, 5]

        reply = parse_pull(
            client.invoke(
                broker,
                pull_message(
                    PullMessageRequestHeader(
                        consumer_group="G",
                        topic="BlockingT",
                        queue_id=1,
                        queue_offset=0,
                        max_msg_nums=32,
                        sys_flag=4,
                        subscription="*",
                    )
                ),
            )
        )
        assert reply.status is PullStatus.FOUND and reply.next_begin_offset == 5 and reply.body

        # a new group on a queue that still starts at 0 reads 0 (Java ConsumerManageProcessor)
        assert parse_query_consumer_offset(client.invoke(broker, query_consumer_offset("G", "BlockingT", 1))) == 0
        check_success(client.invoke(broker, update_consumer_offset("G", "BlockingT", 1, 3)))
        assert parse_query_consumer_offset(client.invoke(broker, query_consumer_offset("G", "BlockingT", 1))) == 3
    finally:
        client.close()


class _Peer:
    """A one-connection TCP peer on loopback running ``serve(conn)`` in a thread."""

    def __init__(self, serve) -> None:
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.srv.getsockname()[1]}"
        self.thread = threading.Thread(target=self._run, args=(serve,), daemon=True)
        self.thread.start()

    def _run(self, serve) -> None:
        conn, _ = self.srv.accept()
        with conn:
            serve(conn)

    def close(self) -> None:
        self.srv.close()


def _read_requests(conn: socket.socket, n: int) -> list:
    dec, got = FrameDecoder(), []
    while len(got) < n:
        data = conn.recv(65536)
        if not data:
            break
        dec.feed(data)
        got.extend(dec)
    return got


def test_pipelined_answers_are_matched_by_opaque_whatever_their_order():
    def serve(conn):
        reqs = _read_requests(conn, 3)
        # answer in reverse order, with a request from the "broker" in between that happens to
        # carry the opaque of one of ours (its own counter): it is not an answer
        unsolicited = get_max_offset("X", 0)
        unsolicited.opaque = reqs[1].opaque
        out = [
            reqs[2].response(0, None, {"offset": "2"}),
            unsolicited,
            reqs[0].response(0, None, {"offset": "0"}),
            reqs[1].response(0, None, {"offset": "1"}),
        ]
        conn.sendall(b"".join(bytes(p) for c in out for p in encode(c)))
        conn.recv(1)  # until the client hangs up

    peer = _Peer(serve)
    conn = BlockingConnection(peer.addr)
    try:
        answers = conn.invoke_all([get_max_offset("T", i) for i in range(3)], timeout=10)
        assert [parse_offset(a) for a in answers] == [0, 1, 2]
    finally:
        conn.close()
        peer.close()


def test_a_silent_peer_costs_the_deadline_and_the_connection():
    hold = threading.Event()
    peer = _Peer(lambda conn: hold.wait(10))
    conn = BlockingConnection(peer.addr)
    try:
        t0 = time.monotonic()
        with pytest.raises(RemotingTimeoutError) as e:
            conn.invoke(get_max_offset("T", 0), timeout=0.3)
        assert e.value.retriable
        assert 0.25 <= time.monotonic() - t0 < 5.0
        assert conn.closed  # the stream position is unknown after a timeout
        with pytest.raises(RemotingConnectError):
            conn.invoke(get_max_offset("T", 0), timeout=1)
    finally:
        hold.set()
        conn.close()
        peer.close()


def test_a_hang_up_mid_call_is_a_retriable_connect_error():
    peer = _Peer(lambda conn: _read_requests(conn, 1))  # reads the request, then closes
    conn = BlockingConnection(peer.addr)
    try:
        with pytest.raises(RemotingConnectError) as e:
            conn.invoke(get_max_offset("T", 0), timeout=10)
        assert e.value.retriable and conn.closed
    finally:
        peer.close()


def test_name_servers_are_tried_in_order():
    def serve(conn):
        req = _read_requests(conn, 1)[0]
        conn.sendall(b"".join(bytes(p) for p in encode(req.response(0, None, None, b'{"topicList":["A"]}'))))
        conn.recv(1)

    dead = socket.create_server(("127.0.0.1", 0))
    dead_addr = f"127.0.0.1:{dead.getsockname()[1]}"
    dead.close()  # nothing listens there now
    peer = _Peer(serve)
    client = BlockingRemotingClient([dead_addr, peer.addr], timeout=10, connect_timeout=2)
    try:
        assert parse_topic_list(client.invoke_namesrv(get_all_topic_list())) == ["A"]
    finally:
        client.close()
        peer.close()
    with pytest.raises(ValueError):
        BlockingRemotingClient([])
