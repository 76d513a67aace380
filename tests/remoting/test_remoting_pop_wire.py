"""The POP wire layer without a broker: the ack handle (Java ``ExtraInfoUtil``), offset infos,
BatchAck bodies, and the reply parsers' statuses (Java ``MQClientAPIImpl.processPopResponse``)."""

import json

import pytest

from rmq.errors import RemotingCommandError, TopicNotExistError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import pop as wire


def reply(code, ext=None, body=None):
    req = RemotingCommand.request(RequestCode.POP_MESSAGE, {})
    return req.response(code, None, ext or {}, body)


@pytest.mark.parametrize(
    "bad, word",
    [
        ("", "0 fields"),
        ("1 2 3 4 0 b", "6 fields"),
        ("x 2 3 4 0 b 0 0", "ckQueueOffset"),
        ("1 2 3 4 7 b 0 0", "retry mark"),
        ("1 2 3 99999999999 0 b 0 0", "reviveQid"),
        ("1 2 3 4 0 b 0 1_0", "queueOffset"),
        ("1 2 3 4 0 b ٣ 0", "queueId"),  # a non-ASCII digit: Java's parseInt refuses it too
        ("1 2 3 4 0 b 0 99999999999999999999", "queueOffset"),
    ],
)
def test_extra_info_refuses_what_java_refuses(bad, word):
    with pytest.raises(ValueError, match=word):
        wire.ExtraInfo.parse(bad)


def test_extra_info_round_trip_and_retry_marks():
    for topic, mark, real in [("T", "0", "T"), ("%RETRY%G_T", "1", "%RETRY%G_T"), ("%RETRY%G+T", "2", "%RETRY%G+T")]:
        info = wire.ExtraInfo.build(5, 1000, 30000, 3, topic, "b", 1, 9)
        assert info.retry == mark
        assert wire.ExtraInfo.parse(str(info)) == info
        # the real topic from the topic popped (Java getRealTopic)
        assert info.real_topic("T", "G") == real
    assert wire.ExtraInfo.parse("5 1000 30000 999 0 b 1 9").is_order
    # Java's split drops trailing empty fields
    assert wire.ExtraInfo.parse("5 1000 30000 3 0 b 1 9  ").queue_offset == 9
    with pytest.raises(ValueError):
        wire.real_topic("T", "G", "3")


def test_offset_infos():
    s = wire.build_msg_offset_info([("T", 0, [1, 2]), ("%RETRY%G_T", 0, [7])])
    assert s == "0 0 1,2;1 0 7"
    assert wire.parse_offset_info(s) == {"0@0": [1, 2], "1@0": [7]}
    assert wire.parse_offset_info(None) == {}
    for bad in ("0 0", "0 0 1;0 0 2", "0 0 x"):
        with pytest.raises(ValueError):
            wire.parse_offset_info(bad)


def test_batch_ack_bodies_are_bounded():
    acks = [{"c": "G", "t": "T", "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 1, "b": "AQ=="}] * 3
    body = json.dumps({"acks": acks}).encode()
    assert len(wire.decode_batch_ack_body(body)[1]) == 3
    with pytest.raises(ValueError, match="at most 2"):
        wire.decode_batch_ack_body(body, max_acks=2)
    wide = json.dumps({"acks": [dict(acks[0], b="A" * 20000)]}).encode()
    with pytest.raises(ValueError, match="wider"):
        wire.decode_batch_ack_body(wide)
    for bad in (b"[]", b"{", json.dumps({"acks": [dict(acks[0], q="x")]}).encode(), json.dumps({"acks": 5}).encode()):
        with pytest.raises(ValueError):
            wire.decode_batch_ack_body(bad)


def test_parse_pop_statuses():
    assert wire.parse_pop(reply(ResponseCode.POLLING_FULL)).status is wire.PopStatus.POLLING_FULL
    assert wire.parse_pop(reply(ResponseCode.POLLING_TIMEOUT)).status is wire.PopStatus.POLLING_NOT_FOUND
    assert wire.parse_pop(reply(ResponseCode.NO_MESSAGE)).status is wire.PopStatus.NO_NEW_MSG
    with pytest.raises(TopicNotExistError):
        wire.parse_pop(reply(ResponseCode.TOPIC_NOT_EXIST))
    ext = {
        "popTime": "1000",
        "invisibleTime": "30000",
        "reviveQid": "2",
        "restNum": "4",
        "startOffsetInfo": "0 1 10",
        "msgOffsetInfo": "0 1 10,12",
    }
    r = wire.parse_pop(reply(ResponseCode.SUCCESS, ext, b"records"))
    assert (r.status, r.rest_num, r.body) == (wire.PopStatus.FOUND, 4, b"records")
    # the handle Java's client builds from startOffsetInfo
    assert r.handle("T", 1, 12, "b") == "10 1000 30000 2 0 b 1 12"
    assert r.handle("T", 1, 12, "b", pop_ck="given") == "given"
    with pytest.raises(RemotingCommandError, match="malformed"):
        wire.parse_pop(reply(ResponseCode.SUCCESS, dict(ext, msgOffsetInfo="0 1"), b"x"))


def test_change_invisible_time_gives_the_new_handle():
    old = "10 1000 30000 2 1 b 1 12"
    cmd = wire.change_invisible_time("G", "T", old, 5000)
    assert cmd.ext_fields["topic"] == "%RETRY%G_T" and cmd.ext_fields["offset"] == "12"
    resp = cmd.response(ResponseCode.SUCCESS, None, {"popTime": "2000", "invisibleTime": "5000", "reviveQid": "4"})
    assert wire.parse_change_invisible_time(resp, old) == "12 2000 5000 4 1 b 1 12"
    with pytest.raises(ValueError, match="queue offset"):
        wire.ack_message("G", "T", "10 1000 30000 2 1 b 1")
