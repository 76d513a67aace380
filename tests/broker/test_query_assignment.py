"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401) over TCP, with the bodies a Java 5
push consumer and ``mqadmin setConsumeMode`` send (fastjson: keys sorted, enums by name)."""

import json

import pytest

from rmq._testing import run_broker, run_namesrv
from rmq._testing.env import BrokerEnv
from rmq.broker.assignment import allocate_for_pop
from rmq.common.allocate import allocate_averagely
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests.assignment import parse_query_assignment, query_assignment
from rmq.remoting.client import RemotingClient
from rmq.types import MessageQueue

TOPIC, GROUP = "QaTopic", "QaGroup"


def heartbeat(client_id, group=GROUP, topic=TOPIC):
    body = {
        "clientID": client_id,
        "consumerDataSet": [
            {
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "consumeType": "CONSUME_PASSIVELY",
                "groupName": group,
                "messageModel": "CLUSTERING",
                "subscriptionDataSet": [{"subString": "*", "subVersion": 1, "topic": topic}],
                "unitMode": False,
            }
        ],
        "producerDataSet": [],
    }
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())


def java_frame(code, body_text):
    return RemotingCommand.request(code, {}, body_text.encode())


def set_mode_body(mode, num=0, topic=TOPIC, group=GROUP):
    # exactly what fastjson writes for SetMessageRequestModeRequestBody
    return f'{{"consumerGroup":"{group}","mode":"{mode}","popShareQueueNum":{num},"topic":"{topic}"}}'


def query_body(client_id, strategy="AVG", model="CLUSTERING", topic=TOPIC, group=GROUP):
    # what fastjson writes for QueryAssignmentRequestBody
    return (
        f'{{"clientId":"{client_id}","consumerGroup":"{group}","messageModel":"{model}",'
        f'"strategyName":"{strategy}","topic":"{topic}"}}'
    )


async def create_group(env, group=GROUP):
    body = json.dumps({"groupName": group}).encode()
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


@pytest.fixture
async def two_brokers(tmp_path):
    """broker-a and broker-b behind one name server, TOPIC with 2 queues on each, GROUP on a."""
    async with run_namesrv() as ns, run_broker(tmp_path / "a", namesrv=ns, broker_name="broker-a") as a:
        async with run_broker(tmp_path / "b", namesrv=ns, broker_name="broker-b") as b:
            c1, c2 = RemotingClient(), RemotingClient()
            try:
                ea, eb = BrokerEnv(ns, a, c1), BrokerEnv(ns, b, c1)
                for e in (ea, eb):
                    await e.create_topic(TOPIC, 2)
                await create_group(ea)
                # two consumers of GROUP, each on its own connection to broker-a
                for c, cid in ((c1, "10.0.0.1@1"), (c2, "10.0.0.2@2")):
                    resp = await c.invoke(ea.addr, heartbeat(cid), timeout=5)
                    assert resp.code == ResponseCode.SUCCESS
                yield ea, eb, c2
            finally:
                await c1.close()
                await c2.close()


async def test_pop_mode_assigns_every_broker_as_queue_minus_one(two_brokers):
    ea, _eb, _ = two_brokers
    resp = await ea.call(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP").encode())
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    resp = await ea.client.invoke(
        ea.addr, java_frame(RequestCode.QUERY_ASSIGNMENT, query_body("10.0.0.1@1")), timeout=10
    )
    assert resp.code == ResponseCode.SUCCESS
    # Java's answer, byte for byte (popShareQueueNum 0: every client pops every broker)
    assert resp.body_bytes() == (
        b'{"messageQueueAssignments":['
        b'{"messageQueue":{"brokerName":"broker-a","queueId":-1,"topic":"QaTopic"},"mode":"POP"},'
        b'{"messageQueue":{"brokerName":"broker-b","queueId":-1,"topic":"QaTopic"},"mode":"POP"}]}'
    )


async def test_pull_mode_splits_both_brokers_queues_between_the_clients(two_brokers):
    ea, _eb, c2 = two_brokers
    # no mode set: the broker's default, PULL (defaultMessageRequestMode)
    got1 = parse_query_assignment(await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1"), 10))
    got2 = parse_query_assignment(await c2.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.2@2"), 10))
    assert got1 is not None and got2 is not None
    # AVG: contiguous halves of the sorted queues, which span both brokers
    assert got1 == [(MessageQueue(TOPIC, "broker-a", 0), "PULL"), (MessageQueue(TOPIC, "broker-a", 1), "PULL")]
    assert got2 == [(MessageQueue(TOPIC, "broker-b", 0), "PULL"), (MessageQueue(TOPIC, "broker-b", 1), "PULL")]
    # AVG_BY_CIRCLE takes them in turn
    got = parse_query_assignment(
        await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1", "AVG_BY_CIRCLE"), 10)
    )
    assert [mq for mq, _ in got or []] == [MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-b", 0)]
    # BROADCASTING: every queue
    got = parse_query_assignment(
        await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "x@1", message_model="BROADCASTING"), 10)
    )
    assert len(got or []) == 4
    # an unknown strategy, an unknown topic, a group with no consumers: Java's null set
    # (the key left out: the client keeps what it has)
    for cmd in (
        query_assignment(TOPIC, GROUP, "10.0.0.1@1", "CONSISTENT_HASH"),
        query_assignment("NoSuchTopic", GROUP, "10.0.0.1@1"),
        query_assignment(TOPIC, "NoMembers", "10.0.0.1@1"),
    ):
        resp = await ea.client.invoke(ea.addr, cmd, 10)
        assert resp.code == ResponseCode.SUCCESS and resp.body_bytes() == b"{}", resp.body_bytes()


async def test_pop_share_queue_num_shares_the_next_clients_queues(two_brokers):
    ea, _eb, _ = two_brokers
    # popShareQueueNum 1 with 2 clients: >= cids - 1, so still "every queue" as -1
    assert (await ea.call(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP", 1).encode())).code == 0
    got = parse_query_assignment(await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1"), 10))
    assert got == [(MessageQueue(TOPIC, "broker-a", -1), "POP"), (MessageQueue(TOPIC, "broker-b", -1), "POP")]


async def test_bad_requests_get_clear_errors(two_brokers):
    ea, _eb, _ = two_brokers
    cases = [
        (RequestCode.SET_MESSAGE_REQUEST_MODE, "not json", ResponseCode.SYSTEM_ERROR, "not valid JSON"),
        (RequestCode.SET_MESSAGE_REQUEST_MODE, set_mode_body("PUSH"), ResponseCode.SYSTEM_ERROR, "mode must be"),
        (RequestCode.SET_MESSAGE_REQUEST_MODE, '{"topic":"QaTopic"}', ResponseCode.SYSTEM_ERROR, "consumerGroup"),
        (
            RequestCode.SET_MESSAGE_REQUEST_MODE,
            set_mode_body("POP", "1.5"),
            ResponseCode.SYSTEM_ERROR,
            "popShareQueueNum",
        ),
        (
            RequestCode.SET_MESSAGE_REQUEST_MODE,
            set_mode_body("POP", topic="%RETRY%QaGroup"),
            ResponseCode.NO_PERMISSION,
            "retry topic is not allowed",
        ),
        (
            RequestCode.SET_MESSAGE_REQUEST_MODE,
            set_mode_body("POP", topic="Nope"),
            ResponseCode.TOPIC_NOT_EXIST,
            "topic[Nope] not exist",
        ),
        (RequestCode.QUERY_ASSIGNMENT, "", ResponseCode.SYSTEM_ERROR, "body is empty"),
        (RequestCode.QUERY_ASSIGNMENT, '{"topic":"QaTopic"}', ResponseCode.SYSTEM_ERROR, "consumerGroup is missing"),
        (
            RequestCode.QUERY_ASSIGNMENT,
            query_body("c@1", model="SOMETIMES"),
            ResponseCode.SYSTEM_ERROR,
            "messageModel must be",
        ),
    ]
    for code, body, want, remark in cases:
        resp = await ea.call(code, {}, body.encode())
        assert resp.code == want and remark in (resp.remark or ""), (body, resp.code, resp.remark)
    # nothing of it was stored: the default mode still answers
    got = parse_query_assignment(await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1"), 10))
    assert got is not None and {m for _, m in got} == {"PULL"}


async def test_mode_table_is_bounded_and_needs_the_group(tmp_path):
    kw = {"max_message_request_modes": 1, "auto_create_subscription_group": False}
    async with run_namesrv() as ns, run_broker(tmp_path, namesrv=ns, **kw) as b:
        client = RemotingClient()
        try:
            env = BrokerEnv(ns, b, client)
            await env.create_topic(TOPIC, 1)
            await create_group(env)
            # (as Java: a group the broker does not have, with autoCreateSubscriptionGroup off)
            resp = await env.call(
                RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP", group="Other").encode()
            )
            assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, resp.remark
            await create_group(env, "Other")
            assert (await env.call(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP").encode())).code == 0
            # the same key again is an update, not a new entry
            assert (await env.call(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("PULL").encode())).code == 0
            resp = await env.call(
                RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP", group="Other").encode()
            )
            assert resp.code == ResponseCode.SYSTEM_ERROR and "maxMessageRequestModes" in (resp.remark or "")
        finally:
            await client.close()


async def test_mode_survives_restart_in_javas_file(tmp_path):
    store = tmp_path / "store"
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            async with run_broker(store, namesrv=ns) as b:
                env = BrokerEnv(ns, b, client)
                await env.create_topic(TOPIC, 2)
                await create_group(env)
                resp = await env.call(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, set_mode_body("POP", 3).encode())
                assert resp.code == ResponseCode.SUCCESS
            # shutdown wrote Java's file, in Java's shape
            saved = json.loads((store / "config" / "messageRequestMode.json").read_text())
            assert saved == {
                "messageRequestModeMap": {
                    TOPIC: {GROUP: {"consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 3, "topic": TOPIC}}
                }
            }
            async with run_broker(store, namesrv=ns) as b:
                env = BrokerEnv(ns, b, client)
                assert (await client.invoke(env.addr, heartbeat("c@1"), 5)).code == ResponseCode.SUCCESS
                got = parse_query_assignment(await client.invoke(env.addr, query_assignment(TOPIC, GROUP, "c@1"), 10))
                assert got == [(MessageQueue(TOPIC, "broker-a", -1), "POP")]
        finally:
            await client.close()


def test_allocate_for_pop_is_javas_allocate4pop():
    mqs = [MessageQueue("T", "b", i) for i in range(6)]
    cids = ["c0", "c1", "c2", "c3"]
    # 0 or >= len(cids) - 1: every broker as -1
    for n in (0, -1, 3, 9):
        assert allocate_for_pop(allocate_averagely, "G", "c1", mqs, cids, n) == [MessageQueue("T", "b", -1)] * 6
    # 1: c1's own share (AVG: 2 queues) then c2's
    own = allocate_averagely("G", "c1", mqs, cids)
    nxt = allocate_averagely("G", "c2", mqs, cids)
    assert allocate_for_pop(allocate_averagely, "G", "c1", mqs, cids, 1) == own + nxt
    # 2 for the last client wraps around to c0 and c1
    got = allocate_for_pop(allocate_averagely, "G", "c3", mqs, cids, 2)
    assert got == [mq for c in ("c3", "c0", "c1") for mq in allocate_averagely("G", c, mqs, cids)]
    # more clients than queues: client i gets queue i % len(queues)
    few = mqs[:2]
    assert allocate_for_pop(allocate_averagely, "G", "c2", few, cids, 1) == [few[0]]
    assert allocate_for_pop(allocate_averagely, "G", "c3", few, cids, 1) == [few[1]]
    assert allocate_for_pop(allocate_averagely, "G", "zz", few, cids, 1) == []


async def test_default_mode_changes_live_and_bad_values_are_refused(two_brokers):
    ea, _eb, _ = two_brokers
    resp = await ea.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"defaultMessageRequestMode=SOMETIMES\n")
    assert resp.code != ResponseCode.SUCCESS and "defaultMessageRequestMode" in (resp.remark or ""), resp.remark
    resp = await ea.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"defaultMessageRequestMode=POP\n")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    got = parse_query_assignment(await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1"), 10))
    # defaultPopShareQueueNum -1: every broker as -1
    assert got == [(MessageQueue(TOPIC, "broker-a", -1), "POP"), (MessageQueue(TOPIC, "broker-b", -1), "POP")]
    resp = await ea.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"serverLoadBalancerEnable=false\n")
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await ea.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"defaultMessageRequestMode=PULL\n")
    got = parse_query_assignment(await ea.client.invoke(ea.addr, query_assignment(TOPIC, GROUP, "10.0.0.1@1"), 10))
    assert got is not None and len(got) == 4 and {m for _, m in got} == {"PULL"}  # no split: every queue
