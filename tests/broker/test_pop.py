"""POP consumption over TCP (Java 5.3.3 semantics): pop/ack, invisible time and revive, DLQ,
change invisible time, batch ack, shared offsets with PULL, long polling, orderly POP, hostile
input. Driven with rmq.protocol.requests.pop through a raw RemotingClient (not the SDK)."""

import asyncio
import json
import time

import pytest

from rmq._testing import broker_env, wait_until
from rmq.client._codec import decode_messages
from rmq.common.message import MessageConst
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.pop import NotificationRequestHeader, PopMessageRequestHeader
from rmq.protocol.requests import pop as wire

GROUP = "PopG"

# fast revive for tests: invisible times of a few hundred ms are allowed, the revive service
# runs every 20 ms
FAST = dict(pop_min_invisible_time=1, revive_interval=20)


@pytest.fixture
async def env(tmp_path):
    async with broker_env(tmp_path / "store", **FAST) as e:
        yield e


async def create_group(env, group=GROUP, retry_max_times=16, orderly=False):
    body = json.dumps({"groupName": group, "retryMaxTimes": retry_max_times, "consumeMessageOrderly": orderly}).encode()
    r = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def pop(
    env,
    topic,
    n=32,
    invisible=60_000,
    queue_id=-1,
    poll=0,
    group=GROUP,
    order=False,
    exp=None,
    exp_type=None,
    init_mode=0,
    timeout=10.0,
    client=None,
):
    h = PopMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        max_msg_nums=n,
        invisible_time=invisible,
        poll_time=poll,
        born_time=int(time.time() * 1000),
        init_mode=init_mode,
        order=order,
        exp=exp,
        exp_type=exp_type,
    )
    resp = await (client or env.client).invoke(env.addr, wire.pop_message(h), timeout=timeout)
    reply = wire.parse_pop(resp)
    msgs = decode_messages(reply.body) if reply.body else []
    with_handles(reply, msgs, env.broker.broker_config.broker_name)
    return reply, msgs


def with_handles(reply, msgs, broker_name):
    """Each message's handle in POP_CK, as the SDK does: the broker's own in a retried message,
    else built from the answer's startOffsetInfo (Java processPopResponse)."""
    for m in msgs:
        m.properties[MessageConst.POP_CK] = reply.handle(
            m.topic, m.queue_id, m.queue_offset, broker_name, m.properties.get(MessageConst.POP_CK)
        )


def handle(m):
    return m.properties[MessageConst.POP_CK]


async def ack(env, topic, m, group=GROUP):
    resp = await env.client.invoke(env.addr, wire.ack_message(group, topic, handle(m)))
    return resp


async def invoke(env, cmd, client=None):
    return await (client or env.client).invoke(env.addr, cmd, timeout=10.0)


async def test_pop_never_returns_more_than_max_msg_nums(env):
    """Java PopMessageProcessor asks each queue for what is left of maxMsgNums: a queue's
    records read as one buffer count as the messages they hold."""
    await env.create_topic("PMax", 4)
    await create_group(env)
    for i in range(40):
        await env.send("PMax", f"m{i}".encode(), queue_id=i // 10)  # (a queue's records side by side)
    seen = []
    for n, expect in ((4, 4), (7, 7), (32, 29)):  # the last pop gets the 29 left
        _, msgs = await pop(env, "PMax", n=n)
        assert len(msgs) == expect, (n, len(msgs))
        seen += [m.body for m in msgs]
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(40))


async def test_pop_then_ack_and_nothing_comes_back(env):
    await env.create_topic("PT", 2)
    await create_group(env)
    for i in range(6):
        await env.send("PT", f"m{i}".encode(), queue_id=i % 2)
    reply, msgs = await pop(env, "PT", invisible=300)
    assert reply.status is wire.PopStatus.FOUND
    assert sorted(m.body for m in msgs) == [f"m{i}".encode() for i in range(6)]
    assert reply.revive_qid in range(8) and reply.invisible_time == 300
    for m in msgs:
        info = wire.ExtraInfo.parse(handle(m))
        assert (info.queue_id, info.queue_offset, info.retry, info.broker_name) == (
            m.queue_id,
            m.queue_offset,
            "0",
            env.broker.broker_config.broker_name,
        )
        assert m.topic == "PT"
        assert (await ack(env, "PT", m)).code == ResponseCode.SUCCESS
    # a topic's records go out as stored (Java): no POP_CK, the client builds the handle
    assert all(MessageConst.POP_CK not in m.properties for m in decode_messages(reply.body))
    # inside the invisible time nothing else to pop; after it nothing revived
    reply, msgs = await pop(env, "PT")
    assert reply.status is wire.PopStatus.POLLING_NOT_FOUND and msgs == []
    pop_service = env.broker.pop_service
    await wait_until(lambda: pop_service.stats()["checkpoints"] == 0, timeout=10, what="checkpoints done")
    reply, msgs = await pop(env, "PT")
    assert msgs == [] and pop_service.revived == 0


async def test_invisible_time_expiry_brings_message_back_with_reconsume_times(env):
    await env.create_topic("RT", 1)
    await create_group(env)
    await env.send("RT", b"again")
    _, msgs = await pop(env, "RT", invisible=200)
    assert [m.body for m in msgs] == [b"again"] and msgs[0].reconsume_times == 0
    first_handle = handle(msgs[0])
    # not acked: revived into %RETRY%PopG_RT and popped again with reconsumeTimes 1
    got = []

    reply_again = []

    async def popped_again():
        r, ms = await pop(env, "RT", invisible=60_000)
        got.extend(ms)
        reply_again.append(r)
        return bool(got)

    await wait_until(popped_again, timeout=20, interval=0.05, what="the message to come back")
    m = got[0]
    assert m.body == b"again" and m.reconsume_times == 1 and m.topic == "RT"
    info = wire.ExtraInfo.parse(handle(m))
    assert info.retry == "1" and handle(m) != first_handle
    # a retry record is re-encoded under the topic popped, its handle in POP_CK (Java recodes it)
    assert all(MessageConst.POP_CK in r.properties for r in decode_messages(reply_again[-1].body))
    assert env.broker.topic_config_manager.select_topic_config("%RETRY%PopG_RT") is not None
    # acking the retry copy by its handle works (the ack goes to the retry topic)
    assert (await ack(env, "RT", m)).code == ResponseCode.SUCCESS
    # the broker's runtime info counts what was revived
    info = json.loads((await env.call(RequestCode.GET_BROKER_RUNTIME_INFO)).body_bytes())["table"]
    assert info["popRevivedCount"] == "1" and "popCheckpointCount" in info and "popHoldRequestCount" in info


async def test_dlq_after_retry_max_times(env):
    await env.create_topic("DT", 1)
    await create_group(env, retry_max_times=2)
    await env.send("DT", b"poison")
    seen = []

    async def pop_some():
        _, ms = await pop(env, "DT", invisible=50)
        seen.extend(ms)
        tc = env.broker.topic_config_manager.select_topic_config("%DLQ%PopG")
        return tc is not None and env.messages("%DLQ%PopG")

    await wait_until(pop_some, timeout=30, interval=0.05, what="the message to reach the DLQ")
    assert [m.reconsume_times for m in seen] == [0, 1, 2]
    dlq = env.messages("%DLQ%PopG")
    assert [m.body for m in dlq] == [b"poison"] and dlq[0].reconsume_times == 3


async def test_change_invisible_time(env):
    await env.create_topic("CT", 1)
    await create_group(env)
    await env.send("CT", b"slow")
    _, msgs = await pop(env, "CT", invisible=60_000)
    m = msgs[0]
    resp = await invoke(env, wire.change_invisible_time(GROUP, "CT", handle(m), 100))
    new_handle = wire.parse_change_invisible_time(resp, handle(m))
    info = wire.ExtraInfo.parse(new_handle)
    assert info.invisible_time == 100 and info.queue_offset == m.queue_offset
    got = []

    async def back():
        _, ms = await pop(env, "CT")
        got.extend(ms)
        return bool(got)

    await wait_until(back, timeout=20, interval=0.05, what="the message back after the new invisible time")
    assert got[0].body == b"slow" and got[0].reconsume_times == 1
    # negative time: refused with a clear remark
    resp = await invoke(env, wire.change_invisible_time(GROUP, "CT", handle(got[0]), -5))
    assert resp.code == ResponseCode.INVALID_PARAMETER and "invisibleTime" in resp.remark


async def test_batch_ack(env):
    await env.create_topic("BT", 1)
    await create_group(env)
    for i in range(5):
        await env.send("BT", f"b{i}".encode())
    _, msgs = await pop(env, "BT", invisible=300)
    assert len(msgs) == 5
    acks = wire.BatchAck.of(GROUP, "BT", [handle(m) for m in msgs[:4]])
    assert len(acks) == 1 and acks[0].bits == frozenset(range(4))
    resp = await invoke(env, wire.batch_ack_message(acks, env.broker.broker_config.broker_name))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    got = []

    async def back():
        _, ms = await pop(env, "BT")
        got.extend(ms)
        return bool(got)

    await wait_until(back, timeout=20, interval=0.05, what="the one un-acked message back")
    assert [m.body for m in got] == [b"b4"]
    # an empty batch is NO_MESSAGE, as Java
    resp = await invoke(env, wire.batch_ack_message([]))
    assert resp.code == ResponseCode.NO_MESSAGE


async def test_two_consumers_share_a_queue_without_duplicates(tmp_path):
    # SYNC_FLUSH: every checkpoint write waits for its flush, so concurrent POPs interleave
    from rmq.remoting.client import RemotingClient

    async with broker_env(tmp_path / "store", flush_disk_type="SYNC_FLUSH", **FAST) as env:
        await env.create_topic("ST", 1)
        await create_group(env)
        for i in range(20):
            await env.send("ST", f"s{i}".encode())
        other = RemotingClient()
        bodies = []
        try:

            async def all_received():
                got = await asyncio.gather(*(pop(env, "ST", n=3, client=(other if k % 2 else None)) for k in range(8)))
                bodies.extend(m.body for _, ms in got for m in ms)
                return len(bodies) >= 20

            await wait_until(all_received, timeout=30, what="every message popped once")
        finally:
            await other.close()
        assert sorted(bodies) == sorted(f"s{i}".encode() for i in range(20))


async def test_pull_and_pop_of_one_group_share_offsets(env):
    await env.create_topic("OT", 1)
    await create_group(env)
    for i in range(4):
        await env.send("OT", f"o{i}".encode())
    _, msgs = await pop(env, "OT", n=2)
    assert [m.body for m in msgs] == [b"o0", b"o1"]
    r = await env.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": "OT", "queueId": 0})
    assert r.ext_fields["offset"] == "2"
    # a PULL consumer of the group commits 3: POP continues from there
    await env.call(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": "OT", "queueId": 0, "commitOffset": "3"}
    )
    _, msgs = await pop(env, "OT")
    assert [m.body for m in msgs] == [b"o3"]


async def test_long_polling_woken_by_a_send(env):
    await env.create_topic("LT", 2)
    await create_group(env)
    # held for up to 60 s: an answer within 30 s can only come from the wake-up
    task = asyncio.create_task(pop(env, "LT", poll=60_000, timeout=90))
    hold = env.broker.pop_service.hold
    await wait_until(lambda: hold.held_count == 1, timeout=10, what="the POP to be held")
    r = await invoke(env, wire.polling_info(GROUP, "LT", -1))
    assert wire.parse_polling_info(r) == 1
    await env.send("LT", b"wake", queue_id=1)
    reply, msgs = await asyncio.wait_for(task, 30)
    assert reply.status is wire.PopStatus.FOUND and [m.body for m in msgs] == [b"wake"]
    # a NOTIFICATION finds nothing now and is held; a send wakes it with hasMsg
    h = NotificationRequestHeader(
        consumer_group=GROUP, topic="LT", queue_id=-1, poll_time=60_000, born_time=int(time.time() * 1000)
    )
    task = asyncio.create_task(invoke(env, wire.notification(h)))
    await wait_until(lambda: hold.held_count == 1, timeout=10, what="the NOTIFICATION to be held")
    await env.send("LT", b"more", queue_id=0)
    assert wire.parse_notification(await asyncio.wait_for(task, 30)).has_msg is True


async def test_poll_expiry_answers_polling_timeout(env):
    await env.create_topic("ET", 1)
    await create_group(env)
    reply, msgs = await pop(env, "ET", poll=100)
    assert reply.status is wire.PopStatus.POLLING_NOT_FOUND and msgs == []


async def test_tag_and_sql_filters(tmp_path):
    async with broker_env(tmp_path / "store", enable_property_filter=True, **FAST) as env:
        await env.create_topic("FT", 1)
        await create_group(env)
        await env.send("FT", b"a", tags="A", extra_props={"n": "1"})
        await env.send("FT", b"b", tags="B", extra_props={"n": "2"})
        await env.send("FT", b"c", tags="A", extra_props={"n": "3"})
        reply, msgs = await pop(env, "FT", exp="A", exp_type="TAG")
        assert [m.body for m in msgs] == [b"a", b"c"]
        # a unit filtered out: the offsets reported (and in the handles) are the records' own
        assert [m.queue_offset for m in msgs] == [0, 2]
        assert sorted(o for v in reply.msg_offsets.values() for o in v) == [0, 2]
        assert [wire.ExtraInfo.parse(handle(m)).queue_offset for m in msgs] == [0, 2]
        await create_group(env, "SqlG")
        _, msgs = await pop(env, "FT", group="SqlG", exp="n > 1", exp_type="SQL92")
        assert [m.body for m in msgs] == [b"b", b"c"]


async def test_orderly_pop_one_batch_in_flight_per_queue(env):
    await env.create_topic("FO", 1)
    await create_group(env, orderly=True)
    for i in range(4):
        await env.send("FO", f"f{i}".encode())
    reply, msgs = await pop(env, "FO", n=2, order=True, invisible=60_000)
    assert [m.body for m in msgs] == [b"f0", b"f1"] and reply.revive_qid == wire.POP_ORDER_REVIVE_QUEUE
    # the queue is blocked until the batch is acked
    _, more = await pop(env, "FO", n=2, order=True)
    assert more == []
    for m in msgs:
        assert (await ack(env, "FO", m)).code == ResponseCode.SUCCESS
    _, more = await pop(env, "FO", n=2, order=True, invisible=200)
    assert [m.body for m in more] == [b"f2", b"f3"]
    # not acked: after the invisible time the same batch again, its count in orderCountInfo
    got = []

    async def again():
        r, ms = await pop(env, "FO", n=2, order=True)
        got.append((r, ms))
        return bool(ms)

    await wait_until(again, timeout=20, interval=0.05, what="the orderly batch again")
    r, ms = got[-1]
    assert [m.body for m in ms] == [b"f2", b"f3"]
    assert r.order_count("FO", 0) == 1


async def test_hostile_input_gets_clear_errors_and_others_are_fine(env):
    await env.create_topic("HT", 1)
    await create_group(env)
    await env.send("HT", b"x")
    bad_handles = ["", "1 2 3", "a b c d 0 broker 0 0", "1 2 3 4 9 b 0 0", "1 2 3 4 0 b 99999999999 0", "\x00" * 10]
    for bad in bad_handles:
        ext = {"consumerGroup": GROUP, "topic": "HT", "queueId": "0", "extraInfo": bad, "offset": "0"}
        r = await env.call(RequestCode.ACK_MESSAGE, ext)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "extraInfo" in r.remark, (bad, r.code, r.remark)
    # an unknown handle (offset past the queue) is NO_MESSAGE, as Java
    ext = {"consumerGroup": GROUP, "topic": "HT", "queueId": "0", "extraInfo": "0 1 1000 0 0 b 0 77", "offset": "77"}
    assert (await env.call(RequestCode.ACK_MESSAGE, ext)).code == ResponseCode.NO_MESSAGE
    # huge maxMsgNums, negative invisible/poll times, bad init mode
    base = {
        "consumerGroup": GROUP,
        "topic": "HT",
        "queueId": "-1",
        "maxMsgNums": "32",
        "invisibleTime": "1000",
        "pollTime": "0",
        "bornTime": "0",
        "initMode": "0",
    }
    for k, v, word in [
        ("maxMsgNums", "100000", "max message num"),
        ("invisibleTime", "-1", "invisibleTime"),
        ("pollTime", "-5", "pollTime"),
        ("initMode", "7", "initMode"),
        ("maxMsgNums", "99999999999", "maxMsgNums"),
    ]:
        r = await env.call(RequestCode.POP_MESSAGE, {**base, k: v})
        assert r.code != ResponseCode.SUCCESS and word in (r.remark or ""), (k, v, r.code, r.remark)
    r = await env.call(RequestCode.BATCH_ACK_MESSAGE, {}, b"{not json")
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    r = await env.call(RequestCode.BATCH_ACK_MESSAGE, {}, json.dumps({"acks": [{"b": "%%%"}]}).encode())
    assert r.code == ResponseCode.MESSAGE_ILLEGAL
    # a second client's round trips are fine throughout
    from rmq.remoting.client import RemotingClient

    other = RemotingClient()
    try:
        _, msgs = await pop(env, "HT", client=other)
        assert [m.body for m in msgs] == [b"x"]
        r = await invoke(env, wire.ack_message(GROUP, "HT", handle(msgs[0])), client=other)
        assert r.code == ResponseCode.SUCCESS
    finally:
        await other.close()


async def test_pop_of_unknown_topic_or_group(env):
    r = await env.call(
        RequestCode.POP_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": "Nope",
            "queueId": "-1",
            "maxMsgNums": "1",
            "invisibleTime": "1000",
            "pollTime": "0",
            "bornTime": "0",
            "initMode": "0",
        },
    )
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert isinstance(r, RemotingCommand)


async def test_bounds_checkpoints_and_held_polls(tmp_path, caplog):
    async with broker_env(tmp_path / "store", pop_ck_max_num=1, pop_polling_size=1, **FAST) as env:
        await env.create_topic("BD", 1)
        await env.create_topic("EMPTY", 1)
        await create_group(env)
        await env.send("BD", b"one")
        await env.send("BD", b"two")
        _, first = await pop(env, "BD", n=1)
        assert [m.body for m in first] == [b"one"]
        pop_service = env.broker.pop_service
        await wait_until(lambda: pop_service.stats()["checkpoints"] == 1, timeout=10, what="the checkpoint read")
        # one checkpoint in flight is the bound: the next POPs are POLLING_FULL, one log line
        for _ in range(3):
            reply, msgs = await pop(env, "BD", n=1)
            assert reply.status is wire.PopStatus.POLLING_FULL and msgs == []
        assert sum("refusing a POP" in r.getMessage() for r in caplog.records) == 1
        assert (await ack(env, "BD", first[0])).code == ResponseCode.SUCCESS
        await wait_until(lambda: pop_service.stats()["checkpoints"] == 0, timeout=10, what="the checkpoint acked")
        _, msgs = await pop(env, "BD", n=1)
        assert [m.body for m in msgs] == [b"two"]
        assert (await ack(env, "BD", msgs[0])).code == ResponseCode.SUCCESS
        await wait_until(lambda: pop_service.stats()["checkpoints"] == 0, timeout=10, what="the checkpoint acked")
        # one held POP per connection: the second is POLLING_FULL at once
        held = asyncio.create_task(pop(env, "EMPTY", poll=60_000, timeout=90))
        await wait_until(lambda: pop_service.hold.held_count == 1, timeout=10, what="the POP held")
        reply, _ = await pop(env, "EMPTY", poll=20_000)
        assert reply.status is wire.PopStatus.POLLING_FULL
        await env.send("EMPTY", b"wake")
        reply, msgs = await asyncio.wait_for(held, 30)
        assert [m.body for m in msgs] == [b"wake"]


async def test_orderly_batch_in_flight_survives_a_restart(tmp_path):
    store = tmp_path / "store"
    async with broker_env(store, **FAST) as env:
        await env.create_topic("FR", 1)
        await create_group(env, orderly=True)
        for i in range(3):
            await env.send("FR", f"r{i}".encode())
        _, batch = await pop(env, "FR", n=2, order=True, invisible=60_000)
        assert [m.body for m in batch] == [b"r0", b"r1"]
    async with broker_env(store, **FAST) as env:
        # still in flight after the restart: the queue stays blocked for the group
        _, more = await pop(env, "FR", n=2, order=True)
        assert more == []
        for m in batch:  # the handles from before the restart still ack
            assert (await ack(env, "FR", m)).code == ResponseCode.SUCCESS
        _, more = await pop(env, "FR", n=2, order=True)
        assert [m.body for m in more] == [b"r2"]


async def test_held_pop_is_answered_at_shutdown(tmp_path):
    from rmq.remoting.client import RemotingClient

    other = RemotingClient()
    try:
        async with broker_env(tmp_path / "store", **FAST) as env:
            await env.create_topic("SD", 1)
            await create_group(env)
            task = asyncio.create_task(pop(env, "SD", poll=30_000, timeout=60, client=other))
            hold = env.broker.pop_service.hold
            await wait_until(lambda: hold.held_count == 1, timeout=10, what="the POP held")
        # the broker stopped: the held POP got its answer, not a client timeout
        reply, msgs = await asyncio.wait_for(task, 20)
        assert reply.status is wire.PopStatus.POLLING_NOT_FOUND and msgs == []
    finally:
        await other.close()


async def test_pop_properties_change_live_and_are_validated(env):
    await env.create_topic("CF", 1)
    await create_group(env)

    async def update(text):
        return await env.call(RequestCode.UPDATE_BROKER_CONFIG, None, text.encode())

    r = await update("popMaxPollTime=500\n")
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await env.call(
        RequestCode.POP_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": "CF",
            "queueId": "-1",
            "maxMsgNums": "1",
            "invisibleTime": "1000",
            "pollTime": "1000",
            "bornTime": "0",
            "initMode": "0",
        },
    )
    assert r.code == ResponseCode.INVALID_PARAMETER and "0..500" in r.remark
    r = await update("popRetryProbability=101\n")
    assert r.code != ResponseCode.SUCCESS and "popRetryProbability" in r.remark and "100" in r.remark
    r = await update("reviveQueueNum=4\n")
    assert r.code != ResponseCode.SUCCESS and "reviveQueueNum" in r.remark
    assert env.broker.broker_config.revive_queue_num == 8


async def test_acks_in_flight_together_share_one_revive_record(env):
    # the acks that wait for one write go into one bAck record per checkpoint (group commit)
    await env.create_topic("GC", 1)
    await create_group(env)
    for i in range(8):
        await env.send("GC", f"g{i}".encode(), queue_id=0)
    reply, msgs = await pop(env, "GC", invisible=60_000)
    assert len(msgs) == 8
    svc = env.broker.pop_service
    await env.dispatched()
    before = len(env.messages(svc.revive_topic, reply.revive_qid))
    infos = [wire.ExtraInfo.parse(handle(m)) for m in msgs]
    written = await asyncio.gather(
        *(
            svc._write_ack(
                i.revive_qid, GROUP, "GC", 0, i.ck_queue_offset, i.pop_time, i.broker_name, m.queue_offset, 0
            )
            for i, m in zip(infos, msgs, strict=True)
        )
    )
    assert written == [True] * 8
    await env.dispatched()
    records = env.messages(svc.revive_topic, reply.revive_qid)[before:]
    assert [r.properties[MessageConst.TAGS] for r in records] == ["bAck"]
    assert sorted(json.loads(records[0].body)["aol"]) == sorted(m.queue_offset for m in msgs)
    # the checkpoint is complete: nothing comes back
    await wait_until(lambda: svc.stats()["checkpoints"] == 0, timeout=10, what="the checkpoint acked")
    reply, again = await pop(env, "GC")
    assert again == [] and svc.revived == 0


async def test_concurrent_acks_each_answered_and_nothing_revived(env):
    await env.create_topic("GA", 2)
    await create_group(env)
    for i in range(12):
        await env.send("GA", f"a{i}".encode(), queue_id=i % 2)
    _, msgs = await pop(env, "GA", invisible=2_000)
    assert len(msgs) == 12
    answers = await asyncio.gather(*(ack(env, "GA", m) for m in msgs))
    assert [r.code for r in answers] == [ResponseCode.SUCCESS] * 12
    svc = env.broker.pop_service
    await wait_until(lambda: svc.stats()["checkpoints"] == 0, timeout=20, what="the checkpoints acked")
    _, again = await pop(env, "GA")
    assert again == [] and svc.revived == 0
