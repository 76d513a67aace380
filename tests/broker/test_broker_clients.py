"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), NOTIFY (40) (B4)."""

import asyncio
import json

from rmq._testing import wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient


def cpp_heartbeat(client_id, group, topic="T"):
    return {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "consumeFromWhere": 0,
                "consumeType": 1,
                "groupName": group,
                "messageModel": 1,
                "subscriptionDataSet": [
                    {"subString": "*", "subVersion": "1795294299665", "topic": f"%RETRY%{group}"},
                    {"subString": "*", "subVersion": "1795294299665", "topic": topic},
                ],
            }
        ],
    }


def ons_heartbeat(client_id, group, topic="T"):
    return {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "BROADCASTING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [
                    {
                        "topic": topic,
                        "subString": "TagA",
                        "classFilterMode": False,
                        "tagsSet": ["TagA"],
                        "codeSet": [2598919],
                        "subVersion": 1795294700183,
                    }
                ],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": "CLIENT_INNER_PRODUCER"}],
    }


class Notifications:
    def __init__(self):
        self.groups = []
        self.event = asyncio.Event()

    def process_request(self, conn, cmd):
        self.groups.append(cmd.ext_fields.get("consumerGroup"))
        self.event.set()
        return None


async def heartbeat(client, addr, body):
    return await client.invoke(addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode()))


async def consumer_list(client, addr, group):
    return await client.invoke(
        addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    )


async def test_heartbeat_dialects_and_consumer_list(env):
    resp = await heartbeat(env.client, env.addr, cpp_heartbeat("111-127.0.0.1@DEFAULT", "GCPP"))
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields == {}
    resp = await consumer_list(env.client, env.addr, "GCPP")
    assert resp.code == ResponseCode.SUCCESS
    assert json.loads(resp.body_bytes()) == {"consumerIdList": ["111-127.0.0.1@DEFAULT"]}
    info = env.broker.consumer_manager.get_consumer_group_info("GCPP")
    assert info.message_model.name == "CLUSTERING" and info.consume_type.name == "CONSUME_PASSIVELY"
    assert set(info.subscriptions) == {"T", "%RETRY%GCPP"}

    resp = await heartbeat(env.client, env.addr, ons_heartbeat("192.0.2.2@1", "GONS"))
    assert resp.code == ResponseCode.SUCCESS
    info = env.broker.consumer_manager.get_consumer_group_info("GONS")
    assert info.message_model.name == "BROADCASTING"
    assert info.consume_from_where.name == "CONSUME_FROM_FIRST_OFFSET"
    assert info.subscriptions["T"].tags_set == ("TagA",)
    assert "CLIENT_INNER_PRODUCER" in env.broker.producer_manager.group_channel_table


async def test_heartbeat_creates_retry_topic_route(env):
    await heartbeat(env.client, env.addr, cpp_heartbeat("c1", "GR"))
    resp = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%GR"})
    assert resp.code == ResponseCode.SUCCESS
    qd = json.loads(resp.body_bytes())["queueDatas"][0]
    assert qd["readQueueNums"] == 1 and qd["writeQueueNums"] == 1 and qd["perm"] == 6


async def test_heartbeat_tolerates_groupless_entries_and_rejects_bad_json(env):
    resp = await heartbeat(
        env.client, env.addr, {"consumerDataSet": [{"subscriptionDataSet": []}], "producerDataSet": [{}]}
    )
    assert resp.code == ResponseCode.SUCCESS
    resp = await env.client.invoke(env.addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"{nope"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "JSON" in resp.remark
    resp = await env.client.invoke(env.addr, RemotingCommand.request(RequestCode.HEART_BEAT, {}, None))
    assert resp.code == ResponseCode.SYSTEM_ERROR


async def test_membership_changes_notify_remaining_members(env):
    a, b = RemotingClient(), RemotingClient()
    notes = Notifications()
    a.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, notes)
    try:
        await heartbeat(a, env.addr, cpp_heartbeat("client-a", "GM"))
        await heartbeat(b, env.addr, cpp_heartbeat("client-b", "GM"))
        await asyncio.wait_for(notes.event.wait(), 3)
        assert notes.groups[-1] == "GM"
        ids = json.loads((await consumer_list(a, env.addr, "GM")).body_bytes())["consumerIdList"]
        assert ids == ["client-a", "client-b"]

        notes.event.clear()
        await b.close()  # vanishes: dropped on close, a is told
        await asyncio.wait_for(notes.event.wait(), 3)
        ids = json.loads((await consumer_list(a, env.addr, "GM")).body_bytes())["consumerIdList"]
        assert ids == ["client-a"]

        resp = await a.invoke(
            env.addr,
            RemotingCommand.request(
                RequestCode.UNREGISTER_CLIENT, {"clientID": "client-a", "producerGroup": "", "consumerGroup": "GM"}
            ),
        )
        assert resp.code == ResponseCode.SUCCESS
        resp = await consumer_list(a, env.addr, "GM")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "GM" in resp.remark
    finally:
        await a.close()
        await b.close()


async def test_silent_client_expires(env):
    await heartbeat(env.client, env.addr, cpp_heartbeat("quiet", "GQ"))
    env.broker.consumer_manager.channel_expired_seconds = 0.0
    assert env.broker.consumer_manager.get_consumer_group_info("GQ") is not None

    def expired():  # a scan expires the channel once the clock has moved past its last heartbeat
        env.broker.scan_not_active_channels()
        return env.broker.consumer_manager.get_consumer_group_info("GQ") is None

    await wait_until(expired, what="the silent client to expire")


async def test_pull_with_heartbeat_subscription(env):
    await env.create_topic("HT", 1)
    await heartbeat(env.client, env.addr, cpp_heartbeat("c", "GH", topic="HT"))
    await env.send("HT", b"m")
    resp = await env.pull("HT", group="GH", sys_flag=0)  # no subscription in the request
    assert resp.code == ResponseCode.SUCCESS
    ext = {
        "consumerGroup": "GH",
        "topic": "HT",
        "queueId": 0,
        "queueOffset": "0",
        "maxMsgNums": 32,
        "sysFlag": 0,
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": str(2 * 1795294299665),
    }
    resp = await env.call(RequestCode.PULL_MESSAGE, ext)
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_LATEST


async def test_malformed_heartbeat_fields_are_tolerated_or_rejected(env):
    odd = {"clientID": 5, "consumerDataSet": "abc", "producerDataSet": [1, None]}
    assert (await heartbeat(env.client, env.addr, odd)).code == ResponseCode.SUCCESS
    odd = {
        "clientID": "c",
        "consumerDataSet": [
            {"groupName": "GX", "subscriptionDataSet": [{"topic": 5, "subVersion": "x", "tagsSet": 7}]}
        ],
    }
    resp = await heartbeat(env.client, env.addr, odd)
    assert resp.code == ResponseCode.SUCCESS
    assert env.broker.consumer_manager.get_consumer_group_info("GX").subscriptions["5"].tags_set == ()
    odd = {"clientID": "c", "consumerDataSet": [{"groupName": {"x": 1}}, {"groupName": "bad group!"}]}
    resp = await heartbeat(env.client, env.addr, odd)
    assert resp.code == ResponseCode.SUCCESS
    assert not any("bad" in t or "{" in t for t in env.broker.topic_config_manager.topic_config_table)
    assert (await heartbeat(env.client, env.addr, cpp_heartbeat("ok", "GOK"))).code == ResponseCode.SUCCESS
