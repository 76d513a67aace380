"""PushConsumer(consume_mode=POP) against a real in-process name server + broker over TCP, and a
4.x PULL consumer beside a POP consumer on one topic."""

from __future__ import annotations

import asyncio
import collections
import time

import pytest
from sdk_support import create_topic, wait_until

import rmq

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
POP = rmq.ConsumeMode.POP


async def _produce(nsaddr: str, topic: str, n: int, group: str, **kw) -> list[rmq.SendResult]:
    async with rmq.Producer(nsaddr, group) as p:
        return [await p.send(rmq.Message(topic, f"m{i}".encode(), **kw)) for i in range(n)]


def test_pop_mode_arguments_are_checked():
    with pytest.raises(rmq.ClientError, match="handler"):
        rmq.PushConsumer("127.0.0.1:1", "G", consume_mode=POP)  # no async for over POP
    with pytest.raises(rmq.ConfigError, match="consume_mode"):
        rmq.PushConsumer(
            "127.0.0.1:1", "G", handler=print, consume_mode=POP, message_model=rmq.MessageModel.BROADCASTING
        )
    c = rmq.PushConsumer("127.0.0.1:1", "G", handler=print, consume_mode=POP, pop_retry_delays=(1, 2.5))
    assert c.options.consume_mode is POP and c.options.pop_retry_delays == (1, 2.5)


async def test_pop_mode_consumes_everything_and_retries_failures(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    sent = await _produce(namesrv_addr, topic, 20, unique("PG"))
    ids = {r.msg_id for r in sent}
    ok: dict[str, rmq.MessageExt] = {}
    deliveries: collections.Counter[str] = collections.Counter()

    async def handler(msg: rmq.MessageExt):
        deliveries[msg.msg_id] += 1
        if msg.body in (b"m2", b"m7") and msg.reconsume_times == 0:
            return rmq.ConsumeResult.RECONSUME_LATER
        if msg.body == b"m9" and msg.reconsume_times == 0:
            raise RuntimeError("boom")
        ok[msg.msg_id] = msg
        return None

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        consume_from_where=FIRST,
        consume_mode=POP,
        pop_invisible_time=30,
        pop_retry_delays=(1.0,),
    )
    c.subscribe(topic, "*")
    async with c:
        await wait_until(lambda: set(ok) == ids, timeout=60, what="every message consumed")
        # one pop loop per broker, queue id -1: no client rebalance, no retry subscription
        assert c.assignment() == {rmq.MessageQueue(topic, broker.broker_config.broker_name, -1)}
        await wait_until(lambda: c.stats["consumed_ok"] == 20, what="the stats")
    retried = {m.body for m in ok.values() if m.reconsume_times > 0}
    assert retried == {b"m2", b"m7", b"m9"}
    assert all(deliveries[m.msg_id] == (2 if m.body in retried else 1) for m in ok.values())
    assert c.stats["consumed_failed"] == 3 and c.stats["pulled"] == 23


async def test_more_pop_members_than_queues_share_the_messages(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    got: dict[str, list[str]] = {f"i{i}": [] for i in range(3)}
    gate = asyncio.Event()

    def member(name: str):
        async def handler(msg: rmq.MessageExt):
            got[name].append(msg.msg_id)
            await gate.wait()  # hold the message: the next one must go to another member

        return handler

    consumers = [
        rmq.PushConsumer(
            namesrv_addr,
            cg,
            handler=member(name),
            consume_from_where=FIRST,
            consume_mode=POP,
            pop_batch_size=1,
            pop_threshold_for_queue=1,
            consume_concurrency=1,
            instance_name=name,
        )
        for name in got
    ]
    for c in consumers:
        c.subscribe(topic)
        await c.start()
    try:
        sent = await _produce(namesrv_addr, topic, 6, unique("PG"))
        await wait_until(lambda: all(got.values()), timeout=30, what="a message for each member")
        gate.set()
        await wait_until(lambda: sum(len(v) for v in got.values()) >= 6, timeout=30, what="all consumed")
        ids = [i for v in got.values() for i in v]
        assert set(ids) == {r.msg_id for r in sent}
    finally:
        gate.set()
        for c in consumers:
            await c.close()


async def test_orderly_pop_keeps_queue_order_across_a_failure(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    bname = broker.broker_config.broker_name
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        for i in range(12):
            await p.send(rmq.Message(topic, f"{i % 2}:{i}".encode()), queue=rmq.MessageQueue(topic, bname, i % 2))
    seen: dict[int, list[int]] = {0: [], 1: []}
    failed = False

    async def handler(msg: rmq.MessageExt):
        nonlocal failed
        q, i = (int(x) for x in msg.body.decode().split(":"))
        if i == 4 and not failed:
            failed = True
            return rmq.ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        seen[q].append(i)

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        orderly=True,
        consume_from_where=FIRST,
        consume_mode=POP,
        suspend_current_queue_time=1.0,
    )
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: len(seen[0]) + len(seen[1]) >= 12, timeout=60, what="all consumed")
    assert failed
    assert seen[0] == [0, 2, 4, 6, 8, 10] and seen[1] == [1, 3, 5, 7, 9, 11]


async def test_pull_and_pop_groups_on_one_topic_both_get_everything(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=4)
    sent = await _produce(namesrv_addr, topic, 30, unique("PG"))
    ids = {r.msg_id for r in sent}
    pulled: set[str] = set()
    popped: set[str] = set()

    async def on_pull(msg):
        pulled.add(msg.msg_id)

    async def on_pop(msg):
        popped.add(msg.msg_id)

    pull_c = rmq.PushConsumer(namesrv_addr, unique("CGPULL"), handler=on_pull, consume_from_where=FIRST)
    pop_c = rmq.PushConsumer(namesrv_addr, unique("CGPOP"), handler=on_pop, consume_from_where=FIRST, consume_mode=POP)
    for c in (pull_c, pop_c):
        c.subscribe(topic)
    async with pull_c, pop_c:
        await wait_until(lambda: pulled == ids and popped == ids, timeout=60, what="both groups")
    assert pull_c.assignment() == set() and pop_c.state is rmq.ServiceState.SHUTDOWN_ALREADY


async def test_messages_past_their_invisible_time_are_left_for_redelivery(cluster, namesrv_addr, unique):
    """One worker is held on the first message past the batch's invisible time: the rest of the
    batch is not handed to the handler (its handles are stale); the broker delivers it again."""
    from rmq.protocol.requests.pop import ExtraInfo

    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    sent = await _produce(namesrv_addr, topic, 5, unique("PG"))
    calls: list[tuple[bytes, int]] = []

    async def handler(msg: rmq.MessageExt):
        calls.append((msg.body, msg.reconsume_times))
        if len(calls) == 1:
            info = ExtraInfo.parse(msg.receipt_handle)
            expiry = (info.pop_time + info.invisible_time) / 1000
            await wait_until(lambda: time.time() > expiry + 0.2, timeout=30, what="the invisible time to pass")

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        consume_from_where=FIRST,
        consume_mode=POP,
        consume_concurrency=1,
        pop_invisible_time=5,
    )
    c.subscribe(topic)
    async with c:
        rest = {f"m{i}".encode() for i in range(1, 5)}
        await wait_until(lambda: rest <= {b for b, _ in calls}, timeout=60, what="the rest delivered again")
    assert calls[0] == (b"m0", 0) and len(sent) == 5
    assert all(n >= 1 for b, n in calls if b in rest)  # never consumed on their stale first delivery
