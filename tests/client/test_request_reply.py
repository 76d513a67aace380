"""Request-reply between SDK clients over a real broker (Java DefaultMQProducer.request,
ReplyMessageProcessor): the reply arrives, timeouts, the requester gone, the bound on
outstanding requests, Producer.send of a reply message."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from sdk_support import create_topic

import rmq
from rmq._testing import wait_until
from rmq.common.message import MessageConst

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def _broker_addr(cluster) -> str:
    _, broker = cluster
    return broker.broker_addr


@contextlib.asynccontextmanager
async def responder(namesrv_addr: str, topic: str, group: str, answer, *, instance_name: str = "responder"):
    """A push consumer answering every request with ``answer(msg)`` through rmq.reply."""
    replied: list[rmq.SendResult | BaseException] = []

    async def handler(msg: rmq.MessageExt) -> None:
        try:
            replied.append(await rmq.reply(msg, answer(msg)))
        except rmq.RMQError as e:
            replied.append(e)

    c = rmq.PushConsumer(namesrv_addr, group, handler=handler, consume_from_where=FIRST, instance_name=instance_name)
    c.subscribe(topic)
    async with c:
        yield replied


async def test_request_gets_the_reply(cluster, namesrv_addr, unique):
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    async with (
        responder(namesrv_addr, topic, unique("RG"), lambda m: b"pong:" + m.body) as replied,
        rmq.Producer(namesrv_addr, unique("PG"), instance_name="requester") as p,
    ):
        reply = await p.request(rmq.Message(topic=topic, body=b"ping"), timeout=15)
        assert reply.body == b"pong:ping"
        assert reply.topic == "DefaultCluster_REPLY_TOPIC"
        assert reply.properties[MessageConst.MESSAGE_TYPE] == "reply"
        assert reply.properties[MessageConst.MESSAGE_REPLY_TO_CLIENT] == p.client_id
        assert MessageConst.REPLY_MESSAGE_ARRIVE_TIME in reply.properties
        assert MessageConst.PUSH_REPLY_TIME in reply.properties
        # several in flight at once, each matched by its correlation id
        replies = await asyncio.gather(
            *(p.request(rmq.Message(topic=topic, body=f"n{i}".encode()), timeout=15) for i in range(20))
        )
        assert [r.body for r in replies] == [f"pong:n{i}".encode() for i in range(20)]
        await wait_until(lambda: len(replied) == 21, 10, what="every reply answered")
        assert all(isinstance(r, rmq.SendResult) for r in replied), replied
        # storeReplyMessageEnable (default true): the reply is stored with its own msgId
        assert all(r.msg_id != "0" for r in replied if isinstance(r, rmq.SendResult))


async def test_request_times_out_without_a_responder(cluster, namesrv_addr, unique):
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        with pytest.raises(rmq.RequestTimeoutError, match="wait reply message timeout") as ei:
            await p.request(rmq.Message(topic=topic, body=b"ping"), timeout=1.0)
        assert ei.value.retriable
        assert len(p._instance.request_futures) == 0  # nothing left waiting


async def test_reply_to_a_requester_that_is_gone(cluster, namesrv_addr, unique):
    """The requester closes before the reply: the broker answers the responder SYSTEM_ERROR
    'channel of <id> not found' (Java's remark) and the responder's rmq.reply raises it."""
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    p = rmq.Producer(namesrv_addr, unique("PG"), instance_name="gone")
    await p.start()
    requester_id = p.client_id
    with pytest.raises(rmq.RequestTimeoutError):
        await p.request(rmq.Message(topic=topic, body=b"ping"), timeout=0.5)
    await p.close()
    async with responder(namesrv_addr, topic, unique("RG"), lambda m: b"late") as replied:
        await wait_until(lambda: replied, 15, what="the responder tried to reply")
    err = replied[0]
    assert isinstance(err, rmq.BrokerResponseError), err
    assert err.code == 1
    assert f"channel of <{requester_id}> not found" in str(err)


async def test_outstanding_requests_are_bounded(cluster, namesrv_addr, unique):
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    async with rmq.Producer(namesrv_addr, unique("PG"), max_outstanding_requests=2) as p:
        # (the two requests wait far longer than the test needs; they are cancelled below)
        waiting = [asyncio.create_task(p.request(rmq.Message(topic=topic, body=b"x"), timeout=120)) for _ in range(2)]
        await wait_until(lambda: len(p._instance.request_futures) == 2, 30, what="two requests waiting")
        with pytest.raises(rmq.RemotingTooMuchRequestError, match="max_outstanding_requests=2"):
            await p.request(rmq.Message(topic=topic, body=b"x"), timeout=5)
        for t in waiting:
            t.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        assert len(p._instance.request_futures) == 0


async def test_a_reply_sent_with_producer_send(cluster, namesrv_addr, unique):
    """A responder may also send create_reply_message's message with any producer (Java's
    way): Producer.send uses SEND_REPLY_MESSAGE_V2 for it."""
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    async with rmq.Producer(namesrv_addr, unique("PG"), instance_name="answerer") as answerer:

        async def handler(msg: rmq.MessageExt) -> None:
            await answerer.send(rmq.create_reply_message(msg, b"via send"))

        c = rmq.PushConsumer(
            namesrv_addr, unique("RG"), handler=handler, consume_from_where=FIRST, instance_name="responder2"
        )
        c.subscribe(topic)
        async with c, rmq.Producer(namesrv_addr, unique("PG"), instance_name="asker") as p:
            reply = await p.request(rmq.Message(topic=topic, body=b"q"), timeout=15)
            assert reply.body == b"via send"


async def test_create_reply_message_needs_a_request(cluster, namesrv_addr, unique):
    topic = unique("T")
    await create_topic(_broker_addr(cluster), topic)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        await p.send(rmq.Message(topic=topic, body=b"plain"))
    c = rmq.PullConsumer(namesrv_addr, unique("CG"), consume_from_where=FIRST)
    c.subscribe(topic)
    async with c:
        msgs: list[rmq.MessageExt] = []
        for _ in range(100):
            msgs += await c.poll(timeout=0.5)
            if msgs:
                break
        assert msgs
        # an ordinary send carries no CLUSTER (the broker adds it to requests only)
        assert MessageConst.CLUSTER not in msgs[0].properties
        with pytest.raises(rmq.ClientError, match=r"property\[CLUSTER\] is null"):
            rmq.create_reply_message(msgs[0], b"x")


async def test_requester_and_responder_in_one_client_instance(cluster, namesrv_addr, unique):
    """Both on the default instance name: one client id, one connection per broker, which
    carries the request, the reply and its push."""
    topic = unique("RQ")
    await create_topic(_broker_addr(cluster), topic)
    async with (
        responder(namesrv_addr, topic, unique("RG"), lambda m: m.body[::-1], instance_name="DEFAULT"),
        rmq.Producer(namesrv_addr, unique("PG")) as p,
    ):
        reply = await p.request(rmq.Message(topic=topic, body=b"abc"), timeout=15)
        assert reply.body == b"cba"
