"""Value and key serializers on the producer, value deserializers on both consumers, over TCP."""

from __future__ import annotations

import asyncio
import json

import pytest
from sdk_support import create_topic, wait_until

import rmq

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def to_json(v: object) -> bytes:
    return json.dumps(v, sort_keys=True).encode()


async def test_values_and_keys_round_trip_through_serializers(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("JT")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG"), value_serializer=to_json, key_serializer=str) as p:
        r1 = await p.send(topic, {"order": 1, "items": ["a", "b"]}, key=1001, tags="J")
        r2 = await p.send_and_wait(topic, [1, 2, 3])
        r3 = await p.send(rmq.Message(topic, b"raw bytes"))  # a Message goes as it is

    c = rmq.PullConsumer(namesrv_addr, unique("CG"), consume_from_where=FIRST, value_deserializer=json.loads)
    c.subscribe(topic)
    got: list[rmq.MessageExt] = []
    async with c:
        while len(got) < 3:
            got.extend(await c.poll(timeout=1.0))
    by_id = {m.msg_id: m for m in got}
    first = by_id[r1.msg_id]
    assert first.value == {"order": 1, "items": ["a", "b"]} and first.value is first.value  # deserialized once
    assert first.body == b'{"items": ["a", "b"], "order": 1}' and first.keys == ("1001",) and first.tags == "J"
    assert by_id[r2.msg_id].value == [1, 2, 3]
    raw = by_id[r3.msg_id]
    with pytest.raises(rmq.SerializationError, match=f"value_deserializer failed for message {r3.msg_id}") as exc:
        raw.value  # noqa: B018 - the property raises
    assert isinstance(exc.value.__cause__, json.JSONDecodeError) and not exc.value.retriable
    assert raw.body == b"raw bytes"  # the body stays readable


async def test_serializer_failures_raise_at_the_call_and_send_nothing(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("JT")
    await create_topic(broker.broker_addr, topic, queues=1)

    def picky(v: object) -> bytes:
        if not isinstance(v, dict):
            raise TypeError(f"only dicts, not {type(v).__name__}")
        return to_json(v)

    async with rmq.Producer(namesrv_addr, unique("PG"), value_serializer=picky) as p:
        with pytest.raises(rmq.SerializationError, match=r"value_serializer failed for a message to JT_\d+") as exc:
            p.send(topic, ["not", "a", "dict"])
        assert isinstance(exc.value.__cause__, TypeError) and not exc.value.retriable
        with pytest.raises(rmq.SerializationError, match="key_serializer"):
            await p.send_and_wait(topic, {}, key=42)  # no key_serializer: a key must be a str
        with pytest.raises(rmq.ClientError, match="value, key and tags go with a topic"):
            p.send(rmq.Message(topic, b"x"), {"v": 1})
        ok = await p.send(topic, {"v": 1})
    assert ok.queue_offset == 0  # nothing went before it

    async with rmq.Producer(namesrv_addr, unique("PG"), value_serializer=lambda v: 42) as bad:
        with pytest.raises(rmq.SerializationError, match="value_serializer returned int"):
            bad.send(topic, "v")
    async with rmq.Producer(namesrv_addr, unique("PG")) as plain:
        with pytest.raises(
            rmq.SerializationError, match="dict is not bytes or str; give the producer a value_serializer"
        ):
            plain.send(topic, {"v": 1})
        assert (await plain.send(topic, "text")).queue_offset == 1
    with pytest.raises(rmq.ConfigError, match="value_serializer"):
        rmq.Producer(namesrv_addr, unique("PG"), value_serializer="json")
    with pytest.raises(rmq.ConfigError, match="value_deserializer"):
        rmq.PushConsumer(namesrv_addr, unique("CG"), value_deserializer=42)


async def test_a_push_handler_sees_values_and_a_bad_one_is_a_failed_consumption(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("JT")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG"), value_serializer=to_json) as p:
        await p.send(topic, {"n": 1}, tags="good")
        await p.send(rmq.Message(topic, b"{broken", tags="bad"))
    values: asyncio.Queue[object] = asyncio.Queue()
    failures: list[BaseException] = []

    async def handler(msg: rmq.MessageExt) -> None:
        try:
            await values.put(msg.value)
        except rmq.SerializationError as e:
            failures.append(e)
            raise

    c = rmq.PushConsumer(
        namesrv_addr, unique("CG"), handler=handler, consume_from_where=FIRST, value_deserializer=json.loads
    )
    c.subscribe(topic)
    async with c:
        assert await asyncio.wait_for(values.get(), 30) == {"n": 1}
        await wait_until(lambda: c.stats["consumed_failed"] >= 1, timeout=30, what="the bad message failed")
    assert isinstance(failures[0].__cause__, json.JSONDecodeError)
