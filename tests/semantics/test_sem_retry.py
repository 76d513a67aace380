"""CONSUMER_SEND_MSG_BACK (36), %RETRY% / %DLQ% topics and the SEND path's retry → DLQ rule."""

import json

import pytest
from semantics_support import phy_offset, wait_for

import rmq
from rmq.protocol.codes import ResponseCode

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


async def _original(w, topic="RetryT", body=b"payload", props=None):
    await w.create_topic(topic, queues=2)
    resp = await w.send(topic, body, queue_id=1, props=props or {"KEYS": "biz-1", "UNIQ_KEY": "C0A8UNIQ"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await w.dispatched()
    return resp.ext_fields["msgId"]


async def test_send_back_copies_to_retry_with_delay_3_plus_reconsume(wire):
    w = wire
    msg_id = await _original(w)
    resp = await w.send_back(phy_offset(msg_id), "GID_a", delay_level=0, max_reconsume_times=16, origin_msg_id=msg_id)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await w.dispatched()
    # parked at level 3 + 0 = 3 (queue 2) with the retry topic as its real topic
    (parked,) = w.messages(SCHEDULE, 2)
    assert parked.properties["REAL_TOPIC"] == "%RETRY%GID_a" and parked.properties["DELAY"] == "3"
    await wait_for(lambda: w.messages("%RETRY%GID_a"), timeout=5, what="the retry copy")
    (copy,) = w.messages("%RETRY%GID_a")
    assert copy.body == b"payload" and copy.flag == 7 and copy.reconsume_times == 1
    assert copy.properties["RETRY_TOPIC"] == "RetryT"
    assert copy.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert copy.properties["KEYS"] == "biz-1" and copy.properties["UNIQ_KEY"] == "C0A8UNIQ"
    tc = w.broker.topic_config_manager.select_topic_config("%RETRY%GID_a")
    assert tc.read_queue_nums == 1 and tc.perm == 6

    # the copy fails again: the second copy keeps the first ORIGIN_MESSAGE_ID, level 3 + 1 = 4
    resp = await w.send_back(copy.commit_log_offset, "GID_a", delay_level=0, origin_msg_id=copy.msg_id)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await w.dispatched()
    assert w.messages(SCHEDULE, 3)[0].properties["DELAY"] == "4"
    await wait_for(lambda: len(w.messages("%RETRY%GID_a")) == 2, timeout=6, what="the second retry copy")
    second = w.messages("%RETRY%GID_a")[1]
    assert second.reconsume_times == 2 and second.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert second.properties["RETRY_TOPIC"] == "RetryT"


async def test_requested_delay_level_is_used(wire):
    w = wire
    msg_id = await _original(w, "ReqLevelT")
    assert (await w.send_back(phy_offset(msg_id), "GID_b", delay_level=1)).code == ResponseCode.SUCCESS
    await w.dispatched()
    assert w.messages(SCHEDULE, 0)[0].properties["REAL_TOPIC"] == "%RETRY%GID_b"


async def test_max_reconsume_times_reached_goes_to_dlq_and_is_routed(wire):
    w = wire
    msg_id = await _original(w, "DlqT")
    off = phy_offset(msg_id)
    # reconsumeTimes 0 >= max 0 → straight to the DLQ, no delay
    resp = await w.send_back(off, "GID_c", max_reconsume_times=0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await w.dispatched()
    (dead,) = w.messages("%DLQ%GID_c")
    assert dead.reconsume_times == 1 and dead.properties["ORIGIN_MESSAGE_ID"] == msg_id
    assert dead.properties["RETRY_TOPIC"] == "DlqT" and dead.body == b"payload"
    assert w.messages(SCHEDULE, 2) == []
    tc = w.broker.topic_config_manager.select_topic_config("%DLQ%GID_c")
    assert tc.read_queue_nums == 1 and tc.perm == 6  # Java 4.9.8: PERM_WRITE | PERM_READ

    async def routed():  # registration with the name server follows the topic's creation
        route = await w.route("%DLQ%GID_c")
        return route if route.code == ResponseCode.SUCCESS else None

    route = await wait_for(routed, what="the name server to route %DLQ%<group>")
    assert json.loads(route.body_bytes())["queueDatas"][0]["readQueueNums"] == 1

    # a consumer of the DLQ topic finds it (our SDK's lite pull consumer)
    c = rmq.PullConsumer(
        w.ns.address,
        "GID_dlq_reader",
        auto_commit=False,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    async with c:
        c.assign(await c.fetch_message_queues("%DLQ%GID_c"))
        got = []
        for _ in range(20):
            got += await c.poll(timeout=0.5)
            if got:
                break
    assert [m.body for m in got] == [b"payload"]


async def test_group_default_max_16_and_negative_level(wire):
    w = wire
    msg_id = await _original(w, "NegT")
    # delayLevel < 0 → DLQ whatever the count
    assert (await w.send_back(phy_offset(msg_id), "GID_d", delay_level=-1)).code == ResponseCode.SUCCESS
    await w.dispatched()
    assert len(w.messages("%DLQ%GID_d")) == 1
    # without maxReconsumeTimes the group's retryMaxTimes (16) applies: reconsumeTimes 16 → DLQ
    resp = await w.send("NegT", b"tired", queue_id=0, reconsume_times=16)
    await w.dispatched()
    assert (await w.send_back(phy_offset(resp.ext_fields["msgId"]), "GID_d")).code == ResponseCode.SUCCESS
    await w.dispatched()
    assert [m.body for m in w.messages("%DLQ%GID_d")] == [b"payload", b"tired"]
    resp = await w.send("NegT", b"fresh", queue_id=0, reconsume_times=15)
    await w.dispatched()
    assert (await w.send_back(phy_offset(resp.ext_fields["msgId"]), "GID_d")).code == ResponseCode.SUCCESS
    await w.dispatched()
    (parked,) = w.messages(SCHEDULE, 17)  # 3 + 15 = 18
    assert parked.reconsume_times == 16


async def test_bad_send_back_requests(wire):
    w = wire
    await _original(w, "BadT")
    resp = await w.send_back(10**12, "GID_e")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "look message by offset failed" in resp.remark
    resp = await w.call(36, {"group": "GID_e"})  # offset missing
    assert resp.code == ResponseCode.SYSTEM_ERROR and "offset" in resp.remark
    resp = await w.send_back(0, "bad group!")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal group" in resp.remark
    w.broker.broker_config.auto_create_subscription_group = False
    resp = await w.send_back(0, "GID_unknown")
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_send_into_retry_above_max_goes_to_dlq(wire):
    """ali-ons' fallback path: SEND_MESSAGE into %RETRY%<group> with reconsumeTimes (j) and
    maxReconsumeTimes (l); j > l → %DLQ%<group>; j ≤ l stays a (delayed) retry."""
    w = wire
    resp = await w.send("%RETRY%GID_f", b"over", reconsume_times=4, max_reconsume_times=3)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await w.send("%RETRY%GID_f", b"within", reconsume_times=3, max_reconsume_times=3)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await w.dispatched()
    (dead,) = w.messages("%DLQ%GID_f")
    assert dead.body == b"over" and dead.reconsume_times == 4
    assert [m.body for m in w.messages("%RETRY%GID_f")] == [b"within"]
    assert w.messages("%RETRY%GID_f")[0].reconsume_times == 3


@pytest.mark.parametrize("fail_times", [1])
async def test_sdk_push_consumer_gets_retry_then_succeeds(wire, fail_times):
    """End to end with our SDK: the handler raises once; the message comes back from %RETRY%
    with reconsume_times 1 and the original topic."""
    w = wire
    await w.create_topic("SdkRetryT", queues=2)
    seen = []

    async def handler(msg):
        seen.append((msg.body, msg.reconsume_times, msg.topic, msg.properties.get("ORIGIN_MESSAGE_ID")))
        if msg.reconsume_times < fail_times:
            raise RuntimeError("first delivery fails")

    c = rmq.PushConsumer(
        w.ns.address,
        "GID_sdk_retry",
        handler=handler,
        consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe("SdkRetryT")
    async with c:
        async with rmq.Producer(w.ns.address, "PID_sdk_retry") as p:
            r = await p.send(rmq.Message("SdkRetryT", b"again"))
        await wait_for(lambda: len(seen) >= 2, timeout=15, what="the redelivery")
    assert seen[0][:3] == (b"again", 0, "SdkRetryT")
    assert seen[1][:3] == (b"again", 1, "SdkRetryT")
    assert seen[1][3] == r.offset_msg_id
