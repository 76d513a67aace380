"""QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33), QUERY_TOPIC_CONSUME_BY_WHO (300) against a real
broker, compared in shape with the Java 4.9.8 broker's answers (golden mqadmin frames), and the
index surviving a kill -9 of a broker process."""

import asyncio
import base64
import json
import os
import signal
import struct
from pathlib import Path

import pytest
from broker_support import decode_records

from rmq._testing import BrokerEnv, StandaloneProcess, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.headers.message import QueryMessageRequestHeader, ViewMessageRequestHeader
from rmq.protocol.headers.topic import QueryTopicConsumeByWhoRequestHeader
from rmq.remoting.client import RemotingClient

# Apache RocketMQ 4.9.8's mqadmin against the Java broker (the in-repository copy).
GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "remoting" / "rocketmq-4.9.8-mqadmin-frames.jsonl"
FOREVER = str((1 << 63) - 1)


def golden_frames():
    """(stream, request_code, header dict, body bytes) of the Java broker's frames for 12, 33, 300."""
    out = []
    for line in GOLDEN.read_text().splitlines():
        d = json.loads(line)
        code = d.get("request_code") if d["stream"] == "broker->client" else d.get("code")
        if code not in (12, 33, 300):
            continue
        frame = base64.b64decode(d["frame_b64"])
        _total, hlen = struct.unpack_from(">ii", frame, 0)
        hlen &= 0xFFFFFF
        out.append((d["stream"], code, json.loads(frame[8 : 8 + hlen]), frame[8 + hlen :]))
    return out


def query(key, topic="QT", max_num=32, begin="0", end=FOREVER, unique=False):
    return {
        "topic": topic,
        "key": key,
        "maxNum": str(max_num),
        "beginTimestamp": begin,
        "endTimestamp": end,
        "_UNIQUE_KEY_QUERY": "true" if unique else "false",
    }


async def test_query_by_key_and_unique_key(env):
    await env.create_topic("QT", 1)
    r1 = await env.send("QT", b"one", keys="order-1 shared", props={"UNIQ_KEY": "UNIQ0001"})
    r2 = await env.send("QT", b"two", keys="shared")
    assert r1.code == r2.code == ResponseCode.SUCCESS
    resp = await env.call(RequestCode.QUERY_MESSAGE, query("order-1"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert set(resp.ext_fields) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
    recs = decode_records(resp.body)
    assert [r.body for r in recs] == [b"one"] and recs[0].properties["KEYS"] == "order-1 shared"
    assert (
        int(resp.ext_fields["indexLastUpdatePhyoffset"])
        == decode_records((await env.call(RequestCode.QUERY_MESSAGE, query("shared"))).body)[-1].phy_offset
    )
    both = decode_records((await env.call(RequestCode.QUERY_MESSAGE, query("shared"))).body)
    assert [r.body for r in both] == [b"one", b"two"]
    one = decode_records((await env.call(RequestCode.QUERY_MESSAGE, query("shared", max_num=1))).body)
    assert [r.body for r in one] == [b"two"]  # the newest
    resp = await env.call(RequestCode.QUERY_MESSAGE, query("UNIQ0001", unique=True, max_num=1))
    assert [r.body for r in decode_records(resp.body)] == [b"one"]
    # not found: Java QueryMessageProcessor's code and remark, the index fields still there
    resp = await env.call(RequestCode.QUERY_MESSAGE, query("nothing"))
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
    assert resp.remark == "can not find message, maybe time range not correct"
    assert set(resp.ext_fields) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
    resp = await env.call(RequestCode.QUERY_MESSAGE, query("order-1", begin=str(1 << 62)))
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
    # a bad header: SYSTEM_ERROR naming the field
    resp = await env.call(RequestCode.QUERY_MESSAGE, {"topic": "QT", "key": "k"})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "maxNum" in resp.remark


async def test_unique_key_query_answers_at_most_default_query_max_num(tmp_path):
    from rmq._testing import broker_env

    async with broker_env(tmp_path / "s", default_query_max_num=3) as env:
        await env.create_topic("QT", 1)
        for i in range(5):
            await env.send("QT", b"%d" % i, keys="same")
        resp = await env.call(RequestCode.QUERY_MESSAGE, query("same", max_num=64, unique=True))
        assert len(decode_records(resp.body)) == 3
        resp = await env.call(RequestCode.QUERY_MESSAGE, query("same", max_num=64))
        assert len(decode_records(resp.body)) == 5


async def test_view_message_by_id(env):
    await env.create_topic("VT", 1)
    r = await env.send("VT", b"viewed", keys="v")
    msg_id = r.ext_fields["msgId"]
    offset = int(msg_id[-16:], 16)
    resp = await env.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert resp.code == ResponseCode.SUCCESS and not resp.ext_fields
    (rec,) = decode_records(resp.body)
    assert rec.body == b"viewed" and rec.offset_msg_id == msg_id
    for bad in (offset + 1, 1 << 40):
        resp = await env.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(bad)})
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == f"can not find message by the offset, {bad}"


async def test_query_topic_consume_by_who(env):
    await env.create_topic("CT", 1)
    resp = await env.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "CT"})
    assert resp.code == ResponseCode.SUCCESS and json.loads(resp.body) == {"groupList": []}
    upd = {"consumerGroup": "OffsetGroup", "topic": "CT", "queueId": 0, "commitOffset": "1"}
    assert (await env.call(RequestCode.UPDATE_CONSUMER_OFFSET, upd)).code == ResponseCode.SUCCESS
    hb = {
        "clientID": "c1",
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": "LiveGroup",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": [
                    {
                        "topic": "CT",
                        "subString": "*",
                        "classFilterMode": False,
                        "tagsSet": [],
                        "codeSet": [],
                        "subVersion": 1,
                        "expressionType": "TAG",
                    }
                ],
            }
        ],
    }
    assert (await env.call(RequestCode.HEART_BEAT, None, json.dumps(hb).encode())).code == ResponseCode.SUCCESS
    resp = await env.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "CT"})
    assert sorted(json.loads(resp.body)["groupList"]) == ["LiveGroup", "OffsetGroup"]
    resp = await env.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark


async def test_replies_have_the_java_brokers_shape(env):
    """Decode the Java broker's frames for 12, 33 and 300 and compare ours field by field."""
    frames = golden_frames()
    requests = [(c, h) for s, c, h, _ in frames if s == "client->broker"]
    replies = {c: [] for c in (12, 33, 300)}
    for s, c, h, body in frames:
        if s == "broker->client":
            replies[c].append((h, body))
    assert {c for c, _ in requests} == {12, 33, 300} and all(replies.values())
    # Our typed headers read Java's requests.
    for code, h in requests:
        cls = {12: QueryMessageRequestHeader, 33: ViewMessageRequestHeader, 300: QueryTopicConsumeByWhoRequestHeader}[
            code
        ]
        cls.from_ext_fields(h["extFields"])
    await env.create_topic("ParityT", 1)
    r = await env.send(
        "ParityT",
        b"Hello RocketMQ 0",
        keys="parityKey1",
        props={"UNIQ_KEY": "FD00000000000000000000000000000270F35FFD2B27760E1D7A0000"},
    )
    offset = int(r.ext_fields["msgId"][-16:], 16)
    ours = {
        12: [
            await env.call(12, {k: v for k, v in h["extFields"].items() if k not in ("Signature", "AccessKey")})
            for c, h in requests
            if c == 12
        ],
        33: [await env.call(33, {"offset": str(offset)})],
        300: [await env.call(300, {"topic": "ParityT"})],
    }
    for code, resps in ours.items():
        for (jh, jbody), mine in zip(replies[code], resps, strict=False):
            assert mine.code == jh["code"] == 0, (code, mine.remark)
            assert set(mine.ext_fields or {}) == set(jh.get("extFields", {})), code
            assert ("remark" in jh) == (mine.remark is not None)
            if code == 300:
                assert set(json.loads(mine.body)) == set(json.loads(jbody)) == {"groupList"}
            else:
                theirs, mine_recs = decode_records(jbody), decode_records(mine.body)
                assert len(theirs) == len(mine_recs) == 1
                assert set(theirs[0].properties) <= set(mine_recs[0].properties) | {"CLUSTER"}


def _checkpoint(store):
    from rmq.store.checkpoint import StoreCheckpoint

    return StoreCheckpoint(str(store)).read()  # {} while there is none (or it is being replaced)


async def _produce_until_killed(env, proc, acked, kill_after):
    i = 0
    while True:
        key = f"crash-{i}"
        try:
            resp = await env.send("KT", b"m%d" % i, keys=f"{key} all", wait_dispatch=False)
        except Exception:
            return
        if resp.code != ResponseCode.SUCCESS:
            return
        acked.append(key)
        i += 1
        if i == kill_after:
            os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.timeout(180)
async def test_index_rebuilt_after_kill_minus_9(tmp_path):
    store = tmp_path / "store"
    # a short thorough interval: the index is flushed (and checkpointed) while production runs,
    # so recovery both cuts a file back and re-indexes the rest; small files so it rolls
    args = [
        "--flushIntervalConsumeQueue=50",
        "--flushConsumeQueueThoroughInterval=100",
        "--maxHashSlotNum=101",
        "--maxIndexNum=400",
    ]
    acked: list[str] = []
    proc = StandaloneProcess(store, args).start()
    client = RemotingClient()
    try:
        env = BrokerEnv.of_process(proc, client)
        await env.create_topic("KT", 2)
        # kill -9 once the index has been flushed at least once while production runs
        task = asyncio.create_task(_produce_until_killed(env, proc, acked, 10**9))
        await wait_until(
            lambda: len(acked) > 300 and "index_file" in _checkpoint(store),
            timeout=60,
            interval=0.01,
            what="an index flush during production",
        )
        os.kill(proc.pid, signal.SIGKILL)
        await asyncio.wait_for(task, 120)
        assert await asyncio.to_thread(proc.proc.wait, 30) == -signal.SIGKILL
    finally:
        await client.close()
        proc.stop()
    assert len(acked) > 300
    assert len(os.listdir(store / "index")) > 1
    proc2 = StandaloneProcess(store, args).start()
    client = RemotingClient()
    try:
        log_text = proc2.log_text()
        assert "not shut down cleanly" in log_text and "cut back to its" in log_text
        env = BrokerEnv.of_process(proc2, client)

        async def indexed():
            resp = await env.call(RequestCode.QUERY_MESSAGE, query(acked[-1], topic="KT"))
            return resp.code == ResponseCode.SUCCESS

        await wait_until(indexed, timeout=30, what="the index rebuilt")
        for key in acked:
            resp = await env.call(RequestCode.QUERY_MESSAGE, query(key, topic="KT"))
            assert resp.code == ResponseCode.SUCCESS, (key, resp.remark)
            recs = [r for r in decode_records(resp.body) if key in r.properties["KEYS"].split()]
            assert len(recs) == 1, (key, len(recs))
        r = await env.send("KT", b"after", keys="after-restart", wait_dispatch=False)
        assert r.code == ResponseCode.SUCCESS

        async def after():
            return (await env.call(RequestCode.QUERY_MESSAGE, query("after-restart", topic="KT"))).code == 0

        await wait_until(after, timeout=20, what="the new message indexed")
    finally:
        await client.close()
        assert proc2.stop() == 0, proc2.log_text()[-3000:]


async def test_message_index_enable_false_in_a_daemon(tmp_path):
    """``messageIndexEnable=false`` (how produce CPU is compared without the index): no index
    file, queries find nothing, sends and pulls work."""
    store = tmp_path / "store"
    with StandaloneProcess(store, ["--messageIndexEnable=false"]) as proc:
        client = RemotingClient()
        try:
            env = BrokerEnv.of_process(proc, client)
            await env.create_topic("NI", 1)
            assert (await env.send("NI", b"m", keys="k")).code == ResponseCode.SUCCESS
            resp = await env.pull("NI", suspend_ms=0)
            assert resp.code == ResponseCode.SUCCESS and decode_records(resp.body)[0].body == b"m"
            resp = await env.call(RequestCode.QUERY_MESSAGE, query("k", topic="NI"))
            assert resp.code == ResponseCode.QUERY_NOT_FOUND
        finally:
            await client.close()
    assert not (store / "index").exists() or os.listdir(store / "index") == []


async def test_query_answers_only_the_topic_asked_for(env):
    """ "AaTopic#K" and "BBTopic#K" have the same Java hashCode, so the index finds both records
    for either topic. Java answers both (its clients drop the other topic's); rmq answers only
    the topic asked for, the one the ACL checked (issue 23, finding 10)."""
    from rmq import _store

    assert _store.index_key_hash("AaTopic", "K") == _store.index_key_hash("BBTopic", "K")
    for topic in ("AaTopic", "BBTopic"):
        await env.create_topic(topic, 1)
        assert (await env.send(topic, topic.encode(), keys="K")).code == ResponseCode.SUCCESS
    for topic in ("AaTopic", "BBTopic"):
        resp = await env.call(RequestCode.QUERY_MESSAGE, query("K", topic=topic))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert [r.body for r in decode_records(resp.body)] == [topic.encode()]
