"""Failures reach the application: consume timeouts, and the errors a consumer cannot heal by
retrying (no subscription group, no topic or route, no permission) raised by ``poll`` or handed
to ``on_error`` after ``error_retries``; against a real broker."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest
from sdk_support import create_topic, wait_until

import rmq
from rmq._testing import run_namesrv, run_standalone

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
#: delay levels of 1 s, so a message sent back comes again within seconds
FAST_DELAYS = " ".join(["1s"] * 18)


@pytest.fixture
async def fast_retry_cluster(tmp_path):
    async with run_standalone(tmp_path / "store", message_delay_level=FAST_DELAYS) as (ns, broker):
        yield ns, broker


async def test_handler_past_consume_timeout_is_failed_and_redelivered(fast_retry_cluster, unique, caplog):
    ns, broker = fast_retry_cluster
    nsaddr = f"127.0.0.1:{ns.port}"
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    calls: list[rmq.MessageExt] = []
    cancelled = asyncio.Event()
    never = asyncio.Event()

    async def handler(msg: rmq.MessageExt) -> None:
        calls.append(msg)
        if len(calls) == 1:  # the first delivery hangs past consume_timeout
            try:
                await never.wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

    c = rmq.PushConsumer(nsaddr, cg, handler=handler, consume_from_where=FIRST, consume_timeout=1.0)
    c.subscribe(topic)
    async with rmq.Producer(nsaddr, unique("PG")) as p, c:
        sent = await p.send(rmq.Message(topic, b"slow"))
        await wait_until(lambda: len(calls) >= 2, timeout=30, what="the message delivered again")
        assert cancelled.is_set(), "the hanging handler call was not cancelled"
        again = calls[1]
        assert again.body == b"slow" and again.msg_id == sent.msg_id and again.topic == topic
        assert again.reconsume_times == 1
        assert c.stats["consume_timeouts"] == 1 and c.stats["sent_back"] == 1
        # the original queue's offset moved past the message: it is not delivered a third time
        await wait_until(
            lambda: (
                c._impl.offset_store.offset_table.get(rmq.MessageQueue(topic, broker.broker_config.broker_name, 0)) == 1
            ),
            timeout=10,
            what="offset committed past the timed-out message",
        )
    assert len(calls) == 2
    lines = [r for r in caplog.records if "consume_timeout" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "sending 1 message(s) back (delay level 3)" in lines[0].getMessage()


async def test_a_handler_swallowing_the_cancellation_still_times_out(fast_retry_cluster, unique):
    ns, broker = fast_retry_cluster
    nsaddr = f"127.0.0.1:{ns.port}"
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    calls: list[int] = []

    async def stubborn(msg: rmq.MessageExt) -> None:
        calls.append(msg.reconsume_times)
        if len(calls) == 1:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return None  # "consumed", says the handler: too late, it timed out

    c = rmq.PushConsumer(
        nsaddr, unique("CG"), handler=stubborn, consume_from_where=FIRST, consume_timeout=0.5, consume_concurrency=1
    )
    c.subscribe(topic)
    async with rmq.Producer(nsaddr, unique("PG")) as p, c:
        await p.send(rmq.Message(topic, b"x"))
        await wait_until(lambda: len(calls) >= 2, timeout=30, what="redelivery")
        assert calls == [0, 1] and c.stats["consume_timeouts"] == 1
        # the single worker goes on (its cancellation was consumed, not left pending)
        await p.send(rmq.Message(topic, b"y"))
        await wait_until(lambda: len(calls) >= 3, timeout=30, what="the next message")


async def test_orderly_consumer_has_no_consume_timeout(fast_retry_cluster, unique):
    # Java ProcessQueue.cleanExpiredMsg returns at once for an orderly consumer. Both handlers
    # below hold their message until the concurrent one (the control, same consume_timeout)
    # has been timed out: the orderly one has then run past its consume_timeout too.
    ns, broker = fast_retry_cluster
    nsaddr = f"127.0.0.1:{ns.port}"
    topic, control_topic = unique("T"), unique("TC")
    for t in (topic, control_topic):
        await create_topic(broker.broker_addr, t, queues=1)
    release, done = asyncio.Event(), asyncio.Event()
    calls = 0

    async def handler(msg: rmq.MessageExt) -> None:
        nonlocal calls
        calls += 1
        await release.wait()
        done.set()

    async def control_handler(msg: rmq.MessageExt) -> None:
        await release.wait()

    c = rmq.PushConsumer(
        nsaddr, unique("CG"), handler=handler, orderly=True, consume_from_where=FIRST, consume_timeout=0.5
    )
    c.subscribe(topic)
    control = rmq.PushConsumer(
        nsaddr, unique("CG"), handler=control_handler, consume_from_where=FIRST, consume_timeout=0.5
    )
    control.subscribe(control_topic)
    async with rmq.Producer(nsaddr, unique("PG")) as p, c, control:
        await p.send(rmq.Message(topic, b"x"))
        await p.send(rmq.Message(control_topic, b"x"))
        await wait_until(
            lambda: calls == 1 and control.stats["consume_timeouts"] >= 1,
            timeout=30,
            what="the orderly handler running and the concurrent one timed out",
        )
        release.set()
        await wait_until(done.is_set, timeout=30, what="the slow orderly handler finished")
        await wait_until(lambda: c.stats["consumed_ok"] == 1, timeout=30, what="the orderly message consumed")
        assert calls == 1 and c.stats["consume_timeouts"] == 0


# ---------------------------------------------------------------------------- errors to the application


async def test_poll_raises_subscription_group_not_exist(tmp_path, unique):
    async with run_standalone(tmp_path / "s", auto_create_subscription_group=False) as (ns, broker):
        nsaddr = f"127.0.0.1:{ns.port}"
        topic = unique("T")
        await create_topic(broker.broker_addr, topic, queues=1)
        c = rmq.PullConsumer(nsaddr, unique("NOGROUP"), error_retries=2, poll_timeout=1.0)
        c.subscribe(topic)
        async with c:
            with pytest.raises(rmq.SubscriptionGroupNotExistError) as ei:
                await _poll_until_raises(c, 40)
            assert ei.value.code == 26 and not ei.value.retriable
            assert any("failure(s) in a row" in n for n in getattr(ei.value, "__notes__", []))


async def test_push_consumer_delivers_no_permission_to_on_error(cluster, namesrv_addr, unique):
    _, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    async with rmq.Admin(namesrv_addr) as admin:
        await admin.create_and_update_subscription_group_config(broker.broker_addr, cg, consume_enable=False)
    errors: list[rmq.RMQError] = []

    async def on_error(e: rmq.RMQError) -> None:
        errors.append(e)

    c = rmq.PushConsumer(namesrv_addr, cg, handler=lambda m: None, on_error=on_error, error_retries=2)
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: errors, timeout=40, what="on_error called")
        assert isinstance(errors[0], rmq.NoPermissionError) and errors[0].code == 16
        # fixed by an operator: the consumer, still retrying, consumes again
        async with rmq.Admin(namesrv_addr) as admin:
            await admin.create_and_update_subscription_group_config(broker.broker_addr, cg, consume_enable=True)
        got: list[rmq.MessageExt] = []
        c._impl.consume_service._single = got.append  # type: ignore[attr-defined]
        async with rmq.Producer(namesrv_addr, unique("PG")) as p:
            await p.send(rmq.Message(topic, b"after"))
        await wait_until(lambda: got, timeout=40, what="consumption after the permission came back")


async def test_no_route_reaches_poll_and_on_error(cluster, namesrv_addr, unique):
    # a subscribed topic the name server has no route for: the rebalance's failures count
    topic = unique("NOROUTE")
    pc = rmq.PullConsumer(namesrv_addr, unique("LG"), error_retries=2, poll_timeout=1.0)
    pc.subscribe(topic)
    errors: list[rmq.RMQError] = []
    push = rmq.PushConsumer(namesrv_addr, unique("CG"), handler=lambda m: None, on_error=errors.append, error_retries=2)
    push.subscribe(topic)
    async with pc, push:
        with pytest.raises(rmq.TopicNotExistError, match=topic):
            await _poll_until_raises(pc, 40)
        await wait_until(lambda: errors, timeout=40, what="push on_error")
        assert isinstance(errors[0], rmq.TopicNotExistError) and errors[0].retriable


async def test_poll_raises_topic_not_exist_from_the_broker(cluster, namesrv_addr, unique):
    # the topic is deleted on the broker while a consumer reads it (the cached route still
    # names it): every pull is answered TOPIC_NOT_EXIST
    _, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=1)
    c = rmq.PullConsumer(namesrv_addr, unique("LG"), error_retries=2, poll_timeout=1.0, auto_commit=False)
    async with c:
        c.assign(await c.fetch_message_queues(topic))
        async with rmq.Admin(namesrv_addr) as admin:
            await admin.delete_topic_in_broker(broker.broker_addr, topic)
        with pytest.raises(rmq.TopicNotExistError) as ei:
            await _poll_until_raises(c, 40)
        assert ei.value.code == 17 and topic in str(ei.value)


async def test_push_consumer_without_on_error_logs_the_error(tmp_path, unique, caplog):
    async with run_standalone(tmp_path / "s", auto_create_subscription_group=False) as (ns, broker):
        topic = unique("T")
        await create_topic(broker.broker_addr, topic, queues=1)
        c = rmq.PushConsumer(f"127.0.0.1:{ns.port}", unique("NOGROUP"), handler=lambda m: None, error_retries=2)
        c.subscribe(topic)
        async with c:
            await wait_until(
                lambda: any("no on_error handler" in r.getMessage() for r in caplog.records),
                timeout=40,
                what="the error logged",
            )
        line = next(r for r in caplog.records if "no on_error handler" in r.getMessage())
        assert "CODE: 26" in line.getMessage()


async def _poll_until_raises(c: rmq.PullConsumer, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        assert await c.poll(timeout=1.0) == []
    raise AssertionError(f"poll did not raise within {timeout} s")


async def test_producer_retries_back_off_and_log_once_per_send(unique, caplog):
    # a broker that registered a topic and died (its route stays until the name server expires
    # it): every attempt is refused at connect
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    dead = f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    topic = unique("T")
    async with run_namesrv() as ns:
        ns.route_info_manager.register_broker(
            "C",
            dead,
            "broker-dead",
            0,
            "",
            {topic: {"readQueueNums": 2, "writeQueueNums": 2, "perm": 6}},
            {"counter": 1},
        )
        async with rmq.Producer(
            f"127.0.0.1:{ns.port}", unique("PG"), retry_times=3, retry_backoff=0.1, send_timeout=10
        ) as p:
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(rmq.RemotingConnectError) as ei:
                await p.send(rmq.Message(topic, b"x"))
            elapsed = loop.time() - start
    assert ei.value.retriable
    assert elapsed >= 0.1 + 0.2 + 0.4, f"3 retries with back-off 0.1, 0.2, 0.4 s took {elapsed:.3f} s"
    lines = [
        r.getMessage()
        for r in caplog.records
        if "producer" in r.getMessage() and topic in r.getMessage() and "fail" in r.getMessage()
    ]
    assert len(lines) == 1, lines
    assert "failed after 4 attempt(s)" in lines[0] and lines[0].count("RemotingConnectError") == 4
