"""PULL_MESSAGE details as Java 4.9.8's PullMessageProcessor and PullRequestHoldService have them
(seeds 000, 001, 003): the OffsetMovedEvent of a PULL_OFFSET_MOVED answer, the broker-not-readable,
broadcast-refused and topic-not-subscribed branches, and a held SQL92 pull woken only by a
message its expression matches."""

import asyncio
import json

from broker_support import decode_records

from rmq._testing import broker_env, wait_until
from rmq.protocol.body.topic import OffsetMovedEvent
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.types import MessageQueue

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."


def _heartbeat(client_id, group, topic, model="CLUSTERING"):
    """A Java client's HEART_BEAT body: ``group`` subscribes ``topic`` (and its retry topic)."""
    subs = [
        {"topic": t, "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1, "expressionType": "TAG"}
        for t in (topic, f"%RETRY%{group}")
    ]
    return {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": model,
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": subs,
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }


async def _send_heartbeat(env, body):
    resp = await env.call(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_offset_moved_writes_the_event_as_java(env):
    """PULL_OFFSET_MOVED on a master appends Java's OffsetMovedEvent to OFFSET_MOVED_EVENT queue
    0, tags and keys the group, body fastjson's (fields in alphabetical order)."""
    await env.create_topic("OM", 2)
    for i in range(3):
        await env.send("OM", b"m%d" % i, queue_id=1)
    resp = await env.pull("OM", queue_id=1, offset=100, group="GOM")
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED
    assert resp.ext_fields["nextBeginOffset"] == "0"  # Java: min offset 0 -> 0 (OFFSET_OVERFLOW_BADLY)

    async def event():
        r = await env.pull("OFFSET_MOVED_EVENT", group="Monitor", sys_flag=4)
        return r if r.code == ResponseCode.SUCCESS else None

    got = await wait_until(event, what="the OffsetMovedEvent to be stored")
    recs = decode_records(got.body_bytes())
    assert len(recs) == 1
    rec = recs[0]
    assert rec.queue_id == 0 and rec.topic == "OFFSET_MOVED_EVENT"
    assert rec.properties["TAGS"] == "GOM" and rec.properties["KEYS"] == "GOM"
    assert rec.flag == 0
    broker_name = env.broker.broker_config.broker_name
    assert (
        rec.body
        == (
            '{"consumerGroup":"GOM","messageQueue":{"brokerName":"' + broker_name + '","queueId":1,"topic":"OM"},'
            '"offsetNew":0,"offsetRequest":100}'
        ).encode()
    )
    assert OffsetMovedEvent.from_body(rec.body) == OffsetMovedEvent("GOM", MessageQueue("OM", broker_name, 1), 100, 0)
    # an answer that is not PULL_OFFSET_MOVED writes none
    assert (await env.pull("OM", queue_id=1, offset=3, group="GOM", sys_flag=4)).code == ResponseCode.PULL_NOT_FOUND
    resp = await env.pull("OM", queue_id=0, offset=7, group="GOM2")  # an empty queue, offset not 0
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED
    await wait_until(lambda: len(env.messages("OFFSET_MOVED_EVENT")) == 2, what="the second event")
    second = OffsetMovedEvent.from_body(env.messages("OFFSET_MOVED_EVENT")[1].body)
    assert second == OffsetMovedEvent("GOM2", MessageQueue("OM", broker_name, 0), 7, 0)


async def test_a_broker_without_read_permission_refuses_pulls(tmp_path):
    async with broker_env(tmp_path / "store", broker_permission=2) as env:  # write only
        await env.create_topic("NR", 1)
        await env.send("NR", b"x")
        resp = await env.pull("NR")
        assert resp.code == ResponseCode.NO_PERMISSION
        ip = env.broker.broker_config.broker_ip1
        assert resp.remark == f"the broker[{ip}] pulling message is forbidden"


async def test_broadcast_consumption_refused_when_the_group_disallows_it(env):
    await env.create_topic("BC", 1)
    body = {"groupName": "GB", "consumeBroadcastEnable": False}
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, json.dumps(body).encode())
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await _send_heartbeat(env, _heartbeat("10.0.0.1@1", "GB", "BC", model="BROADCASTING"))
    resp = await env.pull("BC", group="GB", sys_flag=0)  # no subscription with the pull
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "the consumer group[GB] can not consume by broadcast way"
    # the same group consuming in clusters is served
    await _send_heartbeat(env, _heartbeat("10.0.0.1@1", "GB", "BC", model="CLUSTERING"))
    assert (await env.pull("BC", group="GB", sys_flag=0)).code == ResponseCode.PULL_NOT_FOUND
    # a group that allows broadcast (Java's default) is served
    await _send_heartbeat(env, _heartbeat("10.0.0.2@1", "GB2", "BC", model="BROADCASTING"))
    assert (await env.pull("BC", group="GB2", sys_flag=0)).code == ResponseCode.PULL_NOT_FOUND


async def test_a_topic_the_group_does_not_subscribe(env):
    await env.create_topic("SUB", 1)
    await env.create_topic("OTHER", 1)
    await _send_heartbeat(env, _heartbeat("10.0.0.3@1", "GS", "SUB"))
    assert (await env.pull("SUB", group="GS", sys_flag=0)).code == ResponseCode.PULL_NOT_FOUND
    resp = await env.pull("OTHER", group="GS", sys_flag=0)
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert resp.remark == "the consumer's subscription not exist" + FAQ
    # the group subscribes with subVersion 1; a pull claiming a newer one is told the broker's is old
    ext = {
        "consumerGroup": "GS",
        "topic": "SUB",
        "queueId": 0,
        "queueOffset": "0",
        "maxMsgNums": 32,
        "sysFlag": 0,
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "2",
    }
    resp = await env.client.invoke(env.addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext))
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    assert resp.remark == "the consumer's subscription not latest"
    # an unknown group: the group info does not exist
    resp = await env.pull("SUB", group="Nobody", sys_flag=0)
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert resp.remark == "the consumer's group info not exist" + FAQ


async def test_an_unknown_group_without_auto_creation(tmp_path):
    async with broker_env(tmp_path / "store", auto_create_subscription_group=False) as env:
        await env.create_topic("NG", 1)
        resp = await env.pull("NG", group="NoGroup")
        assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert resp.remark == "subscription group [NoGroup] does not exist, " + FAQ


def _held_pull(env, topic, expression, expression_type, group="GH", offset=0):
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": 0,
        "queueOffset": str(offset),
        "maxMsgNums": 32,
        "sysFlag": 6,  # suspend + subscription
        "commitOffset": "0",
        "suspendTimeoutMillis": "30000",
        "subscription": expression,
        "subVersion": "0",
        "expressionType": expression_type,
    }
    return asyncio.ensure_future(
        env.client.invoke(env.addr, RemotingCommand.request(RequestCode.PULL_MESSAGE, ext), timeout=40)
    )


async def test_a_held_sql92_pull_is_woken_only_by_a_matching_message(tmp_path):
    """Java ``PullRequestHoldService.notifyMessageArriving`` evaluates the held pull's expression
    on the arriving message's properties before waking it: a message the expression does not
    match leaves the pull held (no PULL_RETRY_IMMEDIATELY answer), nor does the periodic sweep
    wake it; a matching one is answered with just that message."""
    async with broker_env(tmp_path / "store", enable_property_filter=True) as env:
        hold = env.broker.pull_request_hold_service
        await env.create_topic("HS", 1)
        pull = _held_pull(env, "HS", "n > 5", "SQL92")
        await wait_until(lambda: hold.held_count == 1, what="the SQL92 pull to be held")
        for i in range(3):  # dispatched before send returns: any wake-up has happened by now
            await env.send("HS", b"no-%d" % i, tags="A", props={"n": str(i)})
        assert not pull.done() and hold.held_count == 1
        hold.check_hold_request()  # the sweep finds nothing to wake either
        assert not pull.done() and hold.held_count == 1
        await env.send("HS", b"yes", tags="A", props={"n": "9"})
        resp = await asyncio.wait_for(pull, 20)
        assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
        assert [r.body for r in decode_records(resp.body_bytes())] == [b"yes"]
        assert hold.held_count == 0
