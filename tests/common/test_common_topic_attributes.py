"""rmq.common.topic_attributes against Java 5.3.3's AttributeParser, AttributeUtil and
TopicMessageType (the cases of their unit tests, in our words)."""

import pytest

from rmq.common.topic_attributes import (
    TopicAttributeError,
    TopicMessageType,
    alter_attributes,
    attributes_to_string,
    check_message_type,
    message_type_of_attributes,
    message_type_of_properties,
    parse_attributes,
)


def test_parse_keeps_signs_and_refuses_javas_bad_forms():
    assert parse_attributes("+message.type=FIFO,-reserve.time") == {"+message.type": "FIFO", "-reserve.time": ""}
    assert parse_attributes("") == {} and parse_attributes(None) == {}
    assert parse_attributes("+a=1,") == {"+a": "1"}  # (Java's split drops a trailing empty item)
    for text, words in [
        ("a=1", "add/alter attribute format is wrong"),
        ("a", "delete attribute format is wrong"),
        ("+a=1,+a=2", "key duplication"),
        ("+a=", "add/alter attribute format is wrong"),
    ]:
        with pytest.raises(TopicAttributeError, match=words):
            parse_attributes(text)


def test_alter_follows_attribute_util():
    assert alter_attributes(True, {}, {"+message.type": "FIFO"}) == {"message.type": "FIFO"}
    cur = {"message.type": "FIFO"}
    assert alter_attributes(False, cur, {"+message.type": "NORMAL"}) == {"message.type": "NORMAL"}
    assert alter_attributes(False, cur, {"-message.type": ""}) == {}
    assert alter_attributes(False, cur, {}) == cur
    assert alter_attributes(True, {}, {"+queue.type": "SimpleCQ"}) == {"queue.type": "SimpleCQ"}
    for create, current, new, words in [
        (True, {}, {"-message.type": ""}, "only add attribute is supported while creating topic"),
        (False, {}, {"-message.type": ""}, "attempt to delete a nonexistent key"),
        (False, {}, {"+nope": "1"}, "unsupported key: nope"),
        (False, {}, {"+message.type": "fifo"}, "value is not in set"),
        (False, {"queue.type": "SimpleCQ"}, {"+queue.type": "SimpleCQ"}, "unchangeable attribute"),
        (True, {}, {"+reserve.time": "x"}, "not a number"),
        (True, {}, {"+reserve.time": "-2"}, "not in range"),
        (True, {}, {"+cleanup.policy": "COMPACTION"}, "not supported by rmq"),
        (True, {}, {"+a-b": "1"}, "kv string format wrong"),
        (True, {}, {"+a": "1", "-a": ""}, "alter duplication key"),
    ]:
        with pytest.raises(TopicAttributeError, match=words):
            alter_attributes(create, current, new)


def test_to_string():
    assert attributes_to_string({"+a": "1", "-b": ""}) == "+a=1,-b"


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, TopicMessageType.NORMAL),
        ({"TRAN_MSG": "true"}, TopicMessageType.TRANSACTION),
        ({"TRAN_MSG": "false"}, TopicMessageType.NORMAL),
        ({"TRAN_MSG": "true", "DELAY": "1", "__SHARDINGKEY": "g"}, TopicMessageType.TRANSACTION),
        ({"DELAY": "1", "__SHARDINGKEY": "g"}, TopicMessageType.DELAY),
        ({"TIMER_DELIVER_MS": "1"}, TopicMessageType.DELAY),
        ({"TIMER_DELAY_SEC": "1"}, TopicMessageType.DELAY),
        ({"TIMER_DELAY_MS": "1"}, TopicMessageType.DELAY),
        ({"__STARTDELIVERTIME": "1"}, TopicMessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, TopicMessageType.FIFO),
        ({"TRANSFER_FLAG": "true", "__SHARDINGKEY": "g"}, None),
        ("__SHARDINGKEY\x01g\x02", TopicMessageType.FIFO),
        ("__SHARDINGKEY\x01\x02", TopicMessageType.NORMAL),  # empty value: no property (Java 5)
        ("\x01x\x02K\x01__SHARDINGKEY\x01g", TopicMessageType.NORMAL),
        (None, TopicMessageType.NORMAL),
    ],
)
def test_message_type_of_properties(props, expected):
    assert message_type_of_properties(props) is expected


def test_check_and_declared_types():
    t = TopicMessageType
    assert check_message_type(t.FIFO, t.FIFO) is None
    assert check_message_type(t.MIXED, t.DELAY) is None
    assert check_message_type(t.NORMAL, t.FIFO) == (
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO"
    )
    assert check_message_type(t.MIXED, t.UNSPECIFIED) is not None
    assert message_type_of_attributes({"message.type": "DELAY"}) is t.DELAY
    assert message_type_of_attributes({}) is None and message_type_of_attributes(None) is None


def test_first_batch_item_properties():
    from rmq.common.message import encode_batch
    from rmq.common.topic_attributes import first_batch_item_properties

    body = encode_batch([(0, b"abc", "__SHARDINGKEY\x01g\x02"), (0, b"d", "X\x01y")])
    assert first_batch_item_properties(body) == "__SHARDINGKEY\x01g\x02"
    assert first_batch_item_properties(body[:10]) is None
    assert first_batch_item_properties(body[:24]) is None  # (cut inside the properties)
    assert first_batch_item_properties(b"") is None
