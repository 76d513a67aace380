"""Timer messages from the SDK: ``Message(delivery_time=...)`` and ``Message(delay=...)`` set
TIMER_DELIVER_MS and a real broker delivers them at that time; the refusals are the SDK's own."""

import asyncio
import datetime
import time

import pytest
from sdk_support import create_topic, drain, wait_until

import rmq
from rmq.common.message import MessageConst
from rmq.protocol.codes import ResponseCode


async def test_delivery_time_and_delay_are_delivered_after_their_time(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    at_ms = time.time_ns() // 1_000_000 + 1500
    at = datetime.datetime.fromtimestamp(at_ms / 1000, tz=datetime.UTC)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        r_at = await p.send(rmq.Message(topic, b"at", delivery_time=at))
        r_ms = await p.send(rmq.Message(topic, b"ms", delivery_time=at_ms))
        r_delay = await p.send(rmq.Message(topic, b"delay", delay=datetime.timedelta(milliseconds=1200)))
    assert {r.status for r in (r_at, r_ms, r_delay)} == {rmq.SendStatus.SEND_OK}
    msgs = await drain(namesrv_addr, topic, 3, group=unique("CG"), timeout=30)
    by_body = {m.body: m for m in msgs}
    assert set(by_body) == {b"at", b"ms", b"delay"}
    for body, msg_id in ((b"at", r_at.msg_id), (b"ms", r_ms.msg_id), (b"delay", r_delay.msg_id)):
        m = by_body[body]
        deliver = int(m.properties[MessageConst.TIMER_DELIVER_MS])
        assert m.msg_id == msg_id  # the producer's message id survives the wheel
        assert m.store_timestamp >= deliver  # never early, by the broker's own clock
    assert int(by_body[b"ms"].properties[MessageConst.TIMER_DELIVER_MS]) == at_ms
    assert abs(int(by_body[b"at"].properties[MessageConst.TIMER_DELIVER_MS]) - at_ms) <= 1
    delay = by_body[b"delay"]
    # counted from the message's preparation, just before it was born (sent)
    assert delay.born_timestamp < int(delay.properties[MessageConst.TIMER_DELIVER_MS]) <= delay.born_timestamp + 1200


def test_timer_arguments_are_checked():
    with pytest.raises(ValueError, match="at most one"):
        rmq.Message("T", b"x", delay_level=2, delay=datetime.timedelta(seconds=1))
    with pytest.raises(ValueError, match="at most one"):
        rmq.Message("T", b"x", delivery_time=1_900_000_000_000, delay=datetime.timedelta(seconds=1))
    with pytest.raises(ValueError, match="at most one"):
        rmq.Message("T", b"x", delivery_time=1_900_000_000_000, delay_level=1)
    with pytest.raises(ValueError, match="timedelta"):
        rmq.Message("T", b"x", delay=datetime.timedelta(seconds=-1))
    with pytest.raises(ValueError, match="epoch milliseconds"):
        rmq.Message("T", b"x", delivery_time="tomorrow")  # type: ignore[arg-type]
    m = rmq.Message("T", b"x", delivery_time=datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC))
    assert m.delivery_time == 1_893_456_000_000


async def test_timer_messages_go_alone_never_in_a_batch(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    later = datetime.timedelta(seconds=30)
    async with rmq.Producer(namesrv_addr, unique("PG"), linger_ms=20) as p:
        with pytest.raises(rmq.ClientError, match="not supported in a batch"):
            await p.send_batch([rmq.Message(topic, b"a"), rmq.Message(topic, b"b", delay=later)])
        # with automatic batching on, the plain messages batch and the timer one goes alone
        results = await asyncio.gather(
            p.send(rmq.Message(topic, b"plain-1")),
            p.send(rmq.Message(topic, b"timer", delay=later)),
            p.send(rmq.Message(topic, b"plain-2")),
        )
    assert {r.status for r in results} == {rmq.SendStatus.SEND_OK}
    store = broker.message_store
    await wait_until(
        lambda: len(_queue(store, "rmq_sys_wheel_timer")) + len(_queue(store, topic)) >= 3, what="all dispatched"
    )
    parked = [m.body for m in _queue(store, "rmq_sys_wheel_timer")]
    assert parked == [b"timer"]
    assert sorted(m.body for m in _queue(store, topic)) == [b"plain-1", b"plain-2"]


def _queue(store, topic):
    cq = store.find_consume_queue(topic, 0, create=False)
    if cq is None:
        return []
    return [
        store.look_message_by_offset(*cq.get_unit(i)[:2])
        for i in range(cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue())
    ]


async def test_cancel_timer_drops_the_message_before_its_time(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    at_ms = time.time_ns() // 1_000_000 + 2000
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        doomed = await p.send(rmq.Message(topic, b"doomed", delivery_time=at_ms))
        await p.send(rmq.Message(topic, b"kept", delivery_time=at_ms))
        # later than both: once it is delivered, their tick is past (one queue: in order)
        await p.send(rmq.Message(topic, b"sentinel", delivery_time=at_ms + 500))
        marker = await p.cancel_timer(doomed, at_ms)
        assert marker.status == rmq.SendStatus.SEND_OK
        assert marker.message_queue == doomed.message_queue
        msgs = await drain(namesrv_addr, topic, 2, group=unique("CG"), timeout=30)
        assert [m.body for m in msgs] == [b"kept", b"sentinel"]
        with pytest.raises(rmq.errors.BrokerResponseError) as e:  # too late: its time has passed
            await p.cancel_timer(doomed, at_ms)
        assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
