"""Producer against a real in-process name server + broker."""

import time

import pytest
from sdk_support import SilentServer, create_topic, drain

import rmq
from rmq._testing import run_broker, run_namesrv
from rmq.client._codec import MessageSysFlag


async def test_send_variants(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=4)
    callbacks = []
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        r1 = await p.send(rmq.Message(topic, b"one", tags="A"))
        task = p.send_with_callback(rmq.Message(topic, b"two"), lambda r, e: callbacks.append((r, e)))
        r2 = await task
        await p.send_oneway(rmq.Message(topic, b"three"))
        batch = await p.send_batch([rmq.Message(topic, f"b{i}".encode(), keys=[f"k{i}"]) for i in range(3)])
        big = bytes(range(256)) * 64  # 16 KiB > compress_over
        r_big = await p.send(rmq.Message(topic, big))
        ordered = [await p.send(rmq.Message(topic, f"o{i}".encode()), sharding_key="order-1") for i in range(5)]
        q3 = rmq.MessageQueue(topic, broker.broker_config.broker_name, 3)
        r_q = await p.send(rmq.Message(topic, b"to-q3"), queue=q3)
        r_sel = await p.send(rmq.Message(topic, b"sel"), selector=lambda mqs, m, arg: mqs[arg], sharding_key=2)
    assert callbacks == [(r2, None)]
    assert r1.status is rmq.SendStatus.SEND_OK and r1.msg_id != r1.offset_msg_id
    assert len(batch.msg_id.split(",")) == 3 and len(batch.offset_msg_id.split(",")) == 3
    assert len({o.queue_id for o in ordered}) == 1
    assert [o.queue_offset for o in ordered] == list(range(ordered[0].queue_offset, ordered[0].queue_offset + 5))
    assert r_q.queue_id == 3 and r_sel.queue_id == 2

    msgs = await drain(namesrv_addr, topic, 14, group=unique("DRAIN"))
    assert len(msgs) == 14
    by_body = {m.body: m for m in msgs}
    assert set(by_body) >= {b"one", b"two", b"three", b"b0", b"b1", b"b2", big, b"to-q3", b"sel"}
    assert by_body[b"one"].msg_id == r1.msg_id and by_body[b"one"].tags == "A"
    assert by_body[big].sys_flag & MessageSysFlag.COMPRESSED_FLAG and by_body[big].offset_msg_id == r_big.offset_msg_id
    # batch items: same queue, consecutive offsets, own UNIQ_KEY and KEYS
    items = [by_body[f"b{i}".encode()] for i in range(3)]
    assert [m.msg_id for m in items] == batch.msg_id.split(",")
    assert [m.queue_offset for m in items] == [batch.queue_offset + i for i in range(3)]
    assert [m.keys for m in items] == [("k0",), ("k1",), ("k2",)]
    # orderly: per-key order preserved in the queue
    o_msgs = [m for m in msgs if m.body.startswith(b"o") and m.body != b"one"]
    assert [m.body for m in o_msgs] == [f"o{i}".encode() for i in range(5)]


async def test_auto_create_topic_through_tbw102(cluster, namesrv_addr, unique):
    topic = unique("AUTO")
    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        r = await p.send(rmq.Message(topic, b"auto"))
        assert r.status is rmq.SendStatus.SEND_OK
        # the route now exists for the real topic
        assert await p.fetch_publish_message_queues(topic)


async def test_broker_error_carries_code_and_retriable(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("RO")
    await create_topic(broker.broker_addr, topic, queues=2, perm=4)  # read-only
    async with rmq.Producer(namesrv_addr, unique("PG"), retry_times=1) as p:
        with pytest.raises(rmq.BrokerResponseError) as ei:
            await p.send(rmq.Message(topic, b"x"), queue=rmq.MessageQueue(topic, broker.broker_config.broker_name, 0))
    assert ei.value.code == 16 and ei.value.retriable  # NO_PERMISSION
    assert isinstance(ei.value, rmq.NoPermissionError)


async def test_send_timeout_and_state_errors(unique):
    async with SilentServer() as silent:
        p = rmq.Producer(f"127.0.0.1:{silent.port}", unique("PG"), send_timeout=0.5)
        with pytest.raises(rmq.IllegalStateError):
            await p.send(rmq.Message("T", b"x"))
        async with p:
            t0 = time.monotonic()
            with pytest.raises(rmq.RemotingTimeoutError) as ei:
                await p.send(rmq.Message("T", b"x"))
            assert ei.value.retriable
            assert time.monotonic() - t0 < 2.0
            with pytest.raises(rmq.ClientError, match="already registered"):
                await rmq.Producer(f"127.0.0.1:{silent.port}", p.group).start()
            with pytest.raises(rmq.ClientError, match="empty"):
                await p.send(rmq.Message("T", b""))
            with pytest.raises(rmq.ClientError, match="maximum"):
                await p.send_batch([rmq.Message("T", b"x" * (1 << 20))] * 5)
            with pytest.raises(rmq.ClientError, match="same topic"):
                await p.send_batch([rmq.Message("T", b"x"), rmq.Message("U", b"x")])


async def test_retries_avoid_a_dead_broker(tmp_path, unique):
    topic = unique("T2B")
    async with run_namesrv() as ns:
        nsaddr = f"127.0.0.1:{ns.port}"
        async with run_broker(tmp_path / "a", namesrv=ns, broker_name="broker-a") as a:
            b_cm = run_broker(tmp_path / "b", namesrv=ns, broker_name="broker-b")
            b = await b_cm.__aenter__()
            try:
                for br in (a, b):
                    await create_topic(br.broker_addr, topic, queues=2)
                async with rmq.Producer(nsaddr, unique("PG"), send_timeout=5.0) as p:
                    first = [await p.send(rmq.Message(topic, b"x")) for _ in range(8)]
                    assert {r.message_queue.broker_name for r in first} == {"broker-a", "broker-b"}
                    await b_cm.__aexit__(None, None, None)
                    b_cm = None
                    after = [await p.send(rmq.Message(topic, b"y")) for _ in range(10)]
                    # every send succeeded, on the live broker, though the route still lists b
                    assert {r.message_queue.broker_name for r in after} == {"broker-a"}
            finally:
                if b_cm is not None:
                    await b_cm.__aexit__(None, None, None)


async def test_malformed_route_is_a_clear_error(unique):
    """A name server that answers GET_ROUTEINFO_BY_TOPIC with a broken body (adversity, not a
    stand-in: nothing real can produce it) gives RemotingCommandError, not a JSON traceback."""
    from rmq.protocol.codes import RequestCode
    from rmq.remoting import RemotingServer

    class BadNamesrv:
        def process_request(self, conn, cmd):
            return cmd.response(0, None, {}, b'{"queueDatas": [{"brokerName": 1}], "brokerDatas": 7}')

    server = RemotingServer("127.0.0.1", 0, name="bad-namesrv")
    server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, BadNamesrv())
    await server.start()
    try:
        async with rmq.Producer(server.address, unique("PG"), send_timeout=2.0) as p:
            with pytest.raises(rmq.RemotingCommandError, match="malformed route") as ei:
                await p.send(rmq.Message("T", b"x"))
            assert not ei.value.retriable
    finally:
        await server.close()


async def test_callback_gets_the_failure_and_oneway_orderly(cluster, namesrv_addr, unique):
    _ns, broker = cluster
    topic = unique("T")
    await create_topic(broker.broker_addr, topic, queues=4)
    seen = []

    async def callback(result, exc):
        seen.append((result, exc))

    async with rmq.Producer(namesrv_addr, unique("PG")) as p:
        bad = rmq.MessageQueue(topic, "no-such-broker", 0)
        task = p.send_with_callback(rmq.Message(topic, b"x"), callback, queue=bad)
        with pytest.raises(rmq.ClientError):
            await task
        for i in range(3):
            await p.send_oneway(rmq.Message(topic, b"ow%d" % i), sharding_key="same")
    assert seen[0][0] is None and isinstance(seen[0][1], rmq.ClientError)
    msgs = await drain(namesrv_addr, topic, 3, group=unique("DRAIN"))
    assert [m.body for m in msgs] == [b"ow0", b"ow1", b"ow2"] and len({m.queue_id for m in msgs}) == 1
