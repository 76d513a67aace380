"""Timer messages from the SDK: ``Message(delivery_time=...)`` and ``Message(delay=...)`` set
TIMER_DELIVER_MS and a real broker delivers them at that time; the refusals are the SDK's own."""

import datetime
import time

import pytest
from sdk_support import create_topic, drain

import rmq
from rmq.common.message import MessageConst


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
    assert int(delay.properties[MessageConst.TIMER_DELIVER_MS]) >= delay.born_timestamp + 1200


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
