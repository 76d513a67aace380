"""Send and consume hooks (Java SendMessageHook / ConsumeMessageHook) over a real broker: what
the contexts carry, the order of the calls, failures, and hooks that raise."""

from __future__ import annotations

import logging

import pytest
from sdk_support import create_topic

import rmq
from rmq._testing import wait_until

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class Recorder:
    def __init__(self, fail: bool = False, name: str = "Recorder") -> None:
        self.calls: list[tuple[str, object]] = []
        self.fail = fail
        self.name = name

    def hook_name(self) -> str:
        return self.name

    def send_message_before(self, ctx: rmq.SendMessageContext) -> None:
        ctx.props["seen"] = True
        self.calls.append(("before", ctx))
        if self.fail:
            raise RuntimeError("hook bug")

    def send_message_after(self, ctx: rmq.SendMessageContext) -> None:
        assert ctx.props["seen"]
        self.calls.append(("after", ctx))
        if self.fail:
            raise RuntimeError("hook bug")

    def consume_message_before(self, ctx: rmq.ConsumeMessageContext) -> None:
        self.calls.append(("before", ctx))
        if self.fail:
            raise RuntimeError("hook bug")

    def consume_message_after(self, ctx: rmq.ConsumeMessageContext) -> None:
        self.calls.append(("after", ctx))
        if self.fail:
            raise RuntimeError("hook bug")


async def test_send_hook_sees_each_send(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic = unique("HT")
    await create_topic(broker.broker_addr, topic)
    rec = Recorder()
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        p.add_send_hook(rec)
        result = await p.send(rmq.Message(topic=topic, body=b"x" * 10, tags="TagH", keys=["k1", "k2"]))
        assert [c[0] for c in rec.calls] == ["before", "after"]
        ctx = rec.calls[1][1]
        assert isinstance(ctx, rmq.SendMessageContext)
        assert (ctx.producer_group, ctx.topic, ctx.tags, ctx.keys) == (p.group, topic, "TagH", "k1 k2")
        assert ctx.msg_id == result.msg_id and ctx.send_result == result and ctx.exception is None
        assert ctx.broker_addr == broker.broker_addr and ctx.mq == result.message_queue
        assert ctx.body_length == 10 and ctx.msg_type == 0
        # a refused attempt: after() gets the exception, which reaches the caller unchanged
        rec.calls.clear()
        with pytest.raises(rmq.BrokerResponseError) as ei:
            await p.send(rmq.Message(topic=topic, body=b"y"), queue=rmq.MessageQueue(topic, "broker-a", 99))
        assert [c[0] for c in rec.calls] == ["before", "after"]
        assert rec.calls[1][1].exception is ei.value and rec.calls[1][1].send_result is None


async def test_a_raising_send_hook_never_breaks_the_send(cluster, namesrv_addr, unique, caplog):
    _, broker = cluster
    topic = unique("HT")
    await create_topic(broker.broker_addr, topic)
    # (the rate limiter is per hook name and process-wide: a name of this test's own)
    bad, good = Recorder(fail=True, name=unique("BadHook")), Recorder()
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        p.add_send_hook(bad)
        p.add_send_hook(good)
        with caplog.at_level(logging.WARNING, logger="rmq.client"):
            results = [await p.send(rmq.Message(topic=topic, body=b"x")) for _ in range(3)]
        assert all(r.status is rmq.SendStatus.SEND_OK for r in results)
        assert len(good.calls) == 6  # the hook after the bad one still ran
        lines = [r.getMessage() for r in caplog.records if f"hook {bad.name}." in r.getMessage()]
        assert len(lines) == 2, lines  # rate-limited: one per hook method, not one per send
        with pytest.raises(rmq.ClientError, match="send_message_before"):
            p.add_send_hook(object())  # type: ignore[arg-type]


async def test_consume_hook_around_the_handler(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic = unique("HC")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        ok = await p.send(rmq.Message(topic=topic, body=b"ok"))
        await p.send(rmq.Message(topic=topic, body=b"fail"))
    done: list[bytes] = []

    def handler(msg: rmq.MessageExt) -> rmq.ConsumeResult:
        done.append(msg.body)
        return rmq.ConsumeResult.RECONSUME_LATER if msg.body == b"fail" else rmq.ConsumeResult.SUCCESS

    rec, bad = Recorder(), Recorder(fail=True)
    c = rmq.PushConsumer(namesrv_addr, unique("CG"), handler=handler, consume_from_where=FIRST)
    c.add_consume_hook(bad)
    c.add_consume_hook(rec)
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: {b"ok", b"fail"} <= set(done), 20, what="both messages handled")
        await wait_until(lambda: sum(k == "after" for k, _ in rec.calls) >= 2, 10, what="the after calls")
    afters = {ctx.msgs[0].body: ctx for kind, ctx in rec.calls if kind == "after"}
    assert afters[b"ok"].success and afters[b"ok"].status == "CONSUME_SUCCESS"
    assert not afters[b"fail"].success and afters[b"fail"].status == "RECONSUME_LATER"
    assert afters[b"ok"].consumer_group == c.group and afters[b"ok"].msgs[0].msg_id == ok.msg_id
    assert afters[b"ok"].mq.topic == topic


async def test_consume_hook_in_iterator_mode(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic = unique("HI")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        for i in range(2):
            await p.send(rmq.Message(topic=topic, body=f"m{i}".encode()))
    rec = Recorder()
    c = rmq.PushConsumer(namesrv_addr, unique("CG"), consume_from_where=FIRST)
    c.add_consume_hook(rec)
    c.subscribe(topic)
    seen = []
    async with c:
        async for msg in c:
            seen.append(msg.body)
            # the hook's before() ran when the loop got the message; after() when it asks for the next
            assert rec.calls[-1][0] == "before" and rec.calls[-1][1].msgs[0].body == msg.body
            if len(seen) == 2:
                break
    assert [k for k, _ in rec.calls[:3]] == ["before", "after", "before"]
    assert rec.calls[1][1].success


async def test_send_hook_sees_a_oneway_send(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic = unique("HO")
    await create_topic(broker.broker_addr, topic)
    rec = Recorder()
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        p.add_send_hook(rec)
        await p.send_oneway(rmq.Message(topic=topic, body=b"x"))
    assert [k for k, _ in rec.calls] == ["before", "after"]
    ctx = rec.calls[1][1]
    assert ctx.communication_mode == "ONEWAY" and ctx.send_result is None and ctx.exception is None
