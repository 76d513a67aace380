"""Automatic batching of Producer.send over TCP: SEND_BATCH_MESSAGE requests counted at the
broker, each caller's own SendResult, failure fan-out, bounds, what goes alone, close flushes."""

from __future__ import annotations

import asyncio

import pytest
from sdk_support import RequestCounter, create_topic, drain

import rmq
from rmq.protocol.codes import RequestCode

LONG = 60_000  # linger_ms that never elapses in a test: batches go when full or at close


def item_size(body: bytes, tags: str | None = None) -> int:
    """Bytes one message takes in a SEND_BATCH_MESSAGE body (Java MessageDecoder.encodeMessage:
    five ints, the body, a short, the properties): the SDK's properties are WAIT, UNIQ_KEY
    (32 hex digits) and TAGS when given, each ``name\\x01value\\x02``."""
    props = len("WAIT\x01true\x02") + len("UNIQ_KEY\x01") + 32 + 1
    if tags:
        props += len(f"TAGS\x01{tags}\x02")
    return 4 * 5 + 2 + len(body) + props


async def test_concurrent_sends_become_full_batches_with_their_own_results(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=4)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    bodies = [b"batched %04d" % i for i in range(100)]
    size = item_size(bodies[0])
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=LONG, max_batch_size=10 * size) as p:
        futures = [p.send(rmq.Message(topic, b)) for b in bodies]
        results = await asyncio.gather(*futures)
    assert batches.count == 10  # ten full batches of ten, each sent when it filled
    assert len({r.msg_id for r in results}) == 100 and all("," not in r.msg_id for r in results)
    by_queue: dict[int, list[int]] = {}
    for r in results:
        by_queue.setdefault(r.queue_id, []).append(r.queue_offset)
    for offsets in by_queue.values():  # every queue offset once
        assert sorted(offsets) == list(range(len(offsets)))

    stored = await drain(namesrv_addr, topic, 100, group=unique("DRAIN"))
    assert len(stored) == 100
    by_id = {m.msg_id: m for m in stored}
    for body, r in zip(bodies, results, strict=True):  # each future: its own message's place
        m = by_id[r.msg_id]
        assert (m.body, m.queue_id, m.queue_offset, m.offset_msg_id) == (
            body,
            r.queue_id,
            r.queue_offset,
            r.offset_msg_id,
        )


async def test_linger_sends_a_partial_batch_and_send_and_wait_batches_too(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=1)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=20) as p:
        results = await asyncio.gather(*(p.send_and_wait(topic, f"v{i}", tags="T") for i in range(5)))
        assert batches.count == 1
        assert [r.queue_offset for r in results] == [0, 1, 2, 3, 4]
        # a lone message after the linger goes as a plain send
        one = await p.send(topic, "alone")
        assert batches.count == 1 and one.queue_offset == 5


async def test_a_failed_batch_fails_every_caller_with_the_same_error(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("RO")
    await create_topic(broker.broker_addr, topic, queues=1, perm=4)  # read-only: sends refused
    q = rmq.MessageQueue(topic, broker.broker_config.broker_name, 0)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=LONG) as p:
        futures = [p.send(rmq.Message(topic, b"x%d" % i), queue=q) for i in range(3)]
        await p.flush()
        errors = [f.exception() for f in futures]
    assert batches.count == 1
    assert isinstance(errors[0], rmq.NoPermissionError) and errors[0].retriable
    assert errors[1] is errors[0] and errors[2] is errors[0]


async def test_bounds_refuse_at_the_call(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=2)
    name = broker.broker_config.broker_name
    size = item_size(b"x" * 100)
    async with rmq.Producer(
        namesrv_addr, unique("PG"), linger_ms=LONG, buffer_memory=3 * size, max_pending_batches=1
    ) as p:
        q0, q1 = rmq.MessageQueue(topic, name, 0), rmq.MessageQueue(topic, name, 1)
        held = [p.send(rmq.Message(topic, b"x" * 100), queue=q0) for _ in range(3)]
        with pytest.raises(rmq.RemotingTooMuchRequestError, match="buffer_memory") as exc:
            p.send(rmq.Message(topic, b"x" * 100), queue=q0)
        assert exc.value.retriable
        with pytest.raises(rmq.RemotingTooMuchRequestError, match="max_pending_batches"):
            p.send(rmq.Message(topic, b"y"), queue=q1)  # a second batch (another queue)
        await p.flush()
        assert [(await f).queue_offset for f in held] == [0, 1, 2]
        room_again = p.send(rmq.Message(topic, b"z"), queue=q1)
        await p.flush()
        assert (await room_again).queue_id == 1


async def test_what_cannot_batch_goes_alone(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=1)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=LONG, max_batch_size=1000) as p:
        alone = [
            p.send(rmq.Message(topic, b"d", delay_level=1)),  # delayed
            p.send(rmq.Message(topic, b"c" * 5000)),  # compressed (> compress_over)
            p.send(rmq.Message(topic, b"b" * 990)),  # larger than max_batch_size
        ]
        results = await asyncio.wait_for(asyncio.gather(*alone), 30)  # no linger: sent at once
    assert batches.count == 0 and all(r.status is rmq.SendStatus.SEND_OK for r in results)


async def test_close_flushes_the_open_batches(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=1)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    p = rmq.Producer(namesrv_addr, unique("PG"), linger_ms=LONG)
    await p.start()
    futures = [p.send(rmq.Message(topic, b"m%d" % i)) for i in range(3)]
    assert not any(f.done() for f in futures)
    await p.close()
    assert [f.result().queue_offset for f in futures] == [0, 1, 2] and batches.count == 1
    with pytest.raises(rmq.IllegalStateError):
        p.send(rmq.Message(topic, b"late"))


async def test_batches_under_a_namespace_answer_plain_names(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("NT")
    await create_topic(broker.broker_addr, f"ns1%{topic}", queues=1)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    async with rmq.Producer(namesrv_addr, unique("PG"), namespace="ns1", linger_ms=LONG) as p:
        futures = [p.send(rmq.Message(topic, b"n%d" % i)) for i in range(3)]
        await p.flush()
        results = [f.result() for f in futures]
    assert batches.count == 1
    assert [(r.topic, r.queue_offset) for r in results] == [(topic, 0), (topic, 1), (topic, 2)]


def test_which_prepared_messages_may_batch():
    from rmq.client.batching import Prepared, batch_item_size, can_batch

    def prepared(props: str, topic: str = "T", sys_flag: int = 0, body: bytes = b"x") -> Prepared:
        return Prepared(topic, body, props, sys_flag, 0, "0" * 32, False)

    plain = prepared("WAIT\x01true\x02UNIQ_KEY\x01" + "0" * 32 + "\x02")
    assert can_batch(plain, 1000) and batch_item_size(plain) == item_size(b"x")
    assert not can_batch(plain, batch_item_size(plain) - 1)  # bigger than a batch
    for key in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME", "MSG_TYPE"):
        assert not can_batch(prepared(f"WAIT\x01true\x02{key}\x011\x02"), 1000), key
        assert not can_batch(prepared(f"{key}\x011\x02WAIT\x01true\x02"), 1000), key
    assert can_batch(prepared("WAIT\x01true\x02MY_DELAY\x011\x02"), 1000)  # a user property that merely ends so
    assert not can_batch(prepared("WAIT\x01true\x02", sys_flag=0x301), 1000)  # compressed
    assert not can_batch(prepared("WAIT\x01true\x02", topic="%RETRY%G"), 1000)


async def test_selector_sends_batch_per_chosen_queue(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("BT")
    await create_topic(broker.broker_addr, topic, queues=4)
    batches = RequestCounter(broker, RequestCode.SEND_BATCH_MESSAGE)
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=LONG) as p:
        await p.fetch_publish_message_queues(topic)  # the route is cached: the selector runs at the call
        futures = [
            p.send(rmq.Message(topic, b"%s%d" % (k, i)), sharding_key=k.decode())
            for i in range(3)
            for k in (b"a", b"b")
        ]
        await p.flush()
        results = [f.result() for f in futures]
    assert batches.count == 2  # one batch per queue the hash selector chose
    a, b = results[0::2], results[1::2]
    assert len({r.queue_id for r in a}) == 1 and len({r.queue_id for r in b}) == 1 and a[0].queue_id != b[0].queue_id
    assert [r.queue_offset for r in a] == [0, 1, 2] and [r.queue_offset for r in b] == [0, 1, 2]
