"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and their error paths."""

import json
import time
import zlib

from broker_support import decode_records, encode_batch, encode_props

from rmq._testing import wait_until
from rmq.protocol.codes import RequestCode, ResponseCode


def _assert_send_reply(resp, addr):
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ext = resp.ext_fields
    assert all(isinstance(v, str) for v in ext.values())
    assert len(ext["msgId"]) == 32 and ext["msgId"] == ext["msgId"].upper()
    ip, port = addr.split(":")
    assert ext["msgId"][:16] == (bytes(int(x) for x in ip.split(".")) + int(port).to_bytes(4, "big")).hex().upper()
    return ext


async def test_send_v1_autocreates_topic_and_routes_it(env):
    resp = await env.send("AutoTopic", b"hello", queue_id=1, keys="k1 k2", extra_props={"UNIQ_KEY": "ABC", "u": "v"})
    ext = _assert_send_reply(resp, env.addr)
    assert ext["queueId"] == "1" and ext["queueOffset"] == "0"
    tc = env.broker.topic_config_manager.select_topic_config("AutoTopic")
    assert tc.write_queue_nums == 4  # min(client's 4, TBW102's 8)
    resp = await env.send("AutoTopic", b"again", queue_id=1)
    assert resp.ext_fields["queueOffset"] == "1"

    # the name server learns the topic (registration after auto-create)
    async def routed():
        r = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "AutoTopic"})
        return r if r.code == ResponseCode.SUCCESS else None

    r = await wait_until(routed, what="AutoTopic's route on the name server")
    assert json.loads(r.body_bytes())["brokerDatas"][0]["brokerAddrs"] == {"0": env.broker.broker_addr}

    pulled = await env.pull("AutoTopic", queue_id=1, sys_flag=4)
    recs = decode_records(pulled.body_bytes())
    assert [r.body for r in recs] == [b"hello", b"again"]
    assert recs[0].properties["KEYS"] == "k1 k2" and recs[0].properties["u"] == "v"
    assert recs[0].properties["UNIQ_KEY"] == "ABC"
    assert recs[0].offset_msg_id == ext["msgId"]


async def test_send_v2_names_and_compressed_body_stored_as_sent(env):
    await env.create_topic("V2Topic", 2)
    body = zlib.compress(b"x" * 5000)
    ext = {
        "a": "PG",
        "b": "V2Topic",
        "c": "TBW102",
        "d": 4,
        "e": 1,
        "f": 1,
        "g": str(int(time.time() * 1000)),
        "h": 7,
        "i": encode_props({"TAGS": "TagZ"}),
        "j": "0",
        "k": False,
        "l": 16,
        "m": "false",
    }
    resp = await env.call(RequestCode.SEND_MESSAGE_V2, ext, body)
    await env.dispatched()
    _assert_send_reply(resp, env.addr)
    assert resp.ext_fields["queueId"] == "1"
    recs = decode_records((await env.pull("V2Topic", queue_id=1)).body_bytes())
    assert recs[0].body == body and recs[0].sys_flag & 1 and recs[0].flag == 7
    assert recs[0].properties["TAGS"] == "TagZ"


async def test_batch_flag_and_code_320(env):
    await env.create_topic("BatchTopic", 1)
    blob = encode_batch(
        [(b"m0", {"UNIQ_KEY": "u0", "TAGS": "A"}), (b"m1", {"UNIQ_KEY": "u1"}), (b"m2", {"UNIQ_KEY": "u2"})]
    )
    resp = await env.send("BatchTopic", blob, batch=True, tags=None)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    ids = resp.ext_fields["msgId"].split(",")
    assert len(ids) == 3 and resp.ext_fields["queueOffset"] == "0"
    resp = await env.send(
        "BatchTopic", encode_batch([(b"m3", {}), (b"m4", {})]), tags=None, code=RequestCode.SEND_BATCH_MESSAGE
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueOffset"] == "3" and len(resp.ext_fields["msgId"].split(",")) == 2
    recs = decode_records((await env.pull("BatchTopic")).body_bytes())
    assert [r.body for r in recs] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert [r.offset_msg_id for r in recs[:3]] == ids
    assert recs[1].properties["UNIQ_KEY"] == "u1"


async def test_unknown_topic_without_autocreate_is_17(tmp_path):
    from broker_support import Env

    from rmq._testing import run_standalone
    from rmq.remoting.client import RemotingClient

    async with run_standalone(tmp_path / "s", auto_create_topic_enable=False) as (ns, broker):
        client = RemotingClient()
        try:
            env = Env(ns, broker, client)
            resp = await env.send("NoSuchTopic")
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "NoSuchTopic" in resp.remark
            assert resp.ext_fields == {}
            r = await env.ns_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()


async def test_send_error_paths(env):
    await env.create_topic("Small", 2)
    resp = await env.send("Small", queue_id=5)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[5] is illegal" in resp.remark

    resp = await env.call(RequestCode.SEND_MESSAGE, {"producerGroup": "PG", "queueId": 0}, b"x")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark

    resp = await env.call(
        RequestCode.SEND_MESSAGE,
        {"producerGroup": "PG", "topic": "T", "queueId": "zero", "bornTimestamp": "1", "defaultTopic": "TBW102"},
        b"x",
    )
    assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId" in resp.remark

    resp = await env.send("bad topic!")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in resp.remark

    resp = await env.send("SCHEDULE_TOPIC_XXXX")
    assert resp.code == ResponseCode.NO_PERMISSION

    await env.create_topic("ReadOnly", 2, perm=4)
    resp = await env.send("ReadOnly")
    assert resp.code == ResponseCode.NO_PERMISSION and "forbidden" in resp.remark

    resp = await env.send("Small", body=b"z" * (4 * 1024 * 1024 + 1))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL

    # and the broker still works
    assert (await env.send("Small")).code == ResponseCode.SUCCESS


async def test_send_into_retry_topic_is_stored(env):
    resp = await env.send("%RETRY%G1", b"retry-me", extra_props={"RETRY_TOPIC": "T"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    recs = decode_records((await env.pull("%RETRY%G1", group="G1")).body_bytes())
    assert recs[0].body == b"retry-me" and recs[0].topic == "%RETRY%G1"


async def test_binary_send_is_answered_in_binary_with_javas_reply_fields(env):
    """A ROCKETMQ-serialized SEND_MESSAGE_V2 (Java's client with rocketmq.serialize.type=ROCKETMQ)
    gets a binary reply carrying what Java's broker puts there, in its order."""
    from rmq.protocol.command import RemotingCommand

    await env.create_topic("BinTopic", 2)
    ext = {
        "a": "PG",
        "b": "BinTopic",
        "c": "TBW102",
        "d": "4",
        "e": "1",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": encode_props({"UNIQ_KEY": "U1", "WAIT": "true"}),
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    for expect_offset in ("0", "1"):
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"binary body")
        cmd.serialize_type, cmd.language = 1, "JAVA"
        resp = await env.client.invoke(env.addr, cmd, timeout=5)
        assert resp.serialize_type == 1 and resp.opaque == cmd.opaque and resp.flag == 1
        assert list(resp.ext_fields) == ["msgId", "queueId", "queueOffset", "TRACE_ON", "MSG_REGION"]
        reply = _assert_send_reply(resp, env.addr)
        assert (reply["queueId"], reply["queueOffset"], reply["TRACE_ON"], reply["MSG_REGION"]) == (
            "1",
            expect_offset,
            "true",
            "DefaultRegion",
        )
        assert (resp.language, resp.version, resp.remark) == ("JAVA", 409, None)
    await env.dispatched()
    recs = decode_records((await env.pull("BinTopic", queue_id=1)).body_bytes())
    assert [r.body for r in recs] == [b"binary body"] * 2 and recs[0].properties["UNIQ_KEY"] == "U1"


async def test_oneway_send_is_stored_without_a_reply(env):
    """Java sendOneway: the broker stores the message and writes nothing back (a reply would
    match no waiting request); the next ordinary request on the connection is answered."""
    from rmq.protocol.command import RemotingCommand

    await env.create_topic("OnewayTopic", 1)
    ext = {
        "a": "PG",
        "b": "OnewayTopic",
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": encode_props({"WAIT": "true"}),
        "j": "0",
        "k": "false",
        "m": "false",
    }
    conn = await env.client.get_connection(env.addr)
    conn.invoke_oneway(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"fire and forget"))
    resp = await env.send("OnewayTopic", b"answered", code=RequestCode.SEND_MESSAGE_V2)
    assert resp.ext_fields["queueOffset"] == "1"  # the oneway message took offset 0
    recs = decode_records((await env.pull("OnewayTopic")).body_bytes())
    assert [r.body for r in recs] == [b"fire and forget", b"answered"]


async def test_sync_flush_sends_are_answered_once_durable_by_callback_or_task(tmp_path):
    """SYNC_FLUSH: every SEND is answered only once the group commit covers it, through the
    group commit's callback, and the same way through a send-pool task when too many
    callbacks wait (max_callbacks 0 here)."""
    import asyncio

    from rmq._testing import broker_env

    async with broker_env(tmp_path / "store", flush_disk_type="SYNC_FLUSH") as env:
        await env.create_topic("SyncTopic", 2)
        store = env.store

        async def one(i):
            resp = await env.send("SyncTopic", b"m%d" % i, queue_id=i % 2, wait_dispatch=False)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            return resp

        for max_callbacks in (10_000, 0):
            store.flush_commit_log.max_callbacks = max_callbacks
            replies = await asyncio.gather(*(one(i) for i in range(20)))
            assert store.commit_log.flushed_offset == store.commit_log.max_offset  # durable when answered
            assert len({r.ext_fields["msgId"] for r in replies}) == 20
        await env.dispatched()
        bodies = [
            r.body for q in (0, 1) for r in decode_records((await env.pull("SyncTopic", queue_id=q)).body_bytes())
        ]
        assert sorted(bodies) == sorted([b"m%d" % i for i in range(20)] * 2)
