"""FIFO message groups in the SDK: ``Message(message_group=...)`` on a FIFO-typed topic made with
the Admin API, one queue per group, group order through an orderly PushConsumer, and the
broker's type check as the producer meets it."""

from __future__ import annotations

import pytest

import rmq
from rmq._testing import wait_until
from rmq.client.producer import select_by_hash
from rmq.common.message import java_string_hash
from rmq.errors import BrokerResponseError
from rmq.protocol.codes import ResponseCode

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def test_message_groups_keep_their_order_through_an_orderly_consumer(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("FifoT"), unique("CG")
    async with rmq.Admin(namesrv_addr) as admin:
        await admin.create_and_update_topic_config(
            broker.broker_addr, topic, read_queue_nums=4, write_queue_nums=4, message_type="FIFO"
        )
        assert await admin.topic_message_type(topic) is rmq.TopicMessageType.FIFO
    groups = [f"order-{i}" for i in range(6)]
    queue_of: dict[str, set[int]] = {g: set() for g in groups}
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        # the groups interleaved: 6 groups x 15 messages, round robin
        for n in range(15):
            for g in groups:
                r = await p.send(rmq.Message(topic, f"{g}:{n}".encode(), message_group=g))
                queue_of[g].add(r.message_queue.queue_id)
        # a message without a group is not FIFO: the typed topic refuses it, no retry elsewhere
        with pytest.raises(BrokerResponseError) as ei:
            await p.send(rmq.Message(topic, b"plain"))
        assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "expected type is FIFO, but actual type is NORMAL" in str(ei.value)
    # every group on one queue: the hash of the group over the topic's 4 queues (Java 4.x
    # SelectMessageQueueByHash with String.hashCode)
    for g, qids in queue_of.items():
        assert qids == {abs(java_string_hash(g)) % 4}, (g, qids)
    assert len({q for qids in queue_of.values() for q in qids}) > 1  # the groups spread

    seen: dict[str, list[int]] = {g: [] for g in groups}
    got_groups: set[str | None] = set()

    async def handler(msg):
        g, n = msg.body.decode().split(":")
        got_groups.add(msg.message_group)
        seen[g].append(int(n))

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, orderly=True, consume_from_where=FIRST)
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: sum(map(len, seen.values())) == 90, what="90 grouped messages")
    assert all(seen[g] == list(range(15)) for g in groups), seen
    assert got_groups == set(groups)


def test_message_group_is_checked_and_selected_like_a_sharding_key():
    with pytest.raises(ValueError, match="message_group"):
        rmq.Message("T", b"x", message_group="")
    with pytest.raises(ValueError, match="message_group"):
        rmq.Message("T", b"x", message_group="a\x01b")
    qs = [rmq.MessageQueue("T", "b", i) for i in range(7)]
    m = rmq.Message("T", b"x", message_group="g1")
    assert select_by_hash(qs, m, "g1").queue_id == abs(java_string_hash("g1")) % 7


async def test_producer_create_topic_takes_attributes(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("DelayT")
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        addrs = await p.create_topic(topic, 2, message_type="DELAY")
        assert addrs == [broker.broker_addr]
        tc = broker.topic_config_manager.select_topic_config(topic)
        assert (tc.read_queue_nums, tc.attributes) == (2, {"message.type": "DELAY"})
        with pytest.raises(BrokerResponseError) as ei:
            await p.create_topic(unique("BadT"), attributes="+message.type=NOPE")
        assert "value is not in set" in str(ei.value)
        # a plain message is not DELAY
        with pytest.raises(BrokerResponseError) as ei:
            await p.send(rmq.Message(topic, b"now"))
        assert ei.value.code == ResponseCode.MESSAGE_ILLEGAL
        r = await p.send(rmq.Message(topic, b"later", delay_level=1))
        assert r.status is rmq.SendStatus.SEND_OK


async def test_batched_groups_stay_on_their_queue_and_pass_the_fifo_check(cluster, namesrv_addr, unique):
    """With automatic batching (linger_ms) a group's messages batch on the group's queue; the
    broker checks a batch by its first message (Java 5's proxy), so the FIFO topic takes it."""
    _ns, _broker = cluster
    topic = unique("FifoB")
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=50) as p:
        await p.create_topic(topic, 4, message_type="FIFO")
        await p.send_and_wait(rmq.Message(topic, b"warm", message_group="w"))  # the route, cached
        futs = [p.send(rmq.Message(topic, f"{g}:{n}".encode(), message_group=g)) for n in range(10) for g in "abc"]
        results = [await f for f in futs]
        assert p._batcher is not None and p._batcher.batches_sent >= 1  # (they did batch)
    by_group: dict[str, set[int]] = {}
    for n_g, r in zip([(n, g) for n in range(10) for g in "abc"], results, strict=True):
        by_group.setdefault(n_g[1], set()).add(r.message_queue.queue_id)
    assert all(q == {abs(java_string_hash(g)) % 4} for g, q in by_group.items()), by_group
    # the offsets within each queue follow the send order of its groups
    per_queue: dict[int, list[int]] = {}
    for r in results:
        per_queue.setdefault(r.message_queue.queue_id, []).append(r.queue_offset)
    assert all(offs == sorted(offs) for offs in per_queue.values()), per_queue
