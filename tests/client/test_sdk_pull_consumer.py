"""PullConsumer (lite pull) against a real in-process name server + broker."""

import asyncio
import time

import pytest
from sdk_support import create_topic, wait_until

import rmq

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _fill(nsaddr, topic, n, group, queues):
    async with rmq.Producer(nsaddr, group) as p:
        for i in range(n):
            q = rmq.MessageQueue(topic, "broker-a", i % queues)
            await p.send(rmq.Message(topic, b"%d" % i), queue=q)


async def _poll_n(c, n, timeout=10.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(await c.poll(timeout=0.5))
    return out


async def test_assign_poll_seek_commit_pause(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, g = unique("T"), unique("LG")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _fill(namesrv_addr, topic, 20, unique("PG"), 2)
    c = rmq.PullConsumer(namesrv_addr, g, consume_from_where=FIRST, auto_commit=False, pull_batch_size=4)
    async with c:
        mqs = await c.fetch_message_queues(topic)
        assert [m.queue_id for m in mqs] == [0, 1]
        q0, q1 = mqs
        c.assign([q0, q1])
        msgs = await _poll_n(c, 20)
        assert sorted(int(m.body) for m in msgs) == list(range(20))
        per_q = {q: [m.queue_offset for m in msgs if m.queue_id == q.queue_id] for q in mqs}
        assert per_q == {q0: list(range(10)), q1: list(range(10))}
        assert await c.committed(q0) in (-1, 0)  # nothing committed yet
        await c.commit()
        assert await c.committed(q0) == 10 and await c.committed(q1) == 10
        # seek back on q0 only: its messages come again from offset 6
        await c.seek(q0, 6)
        again = await _poll_n(c, 4)
        assert [(m.queue_id, m.queue_offset) for m in again] == [(0, 6), (0, 7), (0, 8), (0, 9)]
        await c.commit({q0: 8})
        assert await c.committed(q0) == 8
        with pytest.raises(rmq.ClientError, match="outside"):
            await c.seek(q0, 1000)
        with pytest.raises(rmq.ClientError, match="not assigned"):
            await c.seek(rmq.MessageQueue(topic, "broker-a", 7), 0)
        # pause q1: new messages of q1 are held back, q0's still arrive
        c.pause([q1])
        await _fill(namesrv_addr, topic, 4, unique("PG"), 2)  # 2 to q0, 2 to q1
        got = await _poll_n(c, 2, timeout=3)
        got += await c.poll(timeout=1.0)  # the window in which q1's messages must not come
        assert {m.queue_id for m in got} == {0} and len(got) == 2
        c.resume([q1])
        got = await _poll_n(c, 2)
        assert [m.queue_id for m in got] == [1, 1]
        await c.seek_to_begin(q1)
        assert (await _poll_n(c, 1))[0].queue_offset == 0
        assert await c.offset_for_timestamp(q0, 0) == 0


async def test_subscribe_mode_shares_queues_and_auto_commits(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, g = unique("T"), unique("LG")
    await create_topic(broker.broker_addr, topic, queues=4)
    await _fill(namesrv_addr, topic, 40, unique("PG"), 4)
    changes = []
    a = rmq.PullConsumer(
        namesrv_addr,
        g,
        consume_from_where=FIRST,
        instance_name="a",
        auto_commit_interval=1.0,
        on_rebalance=lambda topic, mqs: changes.append((topic, len(mqs))),
    )
    b = rmq.PullConsumer(namesrv_addr, g, consume_from_where=FIRST, instance_name="b", auto_commit_interval=1.0)
    for c in (a, b):
        c.subscribe(topic)
    async with a, b:
        await wait_until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, timeout=10, what="2 + 2 queues")
        assert not a.assignment() & b.assignment()
        assert changes and changes[-1] == (topic, 2)  # the listener saw the final share
        got_a, got_b = await asyncio.gather(_poll_n(a, 20), _poll_n(b, 20))
        assert sorted(int(m.body) for m in got_a + got_b) == list(range(40))

        async def auto_committed(c: rmq.PullConsumer) -> bool:
            await c.poll(timeout=0.1)  # auto-commit happens in poll once the interval passed
            return all([await c.committed(mq) == 10 for mq in c.assignment()])

        await wait_until(lambda: auto_committed(a), timeout=10, what="a's positions auto-committed")
        await wait_until(lambda: auto_committed(b), timeout=10, what="b's positions auto-committed")
    with pytest.raises(rmq.ClientError):
        a2 = rmq.PullConsumer(namesrv_addr, g)
        a2.subscribe(topic)
        a2.assign([])


async def test_broadcasting_lite_pull_with_local_offsets(cluster, namesrv_addr, unique, tmp_path):
    _ns, broker = cluster
    topic, g = unique("T"), unique("LG")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _fill(namesrv_addr, topic, 10, unique("PG"), 2)
    consumers = [
        rmq.PullConsumer(
            namesrv_addr,
            g,
            message_model=rmq.MessageModel.BROADCASTING,
            consume_from_where=FIRST,
            instance_name=n,
            offset_store_dir=str(tmp_path),
        )
        for n in ("x", "y")
    ]
    for c in consumers:
        c.subscribe(topic)
    async with consumers[0] as a, consumers[1] as b:
        got_a, got_b = await asyncio.gather(_poll_n(a, 10), _poll_n(b, 10))
        assert sorted(int(m.body) for m in got_a) == sorted(int(m.body) for m in got_b) == list(range(10))
        await a.commit()
        q0 = rmq.MessageQueue(topic, "broker-a", 0)
        assert await a.committed(q0) == 5  # from a's local file
        assert await b.committed(q0) == -1  # b has its own file and committed nothing yet
