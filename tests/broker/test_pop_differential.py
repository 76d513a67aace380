"""Differential test of POP ack handles and frames against Java 5.3.3's shapes.

The reference side transliterates Java 5.3.3 line by line (``ExtraInfoUtil.buildExtraInfo``,
``buildStartOffsetInfo``/``buildMsgOffsetInfo``, ``MQClientAPIImpl.processPopResponse``'s handle
build, ``RemotingCommand.makeCustomHeaderToNet``'s extFields of the request headers, fastjson's
``BatchAckMessageRequestBody``) and sends raw JSON frames over a plain socket, so nothing of our
codec is on the request path. Our parser and broker must accept them and produce the same."""

import asyncio
import base64
import json
import struct
import time

import pytest

from rmq.client._codec import decode_messages
from rmq.common.message import MessageConst
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers.pop import PopMessageRequestHeader
from rmq.protocol.requests import pop as wire

GROUP = "DiffG"
SEP = " "  # MessageConst.KEY_SEPARATOR


# ---------------------------------------------------------------------------- Java, transliterated


def java_get_retry(topic):
    # ExtraInfoUtil.getRetry(String topic)
    if topic.startswith("%RETRY%") and "+" in topic:  # KeyBuilder.isPopRetryTopicV2
        return "2"
    if topic.startswith("%RETRY%"):
        return "1"
    return "0"


def java_build_extra_info(
    ck_queue_offset, pop_time, invisible_time, revive_qid, topic, broker_name, queue_id, msg_queue_offset=None
):
    t = java_get_retry(topic)
    s = (
        f"{ck_queue_offset}{SEP}{pop_time}{SEP}{invisible_time}{SEP}{revive_qid}{SEP}{t}"
        f"{SEP}{broker_name}{SEP}{queue_id}"
    )
    if msg_queue_offset is not None:
        s += f"{SEP}{msg_queue_offset}"
    return s


def java_parse_start_offset_info(s):
    # ExtraInfoUtil.parseStartOffsetInfo
    out = {}
    for one in s.split(";") if ";" in s else [s]:
        a = one.split(SEP)
        assert len(a) == 3
        out[a[0] + "@" + a[1]] = int(a[2])
    return out


def java_handle(ext_fields, msg, broker_name):
    # MQClientAPIImpl.processPopResponse, the branch with startOffsetInfo (non-LMQ)
    starts = java_parse_start_offset_info(ext_fields["startOffsetInfo"])
    key = java_get_retry(msg.topic) + "@" + str(msg.queue_id)
    return java_build_extra_info(
        starts[key],
        int(ext_fields["popTime"]),
        int(ext_fields["invisibleTime"]),
        int(ext_fields["reviveQid"]),
        msg.topic,
        broker_name,
        msg.queue_id,
        msg.queue_offset,
    )


def java_header_ext(fields):
    # RemotingCommand.makeCustomHeaderToNet: every non-null field (own class first, then the
    # superclasses TopicQueueRequestHeader / TopicRequestHeader / RpcRequestHeader) as a string.
    return {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in fields if v is not None}


def java_frame(code, ext, opaque, body=b""):
    # RemotingCommand.encodeHeader with SerializeType.JSON (fastjson, fields sorted)
    header = json.dumps(
        {
            "code": code,
            "extFields": ext,
            "flag": 0,
            "language": "JAVA",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": 475,
        },
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


class JavaWire:
    """A plain socket speaking JSON frames."""

    def __init__(self, reader, writer):
        self.reader, self.writer, self.opaque = reader, writer, 100

    async def call(self, code, ext, body=b""):
        self.opaque += 1
        self.writer.write(java_frame(code, ext, self.opaque, body))
        await self.writer.drain()
        total, hlen = struct.unpack(">ii", await self.reader.readexactly(8))
        hlen &= 0xFFFFFF
        header = json.loads(await self.reader.readexactly(hlen))
        body = await self.reader.readexactly(total - 4 - hlen)
        assert header["opaque"] == self.opaque
        return header, body


@pytest.fixture
async def java(env):
    host, port = env.addr.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    yield JavaWire(reader, writer)
    writer.close()


# ---------------------------------------------------------------------------- the handle string


@pytest.mark.parametrize("topic", ["T", "%RETRY%G_T", "%RETRY%G+T"])
def test_extra_info_matches_java(topic):
    for args in [(0, 1, 2, 3), (123456789012, 1700000000000, 30000, 7), (-1, 0, 0, 999)]:
        java = java_build_extra_info(*args, topic, "broker-a", 5, 42)
        ours = wire.ExtraInfo.build(*args, topic, "broker-a", 5, 42)
        assert str(ours) == java
        assert wire.ExtraInfo.parse(java) == ours
        java7 = java_build_extra_info(*args, topic, "broker-a", 5)
        assert str(wire.ExtraInfo.build(*args, topic, "broker-a", 5)) == java7
        assert wire.ExtraInfo.parse(java7).queue_offset is None
    # the offset infos, as ExtraInfoUtil.buildStartOffsetInfo/buildMsgOffsetInfo append them
    assert wire.build_start_offset_info([(topic, 1, 10), ("T", 2, 20)]) == f"{java_get_retry(topic)} 1 10;0 2 20"
    assert wire.build_msg_offset_info([(topic, 1, [10, 12])]) == f"{java_get_retry(topic)} 1 10,12"


def test_request_headers_match_java_fields():
    h = PopMessageRequestHeader(
        consumer_group="G",
        topic="T",
        queue_id=-1,
        max_msg_nums=16,
        invisible_time=30000,
        poll_time=15000,
        born_time=1700000000000,
        init_mode=0,
        exp_type="TAG",
        exp="*",
        order=False,
    )
    # PopMessageRequestHeader's declared fields in order; attemptId null, superclass fields null
    java = java_header_ext(
        [
            ("consumerGroup", "G"),
            ("topic", "T"),
            ("queueId", -1),
            ("maxMsgNums", 16),
            ("invisibleTime", 30000),
            ("pollTime", 15000),
            ("bornTime", 1700000000000),
            ("initMode", 0),
            ("expType", "TAG"),
            ("exp", "*"),
            ("order", False),
            ("attemptId", None),
        ]
    )
    assert wire.pop_message(h).ext_fields == java
    handle = java_build_extra_info(3, 1700000000000, 30000, 2, "T", "broker-a", 1, 4)
    java_ack = java_header_ext(
        [
            ("consumerGroup", "G"),
            ("topic", "T"),
            ("queueId", 1),
            ("extraInfo", handle),
            ("offset", 4),
        ]
    )
    assert wire.ack_message("G", "T", handle).ext_fields == java_ack
    java_change = java_header_ext(
        [
            ("consumerGroup", "G"),
            ("topic", "T"),
            ("queueId", 1),
            ("extraInfo", handle),
            ("offset", 4),
            ("invisibleTime", 5000),
        ]
    )
    assert wire.change_invisible_time("G", "T", handle, 5000).ext_fields == java_change


def test_batch_ack_body_matches_fastjson():
    handles = [java_build_extra_info(10, 1700000000000, 30000, 3, "%RETRY%G_T", "b", 0, o) for o in (10, 11, 13, 19)]
    [ack] = wire.BatchAck.of("G", "T", handles)
    # BitSet {0,1,3,9}.toByteArray() = [0x0b, 0x02] (little-endian), base64 by fastjson
    java = {
        "acks": [
            {
                "b": base64.b64encode(bytes([0x0B, 0x02])).decode(),
                "c": "G",
                "it": 30000,
                "pt": 1700000000000,
                "q": 0,
                "r": "1",
                "rq": 3,
                "so": 10,
                "t": "T",
            }
        ],
        "brokerName": "b",
    }
    assert json.loads(wire.encode_batch_ack_body([ack], "b")) == java
    # and the long names (fastjson's alternateNames) read the same
    long_names = {
        "acks": [
            {
                "bitSet": java["acks"][0]["b"],
                "consumerGroup": "G",
                "invisibleTime": 30000,
                "popTime": 1700000000000,
                "queueId": 0,
                "retry": "1",
                "reviveQueueId": 3,
                "startOffset": 10,
                "topic": "T",
            }
        ]
    }
    assert wire.decode_batch_ack_body(json.dumps(long_names).encode())[1] == [ack]


# ---------------------------------------------------------------------------- against the broker


async def test_java_shaped_frames_against_the_broker(env, java):
    await env.create_topic("DT", 2)
    body = json.dumps({"groupName": GROUP}).encode()
    assert (await env.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)).code == 0
    for i in range(6):
        await env.send("DT", f"d{i}".encode(), queue_id=i % 2)
    broker_name = env.broker.broker_config.broker_name
    pop_ext = java_header_ext(
        [
            ("consumerGroup", GROUP),
            ("topic", "DT"),
            ("queueId", -1),
            ("maxMsgNums", 32),
            ("invisibleTime", 60000),
            ("pollTime", 0),
            ("bornTime", int(time.time() * 1000)),
            ("initMode", 0),
            ("expType", "TAG"),
            ("exp", "*"),
            ("order", False),
            ("bname", broker_name),
        ]
    )
    header, body = await java.call(RequestCode.POP_MESSAGE, pop_ext)
    assert header["code"] == ResponseCode.SUCCESS, header.get("remark")
    ext = header["extFields"]
    assert {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"} <= set(ext)
    msgs = decode_messages(body)
    assert len(msgs) == 6
    sdk_reply = wire.PopReply(
        wire.PopStatus.FOUND,
        int(ext["popTime"]),
        int(ext["invisibleTime"]),
        int(ext["reviveQid"]),
        start_offsets=wire.parse_offset_info(ext["startOffsetInfo"]),
    )
    # msgOffsetInfo lists each queue's offsets as Java's client indexes them
    offs = wire.parse_offset_info(ext["msgOffsetInfo"])
    assert sorted(o for v in offs.values() for o in v) == sorted(m.queue_offset for m in msgs)
    for m in msgs:
        # a topic's records go out as stored, as Java's do (no POP_CK): the client builds the
        # handle, and rmq's SDK builds the one a Java 5.3.3 client does
        assert MessageConst.POP_CK not in m.properties
        assert java_handle(ext, m, broker_name) == sdk_reply.handle(m.topic, m.queue_id, m.queue_offset, broker_name)
    # ACK with Java's frame and the Java-built handle of the first; BATCH_ACK with fastjson's
    # body for the others; CHANGE_MESSAGE_INVISIBLETIME for none left: all accepted
    first, rest = msgs[0], msgs[1:]
    h = java_handle(ext, first, broker_name)
    ack_ext = java_header_ext(
        [
            ("consumerGroup", GROUP),
            ("topic", "DT"),
            ("queueId", first.queue_id),
            ("extraInfo", h),
            ("offset", first.queue_offset),
            ("bname", broker_name),
        ]
    )
    header, _ = await java.call(RequestCode.ACK_MESSAGE, ack_ext)
    assert header["code"] == ResponseCode.SUCCESS, header.get("remark")
    change_ext = java_header_ext(
        [
            ("consumerGroup", GROUP),
            ("topic", "DT"),
            ("queueId", rest[0].queue_id),
            ("extraInfo", java_handle(ext, rest[0], broker_name)),
            ("offset", rest[0].queue_offset),
            ("invisibleTime", 60000),
        ]
    )
    header, _ = await java.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, change_ext)
    assert header["code"] == ResponseCode.SUCCESS, header.get("remark")
    assert set(header["extFields"]) == {"popTime", "invisibleTime", "reviveQid"}
    acks = []
    for m in rest[1:]:
        start = java_parse_start_offset_info(ext["startOffsetInfo"])["0@" + str(m.queue_id)]
        acks.append(
            {
                "b": base64.b64encode(
                    (1 << (m.queue_offset - start)).to_bytes(2, "little").rstrip(b"\0") or b"\0"
                ).decode(),
                "c": GROUP,
                "it": int(ext["invisibleTime"]),
                "pt": int(ext["popTime"]),
                "q": m.queue_id,
                "r": "0",
                "rq": int(ext["reviveQid"]),
                "so": start,
                "t": "DT",
            }
        )
    header, _ = await java.call(
        RequestCode.BATCH_ACK_MESSAGE,
        {},
        json.dumps({"acks": acks, "brokerName": broker_name}, separators=(",", ":")).encode(),
    )
    assert header["code"] == ResponseCode.SUCCESS, header.get("remark")
    # POLLING_INFO / NOTIFICATION with Java's headers
    header, _ = await java.call(
        RequestCode.POLLING_INFO, java_header_ext([("consumerGroup", GROUP), ("topic", "DT"), ("queueId", 0)])
    )
    assert header["code"] == ResponseCode.SUCCESS and header["extFields"]["pollingNum"] == "0"
    header, _ = await java.call(
        RequestCode.NOTIFICATION,
        java_header_ext(
            [
                ("consumerGroup", GROUP),
                ("topic", "DT"),
                ("queueId", -1),
                ("pollTime", 0),
                ("bornTime", int(time.time() * 1000)),
                ("order", False),
            ]
        ),
    )
    assert header["code"] == ResponseCode.SUCCESS and header["extFields"]["hasMsg"] == "false"
