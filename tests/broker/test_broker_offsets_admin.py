"""Offsets (14, 15, 29, 30, 31) and admin codes (17, 21, 28, 200, 202, 208, 215) (B5, B9)."""

import json
import re
import time

from rmq._testing import wait_until
from rmq.protocol.codes import RequestCode, ResponseCode


async def q_offset(env, group, topic, qid=0):
    return await env.call(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": qid})


async def test_consumer_offsets(env):
    await env.create_topic("OT", 2)
    for _ in range(3):
        await env.send("OT", b"x")
    resp = await q_offset(env, "NewGroup", "OT")
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields == {"offset": "0"}
    upd = {"consumerGroup": "G", "topic": "OT", "queueId": 0, "commitOffset": "2"}
    assert (await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, upd)).code == ResponseCode.SUCCESS
    assert (await q_offset(env, "G", "OT")).ext_fields["offset"] == "2"
    upd["commitOffset"] = -1  # ONS persists -1 for offset 0: ignored
    assert (await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, upd)).code == ResponseCode.SUCCESS
    assert (await q_offset(env, "G", "OT")).ext_fields["offset"] == "2"
    resp = await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "OT"})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId" in resp.remark


async def test_max_min_and_search_offsets(env):
    await env.create_topic("MT", 1)
    assert (await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "MT", "queueId": 0})).ext_fields == {"offset": "0"}
    await env.send("MT", b"a")
    first = int(time.time() * 1000)
    # store timestamps have millisecond resolution: let the clock move on around ``mid``
    await wait_until(lambda: int(time.time() * 1000) > first, interval=0.001, what="the next millisecond")
    mid = int(time.time() * 1000)
    await wait_until(lambda: int(time.time() * 1000) > mid, interval=0.001, what="the next millisecond")
    await env.send("MT", b"b")
    await env.send("MT", b"c")
    resp = await env.call(RequestCode.GET_MAX_OFFSET, {"topic": "MT", "queueId": 0})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "3"
    resp = await env.call(RequestCode.GET_MIN_OFFSET, {"topic": "MT", "queueId": 0})
    assert resp.ext_fields["offset"] == "0"
    resp = await env.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": "MT", "queueId": 0, "timestamp": str(mid)})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "1"


async def test_topic_admin_round_trip(env):
    resp = await env.create_topic("AdminT", 3)
    assert resp.code == ResponseCode.SUCCESS
    r = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AdminT"})
    assert r.code == ResponseCode.SUCCESS and json.loads(r.body_bytes())["queueDatas"][0]["writeQueueNums"] == 3

    resp = await env.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    data = json.loads(resp.body_bytes())
    assert data["topicConfigTable"]["AdminT"]["readQueueNums"] == 3
    assert data["topicConfigTable"]["TBW102"]["perm"] == 7
    assert {"counter", "timestamp"} <= set(data["dataVersion"])

    assert (await env.create_topic("bad name", expect=None)).code == ResponseCode.SYSTEM_ERROR
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in resp.remark

    await env.send("AdminT", b"x")
    resp = await env.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "AdminT"})
    assert resp.code == ResponseCode.SUCCESS
    assert env.broker.topic_config_manager.select_topic_config("AdminT") is None
    r = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AdminT"})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    resp = await env.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "TBW102"})
    assert resp.code == ResponseCode.NO_PERMISSION


async def test_subscription_group_admin(env):
    body = json.dumps({"groupName": "SG", "consumeEnable": False, "retryQueueNums": 1}).encode()
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert resp.code == ResponseCode.SUCCESS
    await env.create_topic("SGT", 1)
    resp = await env.pull("SGT", group="SG")
    assert resp.code == ResponseCode.NO_PERMISSION and "SG" in resp.remark
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"consumeEnable":true}')
    assert resp.code == ResponseCode.SYSTEM_ERROR and "groupName" in resp.remark


async def test_runtime_info_and_stats(env):
    await env.create_topic("ST", 2)
    await env.send("ST", b"a", queue_id=0)
    await env.send("ST", b"b", queue_id=1)
    await env.send("ST", b"c", queue_id=1)
    await env.call(
        RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "SG2", "topic": "ST", "queueId": 1, "commitOffset": "1"}
    )
    resp = await env.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    table = json.loads(resp.body_bytes())["table"]
    assert all(isinstance(v, str) for v in table.values())
    assert int(table["msgPutTotalTodayNow"]) >= 3 and table["brokerVersion"] == "409"

    resp = await env.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "ST"})
    assert resp.code == ResponseCode.SUCCESS
    text = resp.body_bytes().decode()
    # fastjson's Map<MessageQueue, TopicOffset>: object keys, as Java writes it
    assert re.search(r'\{"brokerName":"broker-a","queueId":1,"topic":"ST"\}:\{"minOffset":0,"maxOffset":2,', text)
    assert (await env.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})).code == ResponseCode.TOPIC_NOT_EXIST

    resp = await env.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "SG2", "topic": "ST"})
    text = resp.body_bytes().decode()
    assert '"queueId":1,"topic":"ST"}:{"brokerOffset":2,"consumerOffset":1,' in text
