"""POP checkpoints survive a restart and ``kill -9`` of a subprocess broker: nothing acked comes
back, nothing un-acked is lost (it comes back once, through the pop retry topic)."""

import asyncio
import json
import os
import signal
import time

import msgpack
import pytest

from rmq._testing import StandaloneProcess, wait_until
from rmq._testing.env import BrokerEnv
from rmq.client._codec import decode_messages
from rmq.common.message import MessageConst
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers.pop import PopMessageRequestHeader
from rmq.protocol.requests import pop as wire
from rmq.remoting.client import RemotingClient

GROUP = "KillG"
# Offsets are not flushed on their own before the kill (an hour's interval): the replay of the
# revive log must keep the popped messages from being handed out again.
ARGS = ["--popMinInvisibleTime=1", "--reviveInterval=20", "--flushConsumerOffsetInterval=3600000"]


async def pop(env, topic, invisible):
    h = PopMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=invisible,
        poll_time=0,
        born_time=int(time.time() * 1000),
        init_mode=0,
    )
    reply = wire.parse_pop(await env.client.invoke(env.addr, wire.pop_message(h), timeout=10))
    return with_handles(reply, env)


#: the handle's broker name only routes the client's ack: the broker matches its checkpoints
#: by topic, group, queue, start offset and pop time
BROKER_NAME = "broker-a"


def with_handles(reply, env):
    """The records with their handles in POP_CK, as the SDK builds them (Java processPopResponse)."""
    msgs = decode_messages(reply.body) if reply.body else []
    for m in msgs:
        m.properties[MessageConst.POP_CK] = reply.handle(
            m.topic, m.queue_id, m.queue_offset, BROKER_NAME, m.properties.get(MessageConst.POP_CK)
        )
    return msgs


async def revive_caught_up(env, cluster="DefaultCluster"):
    """Every revive queue's progress is at its end: nothing pending, nothing unread."""
    topic = wire.revive_topic(cluster)
    for q in range(8):
        mx = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": q})
        off = await env.call(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "CID_RMQ_SYS_REVIVE_GROUP", "topic": topic, "queueId": q},
        )
        done = int(off.ext_fields["offset"]) if off.code == ResponseCode.SUCCESS else 0
        if done != int(mx.ext_fields["offset"]):
            return False
    return True


@pytest.mark.parametrize("how", ["restart", "kill -9"])
async def test_checkpoints_survive(tmp_path, how):
    store = tmp_path / "store"
    proc = StandaloneProcess(store, ARGS).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        await env.create_topic("KP", 2)
        body = json.dumps({"groupName": GROUP}).encode()
        assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == 0
        for i in range(10):
            await env.send("KP", f"k{i}".encode(), queue_id=i % 2)

        def on_disk(name, what):
            path = store / "config" / name
            return path.exists() and what in path.read_bytes()

        # the topic and the group are written within configPersistInterval (what is under test
        # is the POP state, not the metadata tables)
        await wait_until(lambda: on_disk("topics.msgpack", b"KP"), timeout=20, what="the topic on disk")
        await wait_until(lambda: on_disk("subscriptionGroup.msgpack", b"KillG"), timeout=20, what="the group on disk")
        msgs = []

        async def all_popped():
            msgs.extend(await pop(env, "KP", invisible=1500))
            return len(msgs) >= 10

        await wait_until(all_popped, timeout=20, what="all ten popped")
        acked = {m.body for m in msgs if int(m.body[1:]) % 2 == 0}
        for m in msgs:
            if m.body in acked:
                r = await client.invoke(env.addr, wire.ack_message(GROUP, "KP", m.properties[MessageConst.POP_CK]))
                assert r.code == ResponseCode.SUCCESS
        if how == "kill -9":
            os.kill(proc.pid, signal.SIGKILL)
            assert await asyncio.to_thread(proc.proc.wait, 30) == -signal.SIGKILL
        else:
            assert proc.stop() == 0
    finally:
        await client.close()
        proc.stop()

    proc = StandaloneProcess(store, ARGS).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        back = []

        async def five_back():
            back.extend(await pop(env, "KP", invisible=60_000))
            return len(back) >= 5

        await wait_until(five_back, timeout=30, interval=0.05, what="the un-acked messages back")
        for m in back:
            r = await client.invoke(env.addr, wire.ack_message(GROUP, "KP", m.properties[MessageConst.POP_CK]))
            assert r.code == ResponseCode.SUCCESS
        # once every checkpoint is acked or revived, nothing else comes back
        await wait_until(lambda: revive_caught_up(env), timeout=30, what="the revive service to catch up")
        assert await pop(env, "KP", invisible=60_000) == []
        assert sorted(m.body for m in back) == sorted(f"k{i}".encode() for i in range(1, 10, 2))
        assert all(m.reconsume_times == 1 for m in back)
        # exactly five went through the retry topic: none twice, no acked one
        r = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "%RETRY%KillG_KP", "queueId": 0})
        assert r.ext_fields["offset"] == "5"
    finally:
        await client.close()
        proc.stop()


async def test_replay_past_the_checkpoint_bound_still_applies_acks(tmp_path):
    """After kill -9 the revive log is replayed with room for two checkpoints only: the acks
    past the paused read offset still reach the checkpoints held, so none is revived."""
    store = tmp_path / "store"
    one_queue = [*ARGS, "--reviveQueueNum=1"]
    proc = StandaloneProcess(store, one_queue).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        await env.create_topic("KB", 1)
        body = json.dumps({"groupName": GROUP}).encode()
        assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == 0
        for i in range(3):
            await env.send("KB", f"b{i}".encode())
        wanted = ["topics.msgpack", "subscriptionGroup.msgpack"]
        await wait_until(
            lambda: all(
                (store / "config" / n).exists() and b"KB" in (store / "config" / "topics.msgpack").read_bytes()
                for n in wanted
            ),
            timeout=20,
            what="the metadata on disk",
        )
        popped = []
        for _ in range(3):  # three checkpoints, one message each, then the three acks after them
            h = PopMessageRequestHeader(
                consumer_group=GROUP,
                topic="KB",
                queue_id=0,
                max_msg_nums=1,
                invisible_time=1500,
                poll_time=0,
                born_time=int(time.time() * 1000),
                init_mode=0,
            )
            reply = wire.parse_pop(await client.invoke(env.addr, wire.pop_message(h), timeout=10))
            popped.extend(with_handles(reply, env))
        assert [m.body for m in popped] == [b"b0", b"b1", b"b2"]
        for m in popped:
            r = await client.invoke(env.addr, wire.ack_message(GROUP, "KB", m.properties[MessageConst.POP_CK]))
            assert r.code == ResponseCode.SUCCESS
        os.kill(proc.pid, signal.SIGKILL)
        assert await asyncio.to_thread(proc.proc.wait, 30) == -signal.SIGKILL
    finally:
        await client.close()
        proc.stop()

    proc = StandaloneProcess(store, [*one_queue, "--popCkMaxNum=1"]).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        topic = wire.revive_topic("DefaultCluster")

        async def caught_up():
            mx = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
            off = await env.call(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "CID_RMQ_SYS_REVIVE_GROUP", "topic": topic, "queueId": 0},
            )
            return off.code == ResponseCode.SUCCESS and off.ext_fields["offset"] == mx.ext_fields["offset"]

        await wait_until(caught_up, timeout=30, what="the replay to finish")
        # every checkpoint ended acked, none revived (past their invisible time by now or not)
        info = json.loads((await env.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body_bytes())["table"]
        assert info["popRevivedCount"] == "0" and info["popCheckpointCount"] == "0"
        r = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "%RETRY%KillG_KB", "queueId": 0})
        assert r.code != ResponseCode.SUCCESS or r.ext_fields["offset"] == "0"
        assert "revive reading paused" in proc.log_text()
    finally:
        await client.close()
        proc.stop()


async def pop_orderly(env, topic, n, invisible):
    h = PopMessageRequestHeader(
        consumer_group=GROUP,
        topic=topic,
        queue_id=0,
        max_msg_nums=n,
        invisible_time=invisible,
        poll_time=0,
        born_time=int(time.time() * 1000),
        init_mode=0,
        order=True,
    )
    reply = wire.parse_pop(await env.client.invoke(env.addr, wire.pop_message(h), timeout=10))
    return reply, with_handles(reply, env)


# offsets and the in-flight batches written every 100 ms: the kill comes after they are on disk
PERSISTED = [*ARGS[:2], "--flushConsumerOffsetInterval=100", "--configPersistInterval=100"]


def _on_disk(store, name):
    path = store / "config" / name
    return msgpack.unpackb(path.read_bytes(), strict_map_key=False) if path.exists() else None


@pytest.mark.parametrize("persisted", [False, True], ids=["state-lost", "state-persisted"])
@pytest.mark.parametrize("ack_first", [True, False], ids=["first-acked", "none-acked"])
async def test_orderly_batch_in_flight_survives_kill_9_in_order(tmp_path, ack_first, persisted):
    """An orderly batch is in flight (its first message acked or not) when the broker is killed,
    before or after the offsets and ``consumerOrderInfo`` reached the disk: after the restart its
    un-acked messages come back in queue order, none skipped, and no later message of the queue
    is handed out before them."""
    store = tmp_path / "store"
    args = PERSISTED if persisted else ARGS
    proc = StandaloneProcess(store, args).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        await env.create_topic("KO", 1)
        body = json.dumps({"groupName": GROUP, "consumeMessageOrderly": True}).encode()
        assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == 0
        for i in range(6):
            await env.send("KO", f"o{i}".encode(), queue_id=0)
        await wait_until(
            lambda: (
                (store / "config" / "topics.msgpack").exists()
                and b"KO" in (store / "config" / "topics.msgpack").read_bytes()
            ),
            timeout=20,
            what="the topic on disk",
        )
        _reply, batch = await pop_orderly(env, "KO", 3, invisible=2000)
        assert [m.body for m in batch] == [b"o0", b"o1", b"o2"]
        if ack_first:
            r = await client.invoke(env.addr, wire.ack_message(GROUP, "KO", batch[0].properties[MessageConst.POP_CK]))
            assert r.code == ResponseCode.SUCCESS
        # the queue is blocked while the batch is in flight
        assert (await pop_orderly(env, "KO", 3, invisible=2000))[1] == []
        if persisted:
            await wait_until(lambda: _on_disk(store, "consumerOrderInfo.msgpack"), what="the batch on disk")
            want = 1 if ack_first else 0
            await wait_until(
                lambda: (
                    _on_disk(store, "consumerOffset.msgpack")["offsetTable"].get("KO@KillG", {}).get(0) == want
                    and _on_disk(store, "consumerOrderInfo.msgpack")["KO@KillG"][0][4] == list(range(want))
                ),
                what="the offset and the batch's acks on disk",
            )
        os.kill(proc.pid, signal.SIGKILL)
        assert await asyncio.to_thread(proc.proc.wait, 30) == -signal.SIGKILL
    finally:
        await client.close()
        proc.stop()

    proc = StandaloneProcess(store, args).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        got: list[bytes] = []
        times: list[int] = []

        async def popped_again():
            reply, msgs = await pop_orderly(env, "KO", 3, invisible=60_000)
            if not msgs:
                return False
            got.extend(m.body for m in msgs)
            times.append(reply.order_count("KO", 0))
            for m in msgs:  # the whole batch acked: the queue moves on
                r = await client.invoke(env.addr, wire.ack_message(GROUP, "KO", m.properties[MessageConst.POP_CK]))
                assert r.code == ResponseCode.SUCCESS
            return len(got) >= 6 or got[-1] == b"o5"

        await wait_until(popped_again, timeout=30, interval=0.05, what="the queue popped to its end")
        # in queue order from the first un-acked message (an acked one may come again: at least
        # once), every message once after that, nothing skipped
        first = 1 if ack_first else 0
        start = int(got[0][1:])
        assert start <= first, got
        assert got == [f"o{i}".encode() for i in range(start, 6)]
        if persisted:
            # the batch's count survived: it comes back counted once more (orderCountInfo)
            assert start == first and times[0] == 1, times
    finally:
        await client.close()
        proc.stop()
