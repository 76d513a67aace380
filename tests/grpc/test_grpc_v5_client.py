"""The unmodified PyPI ``rocketmq-python-client==5.1.2`` (gRPC) against ``rmq standalone`` and
against a two-broker cluster given by one broker's endpoint (the ``grpc_target`` fixture): a
producer sends NORMAL, FIFO, DELAY and TRANSACTION messages (transactions left open and resolved
by the client's checker when the recovery check of the broker holding each half message arrives
over Telemetry); rmq's own PullConsumer reads them back over the remoting port; a SimpleConsumer
and a PushConsumer consume. ACL and TLS run against ``rmq standalone``."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from grpc_support import DRIVERS, Driver, start_grpc_broker

import rmq
from rmq._testing import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240), pytest.mark.heavy(45)]


async def _read(namesrv: str, topic: str, bodies: set[str], timeout: float = 30.0) -> dict[str, rmq.MessageExt]:
    """Every message of ``topic`` whose body is in ``bodies``, by body, read from offset 0."""
    c = rmq.PullConsumer(
        namesrv,
        f"GID_read_{uuid.uuid4().hex[:8]}",
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        auto_commit=False,
        poll_timeout=0.5,
    )
    got: dict[str, rmq.MessageExt] = {}
    async with c:
        c.assign(await c.fetch_message_queues(topic))

        async def all_read() -> bool:
            for m in await c.poll():
                got[m.body.decode()] = m
            return bodies <= set(got)

        await wait_until(all_read, timeout, what=f"messages {sorted(bodies)} readable")
    return got


def test_v5_producer_sends_every_message_type(v5_python, grpc_target, workdir):
    topic = f"V5_{uuid.uuid4().hex[:8]}"
    grpc_target.create_topic(topic, queues=4)
    deliver_at = int(time.time()) + 2
    # Left to the recovery check: five sent one after another go to five consecutive queues of
    # the client's round robin over the route (4 on each broker, one broker's after the
    # other's), so in the cluster both brokers hold some and each checks its own.
    unknown = [f"t-checked-{i}" for i in range(5)]
    plan = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "checker": "commit",
        "messages": [
            {"kind": "normal", "body": "n1", "tag": "TagA", "keys": ["k1", "k2"], "properties": {"color": "red"}},
            {"kind": "fifo", "body": "f1", "group": "order-7"},
            {"kind": "fifo", "body": "f2", "group": "order-7"},
            {"kind": "fifo", "body": "f3", "group": "order-7"},
            {"kind": "delay", "body": "d1", "deliver_at_seconds": deliver_at},
            {"kind": "transaction", "body": "t-commit", "resolution": "commit"},
            {"kind": "transaction", "body": "t-rollback", "resolution": "rollback"},
            *({"kind": "transaction", "body": b, "resolution": "unknown"} for b in unknown),
        ],
    }
    driver = Driver(v5_python, plan, workdir)
    try:
        driver.until("waiting", timeout=90)
        sent = {e["body"]: e for e in driver.lines if e["event"] == "sent"}
        errors = [e for e in driver.lines if e["event"] == "error"]
        assert not errors, f"{errors}\n{driver.stderr_tail()}\n{grpc_target.log_tail()}"
        assert set(sent) == {s["body"] for s in plan["messages"]}
        checked = [e for e in driver.lines if e["event"] == "checked"]
        assert {e["body"] for e in checked} == set(unknown) and {e["topic"] for e in checked} == {topic}
        expected = {"n1", "f1", "f2", "f3", "d1", "t-commit", *unknown}
        got = asyncio.run(_read(grpc_target.namesrv, topic, expected))
    finally:
        events = driver.finish() if driver.proc.poll() is None else driver.lines
        driver.kill()
    assert not [e for e in events if e["event"] == "error"], events
    assert "t-rollback" not in got

    n1 = got["n1"]
    assert n1.tags == "TagA"
    assert set(n1.keys) == {"k1", "k2"}
    assert n1.properties["color"] == "red"
    # the producer's address is the stored bornHost (as for a remoting producer)
    assert n1.born_host.startswith("127.0.0.1:"), n1.born_host
    # the 5.x message id is the stored UNIQ_KEY, as Java's proxy stores it
    assert n1.properties["UNIQ_KEY"] == sent["n1"]["message_id"]
    # FIFO: the message group is the sharding key; one group, one queue, in send order
    fifo = [got["f1"], got["f2"], got["f3"]]
    assert {m.properties["__SHARDINGKEY"] for m in fifo} == {"order-7"}
    assert len({m.queue_id for m in fifo}) == 1
    assert [m.queue_offset for m in fifo] == sorted(m.queue_offset for m in fifo)
    # DELAY: the delivery time becomes Java 5's timer property (milliseconds), and the broker's
    # timer store holds the message until then (stored again at its tick, within one 1 s tick)
    assert got["d1"].properties["TIMER_DELIVER_MS"] == str(deliver_at * 1000)
    assert got["d1"].store_timestamp >= deliver_at * 1000 - 1000, (got["d1"].store_timestamp, deliver_at)
    # TRANSACTION: the committed one and the one the checker resolved reached the real topic,
    # their producer group being the topic (Java's proxy names the checker's group so)
    for body in ("t-commit", *unknown):
        assert got[body].properties["PGROUP"] == topic
        assert got[body].properties["UNIQ_KEY"] == sent[body]["message_id"]
    # each checked one was committed where its half message was: in the cluster, both brokers
    # sent recovery checks (over their own Telemetry streams) and the client answered each
    assert {got[b].broker_name for b in unknown} == set(grpc_target.brokers), {b: got[b].broker_name for b in unknown}


def test_v5_producer_with_acl_credentials(v5_python, tmp_path_factory, workdir):
    home = tmp_path_factory.mktemp("rmq-grpc-acl-home")
    os.makedirs(home / "conf")
    (home / "conf" / "plain_acl.yml").write_text(
        "globalWhiteRemoteAddresses:\n"
        "accounts:\n"
        "  - accessKey: grpcUser1\n"
        "    secretKey: grpcSecret1\n"
        "    admin: false\n"
        "    defaultTopicPerm: PUB|SUB\n"
        "    defaultGroupPerm: SUB\n"
        "  - accessKey: grpcAdmin1\n"
        "    secretKey: grpcAdminSecret1\n"
        "    admin: true\n"
    )
    proc, broker = start_grpc_broker(
        tmp_path_factory.mktemp("rmq-grpc-acl") / "store", ["--aclEnable=true", f"--rocketmqHome={home}"]
    )
    try:
        from rmq.remoting import RemotingClient
        from rmq.remoting.acl import AclClientRPCHook, SessionCredentials

        topic = f"V5ACL_{uuid.uuid4().hex[:8]}"

        async def make_topic() -> None:
            from grpc_support import create_topic

            rc = RemotingClient()
            rc.add_rpc_hook(AclClientRPCHook(SessionCredentials("grpcAdmin1", "grpcAdminSecret1")))
            try:
                await create_topic(broker.broker_addr, topic, rc=rc)
            finally:
                await rc.close()

        asyncio.run(make_topic())
        plan = {"endpoints": broker.endpoints, "topic": topic, "messages": [{"body": "acl-ok"}]}
        good = Driver(v5_python, {**plan, "ak": "grpcUser1", "sk": "grpcSecret1"}, workdir)
        events = good.finish(90)
        assert [e["event"] for e in events] == ["sent"], f"{events}\n{good.stderr_tail()}\n{broker.log_tail()}"

        bad = Driver(v5_python, {**plan, "ak": "grpcUser1", "sk": "wrongSecret1"}, workdir)
        events = bad.finish(90)
        assert events and events[0]["event"] == "error", events
        # the client logs the route's refusal and fails the send on it; the broker says why
        assert "route" in events[0]["error"], events
        assert "Check signature failed for accessKey=grpcUser1" in broker.proc.log_text(), broker.log_tail()
    finally:
        proc.stop()


def test_v5_producer_over_tls(v5_python, tmp_path_factory, workdir):
    from tls_support import make_pki

    pki = make_pki(str(tmp_path_factory.mktemp("rmq-grpc-pki")))
    proc, broker = start_grpc_broker(tmp_path_factory.mktemp("rmq-grpc-tls") / "store", pki.server_args("enforcing"))
    try:
        topic = f"V5TLS_{uuid.uuid4().hex[:8]}"
        asyncio.run(_create_topic_tls(broker.broker_addr, topic, pki))
        plan = {"endpoints": broker.endpoints, "topic": topic, "tls": True, "messages": [{"body": "over-tls"}]}
        # grpcio's default roots come from this variable: the client trusts the test CA
        driver = Driver(v5_python, plan, workdir, env={"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": pki.ca_pem})
        events = driver.finish(90)
        assert [e["event"] for e in events] == ["sent"], f"{events}\n{driver.stderr_tail()}\n{broker.log_tail()}"
        # and a plaintext client is not served on the TLS port
        plain = Driver(v5_python, {**plan, "tls": False}, workdir)
        events = plain.finish(90)
        assert events and events[0]["event"] == "error", events
    finally:
        proc.stop()


async def _create_topic_tls(broker_addr: str, topic: str, pki) -> None:
    from grpc_support import create_topic

    from rmq.remoting import RemotingClient

    rc = RemotingClient(tls=pki.client_context())
    try:
        await create_topic(broker_addr, topic, rc=rc)
    finally:
        await rc.close()


def test_v5_simple_consumer_receives_acks_and_sees_unacked_come_back(v5_python, grpc_target, workdir):
    """Messages sent by rmq's own SDK (remoting) are received by a 5.x SimpleConsumer over gRPC
    (POP underneath): acked, one after changing its invisible duration, and one left un-acked
    that comes back as a second delivery attempt after its invisible time. A PULL consumer of
    another group reads them all as well. In the cluster the messages are on both brokers and
    the consumer is given the first one's endpoint."""
    topic = f"V5C_{uuid.uuid4().hex[:8]}"
    grpc_target.create_topic(topic, queues=2)
    bodies = [f"c{i}" for i in range(6)]

    async def produce() -> None:
        async with rmq.Producer(grpc_target.namesrv, f"PID_{topic}") as p:
            for b in bodies:
                await p.send(rmq.Message(topic, b.encode(), tags="TagC", keys=[f"key-{b}"], properties={"n": b}))

    asyncio.run(produce())
    grpc_target.assert_on_every_broker(topic)
    plan = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "group": f"GID_{topic}",
        "expect": bodies,
        "leave": ["c1"],
        "extend": ["c2"],
        "invisible": 10,
        "deadline": 120,
    }
    driver = Driver(v5_python, plan, workdir, script=DRIVERS / "v5_consumer.py")
    try:
        events = driver.finish(150)
    finally:
        driver.kill()
    done = [e for e in events if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events}\n{driver.stderr_tail()}\n{grpc_target.log_tail()}"
    received = [e for e in events if e["event"] == "received"]
    first = {e["body"]: e for e in reversed(received)}
    assert set(first) == set(bodies)
    assert first["c0"]["tag"] == "TagC" and first["c0"]["keys"] == ["key-c0"]
    assert first["c0"]["properties"]["n"] == "c0"
    # the one left un-acked came back: a second delivery, attempt 2
    c1 = [e for e in received if e["body"] == "c1"]
    assert len(c1) >= 2 and c1[0]["attempt"] == 1 and c1[-1]["attempt"] >= 2, c1
    assert any(e["event"] == "changed" and e["body"] == "c2" for e in events)
    # everything acked: nothing else came back twice
    again = {e["body"] for e in received if e["attempt"] > 1}
    assert again <= {"c1"}, again
    # a 4.x-protocol consumer (rmq's PullConsumer) in another group of the topic reads everything
    # too: the POP group's offsets are its own
    pulled = asyncio.run(_read(grpc_target.namesrv, topic, set(bodies)))
    assert set(pulled) >= set(bodies)


def test_v5_push_consumer_consumes_and_retries(v5_python, grpc_target, workdir):
    """A 5.x PushConsumer consumes what rmq's SDK sent; a message its listener fails once is
    delivered again (its invisible time changed to the back-off's first step) and succeeds."""
    topic = f"V5P_{uuid.uuid4().hex[:8]}"
    grpc_target.create_topic(topic, queues=2)
    bodies = [f"p{i}" for i in range(5)]

    async def produce() -> None:
        async with rmq.Producer(grpc_target.namesrv, f"PID_{topic}") as p:
            for b in bodies:
                await p.send(rmq.Message(topic, b.encode()))

    asyncio.run(produce())
    grpc_target.assert_on_every_broker(topic)
    plan = {
        "endpoints": grpc_target.endpoints,
        "topic": topic,
        "group": f"GID_{topic}",
        "expect": bodies,
        "fail_once": ["p3"],
        "deadline": 90,
    }
    driver = Driver(v5_python, plan, workdir, script=DRIVERS / "v5_push.py")
    try:
        events = driver.finish(120)
    finally:
        driver.kill()
    done = [e for e in events if e["event"] in ("done", "error")]
    assert done and done[-1]["event"] == "done", f"{events}\n{driver.stderr_tail()}\n{grpc_target.log_tail()}"
    p3 = [e for e in events if e["event"] == "consumed" and e["body"] == "p3"]
    assert [e["result"] for e in p3][:2] == ["failure", "success"], p3
    assert p3[1]["attempt"] >= 2, p3
