"""The push consumer's details as Java 4.9.8's DefaultMQPushConsumerImpl has them (seed 004):
subscriptions posted with a pull only on request, the DEFAULT instance name turned into the
pid, topic-wide flow-control thresholds and consume thread ranges, and OFFSET_ILLEGAL's
delayed offset fix. Each against a real name server and broker over TCP."""

import asyncio
import dataclasses
import logging
import os
import re

import pytest
from sdk_support import create_topic, wait_until

import rmq
import rmq.client.consumer.push as push_mod
from rmq.client.consumer.base import SubscriptionData
from rmq.protocol.body.conns import ConsumerConnection
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.client import get_consumer_connection_list
from rmq.remoting import RemotingClient

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _send(nsaddr, topic, n, group, tags="A"):
    async with rmq.Producer(nsaddr, group) as p:
        return [await p.send(rmq.Message(topic, f"m{i}".encode(), tags=tags)) for i in range(n)]


async def test_pull_without_subscription_gets_not_latest_until_the_heartbeat(cluster, namesrv_addr, unique, caplog):
    """Java posts the subscription with a pull only with postSubscriptionWhenPull (default
    false): the broker filters by the heartbeat's subscription and refuses a newer version."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    got: list[rmq.MessageExt] = []
    c = rmq.PushConsumer(namesrv_addr, cg, handler=got.append, consume_from_where=FIRST)
    c.subscribe(topic, "A")
    caplog.set_level(logging.WARNING, logger="rmq.client")
    async with c:
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="A")
        await wait_until(lambda: len(got) == 1, what="the first message")
        # what subscribe() does while running, short of its heartbeat: a newer version
        old = c._impl.subscriptions[topic]
        new = SubscriptionData.build(topic, "A || B")
        c._impl.subscriptions[topic] = dataclasses.replace(new, sub_version=max(new.sub_version, old.sub_version + 1))
        errors = c.stats["pull_errors"]
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="A")  # ends the held pull
        await wait_until(lambda: c.stats["pull_errors"] > errors, what="a refused pull")
        assert "SubscriptionNotLatest" in caplog.text
        inst = c._impl._instance
        assert inst is not None
        await inst.send_heartbeat_to_all_brokers()
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="B")
        await wait_until(lambda: any(m.tags == "B" for m in got), what="the B message after the heartbeat")
    assert c.options.post_subscription_when_pull is False  # Java's default


async def test_post_subscription_when_pull_sends_it(cluster, namesrv_addr, unique):
    """With the option on, a newer subscription is taken from the pull itself."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    got: list[rmq.MessageExt] = []
    c = rmq.PushConsumer(
        namesrv_addr, cg, handler=got.append, consume_from_where=FIRST, post_subscription_when_pull=True
    )
    c.subscribe(topic, "A")
    async with c:
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="A")
        await wait_until(lambda: len(got) == 1, what="the first message")
        old = c._impl.subscriptions[topic]
        new = SubscriptionData.build(topic, "A || B")
        c._impl.subscriptions[topic] = dataclasses.replace(new, sub_version=max(new.sub_version, old.sub_version + 1))
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="A")
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="B")
        await wait_until(lambda: any(m.tags == "B" for m in got), what="the B message")
        assert c.stats["pull_errors"] == 0


async def test_default_instance_name_becomes_pid_and_nanotime(cluster, namesrv_addr, unique):
    """Java ClientConfig.changeInstanceNameToPID: a clustering consumer named DEFAULT has the
    client id ``ip@pid#nanotime``, as the broker's consumer connection list shows."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    a = rmq.PushConsumer(namesrv_addr, cg, handler=lambda m: None)
    b = rmq.PushConsumer(namesrv_addr, cg, handler=lambda m: None)  # same group, same process
    for c in (a, b):
        c.subscribe(topic)
    async with a, b:
        async with RemotingClient() as rc:

            async def ids() -> set[str]:
                resp = await rc.invoke(broker.broker_addr, get_consumer_connection_list(cg))
                if resp.code != ResponseCode.SUCCESS:
                    return set()
                return {ci.client_id for ci in ConsumerConnection.decode(resp.body).connection_set}

            listed = await wait_until(lambda: _two(ids()), what="both members listed")
        pattern = re.compile(rf"^[0-9a-f.:]+@{os.getpid()}#\d+$")
        assert all(pattern.match(cid) for cid in listed), listed
        assert {a.client_id, b.client_id} == listed


async def _two(ids_coro):
    ids = await ids_coro
    return ids if len(ids) == 2 else None


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"consume_thread_min": 0}, "consume_thread_min"),
        ({"consume_thread_max": 1001}, "consume_thread_max"),
        ({"consume_thread_min": 30, "consume_thread_max": 20}, "consume_thread_min"),
        ({"pull_threshold_for_topic": 0}, "pull_threshold_for_topic"),
        ({"pull_threshold_for_topic": 6553501}, "pull_threshold_for_topic"),
        ({"pull_threshold_size_for_topic": 102401}, "pull_threshold_size_for_topic"),
    ],
)
def test_seed_004_ranges(kw, name):
    with pytest.raises(rmq.errors.ConfigError, match=name):
        rmq.PushConsumer("127.0.0.1:9876", "CG", handler=lambda m: None, **kw)


async def test_topic_threshold_divides_over_the_queues_and_pauses_pulls(cluster, namesrv_addr, unique):
    """pullThresholdForTopic / pullThresholdSizeForTopic become per-queue thresholds of
    max(1, value // queues owned) (Java RebalancePushImpl.messageQueueChanged), and pulls stop
    once a queue caches more than that."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    release = asyncio.Event()
    started: list[int] = []

    async def handler(msg):
        started.append(1)
        await release.wait()

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        consume_from_where=FIRST,
        consume_thread_min=1,
        consume_thread_max=1,
        pull_batch_size=1,
        pull_threshold_for_topic=9,
        pull_threshold_size_for_topic=5,
    )
    c.subscribe(topic)
    await _send(namesrv_addr, topic, 40, unique("PG"))
    async with c:
        impl = c._impl
        # two queues of the topic and one of %RETRY%group
        await wait_until(lambda: len(impl.process_queue_table) == 3, what="three queues owned")
        await wait_until(lambda: impl.pull_threshold_for_queue == 3, what="the divided threshold")
        assert impl.pull_threshold_size_for_queue == 1
        await wait_until(lambda: c.stats["flow_controlled"] > 0, what="flow control")
        cached = sum(pq.msg_count for mq, pq in impl.process_queue_table.items() if mq.topic == topic)
        # each queue pulls only while it caches no more than 3, one message per pull
        assert cached <= 2 * (3 + 1), cached
        assert len(started) == 1  # one handler task (consume_thread_min=1)
        release.set()
        await wait_until(lambda: c.stats["consumed_ok"] >= 40, what="all consumed")


async def test_offset_illegal_drops_the_queue_then_persists_the_fixed_offset(
    cluster, namesrv_addr, unique, monkeypatch
):
    """OFFSET_ILLEGAL: Java sets the next offset and drops the process queue at once, then
    (10 s later; shortened here) persists the offset and removes the queue, which the next
    rebalance starts again at the fixed offset."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _send(namesrv_addr, topic, 3, unique("PG"))
    async with RemotingClient() as rc:
        resp = await rc.invoke(
            broker.broker_addr,
            RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": cg, "topic": topic, "queueId": "0", "commitOffset": "100"},
            ),
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert push_mod.OFFSET_ILLEGAL_FIX_DELAY == 10.0  # Java's
    monkeypatch.setattr(push_mod, "OFFSET_ILLEGAL_FIX_DELAY", 0.3)
    got: list[rmq.MessageExt] = []
    c = rmq.PushConsumer(namesrv_addr, cg, handler=got.append)
    c.subscribe(topic)
    async with c:
        table = c._impl.process_queue_table
        first = await wait_until(
            lambda: next((pq for mq, pq in table.items() if mq.topic == topic), None), what="the queue"
        )
        await wait_until(lambda: first.dropped, what="the queue dropped")
        # past the end of a queue starting at 0, the broker corrects to 0 (Java
        # DefaultMessageStore.getMessage, OFFSET_OVERFLOW_BADLY with minOffset 0)
        assert first.next_offset == 0
        assert not got  # nothing consumed from the dropped queue
        second = await wait_until(
            lambda: next((pq for mq, pq in table.items() if mq.topic == topic and pq is not first), None),
            what="the queue taken again",
        )
        assert not first.offset_fix_pending
        await _send(namesrv_addr, topic, 1, unique("PG"), tags="NEW")
        await wait_until(lambda: any(m.tags == "NEW" for m in got), what="the new message")
        # started again at the corrected offset read back from the broker (the offset store
        # forgot the queue when it was removed): the three old messages too
        assert sorted(m.queue_offset for m in got) == [0, 1, 2, 3]
        assert not second.dropped
