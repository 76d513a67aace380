"""rmq.Admin's consumer and connection operations against a real in-process broker with real
SDK producers and consumers connected, the bodies they read checked against Apache RocketMQ
4.9.8's captured answers (tests/golden), and the bounds of the producer table."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import remoting_golden as golden

import rmq
from rmq._testing import run_standalone, wait_until
from rmq.client.admin import Admin, AdminError
from rmq.common import fastjson
from rmq.protocol.body.conns import (
    ConsumerConnection,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    ProducerConnection,
    ResetOffsetBody,
    version_desc,
)
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import body_of
from rmq.protocol.requests.client import (
    get_consumer_connection_list,
    get_consumer_running_info,
    get_producer_connection_list,
    heart_beat,
)
from rmq.protocol.requests.consumer import (
    PullReply,
    invoke_broker_to_get_consumer_status,
    invoke_broker_to_reset_offset,
    parse_pull,
    pull_message,
)
from rmq.remoting import RemotingClient

FIRST = rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def golden_answers(code: int) -> list[tuple[RemotingCommand, RemotingCommand]]:
    """(request, answer) pairs of the mqadmin capture for ``code``; answers are matched by the
    request code they carry and their opaque (several connections share a stream label)."""
    from rmq.remoting.codec import decode_frame

    rows = golden.mqadmin_frames()
    for row in rows:
        row["cmd"] = decode_frame(row["frame"])
    out = []
    for i, row in enumerate(rows):
        if row["flag"] & 1 or row["code"] != code:
            continue
        answer = next(
            (
                r["cmd"]
                for r in rows[i + 1 :]
                if r["flag"] & 1 and r.get("request_code") == code and r["cmd"].opaque == row["cmd"].opaque
            ),
            None,
        )
        if answer is not None:
            out.append((row["cmd"], answer))
    return out


#: Maps keyed by data (topics, queues, client ids): their shape is that of one value.
MAPS = {"subscriptionTable", "statusTable", "mqTable", "offsetTable", "consumerTable", "messageQueueTable"}


def shape(value: object, name: str = "") -> object:
    """Keys and value types, recursively (the values of live state differ, the shape may not)."""
    if isinstance(value, dict):
        if name in MAPS:
            return {"<key>": shape(next(iter(value.values())))} if value else {}
        return {str(k): shape(v, str(k)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


# -- the bodies --------------------------------------------------------------------------------


def test_fastjson_bodies_round_trip():
    mq = rmq.MessageQueue("T", "broker-a", 3)
    body = ResetOffsetBody({mq: 7, rmq.MessageQueue("T", "broker-a", 0): 0})
    assert body.encode().startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:0,')
    assert ResetOffsetBody.decode(body.encode()) == body
    assert ResetOffsetBody.decode(body.encode_for_c()) == body  # the C++ list form
    assert json.loads(body.encode_for_c())["offsetTable"][1] == {
        "brokerName": "broker-a",
        "offset": 7,
        "queueId": 3,
        "topic": "T",
    }
    status = GetConsumerStatusBody({}, {"c1": {mq: 5}})
    assert GetConsumerStatusBody.decode(status.encode()) == status
    assert fastjson.loads('{"a":{0:"x"},"b":[1,2.5,true,null]}') == {"a": {"0": "x"}, "b": [1, 2.5, True, None]}
    for bad in ('{"a":', '{{"x":1}:', "[1,2", '{"a":1}junk', "{" * 100 + "}" * 100):
        with pytest.raises(ValueError):
            fastjson.loads(bad)
    assert (version_desc(409), version_desc(62), version_desc(10_000)) == (
        "V4_9_8",
        "V3_1_8_SNAPSHOT",
        "HIGHER_VERSION",
    )


def test_java_answers_decode():
    """Each captured Java answer reads into the admin's types."""
    (_, a203), *_ = golden_answers(RequestCode.GET_CONSUMER_CONNECTION_LIST)
    cc = ConsumerConnection.from_json(fastjson.loads(a203.body_bytes()))
    assert [(c.client_id, c.language, version_desc(c.version)) for c in cc.connection_set] == [
        ("192.0.2.2@29011#2226785937209", "JAVA", "V4_9_8")
    ]
    assert (cc.consume_type, cc.message_model, cc.consume_from_where) == (
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_FIRST_OFFSET",
    )
    assert set(cc.subscription_table) == {"%RETRY%cg_parity", "ParityT"}
    assert cc.subscription_table["ParityT"].sub_string == "*"

    ((_, a204),) = golden_answers(RequestCode.GET_PRODUCER_CONNECTION_LIST)
    pc = ProducerConnection.from_json(fastjson.loads(a204.body_bytes()))
    assert [c.client_addr for c in pc.connection_set] == ["127.0.0.1:43928"]

    for req, a222 in golden_answers(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET):
        table = ResetOffsetBody.decode(a222.body_bytes()).offset_table
        assert sorted(mq.queue_id for mq in table) == [0, 1, 2, 3] and min(table.values()) > 100_000
        assert req.ext_fields["timestamp"] == "-1" and req.ext_fields["isForce"] == "true"

    (_, a307), *_ = golden_answers(RequestCode.GET_CONSUMER_RUNNING_INFO)
    info = ConsumerRunningInfo.decode(a307.body_bytes())
    assert info.properties["PROP_CONSUMEORDERLY"] == "false" and info.properties["consumerGroup"] == "cg_parity"
    assert rmq.MessageQueue("ParityT", "broker-a", 1) in info.mq_table
    assert info.mq_table[rmq.MessageQueue("ParityT", "broker-a", 1)]["commitOffset"] == 57710
    assert info.status_table["ParityT"]["consumeOKTPS"] > 0

    # 220 is a broker → client request: its body is the table the 222 answer carries
    rows = [r for r in golden.mqadmin_frames() if r["code"] == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]
    from rmq.remoting.codec import decode_frame

    bodies = [ResetOffsetBody.decode(decode_frame(r["frame"]).body_bytes()) for r in rows]
    assert [b.offset_table for b in bodies] == [
        ResetOffsetBody.decode(a.body_bytes()).offset_table
        for _, a in golden_answers(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
    ]
    assert all(decode_frame(r["frame"]).flag & 2 for r in rows)  # oneway, as ours


# -- live --------------------------------------------------------------------------------------


@pytest.fixture
async def live(tmp_path):
    """A broker with a topic of 4 queues, 8 messages, an SDK producer and an SDK push consumer."""
    async with run_standalone(tmp_path / "store", call_client_timeout_mills=3000) as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with Admin(ns_addr) as admin:
            await admin.create_and_update_topic_config(
                broker.broker_addr, "ConnsT", read_queue_nums=4, write_queue_nums=4
            )
            got: list[bytes] = []

            async def handler(msg):
                got.append(msg.body)

            async with rmq.Producer(ns_addr, "PID_conns") as producer:
                sent = [await producer.send(rmq.Message("ConnsT", f"m{i}".encode())) for i in range(8)]
                consumer = rmq.PushConsumer(ns_addr, "GID_conns", handler=handler, consume_from_where=FIRST)
                consumer.subscribe("ConnsT", "*")
                async with consumer:
                    await wait_until(lambda: len(got) == 8, what="8 messages consumed")
                    await wait_until(
                        lambda: sum(broker.consumer_offset_manager.query_offsets("GID_conns", "ConnsT").values()) == 8,
                        what="the offsets committed",
                    )
                    yield admin, broker, producer, consumer, got, sent


async def test_connections_of_real_sdk_clients(live):
    admin, broker, _producer, consumer, _got, _sent = live
    cc = await admin.examine_consumer_connection_info("GID_conns")
    assert [c.client_id for c in cc.connection_set] == [consumer.client_id]
    assert cc.connection_set[0].language == "PYTHON" and cc.connection_set[0].client_addr.startswith("127.0.0.1:")
    assert (cc.consume_type, cc.message_model, cc.consume_from_where) == (
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_FIRST_OFFSET",
    )
    assert {"ConnsT", "%RETRY%GID_conns"} <= set(cc.subscription_table)
    pc = await admin.examine_producer_connection_info("PID_conns", "ConnsT")
    assert [c.language for c in pc.connection_set] == ["PYTHON"]
    with pytest.raises(AdminError) as e:
        await admin.examine_consumer_connection_info("GID_nobody")  # no route for its retry topic
    with pytest.raises(AdminError) as e:
        await admin._call(broker.broker_addr, get_consumer_connection_list("GID_nobody"), body_of)
    assert e.value.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert e.value.remark == "the consumer group[GID_nobody] not online"
    with pytest.raises(AdminError) as e:
        await admin._call(broker.broker_addr, get_producer_connection_list("PID_nobody"), body_of)
    assert e.value.code == ResponseCode.SYSTEM_ERROR and e.value.remark == "the producer group[PID_nobody] not exist"


async def test_ours_have_javas_shape(live):
    """Our broker's answers to the captured requests have the Java answers' keys and types."""
    admin, broker, _producer, consumer, _got, _sent = live
    for code, live_req in (
        (203, get_consumer_connection_list("GID_conns")),
        (204, get_producer_connection_list("PID_conns")),
        (222, invoke_broker_to_reset_offset("ConnsT", "GID_conns", -1, True)),
        (307, get_consumer_running_info("GID_conns", consumer.client_id or "")),
    ):
        (_, java), *_ = golden_answers(code)
        ours = await admin._call(broker.broker_addr, live_req, lambda r: r)
        assert ours.code == java.code == ResponseCode.SUCCESS, (code, ours.remark)
        mine, theirs = shape(fastjson.loads(ours.body_bytes())), shape(fastjson.loads(java.body_bytes()))
        if code == 307:  # Java's properties carry its own fields (pullBatchSize, ...): the keys we share
            for k in ("mqTable", "subscriptionSet", "statusTable"):
                assert mine[k] == theirs[k], (code, k, mine[k], theirs[k])
            assert {
                "PROP_CONSUMEORDERLY",
                "PROP_CONSUME_TYPE",
                "PROP_CLIENT_VERSION",
                "PROP_NAMESERVER_ADDR",
                "PROP_CONSUMER_START_TIMESTAMP",
                "consumerGroup",
                "messageModel",
                "consumeFromWhere",
            } <= set(mine["properties"])
        else:
            assert mine == theirs, (code, mine, theirs)


async def test_relays_and_status(live):
    admin, _broker, _producer, consumer, got, sent = live
    info = await admin.get_consumer_running_info("GID_conns", consumer.client_id)
    assert {mq.queue_id for mq in info.mq_table if mq.topic == "ConnsT"} == {0, 1, 2, 3}
    assert info.properties["PROP_CLIENT_VERSION"] == "V4_9_8"
    with pytest.raises(AdminError) as e:
        await admin.get_consumer_running_info("GID_conns", "10.0.0.1@1#nobody")
    assert e.value.remark == "The Consumer <GID_conns> <10.0.0.1@1#nobody> not online"

    result = await admin.consume_message_directly("GID_conns", consumer.client_id, sent[3].offset_msg_id)
    assert result.consume_result == "CR_SUCCESS" and got.count(b"m3") == 2  # handed to the handler again
    with pytest.raises(AdminError) as e:
        await admin.consume_message_directly(
            "GID_conns", consumer.client_id, sent[3].offset_msg_id[:16] + "7FFFFFFF00000000"
        )
    assert "no message" in e.value.remark

    status = await admin.get_consume_status("ConnsT", "GID_conns")
    assert list(status) == [consumer.client_id]
    assert sum(status[consumer.client_id].values()) == 8
    stats = await admin.examine_consume_stats("GID_conns")
    assert stats.compute_total_diff() == 0 and len(stats.offset_table) >= 4


async def test_reset_offset_moves_a_live_sdk_consumer_back(live):
    admin, broker, _producer, _consumer, got, _sent = live
    table = await admin.reset_offset_by_timestamp("ConnsT", "GID_conns", 0, force=True)
    assert sorted((mq.queue_id, off) for mq, off in table.items()) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    await wait_until(lambda: len(got) == 16, what="the 8 messages consumed again")
    assert sorted(got[8:]) == sorted(got[:8])
    # the broker's own offsets moved too, then forward again as the member consumed
    await wait_until(
        lambda: sum(broker.consumer_offset_manager.query_offsets("GID_conns", "ConnsT").values()) == 8,
        what="the offsets committed again",
    )
    # not forced and the timestamp's offsets are ahead: nothing moves forward
    table = await admin.reset_offset_by_timestamp("ConnsT", "GID_conns", -1, force=False)
    assert sum(table.values()) == 8


async def test_reset_with_no_consumer_online_sets_the_broker_offsets(tmp_path):
    async with run_standalone(tmp_path / "store") as (ns, broker):
        ns_addr = f"127.0.0.1:{ns.port}"
        async with Admin(ns_addr) as admin:
            await admin.create_and_update_topic_config(
                broker.broker_addr, "OffT", read_queue_nums=2, write_queue_nums=2
            )
            async with rmq.Producer(ns_addr, "PID_off") as producer:
                stamps = []
                for i in range(6):
                    await producer.send(rmq.Message("OffT", b"x"), queue=rmq.MessageQueue("OffT", "broker-a", i % 2))
                    stamps.append(int(time.time() * 1000))
            await admin.update_consume_offset(broker.broker_addr, "GID_off", rmq.MessageQueue("OffT", "broker-a", 0), 3)
            await admin.update_consume_offset(broker.broker_addr, "GID_off", rmq.MessageQueue("OffT", "broker-a", 1), 3)
            with pytest.raises(AdminError) as e:
                await admin.reset_offset_by_timestamp("OffT", "GID_off", -1)
            assert e.value.code == ResponseCode.CONSUMER_NOT_ONLINE
            assert e.value.remark == (
                "Consumer not online, so can not reset offset, Group: GID_off Topic: OffT Timestamp: -1"
            )
            stats = await admin.reset_offset_by_timestamp_old("GID_off", "OffT", 0, force=True)
            assert [(s.queue_id, s.consumer_offset, s.rollback_offset) for s in stats] == [(0, 3, 0), (1, 3, 0)]
            assert broker.consumer_offset_manager.query_offsets("GID_off", "OffT") == {0: 0, 1: 0}
            stats = await admin.reset_offset_by_timestamp_old("GID_off", "OffT", -1, force=False)
            assert [s.rollback_offset for s in stats] == [0, 0]  # not forced: never forward
            stats = await admin.reset_offset_by_timestamp_old("GID_off", "OffT", -1, force=True)
            assert broker.consumer_offset_manager.query_offsets("GID_off", "OffT") == {0: 3, 1: 3}
            with pytest.raises(AdminError) as e:  # a group with no offsets at all
                await admin._call(broker.broker_addr, invoke_broker_to_reset_offset("OffT", "GID_none", -1), body_of)
            assert e.value.remark == "THe consumer group <GID_none> not exist"


async def _heartbeat(client: RemotingClient, addr: str, client_id: str, groups: list[str]) -> int:
    resp = await client.invoke(
        addr,
        heart_beat(
            {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": g} for g in groups]}
        ),
        timeout=5.0,
    )
    return resp.code


async def test_producer_table_is_bounded(tmp_path):
    async with run_standalone(tmp_path / "store", max_producer_groups=2, max_producers_per_group=1) as (ns, broker):
        addr = broker.broker_addr
        async with RemotingClient() as a, RemotingClient() as b:
            assert await _heartbeat(a, addr, "client-a", ["P1", "P2", "P3"]) == ResponseCode.SUCCESS
            assert set(broker.producer_manager.group_channel_table) == {"P1", "P2"}  # P3: past maxProducerGroups
            assert await _heartbeat(b, addr, "client-b", ["P1"]) == ResponseCode.SUCCESS
            async with Admin(f"127.0.0.1:{ns.port}") as admin:
                pc = await admin._call(
                    addr,
                    get_producer_connection_list("P1"),
                    lambda r: ProducerConnection.from_json(fastjson.loads(body_of(r))),
                )
            assert [c.client_id for c in pc.connection_set] == ["client-b"]  # the older one evicted
            # a closed connection leaves the table
            await b.close()
            await wait_until(
                lambda: "P1" not in broker.producer_manager.group_channel_table,
                what="client-b's producer entry removed on close",
            )
            # and an expired one (no heartbeat for channelExpiredSeconds)
            broker.producer_manager.scan_not_active_channel(time.monotonic() + 121)
            assert broker.producer_manager.group_channel_table == {}


class _Hang:
    """A client-side processor that never answers (a consumer stuck in its handler)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    def reject_request(self) -> bool:
        return False

    async def process_request(self, conn, cmd):
        self.asked.set()
        await asyncio.Event().wait()


def _consumer_heartbeat(client_id: str, group: str, version: int = 409) -> RemotingCommand:
    cmd = heart_beat(
        {
            "clientID": client_id,
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [],
                    "unitMode": False,
                }
            ],
        }
    )
    cmd.version = version
    return cmd


async def test_relay_timeout_unsupported_and_old_clients(tmp_path):
    async with run_standalone(tmp_path / "store", call_client_timeout_mills=500) as (ns, broker):
        addr = broker.broker_addr
        hang = _Hang()
        async with (
            RemotingClient() as stuck,
            RemotingClient() as plain,
            RemotingClient() as old,
            Admin(f"127.0.0.1:{ns.port}") as admin,
        ):
            stuck.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, hang)
            for client, cid, version in ((stuck, "stuck", 409), (plain, "plain", 409), (old, "old", 30)):
                resp = await client.invoke(addr, _consumer_heartbeat(cid, "GID_relay", version), timeout=5)
                assert resp.code == ResponseCode.SUCCESS, resp.remark

            async def running_info(cid: str) -> AdminError:
                with pytest.raises(AdminError) as e:
                    await admin._call(addr, get_consumer_running_info("GID_relay", cid), body_of)
                return e.value

            e = await running_info("stuck")
            assert hang.asked.is_set() and e.code == ResponseCode.CONSUME_MSG_TIMEOUT
            assert e.remark.startswith("consumer <GID_relay> <stuck> Timeout:")
            e = await running_info("plain")  # its client has no processor for 307: its answer, relayed
            assert e.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            e = await running_info("old")
            assert e.remark == (
                "The Consumer <old> Version <V3_0_8_SNAPSHOT> too low to finish, please upgrade it to V3_1_8_SNAPSHOT"
            )
            # the connection listing has all three, each with the version it declared
            cc = await admin._call(
                addr,
                get_consumer_connection_list("GID_relay"),
                lambda r: ConsumerConnection.from_json(fastjson.loads(body_of(r))),
            )
            assert sorted((c.client_id, c.version) for c in cc.connection_set) == [
                ("old", 30),
                ("plain", 409),
                ("stuck", 409),
            ]
            # status from every member: the ones that cannot answer are left out, as Java does
            status = await admin._call(
                addr,
                invoke_broker_to_get_consumer_status("T", "GID_relay"),
                lambda r: GetConsumerStatusBody.decode(body_of(r)),
            )
            assert status.consumer_table == {}
            with pytest.raises(AdminError) as err:
                await admin._call(addr, invoke_broker_to_get_consumer_status("T", "GID_none"), body_of)
            assert err.value.remark == "No Any Consumer online in the consumer group: [GID_none]"


async def test_a_member_that_ignores_the_reset_is_moved_on_its_next_pull(tmp_path):
    """ali-ons has no handler for RESET_CONSUMER_CLIENT_OFFSET: its next pull of each queue at
    another offset is answered PULL_OFFSET_MOVED to the reset offset, once; a pull at the reset
    offset (a member that applied it) is served as usual."""
    from rmq.protocol.headers.consumer import PullMessageRequestHeader

    async with run_standalone(tmp_path / "store") as (ns, broker):
        addr = broker.broker_addr
        async with Admin(f"127.0.0.1:{ns.port}") as admin, RemotingClient() as member:
            await admin.create_and_update_topic_config(addr, "IgnT", read_queue_nums=2, write_queue_nums=2)
            async with rmq.Producer(f"127.0.0.1:{ns.port}", "PID_ign") as p:
                for i in range(4):
                    await p.send(rmq.Message("IgnT", b"x"), queue=rmq.MessageQueue("IgnT", "broker-a", i % 2))
            assert (await member.invoke(addr, _consumer_heartbeat("ign", "GID_ign"), timeout=5)).code == 0
            for qid in (0, 1):
                await admin.update_consume_offset(addr, "GID_ign", rmq.MessageQueue("IgnT", "broker-a", qid), 2)
            table = await admin.reset_offset_by_timestamp("IgnT", "GID_ign", 0)
            assert sorted(table.values()) == [0, 0]

            async def pull(qid: int, offset: int) -> PullReply:
                cmd = pull_message(
                    PullMessageRequestHeader(
                        consumer_group="GID_ign",
                        topic="IgnT",
                        queue_id=qid,
                        queue_offset=offset,
                        max_msg_nums=32,
                        sys_flag=4,
                        subscription="*",
                    )
                )
                return parse_pull(await member.invoke(addr, cmd, timeout=5))

            moved = await pull(0, 2)  # still at its old offset
            assert moved.status.name == "OFFSET_ILLEGAL" and moved.next_begin_offset == 0
            again = await pull(0, 2)  # once only
            assert again.status.name != "OFFSET_ILLEGAL"
            applied = await pull(1, 0)  # at the reset offset: served, the entry dropped
            assert applied.status.name == "FOUND"
            assert (await pull(1, 2)).status.name != "OFFSET_ILLEGAL"
            assert len(broker.pending_resets) == 0


def test_pending_resets_expire_and_are_bounded():
    from rmq.broker.offset_reset import PendingResets

    p = PendingResets(ttl=60, max_entries=3)
    p.add("G", "T", {0: 5, 1: 5, 2: 5, 3: 5})
    assert len(p) == 3 and p.redirect("G", "T", 0, 9) is None  # the oldest (queue 0) was dropped
    assert p.redirect("G", "T", 3, 9) == 5 and p.redirect("G", "T", 3, 9) is None
    assert p.expire(time.monotonic() + 61) == 2 and len(p) == 0
