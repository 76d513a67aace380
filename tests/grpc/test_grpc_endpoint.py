"""The gRPC endpoint's answers and bounds, driven by a raw grpcio client built from rmq's own
schema (blocking API: no event loop of the test's involved) against ``rmq standalone``."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import grpc
import pytest
from grpc_support import Stub, send_request, start_grpc_broker

from rmq._testing import wait_until_sync
from rmq._testing.env import BrokerEnv
from rmq.broker.grpc.schema import SERVICE, pb
from rmq.client._codec import decode_messages
from rmq.common import fastjson
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

pytestmark = [pytest.mark.timeout(180)]

Code = pb.Code
GRPC_LIMIT = 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc, b = start_grpc_broker(
        tmp_path_factory.mktemp("rmq-grpc-edge") / "store",
        [
            f"--grpcMaxMessageSize={GRPC_LIMIT}",
            "--maxMessageSize=65536",
            "--grpcMaxTelemetrySessionsPerClient=2",
            "--grpcTelemetryQueueSize=4",
        ],
    )
    try:
        b.topic = f"EDGE_{uuid.uuid4().hex[:8]}"
        b.create_topic(b.topic, queues=4)
        yield b
    finally:
        proc.stop()


@pytest.fixture
def channel(broker):
    ch = grpc.insecure_channel(broker.endpoints)
    try:
        yield ch
    finally:
        ch.close()


def _settings(client_type: int = 1, topic: str = "") -> object:
    cmd = pb.TelemetryCommand()
    cmd.settings.client_type = client_type
    cmd.settings.publishing.topics.add(name=topic)
    return cmd


def test_route_heartbeat_and_refusals(broker, channel):
    stub = Stub(channel, "edge-client")
    md = stub.metadata
    route = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=broker.topic)), metadata=md, timeout=10)
    assert route.status.code == Code.OK
    assert sorted(q.id for q in route.message_queues) == [0, 1, 2, 3]
    assert {q.permission for q in route.message_queues} == {pb.Permission.READ_WRITE}
    q = route.message_queues[0]
    assert (q.broker.endpoints.addresses[0].host, q.broker.endpoints.addresses[0].port) == (
        "127.0.0.1",
        broker.grpc_port,
    )
    # an untyped topic takes every kind, as the broker's SEND check does (design.md "Typed topics")
    assert sorted(q.accept_message_types) == sorted(
        [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION]
    )

    missing = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic_x")), metadata=md, timeout=10)
    assert missing.status.code == Code.TOPIC_NOT_FOUND

    # before any settings came over Telemetry: answered on the defaults (Java fails here)
    hb = stub.Heartbeat(pb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), metadata=md, timeout=10)
    assert hb.status.code == Code.OK
    no_id = stub.Heartbeat(pb.HeartbeatRequest(), timeout=10)
    assert no_id.status.code == Code.CLIENT_ID_REQUIRED

    ok = stub.SendMessage(send_request(broker.topic, b"plain", "ID-1"), metadata=md, timeout=10)
    assert ok.status.code == Code.OK and ok.entries[0].message_id == "ID-1" and ok.entries[0].offset >= 0

    # a delivery time in milliseconds where seconds are expected (the 5.x Python client's trap)
    req = send_request(broker.topic, b"late", "ID-2", message_type=pb.MessageType.DELAY)
    req.messages[0].system_properties.delivery_timestamp.seconds = int(time.time() * 1000)
    assert stub.SendMessage(req, metadata=md, timeout=10).status.code == Code.ILLEGAL_DELIVERY_TIME

    req = send_request(broker.topic, b"x", "ID-3")
    req.messages[0].user_properties["UNIQ_KEY"] = "mine"
    assert stub.SendMessage(req, metadata=md, timeout=10).status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert stub.SendMessage(send_request(broker.topic, b"x", ""), metadata=md, timeout=10).status.code == (
        Code.ILLEGAL_MESSAGE_ID
    )
    assert stub.SendMessage(send_request(broker.topic, b"", "ID-4"), metadata=md, timeout=10).status.code == (
        Code.MESSAGE_BODY_EMPTY
    )
    big = stub.SendMessage(send_request(broker.topic, b"b" * 70_000, "ID-5"), metadata=md, timeout=10)
    assert big.status.code == Code.MESSAGE_BODY_TOO_LARGE
    assert stub.SendMessage(send_request("NoSuchTopic_x", b"x", "ID-6"), metadata=md, timeout=10).status.code == (
        Code.TOPIC_NOT_FOUND
    )

    end = stub.EndTransaction(
        pb.EndTransactionRequest(topic=pb.Resource(name=broker.topic), message_id="ID-1", transaction_id="garbage"),
        metadata=md,
        timeout=10,
    )
    assert end.status.code == Code.INVALID_TRANSACTION_ID

    # receive (POP underneath) refuses what Java's proxy refuses
    def receive(topic: str, invisible_s: int = 30, group: str = "GID_edge", timeout: float = 20) -> list:
        req = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=4)
        req.message_queue.topic.name = topic
        req.message_queue.id = -1
        req.invisible_duration.seconds = invisible_s
        req.long_polling_timeout.seconds = 5
        answers = list(stub.ReceiveMessage(req, metadata=md, timeout=timeout))
        # every answer ends with the delivery time (Java's onComplete)
        assert answers[-1].WhichOneof("content") == "delivery_timestamp"
        return [r.status.code for r in answers[:-1]]

    assert receive(broker.topic, invisible_s=5) == [Code.ILLEGAL_INVISIBLE_TIME]
    assert receive(broker.topic, timeout=3) == [Code.ILLEGAL_POLLING_TIME]  # < 5 s left to poll
    assert receive(broker.topic, group="") == [Code.ILLEGAL_CONSUMER_GROUP]
    assert receive("NoSuchTopic_x") == [Code.TOPIC_NOT_FOUND]
    got = receive(broker.topic)  # what the sends above stored: a status, then the messages
    assert got[0] == Code.OK and len(got) > 1
    ack = stub.AckMessage(
        pb.AckMessageRequest(
            group=pb.Resource(name="GID_edge"),
            topic=pb.Resource(name=broker.topic),
            entries=[pb.AckMessageEntry(message_id="x", receipt_handle="not a handle")],
        ),
        metadata=md,
        timeout=10,
    )
    assert ack.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    forward = stub.ForwardMessageToDeadLetterQueue(
        pb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="G"), topic=pb.Resource(name=broker.topic), receipt_handle="not a handle"
        ),
        metadata=md,
        timeout=10,
    )
    assert forward.status.code == Code.INVALID_RECEIPT_HANDLE


def test_forward_to_dead_letter_queue(broker, channel):
    """ForwardMessageToDeadLetterQueue (Java ForwardMessageToDLQActivity): the received message
    goes to ``%DLQ%<group>`` at once, with its id and body, and its handle is acked."""
    stub = Stub(channel, "dlq-client")
    md = stub.metadata
    topic = f"DLQT_{uuid.uuid4().hex[:8]}"
    group = f"GID_{topic}"
    broker.create_topic(topic, queues=1)
    sent = stub.SendMessage(send_request(topic, b"to-the-dlq", "ID-DLQ-1"), metadata=md, timeout=10)
    assert sent.status.code == Code.OK, sent.status
    req = pb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=1)
    req.message_queue.topic.name = topic
    req.message_queue.id = -1
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 5
    messages = [r.message for r in stub.ReceiveMessage(req, metadata=md, timeout=20) if r.HasField("message")]
    assert [m.body for m in messages] == [b"to-the-dlq"]
    handle = messages[0].system_properties.receipt_handle
    forward = stub.ForwardMessageToDeadLetterQueue(
        pb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=group),
            topic=pb.Resource(name=topic),
            receipt_handle=handle,
            message_id="ID-DLQ-1",
            delivery_attempt=1,
            max_delivery_attempts=17,
        ),
        metadata=md,
        timeout=10,
    )
    assert forward.status.code == Code.OK, forward.status

    async def dlq() -> list:
        rc = RemotingClient()
        try:
            env = BrokerEnv(None, None, rc, broker_addr=broker.broker_addr)
            resp = await env.pull(f"%DLQ%{group}", group="DLQ_reader", suspend_ms=0)
            assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
            return decode_messages(resp.body_bytes())
        finally:
            await rc.close()

    stored = asyncio.run(dlq())
    assert [m.body for m in stored] == [b"to-the-dlq"]
    assert stored[0].properties["UNIQ_KEY"] == "ID-DLQ-1"
    assert stored[0].properties["RETRY_TOPIC"] == topic


def test_typed_topics(broker, channel):
    """A FIFO topic (``+message.type=FIFO``) routes as FIFO, takes messages with a group and
    refuses a NORMAL one as Java's proxy does (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE)."""
    stub = Stub(channel, "typed-client")
    md = stub.metadata
    topic = f"FIFO_{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, queues=4, attributes="+message.type=FIFO")
    route = stub.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=md, timeout=10)
    assert {tuple(q.accept_message_types) for q in route.message_queues} == {(pb.MessageType.FIFO,)}
    fifo = send_request(topic, b"f", "ID-F1", message_type=pb.MessageType.FIFO, message_group="g1")
    assert stub.SendMessage(fifo, metadata=md, timeout=10).status.code == Code.OK
    normal = stub.SendMessage(send_request(topic, b"n", "ID-N1"), metadata=md, timeout=10)
    assert normal.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, normal.status


def test_malformed_and_oversized_requests_and_unknown_methods(broker, channel):
    raw = channel.unary_unary(f"/{SERVICE}/SendMessage")  # bytes in, bytes out
    bad = pb.SendMessageResponse.FromString(raw(b"\xff\xff\xff\xff\x0f garbage", timeout=10))
    assert bad.status.code == Code.BAD_REQUEST
    assert "malformed" in bad.status.message

    with pytest.raises(grpc.RpcError) as huge:
        raw(send_request(broker.topic, b"h" * (GRPC_LIMIT + 1), "ID-H").SerializeToString(), timeout=10)
    assert huge.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    with pytest.raises(grpc.RpcError) as unknown:
        channel.unary_unary(f"/{SERVICE}/PullMessage")(b"", timeout=10)
    assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED

    # the same connection still serves
    stub = Stub(channel)
    ok = stub.SendMessage(send_request(broker.topic, b"after", "ID-A"), metadata=stub.metadata, timeout=10)
    assert ok.status.code == Code.OK


def _held(stop: threading.Event, *commands: object):
    """A request stream that sends ``commands`` and stays open until ``stop``."""
    yield from commands
    stop.wait()


def test_telemetry_settings_and_session_bound(broker, channel):
    stub = Stub(channel, "bounded-client")
    streams = []
    stop = threading.Event()
    try:
        for _ in range(2):
            call = stub.Telemetry(_held(stop, _settings(topic=broker.topic)), metadata=stub.metadata)
            answer = next(call)
            assert answer.status.code == Code.OK
            assert answer.settings.publishing.max_body_size == 65536
            assert answer.settings.backoff_policy.max_attempts >= 1
            streams.append(call)
        third = stub.Telemetry(iter([_settings()]), metadata=stub.metadata)
        refused = next(third)
        assert refused.status.code == Code.TOO_MANY_REQUESTS
    finally:
        stop.set()
        for call in streams:
            call.cancel()


def test_a_client_that_never_reads_does_not_stop_others(broker):
    """Client A floods Telemetry with settings and never reads an answer: its stream's queue
    fills and drops (one warning); client B's round trips meanwhile all succeed."""
    reader_less = grpc.insecure_channel(broker.endpoints)
    other = grpc.insecure_channel(broker.endpoints)
    stop = threading.Event()

    def flood():
        while not stop.is_set():
            yield _settings(topic=broker.topic)

    calls = []
    try:
        for i in range(2):
            a = Stub(reader_less, f"never-reads-{i}")
            calls.append(a.Telemetry(flood(), metadata=a.metadata))  # answers never read
        wait_until_sync(
            lambda: "does not read its Telemetry stream" in broker.proc.log_text(),
            timeout=60,
            what="the unread stream's queue to fill",
        )
        b = Stub(other, "well-behaved")
        for n in range(50):
            resp = b.SendMessage(send_request(broker.topic, b"b%d" % n, f"B-{n}"), metadata=b.metadata, timeout=10)
            assert resp.status.code == Code.OK, resp.status
    finally:
        stop.set()
        for call in calls:
            call.cancel()
        reader_less.close()
        other.close()


def _consumer_settings(group: str, topic: str, client_type: int) -> object:
    cmd = pb.TelemetryCommand()
    cmd.settings.client_type = client_type
    sub = cmd.settings.subscription
    sub.group.name = group
    entry = sub.subscriptions.add()
    entry.topic.name = topic
    entry.expression.type = pb.FilterType.TAG
    entry.expression.expression = "TagA || TagB"
    return cmd


async def _connections(addr: str, code: int, key: str, group: str) -> tuple[int, dict]:
    rc = RemotingClient()
    try:
        resp = await rc.invoke(addr, RemotingCommand.request(code, {key: group}))
        return resp.code, (fastjson.loads(resp.body_bytes()) if resp.code == ResponseCode.SUCCESS else {})
    finally:
        await rc.close()


def test_v5_clients_in_the_connection_lists(broker, channel):
    """Java ClientActivity: a 5.x consumer's settings register it in the broker's consumer
    table (consumerConnection shows its client id, language, subscription and consume type), a
    producer's in the producer table; both leave on NotifyClientTermination or when their
    Telemetry stream ends."""
    group = f"GID_conn_{uuid.uuid4().hex[:6]}"
    consumer_list = (RequestCode.GET_CONSUMER_CONNECTION_LIST, "consumerGroup", group)
    producer_list = (RequestCode.GET_PRODUCER_CONNECTION_LIST, "producerGroup", broker.topic)

    def listed(what: tuple) -> tuple[int, dict]:
        return asyncio.run(_connections(broker.broker_addr, *what))

    stop = threading.Event()
    consumer = Stub(channel, "conn-consumer")
    md = (*consumer.metadata[:1], ("x-mq-language", "GOLANG"))
    call = consumer.Telemetry(
        _held(stop, _consumer_settings(group, broker.topic, pb.ClientType.SIMPLE_CONSUMER)), metadata=md
    )
    producer = Stub(channel, "conn-producer")
    pcall = producer.Telemetry(_held(stop, _settings(topic=broker.topic)), metadata=producer.metadata)
    try:
        assert next(call).status.code == Code.OK
        assert next(pcall).status.code == Code.OK
        code, body = listed(consumer_list)
        assert code == ResponseCode.SUCCESS
        assert [(c["clientId"], c["language"]) for c in body["connectionSet"]] == [("conn-consumer", "GOLANG")]
        assert body["consumeType"] == "CONSUME_ACTIVELY" and body["messageModel"] == "CLUSTERING"
        sub = body["subscriptionTable"][broker.topic]
        assert sub["subString"] == "TagA || TagB" and sorted(sub["tagsSet"]) == ["TagA", "TagB"]
        code, body = listed(producer_list)
        assert code == ResponseCode.SUCCESS
        assert "conn-producer" in {c["clientId"] for c in body["connectionSet"]}
        # the heartbeat refreshes, the termination unregisters
        hb = pb.HeartbeatRequest(client_type=pb.ClientType.SIMPLE_CONSUMER, group=pb.Resource(name=group))
        assert consumer.Heartbeat(hb, metadata=md, timeout=10).status.code == Code.OK
        done = consumer.NotifyClientTermination(
            pb.NotifyClientTerminationRequest(group=pb.Resource(name=group)), metadata=md, timeout=10
        )
        assert done.status.code == Code.OK
        assert listed(consumer_list)[0] == ResponseCode.CONSUMER_NOT_ONLINE
        # the producer leaves with its stream
        pcall.cancel()
        wait_until_sync(
            lambda: "conn-producer" not in {c["clientId"] for c in listed(producer_list)[1].get("connectionSet", ())},
            timeout=20,
            interval=0.1,
            what="the producer's stream end to unregister it",
        )
    finally:
        stop.set()
        call.cancel()
        pcall.cancel()
