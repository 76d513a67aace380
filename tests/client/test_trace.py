"""Message trace: the encoding against Java's TraceDataEncoder (strings built per its source),
Java-written traces read back, and produce + consume with trace=True found by id with
rmq.Admin over a real broker (traceTopicEnable=true)."""

from __future__ import annotations

import logging

import pytest
from sdk_support import create_topic

import rmq
from rmq._testing import run_standalone, wait_until
from rmq.client.trace import (
    ConsumeMessageTraceHook,
    TraceBean,
    TraceContext,
    TraceDispatcher,
    TraceType,
    decode_trace_data,
    encode_trace_context,
    trace_views,
)

C, F = "\x01", "\x02"  # Java TraceConstants.CONTENT_SPLITOR / FIELD_SPLITOR
FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


# ------------------------------------------------------------------ the format, from Java's source


def test_pub_is_encoded_as_java_does():
    ctx = TraceContext(TraceType.PUB, 1700000000123, "DefaultRegion", "PG", 7, True)
    ctx.trace_beans = [
        TraceBean(
            topic="T",
            msg_id="7F0000010001",
            tags="TagA",
            keys="k1 k2",
            store_host="127.0.0.1:10911",
            body_length=5,
            msg_type=0,
            offset_msg_id="0A0000010000",
        )
    ]
    bean = encode_trace_context(ctx)
    # TraceDataEncoder.encoderFromContextBean, case Pub: 14 values, then FIELD_SPLITOR
    assert bean.trans_data == (
        "Pub"
        + C
        + "1700000000123"
        + C
        + "DefaultRegion"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "7F0000010001"
        + C
        + "TagA"
        + C
        + "k1 k2"
        + C
        + "127.0.0.1:10911"
        + C
        + "5"
        + C
        + "7"
        + C
        + "0"
        + C
        + "0A0000010000"
        + C
        + "true"
        + F
    )
    # transKey: the msgId and each user key, so the index finds the trace by either
    assert bean.trans_keys == {"7F0000010001", "k1", "k2"}


def test_missing_tags_and_keys_are_written_null_as_java_does():
    ctx = TraceContext(
        TraceType.PUB,
        1,
        "r",
        "PG",
        0,
        False,
        trace_beans=[TraceBean(topic="T", msg_id="ID", tags=None, keys=None, store_host="h", offset_msg_id="O")],
    )
    line = encode_trace_context(ctx).trans_data
    assert line.split(C)[6:8] == ["null", "null"]
    assert line.endswith(C + "false" + F)
    assert encode_trace_context(ctx).trans_keys == {"ID"}


def test_sub_before_and_sub_after_are_encoded_as_java_does():
    beans = [TraceBean(msg_id="A", retry_times=0, keys="k"), TraceBean(msg_id="B", retry_times=2, keys=None)]
    before = TraceContext(TraceType.SUB_BEFORE, 100, "reg", "CG", request_id="REQ", trace_beans=beans)
    assert encode_trace_context(before).trans_data == (
        "SubBefore"
        + C
        + "100"
        + C
        + "reg"
        + C
        + "CG"
        + C
        + "REQ"
        + C
        + "A"
        + C
        + "0"
        + C
        + "k"
        + F
        + "SubBefore"
        + C
        + "100"
        + C
        + "reg"
        + C
        + "CG"
        + C
        + "REQ"
        + C
        + "B"
        + C
        + "2"
        + C
        + "null"
        + F
    )
    after = TraceContext(TraceType.SUB_AFTER, 150, "reg", "CG", 25, False, "REQ", 4, beans)
    # the non-CLOUD form: contextCode, then timestamp and group
    assert encode_trace_context(after).trans_data == (
        "SubAfter"
        + C
        + "REQ"
        + C
        + "A"
        + C
        + "25"
        + C
        + "false"
        + C
        + "k"
        + C
        + "4"
        + C
        + "150"
        + C
        + "CG"
        + F
        + "SubAfter"
        + C
        + "REQ"
        + C
        + "B"
        + C
        + "25"
        + C
        + "false"
        + C
        + "null"
        + C
        + "4"
        + C
        + "150"
        + C
        + "CG"
        + F
    )


def test_traces_written_by_java_clients_are_read():
    """Every line shape TraceDataEncoder.decoderFromTraceDataString takes: Pub with 13 (old),
    14 (4.9.8) and 15 (with clientHost) values, SubBefore, SubAfter with 6, 7 and 9 values,
    EndTransaction."""
    data = (
        "Pub"
        + C
        + "1000"
        + C
        + "DefaultRegion"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "ID1"
        + C
        + "TagA"
        + C
        + "null"
        + C
        + "10.0.0.1:10911"
        + C
        + "11"
        + C
        + "3"
        + C
        + "0"
        + C
        + "true"
        + F
        + "Pub"
        + C
        + "1001"
        + C
        + "DefaultRegion"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "ID2"
        + C
        + "null"
        + C
        + "k"
        + C
        + "10.0.0.1:10911"
        + C
        + "12"
        + C
        + "4"
        + C
        + "3"
        + C
        + "OFF2"
        + C
        + "false"
        + F
        + "Pub"
        + C
        + "1002"
        + C
        + "R"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "ID3"
        + C
        + "t"
        + C
        + "k"
        + C
        + "h"
        + C
        + "1"
        + C
        + "5"
        + C
        + "1"
        + C
        + "OFF3"
        + C
        + "true"
        + C
        + "10.0.0.9"
        + F
        + "SubBefore"
        + C
        + "2000"
        + C
        + "null"
        + C
        + "CG"
        + C
        + "REQ"
        + C
        + "ID1"
        + C
        + "1"
        + C
        + "null"
        + F
        + "SubAfter"
        + C
        + "REQ"
        + C
        + "ID1"
        + C
        + "9"
        + C
        + "true"
        + C
        + "null"
        + F
        + "SubAfter"
        + C
        + "REQ"
        + C
        + "ID1"
        + C
        + "9"
        + C
        + "true"
        + C
        + "null"
        + C
        + "0"
        + F
        + "SubAfter"
        + C
        + "REQ"
        + C
        + "ID1"
        + C
        + "9"
        + C
        + "false"
        + C
        + "null"
        + C
        + "4"
        + C
        + "2100"
        + C
        + "CG"
        + F
        + "EndTransaction"
        + C
        + "3000"
        + C
        + "R"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "ID4"
        + C
        + "t"
        + C
        + "k"
        + C
        + "h"
        + C
        + "1"
        + C
        + "TX"
        + C
        + "COMMIT_MESSAGE"
        + C
        + "false"
        + F
    )
    ctxs = decode_trace_data(data)
    assert [c.trace_type for c in ctxs] == [
        "Pub",
        "Pub",
        "Pub",
        "SubBefore",
        "SubAfter",
        "SubAfter",
        "SubAfter",
        "EndTransaction",
    ]
    p1, p2, p3, sb, sa6, sa7, sa9, et = ctxs
    assert (p1.time_stamp, p1.group_name, p1.cost_time, p1.success) == (1000, "PG", 3, True)
    assert (p1.trace_beans[0].msg_id, p1.trace_beans[0].tags, p1.trace_beans[0].body_length) == ("ID1", "TagA", 11)
    assert (p2.trace_beans[0].offset_msg_id, p2.success, p2.trace_beans[0].msg_type) == ("OFF2", False, 3)
    assert p3.trace_beans[0].client_host == "10.0.0.9"
    assert (sb.request_id, sb.trace_beans[0].retry_times, sb.group_name) == ("REQ", 1, "CG")
    assert (sa6.cost_time, sa6.success, sa6.context_code) == (9, True, 0)
    assert sa7.context_code == 0
    assert (sa9.time_stamp, sa9.group_name, sa9.success, sa9.context_code) == (2100, "CG", False, 4)
    assert (et.trace_beans[0].transaction_id, et.trace_beans[0].transaction_state) == ("TX", "COMMIT_MESSAGE")
    # our encoder's output decodes to what was encoded (the 4.9.8 shapes)
    for ctx in (p2, sb, sa9):
        again = decode_trace_data(encode_trace_context(ctx).trans_data)[0]
        assert again.trace_type == ctx.trace_type and again.trace_beans[0].msg_id == ctx.trace_beans[0].msg_id


def test_unreadable_lines_are_skipped_not_fatal():
    data = (
        "Pub"
        + C
        + "notanumber"
        + F
        + "Garbage"
        + F
        + "SubAfter"
        + C
        + "R"
        + C
        + "ID"
        + C
        + "1"
        + C
        + "true"
        + C
        + "k"
        + F
    )
    ctxs = decode_trace_data(data)
    assert [c.trace_type for c in ctxs] == ["SubAfter"]
    assert decode_trace_data("") == []


def test_trace_views_keep_the_records_of_the_message():
    data = (
        "Pub"
        + C
        + "1000"
        + C
        + "R"
        + C
        + "PG"
        + C
        + "T"
        + C
        + "ID1"
        + C
        + "t"
        + C
        + "k"
        + C
        + "h"
        + C
        + "1"
        + C
        + "3"
        + C
        + "0"
        + C
        + "OFF"
        + C
        + "true"
        + F
        + "SubAfter"
        + C
        + "REQ"
        + C
        + "OTHER"
        + C
        + "9"
        + C
        + "true"
        + C
        + "null"
        + C
        + "0"
        + C
        + "5"
        + C
        + "CG"
        + F
    )
    msg = rmq.MessageExt(
        topic="RMQ_SYS_TRACE_TOPIC",
        body=data.encode(),
        tags=None,
        keys=(),
        properties={},
        msg_id="X",
        offset_msg_id="X",
        queue_id=0,
        queue_offset=0,
        reconsume_times=0,
        born_host="10.1.2.3:5555",
    )
    views = trace_views("ID1", msg)
    assert len(views) == 1
    v = views[0]
    assert (v.msg_type, v.group_name, v.client_host, v.cost_time, v.status) == ("Pub", "PG", "10.1.2.3", 3, "success")


# ------------------------------------------------------------------ over a real broker


@pytest.fixture
async def trace_cluster(tmp_path):
    async with run_standalone(tmp_path / "store", trace_topic_enable=True) as (ns, broker):
        yield f"127.0.0.1:{ns.port}", broker


async def test_produce_and_consume_with_trace_found_by_id(trace_cluster, unique):
    namesrv, broker = trace_cluster
    topic, pg, cg = unique("TT"), unique("PG"), unique("CG")
    await create_topic(broker.broker_addr, topic)
    got: list[rmq.MessageExt] = []
    c = rmq.PushConsumer(namesrv, cg, handler=got.append, consume_from_where=FIRST, trace=True)
    c.subscribe(topic)
    async with rmq.Producer(namesrv, pg, trace=True) as p:
        result = await p.send(rmq.Message(topic=topic, body=b"traced", tags="TagT", keys=["order-1"]))
    async with c:
        await wait_until(lambda: got, 20, what="the traced message consumed")
    async with rmq.Admin(namesrv) as admin:
        views: list = []

        async def found() -> bool:
            views[:] = await admin.query_msg_trace_by_id(result.msg_id)
            return {v.msg_type for v in views} >= {"Pub", "SubBefore", "SubAfter"}

        # the trace messages are indexed at dispatch: wait for all three records
        await wait_until(found, 20, interval=0.1, what="Pub, SubBefore and SubAfter traces")
        kinds = {v.msg_type: v for v in views}
        assert set(kinds) >= {"Pub", "SubBefore", "SubAfter"}, views
        pub = kinds["Pub"]
        assert (pub.group_name, pub.status, pub.topic, pub.tags, pub.keys) == (pg, "success", topic, "TagT", "order-1")
        assert pub.store_host == broker.broker_addr
        assert kinds["SubAfter"].group_name == cg and kinds["SubAfter"].status == "success"
        # the user key finds the trace messages too
        by_key = await admin.query_message_by_key("RMQ_SYS_TRACE_TOPIC", "order-1")
        assert by_key.messages


async def test_a_full_trace_queue_drops_with_a_log_line(trace_cluster, unique, caplog):
    namesrv, _ = trace_cluster
    d = TraceDispatcher(namesrv, unique("CG"), "CONSUMER", queue_size=2, producer_factory=rmq.Producer)
    ctxs = [TraceContext(TraceType.SUB_AFTER, trace_beans=[TraceBean(msg_id=f"ID{i}")]) for i in range(5)]
    with caplog.at_level(logging.WARNING, logger="rmq.client"):
        accepted = [d.append(c) for c in ctxs]  # one loop turn: the worker has not run yet
    assert accepted == [True, True, False, False, False]
    assert d.dropped == 3
    assert sum("trace of" in r.getMessage() and "dropped" in r.getMessage() for r in caplog.records) == 1
    await d.close()
    assert d.sent_messages == 1  # the two kept were sent as one trace message
    assert d.append(ctxs[0]) is False  # closed


async def test_a_trace_hook_skips_messages_with_the_switch_off():
    hook = ConsumeMessageTraceHook(TraceDispatcher("127.0.0.1:1", "CG", "CONSUMER", producer_factory=rmq.Producer))
    msg = rmq.MessageExt(
        topic="T",
        body=b"x",
        tags=None,
        keys=(),
        properties={"TRACE_ON": "false"},
        msg_id="A",
        offset_msg_id="A",
        queue_id=0,
        queue_offset=0,
        reconsume_times=0,
    )
    ctx = rmq.ConsumeMessageContext("CG", [msg], msg.queue)
    hook.consume_message_before(ctx)
    assert "trace_before" not in ctx.props
    await hook.close()


async def test_a_trace_written_by_a_java_client_is_found_by_id(trace_cluster, unique):
    """What Java's AsyncTraceDispatcher sends (SEND_MESSAGE_V2 to RMQ_SYS_TRACE_TOPIC, the body
    TraceDataEncoder's text, KEYS the message ids and user keys), written frame by frame, is
    found and read by rmq.Admin.query_msg_trace_by_id."""
    from rmq.protocol.command import RemotingCommand
    from rmq.remoting import RemotingClient

    _, broker = trace_cluster
    namesrv = trace_cluster[0]
    msg_id = "0A0B0C0D00002A9F0000000000000042"
    body = (
        "Pub"
        + C
        + "1700000000000"
        + C
        + "DefaultRegion"
        + C
        + "JavaPG"
        + C
        + "JT"
        + C
        + msg_id
        + C
        + "null"
        + C
        + "jk"
        + C
        + "10.0.0.1:10911"
        + C
        + "6"
        + C
        + "2"
        + C
        + "0"
        + C
        + "0A00000100002A9F00000000000000AA"
        + C
        + "true"
        + F
        + "SubBefore"
        + C
        + "1700000000100"
        + C
        + "null"
        + C
        + "JavaCG"
        + C
        + "REQ1"
        + C
        + msg_id
        + C
        + "0"
        + C
        + "jk"
        + F
        + "SubAfter"
        + C
        + "REQ1"
        + C
        + msg_id
        + C
        + "5"
        + C
        + "true"
        + C
        + "jk"
        + C
        + "0"
        + C
        + "1700000000105"
        + C
        + "JavaCG"
        + F
    )
    props = f"KEYS{C}{msg_id} jk{F}UNIQ_KEY{C}7F00000100002A9F00000000000000FF{F}WAIT{C}true{F}"
    ext = {
        "a": "_INNER_TRACE_PRODUCER-JavaPG-PRODUCER-1",
        "b": "RMQ_SYS_TRACE_TOPIC",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000200",
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
        "m": "false",
    }
    cmd = RemotingCommand.request(310, ext, body.encode())
    cmd.language = "JAVA"
    java = RemotingClient()
    try:
        resp = await java.invoke(broker.broker_addr, cmd)
        assert resp.code == 0, resp.remark
    finally:
        await java.close()
    async with rmq.Admin(namesrv) as admin:
        views = await wait_until(lambda: admin.query_msg_trace_by_id(msg_id), 20, what="the Java trace indexed")
    assert [(v.msg_type, v.group_name, v.status) for v in views] == [
        ("Pub", "JavaPG", "success"),
        ("SubBefore", "JavaCG", "success"),
        ("SubAfter", "JavaCG", "success"),
    ]
    pub = views[0]
    assert (pub.topic, pub.tags, pub.keys, pub.cost_time, pub.time_stamp) == ("JT", "null", "jk", 2, 1700000000000)
    assert pub.client_host == "127.0.0.1"


def test_a_bad_trace_topic_fails_at_construction():
    with pytest.raises(rmq.ClientError, match="trace_topic"):
        rmq.Producer("127.0.0.1:1", "PG", trace=True, trace_topic="no spaces")
    with pytest.raises(rmq.ClientError, match="trace_topic"):
        rmq.PushConsumer("127.0.0.1:1", "CG", trace=True, trace_topic="x" * 200)
