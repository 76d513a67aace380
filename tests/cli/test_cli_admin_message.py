"""``rmq admin`` queryMsgByKey / queryMsgByUniqueKey / queryMsgById / queryMsgByOffset as a real
CLI process against a real broker, messages sent by the SDK producer; and ``rmq.Admin``'s
message lookups directly."""

import asyncio
import os

import pytest
from cli_support import admin, admin_async

import rmq
from rmq._testing import wait_until
from rmq.client.admin import Admin

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sent(daemon):
    """Three messages sent by the SDK: two with key "order-7", one with "other"."""

    async def send():
        async with Admin(daemon.namesrv_addr) as a:
            for addr in await a.master_addrs():
                await a.create_and_update_topic_config(addr, "MsgT", read_queue_nums=2, write_queue_nums=2)
        async with rmq.Producer(daemon.namesrv_addr, "MsgPG") as p:
            out = []
            for body, keys in ((b"first", "order-7 a"), (b"second", "order-7"), (b"third", "other")):
                out.append(await p.send(rmq.Message("MsgT", body, tags="TagM", keys=keys)))
            return out

    results = asyncio.run(send())

    async def indexed():
        async with Admin(daemon.namesrv_addr) as a:
            return len((await a.query_message_by_key("MsgT", "other")).messages) == 1

    asyncio.run(wait_until(indexed, what="the messages indexed"))
    return results


def test_query_msg_by_key(daemon, sent):
    r = admin("queryMsgByKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-k", "order-7")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}"
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == [sent[0].msg_id, sent[1].msg_id]  # oldest first
    assert [(int(row[1]), int(row[2])) for row in rows] == [
        (s.message_queue.queue_id, s.queue_offset) for s in sent[:2]
    ]
    assert len(lines[1]) == 50 + 1 + 4 + 1 + 40
    # a time range that ends before everything, and a max count
    r = admin("queryMsgByKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-k", "order-7", "-e", "1")
    assert r.returncode == 0 and r.stdout.splitlines()[1:] == []
    r = admin("queryMsgByKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-k", "order-7", "-c", "1")
    assert [line.split()[0] for line in r.stdout.splitlines()[1:]] == [sent[1].msg_id]
    r = admin("queryMsgByKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-k", "order-7", "-c", "0")
    assert r.returncode == 2 and "maxNum" in r.stderr
    r = admin("queryMsgByKey", "-n", daemon.namesrv_addr, "-t", "NoSuchTopic", "-k", "x")
    assert r.returncode == 1 and "NoSuchTopic" in r.stderr


def test_query_msg_by_unique_key(daemon, sent):
    r = admin("queryMsgByUniqueKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-i", sent[1].msg_id)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "OffsetID:" not in out  # showMessage has no OffsetID line
    assert f"{'Topic:':<20} MsgT\n" in out and f"{'Tags:':<20} [TagM]\n" in out
    assert f"{'Keys:':<20} [order-7]\n" in out
    assert f"{'Queue Offset:':<20} {sent[1].queue_offset}\n" in out
    path = out.split("Message Body Path:")[1].split("\n")[0].strip()
    assert path == f"/tmp/rocketmq/msgbodys/{sent[1].msg_id}"
    with open(path, "rb") as f:
        assert f.read() == b"second"
    assert out.endswith("WARN: No Consumer")
    r = admin("queryMsgByUniqueKey", "-n", daemon.namesrv_addr, "-t", "MsgT", "-i", "00" * 16)
    assert r.returncode == 0 and r.stdout == ""  # Java prints nothing


def test_query_msg_by_id_and_offset(daemon, sent):
    r = admin("queryMsgById", "-n", daemon.namesrv_addr, "-i", f"{sent[0].offset_msg_id},{sent[2].offset_msg_id}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("OffsetID:") == 2
    assert f"{'OffsetID:':<20} {sent[0].offset_msg_id}\n" in r.stdout
    assert f"{'Keys:':<20} [order-7 a]\n" in r.stdout and f"{'Keys:':<20} [other]\n" in r.stdout
    assert f"{'Store Host:':<20} {daemon.broker_addr}\n" in r.stdout
    # a unique key is not an offset id of a live broker: with -t it is looked up as one
    r = admin("queryMsgById", "-n", daemon.namesrv_addr, "-t", "MsgT", "-i", sent[2].msg_id)
    assert r.returncode == 0, r.stderr
    assert f"{'Keys:':<20} [other]\n" in r.stdout
    r = admin("queryMsgById", "-n", daemon.namesrv_addr, "-i", "not-an-id")
    assert r.returncode == 2 and "offset message id" in r.stderr
    # the msg_id the SDK prints (a unique key) without -t: pointed to queryMsgByUniqueKey
    r = admin("queryMsgById", "-n", daemon.namesrv_addr, "-i", sent[2].msg_id)
    assert r.returncode == 2 and f"queryMsgByUniqueKey -t <topic> -i {sent[2].msg_id}" in r.stderr
    s = sent[2]
    r = admin(
        "queryMsgByOffset",
        "-n",
        daemon.namesrv_addr,
        "-t",
        "MsgT",
        "-b",
        s.message_queue.broker_name,
        "-i",
        str(s.message_queue.queue_id),
        "-o",
        str(s.queue_offset),
    )
    assert r.returncode == 0, r.stderr
    assert f"{'OffsetID:':<20} {s.offset_msg_id}\n" in r.stdout and f"{'Keys:':<20} [other]\n" in r.stdout
    r = admin(
        "queryMsgByOffset",
        "-n",
        daemon.namesrv_addr,
        "-t",
        "MsgT",
        "-b",
        s.message_queue.broker_name,
        "-i",
        str(s.message_queue.queue_id),
        "-o",
        "999",
    )
    assert r.returncode == 0 and r.stdout == ""


def test_admin_api_and_consume_by_who(daemon, sent):
    async def run():
        async with Admin(daemon.namesrv_addr) as a:
            res = await a.query_message_by_key("MsgT", "order-7")
            assert [m.body for m in res.messages] == [b"first", b"second"]
            assert res.index_last_update_timestamp > 0
            uq = await a.query_message_by_unique_key("MsgT", sent[0].msg_id)
            assert [m.body for m in uq.messages] == [b"first"]
            m = await a.view_message(sent[1].offset_msg_id)
            assert m is not None and m.body == b"second" and m.keys == ("order-7",)
            assert await a.query_topic_consume_by_who("MsgT") == []

            async def handler(msg):
                return None

            c = rmq.PushConsumer(daemon.namesrv_addr, "MsgCG", handler=handler)
            c.subscribe("MsgT", "*")
            async with c:
                await wait_until(lambda: a.query_topic_consume_by_who("MsgT"), what="the consumer seen")
                assert await a.query_topic_consume_by_who("MsgT") == ["MsgCG"]

    asyncio.run(run())
    assert os.path.isdir("/tmp/rocketmq/msgbodys")


async def test_query_msg_pushes_a_message_to_one_consumer_with_g_and_d(daemon, sent):
    """queryMsgByUniqueKey / queryMsgById -g -d: the broker that stores the message hands it to
    that consumer's handler again (CONSUME_MESSAGE_DIRECTLY) and Java's result line is printed."""
    ns = daemon.namesrv_addr
    got: list[bytes] = []

    async def handler(msg):
        got.append(msg.body)

    consumer = rmq.PushConsumer(
        ns, "MsgPushG", handler=handler, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe("MsgT", "*")
    async with consumer:
        await wait_until(lambda: len(got) == 3, what="the three messages consumed")
        first = sent[0]
        rc, out, err = await admin_async(
            "queryMsgByUniqueKey",
            "-n",
            ns,
            "-t",
            "MsgT",
            "-i",
            first.msg_id,
            "-g",
            "MsgPushG",
            "-d",
            consumer.client_id,
        )
        assert rc == 0, err
        assert out.strip().startswith(
            "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS"
        ), out
        assert got.count(b"first") == 2
        rc, out, err = await admin_async(
            "queryMsgById", "-n", ns, "-i", sent[1].offset_msg_id, "-g", "MsgPushG", "-d", consumer.client_id
        )
        assert rc == 0 and "consumeResult=CR_SUCCESS" in out, err
        assert got.count(b"second") == 2
        # -g without -d is refused before anything is sent
        rc, out, err = await admin_async("queryMsgById", "-n", ns, "-i", sent[1].offset_msg_id, "-g", "MsgPushG")
        assert rc == 2 and "-g and -d go together" in err
        assert got.count(b"second") == 2


def test_query_msg_trace_with_tracing_off_says_how_to_turn_it_on(daemon, sent):
    r = admin("queryMsgTraceById", "-n", daemon.namesrv_addr, "-i", sent[0].msg_id)
    assert r.returncode == 1
    assert "no route for topic RMQ_SYS_TRACE_TOPIC" in r.stderr and "traceTopicEnable=true" in r.stderr
    assert "trace=True" in r.stderr
