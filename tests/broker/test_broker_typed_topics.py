"""Typed topics (Java 5 topic attributes, ``message.type``) over TCP: UPDATE_AND_CREATE_TOPIC's
``attributes`` (Java's syntax and alteration rules, refusals), GET_ALL_TOPIC_CONFIG, the
persisted table across a restart, the SEND type check on the fast (Cython) and Python paths
alike, and the subscription group's ``consumeMessageOrderly``."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq._testing import broker_env, run_broker
from rmq.common.message import java_properties
from rmq.common.topic_attributes import TopicMessageType, check_message_type, message_type_of_properties
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import RemotingClient

FIFO_REFUSED = "TopicMessageType validate failed, the expected type is FIFO, but actual type is NORMAL"


async def topic_config(env, topic: str) -> dict:
    resp = await env.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert resp.code == ResponseCode.SUCCESS
    return json.loads(resp.body_bytes())["topicConfigTable"][topic]


async def test_attributes_are_created_altered_and_returned(env):
    await env.create_topic("TypedT", attributes="+message.type=FIFO")
    tc = await topic_config(env, "TypedT")
    assert tc["attributes"] == {"message.type": "FIFO"}
    assert env.broker.topic_config_manager.select_topic_config("TypedT").message_type.value == "FIFO"
    # a 4.x frame (no attributes field) updates the queues and keeps the attributes (Java 5:
    # no change asked is no change)
    await env.create_topic("TypedT", queues=8)
    tc = await topic_config(env, "TypedT")
    assert tc["attributes"] == {"message.type": "FIFO"} and tc["writeQueueNums"] == 8
    await env.create_topic("TypedT", attributes="+message.type=DELAY")
    assert (await topic_config(env, "TypedT"))["attributes"] == {"message.type": "DELAY"}
    await env.create_topic("TypedT", attributes="-message.type")
    tc = await topic_config(env, "TypedT")
    assert "attributes" not in tc  # untyped again: the 4.9.8 shape
    assert env.broker.topic_config_manager.select_topic_config("TypedT").message_type.value == "NORMAL"
    # an untyped topic created by a 4.x frame has no attributes at all
    await env.create_topic("PlainT")
    assert "attributes" not in await topic_config(env, "PlainT")


@pytest.mark.parametrize(
    ("create_first", "attributes", "code", "remark"),
    [
        (False, "+foo=1", ResponseCode.SYSTEM_ERROR, "unsupported key: foo"),
        (False, "+message.type=BAD", ResponseCode.SYSTEM_ERROR, "value is not in set"),
        (False, "-message.type", ResponseCode.SYSTEM_ERROR, "only add attribute is supported while creating topic"),
        (False, "message.type=FIFO", ResponseCode.SYSTEM_ERROR, "add/alter attribute format is wrong"),
        (False, "+message.type=FIFO,+message.type=NORMAL", ResponseCode.SYSTEM_ERROR, "key duplication"),
        (False, "+message.type=MIXED", ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
        (False, "+queue.type=BatchCQ", ResponseCode.SYSTEM_ERROR, "not supported by rmq"),
        (True, "+queue.type=SimpleCQ", ResponseCode.SYSTEM_ERROR, "attempt to update an unchangeable attribute"),
        (True, "-reserve.time", ResponseCode.SYSTEM_ERROR, "attempt to delete a nonexistent key: reserve.time"),
    ],
)
async def test_bad_attributes_are_refused_with_javas_words(env, create_first, attributes, code, remark):
    if create_first:
        await env.create_topic("BadT", attributes="+message.type=NORMAL")
    resp = await env.create_topic("BadT", expect=code, attributes=attributes)
    assert remark in resp.remark
    tc = env.broker.topic_config_manager.select_topic_config("BadT")
    if create_first:  # nothing changed
        assert tc.attributes == {"message.type": "NORMAL"}
    else:
        assert tc is None


async def test_mixed_is_allowed_when_enabled(tmp_path):
    async with broker_env(tmp_path / "s", enable_mixed_message_type=True) as env:
        await env.create_topic("MixedT", attributes="+message.type=MIXED")
        for props in ({}, {"__SHARDINGKEY": "g"}, {"DELAY": "2"}):
            resp = await env.send("MixedT", b"x", 0, props=props)
            assert resp.code == ResponseCode.SUCCESS, resp.remark


# Properties and the verdict for a topic of each type: every case goes to a broker with the
# fast path and one without, twice (the first SEND of a queue always takes the Python path).
CASES = [
    # (declared type, properties, accepted)
    ("FIFO", {"__SHARDINGKEY": "g1"}, True),
    ("FIFO", {}, False),
    ("FIFO", {"__SHARDINGKEY": ""}, False),  # an empty value is no property (Java 5)
    ("FIFO", {"K": "__SHARDINGKEY\x01g"}, False),  # (the name inside a value)
    ("FIFO", {"__SHARDINGKEY": "g", "TIMER_DELAY_SEC": "5"}, False),  # DELAY wins over FIFO
    ("FIFO", {"TRANSFER_FLAG": "true"}, True),  # not checked, as Java's proxy
    ("NORMAL", {}, True),
    ("NORMAL", {"__SHARDINGKEY": "g"}, False),
    ("NORMAL", {"TRAN_MSG": "false"}, True),
    ("DELAY", {"TIMER_DELIVER_MS": "1"}, True),
    ("DELAY", {"__STARTDELIVERTIME": "1"}, True),
    ("DELAY", {}, False),
    ("TRANSACTION", {}, False),
    ("UNSPECIFIED", {}, False),
]


async def test_send_type_check_on_both_paths_alike(tmp_path):
    async with (
        broker_env(tmp_path / "fast", send_fast_path=True) as fast,
        broker_env(tmp_path / "slow", send_fast_path=False) as slow,
    ):
        for env in (fast, slow):
            for t in ("FIFO", "NORMAL", "DELAY", "TRANSACTION", "UNSPECIFIED"):
                await env.create_topic(f"T_{t}", queues=1, attributes=f"+message.type={t}")
            await env.create_topic("T_untyped", queues=1)
        taken0 = fast.broker.send_processor.fast.taken
        for declared, props, accepted in CASES:
            answers = []
            for env in (fast, slow):
                for _ in range(2):
                    resp = await env.send(f"T_{declared}", b"x", 0, props=props)
                    answers.append((resp.code, resp.remark))
            want = (ResponseCode.SUCCESS, None) if accepted else (ResponseCode.MESSAGE_ILLEGAL,)
            assert all(a[: len(want)] == want for a in answers), (declared, props, answers)
            assert len(set(answers)) == 1, (declared, props, answers)
            if not accepted:
                assert answers[0][1].startswith(f"TopicMessageType validate failed, the expected type is {declared}")
        # the refusal names both types, as Java's DefaultTopicMessageTypeValidator
        resp = await fast.send("T_FIFO", b"x", 0)
        assert (resp.code, resp.remark) == (ResponseCode.MESSAGE_ILLEGAL, FIFO_REFUSED)
        # an untyped topic takes every type (4.x behaviour)
        for env in (fast, slow):
            for props in ({}, {"__SHARDINGKEY": "g"}, {"DELAY": "1"}):
                assert (await env.send("T_untyped", b"x", 0, props=props)).code == ResponseCode.SUCCESS
        # the fast path took the typed sends it could check itself (plain FIFO/NORMAL ones)
        assert fast.broker.send_processor.fast.taken - taken0 >= 5
        assert slow.broker.send_processor.fast is None


async def test_send_type_check_off(tmp_path):
    for fast_path in (True, False):
        async with broker_env(
            tmp_path / str(fast_path), send_fast_path=fast_path, enable_topic_message_type_check=False
        ) as env:
            await env.create_topic("T_FIFO", queues=1, attributes="+message.type=FIFO")
            for _ in range(2):
                resp = await env.send("T_FIFO", b"x", 0)
                assert resp.code == ResponseCode.SUCCESS, resp.remark


async def test_attributes_survive_a_restart(tmp_path):
    store = tmp_path / "store"
    async with run_broker(store) as broker:
        async with RemotingClient() as rc:
            ext = {
                "topic": "KeptT",
                "defaultTopic": "TBW102",
                "readQueueNums": "2",
                "writeQueueNums": "2",
                "perm": "6",
                "topicFilterType": "SINGLE_TAG",
                "order": "false",
                "attributes": "+message.type=TRANSACTION",
            }
            resp = await rc.invoke(
                broker.broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        path = broker.topic_config_manager.path
    # the table on disk: Java 5's TopicConfig shape, attributes included
    table = msgpack.unpackb(Path(path).read_bytes(), raw=False)["topicConfigTable"]
    assert table["KeptT"]["attributes"] == {"message.type": "TRANSACTION"}
    assert table["KeptT"]["readQueueNums"] == 2
    async with run_broker(store) as broker:
        tc = broker.topic_config_manager.select_topic_config("KeptT")
        assert tc.attributes == {"message.type": "TRANSACTION"} and tc.type_code == 4
        assert tc.message_type.value == "TRANSACTION"


async def test_consume_message_orderly_on_the_group(env):
    body = json.dumps({"groupName": "OrderlyG", "consumeMessageOrderly": True}).encode()
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await env.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    table = json.loads(resp.body_bytes())["subscriptionGroupTable"]
    assert table["OrderlyG"]["consumeMessageOrderly"] is True
    # a 4.x body (no such field) leaves it false, and the group reads in Java 4.9.8's shape
    # (the field left out, which Java 5 reads as false)
    body = json.dumps({"groupName": "PlainG"}).encode()
    assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)).code == ResponseCode.SUCCESS
    resp = await env.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert "consumeMessageOrderly" not in json.loads(resp.body_bytes())["subscriptionGroupTable"]["PlainG"]


async def test_get_topic_config_answers_one_topic_with_its_attributes(env):
    await env.create_topic("OneT", queues=3, attributes="+message.type=DELAY")
    resp = await env.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "OneT", "lo": "false"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    tc = json.loads(resp.body_bytes())
    assert tc["topicName"] == "OneT" and tc["readQueueNums"] == 3
    assert tc["attributes"] == {"message.type": "DELAY"}
    resp = await env.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchT"})
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: NoSuchT")


async def test_a_java5_mqadmin_frame_is_taken(env):
    """Java 5.3.3 mqadmin updateTopic -a: CreateTopicRequestHeader with attributes and force,
    every value a string, as its RocketMQSerializable writes them."""
    ext = {
        "topic": "J5T",
        "defaultTopic": "TBW102",
        "readQueueNums": "8",
        "writeQueueNums": "8",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
        "attributes": "+message.type=FIFO",
        "force": "false",
    }
    resp = await env.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (await topic_config(env, "J5T"))["attributes"] == {"message.type": "FIFO"}


@pytest.fixture
async def typed_pair(tmp_path):
    async with (
        broker_env(tmp_path / "fast", send_fast_path=True) as fast,
        broker_env(tmp_path / "slow", send_fast_path=False) as slow,
    ):
        for env in (fast, slow):
            for t in ("FIFO", "NORMAL", "DELAY"):
                await env.create_topic(f"G_{t}", queues=1, attributes=f"+message.type={t}")
                await env.send(f"G_{t}", b"warm", 0, props={"TRANSFER_FLAG": "1"})  # the queue's first
        yield fast, slow


_names = st.sampled_from(["__SHARDINGKEY", "TIMER_DELAY_MS", "__STARTDELIVERTIME", "TRANSFER_FLAG", "X", ""])
_values = st.sampled_from(["", "g", "true", "__SHARDINGKEY"])
_items = st.lists(
    st.one_of(st.tuples(_names, _values).map(lambda kv: f"{kv[0]}\x01{kv[1]}"), st.sampled_from(["\x01", "x"])),
    max_size=5,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(items=_items, topic=st.sampled_from(["G_FIFO", "G_NORMAL", "G_DELAY"]))
async def test_generated_properties_get_the_same_verdict_on_both_paths(typed_pair, items, topic):
    """Property texts built from the names the check reads (empty names and values, a name
    inside a value, repeats): the C scan and the Python reading agree, and both agree with
    rmq.common.topic_attributes."""
    props = "\x02".join(items)
    actual = message_type_of_properties(props)
    accepted = actual is None or check_message_type(TopicMessageType(topic[2:]), actual) is None
    codes = []
    fast = typed_pair[0].broker.send_processor.fast
    taken = fast.taken
    for env in typed_pair:
        resp = await env.send(topic, b"x", 0, raw_properties=props)
        codes.append(resp.code)
    # a timer property with a value (none generated is a number) is refused by the timer check
    # (Java HookUtils: WHEEL_TIMER_MSG_ILLEGAL), whatever the topic's type
    timer_illegal = any(java_properties(props).get(k) for k in ("TIMER_DELAY_MS", "__STARTDELIVERTIME"))
    want = ResponseCode.SUCCESS if accepted and not timer_illegal else ResponseCode.MESSAGE_ILLEGAL
    assert codes == [want, want], (props, topic, codes)
    # the C scan decided: a refused message was declined there, a plain accepted one stored
    # there (timer properties may go to the Python path for their own handling)
    if not accepted or timer_illegal:
        assert fast.taken == taken
    elif "TIMER" not in props and "DELIVER" not in props:
        assert fast.taken == taken + 1, props


async def test_the_check_switch_is_live(tmp_path):
    """UPDATE_BROKER_CONFIG enableTopicMessageTypeCheck=false takes effect at the next SEND on
    the fast path too (it reads the switch per typed SEND)."""
    async with broker_env(tmp_path / "s") as env:
        await env.create_topic("LiveT", queues=1, attributes="+message.type=FIFO")
        await env.send("LiveT", b"warm", 0, props={"__SHARDINGKEY": "g"})
        assert (await env.send("LiveT", b"x", 0)).code == ResponseCode.MESSAGE_ILLEGAL
        resp = await env.call(RequestCode.UPDATE_BROKER_CONFIG, None, b"enableTopicMessageTypeCheck=false\n")
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        taken = env.broker.send_processor.fast.taken
        assert (await env.send("LiveT", b"x", 0)).code == ResponseCode.SUCCESS
        assert env.broker.send_processor.fast.taken == taken + 1
