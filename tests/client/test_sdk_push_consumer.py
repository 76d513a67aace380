"""PushConsumer against a real in-process name server + broker."""

import asyncio
import json
import logging
import os

import pytest
from sdk_support import create_topic, holds, wait_until

import rmq
from rmq._testing import free_broker_port, run_broker, run_namesrv
from rmq.protocol.body.conns import ConsumerRunningInfo, GetConsumerStatusBody
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


async def _produce(nsaddr, topic, bodies, group, **kw):
    async with rmq.Producer(nsaddr, group) as p:
        return [await p.send(rmq.Message(topic, b, **kw)) for b in bodies]


async def _stored_offsets(broker_addr, group, topic, queues):
    from rmq.remoting import RemotingClient

    out = {}
    async with RemotingClient() as rc:
        for q in range(queues):
            resp = await rc.invoke(
                broker_addr,
                RemotingCommand.request(
                    RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": str(q)}
                ),
            )
            out[q] = int(resp.ext_fields["offset"]) if resp.code == ResponseCode.SUCCESS else -1
    return out


async def test_handler_filters_tags_and_commits_offsets(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=4)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        sent = [await p.send(rmq.Message(topic, f"m{i}".encode(), tags="ABC"[i % 3])) for i in range(30)]
    got = []

    async def handler(msg):
        got.append(msg)

    ends: dict[int, int] = {}
    for r in sent:
        ends[r.queue_id] = max(ends.get(r.queue_id, 0), r.queue_offset + 1)

    def consumed_offsets() -> dict[int, int]:
        store = c._impl.offset_store
        return {mq.queue_id: off for mq, off in store.offset_table.items() if mq.topic == topic} if store else {}

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic, "A || B")
    async with c:
        await wait_until(lambda: len(got) >= 20, what="20 A/B messages")
        # the filtered C messages at the end of a queue are consumed too (skipped)
        await wait_until(lambda: consumed_offsets() == ends, what="every queue consumed to its end")
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(30) if i % 3 != 2)
    assert {m.tags for m in got} == {"A", "B"}
    # close() persisted the consumed offsets: every queue is at its end (C messages skipped too)
    assert await _stored_offsets(broker.broker_addr, cg, topic, 4) == ends


async def test_resume_from_stored_offset_and_iterator_ack(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg, pg = unique("T"), unique("CG"), unique("PG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _produce(namesrv_addr, topic, [b"a", b"b", b"c"], pg)
    seen = []
    c = rmq.PushConsumer(namesrv_addr, cg, consume_from_where=FIRST)
    c.subscribe(topic)
    with pytest.raises(RuntimeError):
        async with c:
            async for msg in c:
                seen.append(msg.body)
                if msg.body == b"b":
                    raise RuntimeError("handler failed on b")  # b is NOT acknowledged
    assert seen == [b"a", b"b"]
    # the same group starts again where it stopped: b (not acked) and c, then new d
    await _produce(namesrv_addr, topic, [b"d"], pg)
    again = []
    c2 = rmq.PushConsumer(namesrv_addr, cg)  # CONSUME_FROM_LAST_OFFSET: stored offset wins
    c2.subscribe(topic)
    async with c2:
        async for msg in c2:
            again.append(msg.body)
            if len(again) == 3:
                break
    assert again == [b"b", b"c", b"d"]
    assert (await _stored_offsets(broker.broker_addr, cg, topic, 1))[0] == 4


@pytest.mark.slow
async def test_failed_message_is_consumed_again(cluster, namesrv_addr, unique):
    """RECONSUME_LATER: sent back to the broker (%RETRY%group) when it supports
    CONSUMER_SEND_MSG_BACK, else retried locally after 5 s; either way it comes back with
    reconsume_times == 1 and nothing else is held up."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _produce(namesrv_addr, topic, [b"ok1", b"bad", b"ok2"], unique("PG"))
    deliveries = []

    async def handler(msg):
        deliveries.append((msg.body, msg.reconsume_times, msg.topic))
        if msg.body == b"bad" and msg.reconsume_times == 0:
            return rmq.ConsumeResult.RECONSUME_LATER

    c = rmq.PushConsumer(
        namesrv_addr, cg, handler=handler, consume_from_where=FIRST, delay_level_when_next_consume=1
    )  # 1 s instead of 10 s
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: (b"bad", 1, topic) in deliveries, timeout=30, what="redelivery of bad")
    assert {d[0] for d in deliveries} == {b"ok1", b"bad", b"ok2"}
    assert c.stats["consumed_failed"] == 1
    assert c.stats["sent_back"] + c.stats["local_retries"] == 1


@pytest.mark.slow
async def test_second_consumer_joins_and_leaves_without_loss(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=8)
    received: dict[str, list[bytes]] = {"c1": [], "c2": []}

    def handler_for(name):
        async def handler(msg):
            received[name].append(msg.body)

        return handler

    c1 = rmq.PushConsumer(namesrv_addr, cg, handler=handler_for("c1"), instance_name="c1", consume_from_where=FIRST)
    c1.subscribe(topic)
    c2 = rmq.PushConsumer(namesrv_addr, cg, handler=handler_for("c2"), instance_name="c2", consume_from_where=FIRST)
    c2.subscribe(topic)
    total = 400
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:

        async def produce(lo, hi):
            for i in range(lo, hi):
                await p.send(rmq.Message(topic, b"%d" % i))
                await asyncio.sleep(0.002)  # pacing: sends spread over the rebalance

        await c1.start()
        await wait_until(lambda: len(c1._impl.process_queue_table) == 9, what="c1 owns all queues")  # 8 + retry
        await produce(0, 100)
        await c2.start()
        # NOTIFY_CONSUMER_IDS_CHANGED makes c1 give up half at once (not after the 20 s timer)
        await wait_until(
            lambda: sum(1 for mq in c1._impl.process_queue_table if mq.topic == topic) == 4,
            timeout=8,
            what="c1 rebalanced to 4 queues",
        )
        await wait_until(
            lambda: sum(1 for mq in c2._impl.process_queue_table if mq.topic == topic) == 4,
            timeout=8,
            what="c2 took 4 queues",
        )
        await produce(100, 300)
        await c1.close()
        await wait_until(
            lambda: sum(1 for mq in c2._impl.process_queue_table if mq.topic == topic) == 8,
            timeout=8,
            what="c2 owns all queues after c1 left",
        )
        await produce(300, total)
    try:
        await wait_until(
            lambda: {int(b) for b in received["c1"] + received["c2"]} >= set(range(total)),
            timeout=20,
            what="every message consumed",
        )
    finally:
        await c2.close()
    assert received["c1"] and received["c2"]
    dup = len(received["c1"]) + len(received["c2"]) - total
    assert dup < 100  # duplicates only around the rebalances


async def test_broadcasting_delivers_everything_to_everyone(cluster, namesrv_addr, unique, tmp_path):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=3)
    got = {"x": [], "y": []}
    consumers = []
    for name in got:

        async def handler(msg, name=name):
            got[name].append(msg.body)

        c = rmq.PushConsumer(
            namesrv_addr,
            cg,
            handler=handler,
            instance_name=name,
            message_model=rmq.MessageModel.BROADCASTING,
            consume_from_where=FIRST,
            offset_store_dir=str(tmp_path / "offsets"),
        )
        c.subscribe(topic)
        consumers.append(c)
        await c.start()
    try:
        await _produce(namesrv_addr, topic, [b"%d" % i for i in range(12)], unique("PG"))
        await wait_until(lambda: all(len(v) >= 12 for v in got.values()), what="both got 12")
    finally:
        for c in consumers:
            await c.close()
    assert sorted(got["x"]) == sorted(got["y"]) == sorted(b"%d" % i for i in range(12))
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "offsets") for f in fs if f == "offsets.json"]
    assert len(files) == 2
    with open(files[0]) as f:
        table = json.load(f)["offsetTable"]
    assert sum(e["offset"] for e in table) == 12


async def test_flow_control_and_pause(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _produce(namesrv_addr, topic, [b"%d" % i for i in range(200)], unique("PG"))
    gate = asyncio.Event()
    got = []

    async def handler(msg):
        await gate.wait()
        got.append(msg.queue_offset)

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        consume_from_where=FIRST,
        pull_threshold_for_queue=20,
        pull_batch_size=8,
        consume_concurrency=4,
    )
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: c.stats["flow_controlled"] > 0, what="flow control")
        pq = next(pq for mq, pq in c._impl.process_queue_table.items() if mq.topic == topic)
        assert pq.msg_count <= 20 + 8
        c.pause()
        gate.set()
        await wait_until(lambda: len(got) == c.stats["pulled"], what="cached messages consumed")
        pulled = c.stats["pulled"]
        assert pulled < 200
        await holds(lambda: c.stats["pulled"] == pulled, 0.3, "paused: no more pulls")
        c.resume()
        await wait_until(lambda: len(got) == 200, what="all 200 after resume")
    assert sorted(got) == list(range(200))


async def test_orderly_broadcasting_keeps_queue_order_and_suspends(cluster, namesrv_addr, unique, tmp_path):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        for i in range(20):
            await p.send(rmq.Message(topic, f"{i % 2}:{i}".encode()), sharding_key=f"key{i % 2}")
    seen: dict[int, list[str]] = {}
    failed = set()

    async def handler(msg):
        body = msg.body.decode()
        if body == "0:6" and body not in failed:
            failed.add(body)
            raise RuntimeError("fail once")  # suspends this queue, then retried first
        seen.setdefault(msg.queue_id, []).append(body)

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        orderly=True,
        consume_from_where=FIRST,
        message_model=rmq.MessageModel.BROADCASTING,
        suspend_current_queue_time=0.2,
        offset_store_dir=str(tmp_path),
    )
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: sum(map(len, seen.values())) == 20, what="20 orderly messages")
    for q, bodies in seen.items():
        nums = [int(b.split(":")[1]) for b in bodies]
        assert nums == sorted(nums), f"queue {q} out of order: {bodies}"


async def test_orderly_clustering_locks_queues(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    from rmq.remoting import RemotingClient

    async with RemotingClient() as rc:
        probe = await rc.invoke(
            broker.broker_addr,
            RemotingCommand.request(
                RequestCode.LOCK_BATCH_MQ,
                None,
                json.dumps({"consumerGroup": cg, "clientId": "probe", "mqSet": []}).encode(),
            ),
        )
    assert probe.code == ResponseCode.SUCCESS and json.loads(probe.body_bytes()) == {"lockOKMQSet": []}
    got = []

    async def handler(msg):
        got.append(msg.body)

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, orderly=True, consume_from_where=FIRST)
    c.subscribe(topic)
    async with c:
        async with rmq.Producer(namesrv_addr, unique("PG")) as p:
            for i in range(10):
                await p.send(rmq.Message(topic, b"%d" % i), sharding_key="k")
        await wait_until(lambda: len(got) == 10, what="10 orderly messages")
        assert all(pq.locked for mq, pq in c._impl.process_queue_table.items() if mq.topic == topic)
    assert got == [b"%d" % i for i in range(10)]


async def test_broker_requests_to_client(cluster, namesrv_addr, unique):
    """GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT, CONSUME_MESSAGE_DIRECTLY and
    RESET_CONSUMER_CLIENT_OFFSET, sent by the broker over the client's own connection."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    direct = []

    async def handler(msg):
        direct.append(msg.body)

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic)
    async with c:
        await _produce(namesrv_addr, topic, [b"a", b"b", b"c"], unique("PG"))
        await wait_until(lambda: len(direct) == 3, what="3 messages")
        info = broker.consumer_manager.get_consumer_group_info(cg)
        conn = next(iter(info.channels))
        resp = await conn.invoke(
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": cg, "clientId": c.client_id}
            ),
            3.0,
        )
        assert resp.code == ResponseCode.SUCCESS
        running = ConsumerRunningInfo.decode(resp.body_bytes())  # fastjson object keys, as Java's
        assert running.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert any(s.topic == topic for s in running.subscription_set)
        resp = await conn.invoke(
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"group": cg, "topic": topic, "clientAddr": ""}
            ),
            3.0,
        )
        assert resp.code == ResponseCode.SUCCESS
        table = GetConsumerStatusBody.decode(resp.body_bytes()).message_queue_table
        assert list(table.values()) == [3]
        # the stored record of "a" (queue offset 0) from the broker's store, consumed directly
        result = broker.message_store.get_message(cg, topic, 0, 0, 1)
        try:
            body = b"".join(bytes(b) for b in result.buffers)
        finally:
            result.release()
        resp = await conn.invoke(
            RemotingCommand.request(
                RequestCode.CONSUME_MESSAGE_DIRECTLY,
                {"consumerGroup": cg, "clientId": c.client_id, "msgId": "x", "brokerName": "broker-a"},
                body,
            ),
            3.0,
        )
        assert resp.code == ResponseCode.SUCCESS
        assert json.loads(resp.body_bytes())["consumeResult"] == "CR_SUCCESS" and direct[-1] == b"a"
        # reset to offset 1: b and c come again
        reset = json.dumps({"offsetTable": [[{"topic": topic, "brokerName": "broker-a", "queueId": 0}, 1]]})
        resp = await conn.invoke(
            RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                {"topic": topic, "group": cg, "timestamp": "0", "isForce": "true"},
                reset.encode(),
            ),
            5.0,
        )
        assert resp.code == ResponseCode.SUCCESS
        await wait_until(lambda: direct[-2:] == [b"b", b"c"] and len(direct) == 6, what="redelivery after reset")


@pytest.mark.slow
async def test_consumer_survives_broker_restart(tmp_path, unique):
    topic, cg = unique("T"), unique("CG")
    got = []

    async def handler(msg):
        got.append(msg.body)

    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        port = free_broker_port()  # fixed from the start: the restart binds it again, with its neighbours
        async with run_broker(tmp_path / "b", namesrv=ns, listen_port=port) as broker:
            await create_topic(broker.broker_addr, topic, queues=2)
            c = rmq.PushConsumer(nsaddr, cg, handler=handler, consume_from_where=FIRST)
            c.subscribe(topic)
            await c.start()
            await _produce(nsaddr, topic, [b"before-%d" % i for i in range(10)], unique("PG"))
            await wait_until(lambda: len(got) >= 10, what="10 before restart")
        try:
            # broker down: the consumer keeps retrying; same port and store on restart
            await wait_until(lambda: c.stats["pull_errors"] > 0, what="pulls failing while the broker is down")
            async with run_broker(tmp_path / "b", namesrv=ns, listen_port=port):
                await _produce(nsaddr, topic, [b"after-%d" % i for i in range(10)], unique("PG"))
                await wait_until(lambda: len(got) >= 20, timeout=30, what="10 after restart")
        finally:
            await c.close()
    assert set(got) == {b"before-%d" % i for i in range(10)} | {b"after-%d" % i for i in range(10)}


async def test_close_lets_running_handlers_finish_and_commits_them(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _produce(namesrv_addr, topic, [b"slow"], unique("PG"))
    started, finished = asyncio.Event(), []

    async def handler(msg):
        started.set()
        await asyncio.sleep(0.5)
        finished.append(msg.body)

    c = rmq.PushConsumer(namesrv_addr, cg, handler=handler, consume_from_where=FIRST)
    c.subscribe(topic)
    await c.start()
    await asyncio.wait_for(started.wait(), 10)
    await c.close()
    assert finished == [b"slow"]
    assert (await _stored_offsets(broker.broker_addr, cg, topic, 1))[0] == 1


@pytest.mark.slow
async def test_retry_then_dead_letter_queue(cluster, namesrv_addr, unique):
    """A message that always fails (CONSUMER_SEND_MSG_BACK each time) is redelivered from %RETRY%group,
    then parked in %DLQ%group after max_reconsume_times."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    (sent,) = await _produce(namesrv_addr, topic, [b"poison"], unique("PG"))
    deliveries = []

    async def handler(msg):
        deliveries.append(msg.reconsume_times)
        raise RuntimeError("always fails")

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        consume_from_where=FIRST,
        max_reconsume_times=1,
        delay_level_when_next_consume=1,
    )
    c.subscribe(topic)
    async with c:
        await wait_until(lambda: deliveries[-2:] == [0, 1], timeout=40, what="one redelivery from %RETRY%")
        await wait_until(lambda: c.stats["sent_back"] == 2, what="the second send-back (to the DLQ)")
    assert c.stats["sent_back"] == 2 and c.stats["local_retries"] == 0
    # Java creates the DLQ write-only (consumers cannot pull it), so read the store directly.
    from rmq.client._codec import decode_messages

    dlq = "%DLQ%" + cg

    def dlq_records():
        res = broker.message_store.get_message(cg, dlq, 0, 0, 1)
        try:
            return decode_messages(b"".join(bytes(b) for b in res.buffers)) if res.buffers else []
        finally:
            res.release()

    got = await wait_until(dlq_records, timeout=15, what="the message in the DLQ")
    assert got[0].body == b"poison" and got[0].properties.get("ORIGIN_MESSAGE_ID") in (sent.msg_id, sent.offset_msg_id)


async def test_follows_suggest_which_broker_id(tmp_path, unique, caplog):
    """A master that reads "from disk" (tiny total_physical_memory) with slave_read_enable
    suggests the slave (whichBrokerWhenConsumeSlowly = 1) while there is a backlog, the master
    again once caught up. The consumer follows (with no slave in the route it falls back to the
    master's address) and loses nothing."""
    topic, cg = unique("T"), unique("CG")
    got = []

    async def handler(msg):
        got.append(msg.body)

    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "b", namesrv=ns, slave_read_enable=True, total_physical_memory=1024) as broker:
            await create_topic(broker.broker_addr, topic, queues=1)
            await _produce(nsaddr, topic, [b"%d" % i for i in range(40)], unique("PG"))
            c = rmq.PushConsumer(nsaddr, cg, handler=handler, consume_from_where=FIRST, pull_batch_size=8)
            c.subscribe(topic)
            async with c:
                await wait_until(lambda: len(got) == 40, what="40 messages")
                mq = rmq.MessageQueue(topic, broker.broker_config.broker_name, 0)
                await wait_until(lambda: c._impl.pull_from_which_node.get(mq) == 0, what="back to the master")
    assert sorted(got, key=int) == [b"%d" % i for i in range(40)]
    text = caplog.text
    assert "from node 1" in text and "from node 0" in text[text.index("from node 1") :]


@pytest.mark.slow
async def test_orderly_clustering_rebalance_hands_locks_over(cluster, namesrv_addr, unique):
    """Two orderly members: when the second joins, the first unlocks the queues it gives up and
    the second locks them; per-key order holds across the hand-over and nothing is lost."""
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=4)
    seen: dict[str, list[int]] = {}
    fail_once = {"k1:3"}

    def handler_for(name):
        async def handler(msg):
            key, seq = msg.body.decode().split(":")
            if f"{key}:{seq}" in fail_once:
                fail_once.discard(f"{key}:{seq}")
                return rmq.ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT  # retried in place, in order
            seen.setdefault(key, []).append(int(seq))

        return handler

    c1 = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler_for("c1"),
        orderly=True,
        instance_name="o1",
        consume_from_where=FIRST,
        suspend_current_queue_time=0.2,
    )
    c2 = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler_for("c2"),
        orderly=True,
        instance_name="o2",
        consume_from_where=FIRST,
        suspend_current_queue_time=0.2,
    )
    for c in (c1, c2):
        c.subscribe(topic)
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:

        async def produce(lo, hi):
            for seq in range(lo, hi):
                for k in range(4):
                    await p.send(rmq.Message(topic, f"k{k}:{seq}".encode()), sharding_key=f"key-{k}")

        await c1.start()
        await produce(0, 10)
        await c2.start()
        await wait_until(
            lambda: sum(1 for mq in c2._impl.process_queue_table if mq.topic == topic) == 2,
            timeout=15,
            what="c2 took 2 queues",
        )
        await produce(10, 20)
        try:
            await wait_until(
                lambda: all(len(set(seen.get(f"k{k}", []))) == 20 for k in range(4)),
                timeout=60,
                what="every key's 20 messages",
            )
        finally:
            await c2.close()
            await c1.close()
    for key, seqs in seen.items():
        # duplicates may appear around the hand-over, but never out of order within a delivery run
        assert sorted(set(seqs)) == list(range(20)), (key, seqs)
        firsts = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
        assert firsts == sorted(firsts), f"{key} out of order: {seqs}"


async def test_batch_handler_gets_lists_and_a_failure_redelivers_the_batch(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    await _produce(namesrv_addr, topic, [b"%d" % i for i in range(24)], unique("PG"))
    batches, failed_once = [], []

    async def batch_handler(msgs):
        assert 1 <= len(msgs) <= 4 and len({m.queue_id for m in msgs}) == 1
        if not failed_once and any(m.body == b"5" for m in msgs):
            failed_once.append([m.body for m in msgs])
            raise RuntimeError("whole batch fails")
        batches.append([m.body for m in msgs])

    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        batch_handler=batch_handler,
        consume_batch_size=4,
        consume_from_where=FIRST,
        delay_level_when_next_consume=1,
    )
    c.subscribe(topic)
    async with c:
        await wait_until(
            lambda: {b for bs in batches for b in bs} >= {b"%d" % i for i in range(24)},
            timeout=20,
            what="all 24 in batches",
        )
    assert any(len(b) > 1 for b in batches)
    redelivered = {b for bs in batches for b in bs if b in failed_once[0]}
    assert redelivered == set(failed_once[0])
    with pytest.raises(rmq.ClientError):
        rmq.PushConsumer(namesrv_addr, cg, handler=batch_handler, consume_batch_size=4)


async def test_iterator_reconsume_later(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=1)
    await _produce(namesrv_addr, topic, [b"a", b"b", b"c"], unique("PG"))
    seen = []
    c = rmq.PushConsumer(namesrv_addr, cg, consume_from_where=FIRST, delay_level_when_next_consume=1)
    c.subscribe(topic)
    async with c:
        with pytest.raises(rmq.ClientError):
            await c.reconsume_later()  # nothing returned yet
        async for msg in c:
            seen.append((msg.body, msg.reconsume_times))
            if msg.body == b"b" and msg.reconsume_times == 0:
                await c.reconsume_later(msg)
            if len(seen) == 4:
                break
    assert seen[:3] == [(b"a", 0), (b"b", 0), (b"c", 0)] and seen[3] == (b"b", 1)
    assert (await _stored_offsets(broker.broker_addr, cg, topic, 1))[0] == 3


async def test_orderly_iterator_holds_the_queue_locks_and_cannot_skip(cluster, namesrv_addr, unique, monkeypatch):
    import rmq.client.consumer.push as push

    monkeypatch.setattr(push, "LOCK_RENEW_INTERVAL", 0.2)  # Java's 20 s lockAll, shortened
    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    mqs = [rmq.MessageQueue(topic, broker.broker_config.broker_name, q) for q in (0, 1)]
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        for i in range(10):
            await p.send(rmq.Message(topic, b"%d" % i), queue=mqs[i % 2])
    c = rmq.PushConsumer(namesrv_addr, cg, orderly=True, consume_from_where=FIRST)
    c.subscribe(topic)
    seen: dict[int, list[int]] = {0: [], 1: []}
    async with c:
        async for msg in c:
            seen[msg.queue_id].append(int(msg.body))
            with pytest.raises(rmq.ClientError, match="orderly"):
                await c.reconsume_later(msg)
            if sum(map(len, seen.values())) == 10:
                break
        # the queues were consumed under the broker's locks, and the locks are renewed
        pqs = [pq for mq, pq in c._impl.process_queue_table.items() if mq.topic == topic]
        assert len(pqs) == 2 and all(pq.locked for pq in pqs)
        renewed_after = max(pq.last_lock_time for pq in pqs)
        await wait_until(lambda: min(pq.last_lock_time for pq in pqs) > renewed_after, what="locks renewed")
    assert seen == {0: [0, 2, 4, 6, 8], 1: [1, 3, 5, 7, 9]}
    assert await _stored_offsets(broker.broker_addr, cg, topic, 2) == {0: 5, 1: 5}


async def test_failing_handler_logs_one_traceback_then_rate_limited_lines(
    cluster, namesrv_addr, unique, tmp_path, caplog
):
    """A handler that raises on every message once wrote a full traceback per failure (issue 23,
    finding 9): now the first failure carries its traceback and after it the group gets one line
    per 10 s with a count, however many messages fail. (BROADCASTING drops a failed message, so
    its "dropped" line is counted too; the bound is in the number of 10 s intervals the test
    took, so a slow machine cannot break it.)"""
    import time

    _ns, broker = cluster
    topic, cg = unique("T"), unique("CG")
    await create_topic(broker.broker_addr, topic, queues=2)
    failures = []

    async def handler(msg):
        failures.append(msg.body)
        raise RuntimeError("handler always fails")

    caplog.set_level(logging.WARNING, logger="rmq.client")
    start = time.monotonic()
    c = rmq.PushConsumer(
        namesrv_addr,
        cg,
        handler=handler,
        message_model=rmq.MessageModel.BROADCASTING,
        consume_from_where=FIRST,
        offset_store_dir=str(tmp_path / "offsets"),
    )
    c.subscribe(topic)
    async with c:
        await _produce(namesrv_addr, topic, [b"%d" % i for i in range(200)], unique("PG"))
        await wait_until(lambda: c.stats["consumed_failed"] >= 200, timeout=60, what="200 failures")
    intervals = int((time.monotonic() - start) // 10) + 1
    lines = [r for r in caplog.records if r.name == "rmq.client" and cg in r.getMessage()]
    raised = [r for r in lines if "handler raised" in r.getMessage()]
    assert len(failures) >= 200
    assert raised and raised[0].exc_info is not None  # the first: with its traceback
    assert all(r.exc_info is None for r in raised[1:])
    assert len(raised) <= intervals, [r.getMessage() for r in raised]
    assert len(lines) <= 2 * intervals, [r.getMessage() for r in lines]
