from sdk_support import create_topic, wait_until

import rmq


async def test_issue_snippet(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, pg, cg = unique("T"), unique("PG"), unique("CG")
    await create_topic(broker.broker_addr, topic)
    async with rmq.Producer(namesrv_addr=namesrv_addr, group=pg) as p:
        r = await p.send(rmq.Message(topic=topic, body=b"x", tags="TagA", keys=["k1"], properties={"a": "1"}))
        assert r.status is rmq.SendStatus.SEND_OK
        assert len(r.msg_id) == 32 and len(r.offset_msg_id) == 32
        assert r.queue_offset == 0
    c = rmq.PushConsumer(
        namesrv_addr=namesrv_addr, group=cg, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    c.subscribe(topic, "TagA || TagB")
    async with c:
        async for msg in c:
            assert (msg.topic, msg.body, msg.tags, msg.keys) == (topic, b"x", "TagA", ("k1",))
            assert msg.properties["a"] == "1"
            assert msg.msg_id == r.msg_id and msg.offset_msg_id == r.offset_msg_id
            assert (msg.queue_id, msg.queue_offset, msg.reconsume_times) == (r.queue_id, 0, 0)
            break


async def test_readme_snippet_verbatim_on_an_auto_created_topic(cluster, namesrv_addr, unique):
    """The README's SDK snippet with every default: the topic does not exist before the first send
    (the broker creates it from TBW102) and the new group starts CONSUME_FROM_LAST_OFFSET, which
    for a queue whose minimum offset is still 0 means from 0 (the broker answers the offset query
    with 0: Java ConsumerManageProcessor.queryConsumerOffset)."""
    import time

    topic, pg, cg = unique("T"), unique("PG"), unique("CG")
    async with rmq.Producer(namesrv_addr=namesrv_addr, group=pg) as p:
        r = await p.send(rmq.Message(topic=topic, body=b"x", tags="TagA", keys=["k1"], properties={"a": "1"}))
        assert (r.status, r.queue_offset) == (rmq.SendStatus.SEND_OK, 0)
        assert isinstance(r.msg_id, str) and isinstance(r.offset_msg_id, str) and r.queue_id >= 0
    t0 = time.monotonic()
    c = rmq.PushConsumer(namesrv_addr=namesrv_addr, group=cg)
    c.subscribe(topic, "TagA || TagB")
    async with c:
        async for msg in c:
            assert (msg.topic, msg.body, msg.tags, msg.keys, msg.properties["a"]) == (topic, b"x", "TagA", ("k1",), "1")
            assert (msg.msg_id, msg.queue_id, msg.queue_offset, msg.reconsume_times) == (r.msg_id, r.queue_id, 0, 0)
            break
    assert time.monotonic() - t0 < 5.0, "the first message took a rebalance period to arrive"


async def test_consumer_started_before_the_topic_exists(cluster, namesrv_addr, unique):
    """The consumer subscribes to a topic nobody created yet; the first send auto-creates it and
    the consumer picks it up within seconds (early rebalances), not after a 20 s period."""
    import time

    topic = unique("LATE")
    got = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(namesrv_addr=namesrv_addr, group=unique("CG"), handler=handler)
    c.subscribe(topic)
    async with c:
        # the first rebalance found no route and scheduled an early one
        await wait_until(lambda: c._impl._early_rebalance is not None, what="an early rebalance scheduled")
        async with rmq.Producer(namesrv_addr=namesrv_addr, group=unique("PG")) as p:
            await p.send(rmq.Message(topic=topic, body=b"first"))
        t0 = time.monotonic()
        await wait_until(lambda: got, timeout=15, what="the first message")
    assert got == [b"first"]
    assert time.monotonic() - t0 < 12.0  # the early rebalance, not the 20 s period (room for a busy machine)
