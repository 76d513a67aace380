"""rmq.SimpleConsumer (RocketMQ 5 POP) against a real in-process name server + broker over TCP."""

from __future__ import annotations

import asyncio

import pytest
from sdk_support import create_topic, wait_until

import rmq

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _produce(nsaddr: str, topic: str, n: int, group: str, **kw) -> list[rmq.SendResult]:
    async with rmq.Producer(nsaddr, group) as p:
        return [await p.send(rmq.Message(topic, f"m{i}".encode(), **kw)) for i in range(n)]


async def _receive_until(c: rmq.SimpleConsumer, pred, *, invisible: float, timeout: float = 30.0, max_messages=32):
    """Receive (without acking) until ``pred(all received so far)``; returns them."""
    got: list[rmq.MessageExt] = []

    async def step():
        got.extend(await c.receive(max_messages, invisible))
        return pred(got)

    await wait_until(step, timeout=timeout, interval=0, what="messages received")
    return got


async def test_receive_ack_and_an_unacked_message_comes_back(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    sent = await _produce(namesrv_addr, topic, 10, unique("PG"))
    ids = {r.msg_id for r in sent}
    async with rmq.SimpleConsumer(
        namesrv_addr, cg, subscriptions={topic: "*"}, await_duration=1.0, consume_from_where=FIRST
    ) as c:
        assert c.subscription_expressions() == {topic: "*"} and c.state is rmq.ServiceState.RUNNING
        # 5 s: long enough to receive all ten once on a busy machine
        got = await _receive_until(c, lambda g: {m.msg_id for m in g} >= ids, invisible=5.0)
        assert len(got) == 10 and {m.msg_id for m in got} == ids  # each once
        for m in got:
            assert m.topic == topic and m.body.startswith(b"m") and m.delivery_attempt == 1
            assert m.receipt_handle and m.broker_name == broker.broker_config.broker_name
        keep = next(m for m in got if m.body == b"m3")
        for m in got:
            if m is not keep:
                await c.ack(m)
        # the un-acked one comes back after its 5 s, with a new handle and attempt 2; nothing
        # acked comes back (all had the same invisible time)
        again = await _receive_until(c, lambda g: any(m.msg_id == keep.msg_id for m in g), invisible=30.0)
        assert [m.msg_id for m in again] == [keep.msg_id]
        back = again[0]
        assert back.body == b"m3" and back.delivery_attempt == 2 and back.topic == topic
        assert back.receipt_handle != keep.receipt_handle
        await c.ack(back)
    assert c.state is rmq.ServiceState.SHUTDOWN_ALREADY


async def test_change_invisible_duration(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _produce(namesrv_addr, topic, 2, unique("PG"))
    async with rmq.SimpleConsumer(
        namesrv_addr, cg, subscriptions={topic: "*"}, await_duration=1.0, consume_from_where=FIRST
    ) as c:
        got = await _receive_until(c, lambda g: len(g) >= 2, invisible=300.0)
        first, second = sorted(got, key=lambda m: m.queue_offset)
        # shorten the first one's 300 s to 1 s: it is delivered again long before the 300 s
        changed = await c.change_invisible_duration(first, 1.0)
        assert changed.msg_id == first.msg_id and changed.receipt_handle != first.receipt_handle
        # lengthen the second's (still 300 s) and ack it with its new handle
        await c.ack(await c.change_invisible_duration(second, 120.0))
        again = await _receive_until(c, lambda g: bool(g), invisible=30.0, timeout=60.0)
        assert [m.msg_id for m in again] == [first.msg_id] and again[0].delivery_attempt == 2
        await c.ack(again[0])


async def test_more_consumers_than_queues_all_get_messages(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    sent = await _produce(namesrv_addr, topic, 6, unique("PG"))
    consumers = [
        rmq.SimpleConsumer(
            namesrv_addr,
            cg,
            subscriptions={topic: "*"},
            await_duration=1.0,
            consume_from_where=FIRST,
            instance_name=f"i{i}",
        )
        for i in range(3)
    ]
    for c in consumers:
        await c.start()
    try:
        per: list[list[rmq.MessageExt]] = [[] for _ in consumers]

        async def one_each():
            for c, mine in zip(consumers, per, strict=True):
                if not mine:
                    mine.extend(await c.receive(2, 60.0))
            return all(per)

        await wait_until(one_each, timeout=30.0, interval=0, what="a message for every consumer")
        ids = [m.msg_id for mine in per for m in mine]
        assert len(ids) == len(set(ids))  # invisible to the others: never twice
        assert set(ids) <= {r.msg_id for r in sent}
    finally:
        for c in consumers:
            await c.shutdown()


async def test_tag_filter_and_errors(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        for i in range(8):
            await p.send(rmq.Message(topic, f"m{i}".encode(), tags="A" if i % 2 else "B"))
    c = rmq.SimpleConsumer(namesrv_addr, cg, await_duration=1.0, consume_from_where=FIRST)
    with pytest.raises(rmq.IllegalStateError):
        await c.receive()
    with pytest.raises(rmq.ClientError, match="subscribe"):
        await c.start()
    c = rmq.SimpleConsumer(namesrv_addr, cg, {topic: "A"}, await_duration=1.0, consume_from_where=FIRST)
    async with c:
        got = await _receive_until(c, lambda g: len(g) >= 4, invisible=60.0)
        assert sorted(m.body for m in got) == [b"m1", b"m3", b"m5", b"m7"] and {m.tags for m in got} == {"A"}
        with pytest.raises(rmq.ConfigError, match="max_messages"):
            await c.receive(0)
        with pytest.raises(rmq.ConfigError, match="invisible_duration"):
            await c.receive(1, 0)
        pulled = rmq.MessageExt(topic, b"x", None, (), {}, "id", "oid", 0, 0, 0)
        with pytest.raises(rmq.ClientError, match="receipt handle"):
            await c.ack(pulled)
        for m in got:
            await c.ack(m)
    async with rmq.SimpleConsumer(namesrv_addr, unique("CG"), {unique("NOPE"): "*"}, await_duration=0.5) as c2:
        with pytest.raises(rmq.TopicNotExistError) as ei:
            await c2.receive()
        assert ei.value.retriable


async def test_receive_long_polls_until_a_message_arrives(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.SimpleConsumer(namesrv_addr, cg, {topic: "*"}, await_duration=30.0, consume_from_where=FIRST) as c:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        waiting = asyncio.ensure_future(c.receive(4, 30.0))
        sent = await _produce(namesrv_addr, topic, 1, unique("PG"))
        got = await waiting
        assert [m.msg_id for m in got] == [sent[0].msg_id]
        # the broker held the request and answered on the arrival, well before its 30 s poll time
        assert loop.time() - t0 < 20.0
        await c.ack(got[0])


async def test_namespace(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, f"nsA%{topic}", queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG"), namespace="nsA") as p:
        sent = await p.send(rmq.Message(topic, b"x"))
    async with rmq.SimpleConsumer(
        namesrv_addr,
        cg,
        {topic: "*"},
        namespace="nsA",
        await_duration=1.0,
        consume_from_where=FIRST,
        value_deserializer=bytes.upper,
    ) as c:
        assert c.namespace == "nsA" and c.subscription_expressions() == {topic: "*"}
        got = await _receive_until(c, bool, invisible=30.0)
        assert [m.msg_id for m in got] == [sent.msg_id] and got[0].topic == topic  # the plain name
        assert got[0].value == b"X"
        # both go to nsA%topic (the broker refuses a topic it does not have)
        changed = await c.change_invisible_duration(got[0], 60.0)
        assert changed.topic == topic and changed.value == b"X"
        await c.ack(changed)


async def test_receive_takes_the_brokers_in_turn(tmp_path, unique):
    from rmq._testing import run_broker, run_namesrv

    topic, cg = unique("T2B"), unique("CG")
    async with run_namesrv() as ns, run_broker(tmp_path / "a", namesrv=ns, broker_name="broker-a") as a:
        async with run_broker(tmp_path / "b", namesrv=ns, broker_name="broker-b") as b:
            nsaddr = f"127.0.0.1:{ns.port}"
            for br in (a, b):
                await create_topic(br.broker_addr, topic, queues=1)
            async with rmq.Producer(nsaddr, unique("PG")) as p:
                for name in ("broker-a", "broker-b"):
                    for i in range(3):
                        await p.send(rmq.Message(topic, f"{name}:{i}".encode()), queue=rmq.MessageQueue(topic, name, 0))
            async with rmq.SimpleConsumer(nsaddr, cg, {topic: "*"}, await_duration=1.0, consume_from_where=FIRST) as c:
                # each receive pops one broker (queue id -1), the brokers in turn
                calls = []
                while sum(len(g) for g in calls) < 6:
                    calls.append(await c.receive(32, 60.0))
                    assert len(calls) < 20
                names = [{m.broker_name for m in g} for g in calls if g]
                assert all(len(n) == 1 for n in names) and {next(iter(n)) for n in names} == {"broker-a", "broker-b"}
                for g in calls:
                    for m in g:
                        assert m.body.decode().startswith(m.broker_name)
                        await c.ack(m)  # to the broker that popped it
