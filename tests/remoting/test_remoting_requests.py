"""rmq.protocol.requests: every builder survives build → encode → decode → from_ext_fields, and
the parsers read real RocketMQ 4.9.8 replies (golden captures) into typed results or raise the
right rmq.errors with the retriable flag."""

from __future__ import annotations

import json

import pytest
from remoting_golden import quickstart

from rmq.common.route import ClusterInfo, TopicRouteData
from rmq.errors import (
    PullNotFoundError,
    RemotingCommandError,
    SubscriptionNotLatestError,
    SystemBusyError,
    TopicNotExistError,
    for_code,
)
from rmq.protocol.body.conns import ProducerTableInfo
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.client import UnregisterClientRequestHeader
from rmq.protocol.headers.consumer import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.protocol.headers.message import EndTransactionRequestHeader, SendMessageRequestHeader, read_send_header
from rmq.protocol.headers.namesrv import GetRouteInfoRequestHeader
from rmq.protocol.headers.topic import CreateTopicRequestHeader, DeleteTopicRequestHeader
from rmq.protocol.requests import LANGUAGE, check_success, parse_body
from rmq.protocol.requests.client import heart_beat, parse_all_producer_info, parse_heart_beat, unregister_client
from rmq.protocol.requests.consumer import (
    consumer_send_msg_back,
    create_subscription_group,
    get_consumer_list_by_group,
    get_max_offset,
    get_min_offset,
    lock_batch_mq,
    parse_consumer_list,
    parse_lock_batch_mq,
    parse_offset,
    parse_pull,
    parse_query_consumer_offset,
    pull_message,
    query_consumer_offset,
    search_offset,
    unlock_batch_mq,
    update_consumer_offset,
)
from rmq.protocol.requests.message import end_transaction, parse_send, send_message
from rmq.protocol.requests.namesrv import (
    delete_topic_in_namesrv,
    get_all_topic_list,
    get_broker_cluster_info,
    get_route_info,
    parse_cluster_info,
    parse_topic_list,
    parse_topic_route,
)
from rmq.protocol.requests.topic import create_topic, delete_topic_in_broker
from rmq.remoting.codec import decode_frame, encode
from rmq.types import MessageQueue, PullStatus, SendStatus


def _wire(cmd: RemotingCommand) -> RemotingCommand:
    """Encode and decode again, as the peer sees it."""
    return decode_frame(b"".join(bytes(p) for p in encode(cmd)))


SEND = SendMessageRequestHeader(
    producer_group="PG",
    topic="T",
    queue_id=3,
    sys_flag=0,
    born_timestamp=1700000000000,
    flag=0,
    properties="WAIT\x01true\x02",
    reconsume_times=0,
    batch=False,
)
PULL = PullMessageRequestHeader(
    consumer_group="G",
    topic="T",
    queue_id=1,
    queue_offset=64,
    max_msg_nums=32,
    sys_flag=6,
    suspend_timeout_millis=15000,
    subscription="a || b",
    sub_version=7,
    expression_type="TAG",
)
END_TX = EndTransactionRequestHeader(
    producer_group="PG",
    tran_state_table_offset=5,
    commit_log_offset=1234,
    commit_or_rollback=8,
    from_transaction_check=True,
    msg_id="M",
    transaction_id="X",
)
SEND_BACK = ConsumerSendMsgBackRequestHeader(
    offset=99, group="G", delay_level=3, origin_msg_id="M", origin_topic="T", max_reconsume_times=16
)
CREATE = CreateTopicRequestHeader(topic="T", read_queue_nums=8, write_queue_nums=4, perm=6, order=True)

# (request built, its request code, the header class the broker decodes it with, the header it must read back)
ROUND_TRIPS = [
    (
        get_route_info("T"),
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        GetRouteInfoRequestHeader,
        GetRouteInfoRequestHeader(topic="T"),
    ),
    (send_message(SEND, b"body"), RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeader, SEND),
    (end_transaction(END_TX, "why"), RequestCode.END_TRANSACTION, EndTransactionRequestHeader, END_TX),
    (pull_message(PULL), RequestCode.PULL_MESSAGE, PullMessageRequestHeader, PULL),
    (
        query_consumer_offset("G", "T", 2),
        RequestCode.QUERY_CONSUMER_OFFSET,
        QueryConsumerOffsetRequestHeader,
        QueryConsumerOffsetRequestHeader(consumer_group="G", topic="T", queue_id=2),
    ),
    (
        update_consumer_offset("G", "T", 2, 77),
        RequestCode.UPDATE_CONSUMER_OFFSET,
        UpdateConsumerOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader(consumer_group="G", topic="T", queue_id=2, commit_offset=77),
    ),
    (
        get_max_offset("T", 2),
        RequestCode.GET_MAX_OFFSET,
        GetMaxOffsetRequestHeader,
        GetMaxOffsetRequestHeader(topic="T", queue_id=2),
    ),
    (
        get_min_offset("T", 2),
        RequestCode.GET_MIN_OFFSET,
        GetMinOffsetRequestHeader,
        GetMinOffsetRequestHeader(topic="T", queue_id=2),
    ),
    (
        search_offset("T", 2, 1700000000000),
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        SearchOffsetRequestHeader,
        SearchOffsetRequestHeader(topic="T", queue_id=2, timestamp=1700000000000),
    ),
    (
        get_consumer_list_by_group("G"),
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        GetConsumerListByGroupRequestHeader,
        GetConsumerListByGroupRequestHeader(consumer_group="G"),
    ),
    (
        consumer_send_msg_back(SEND_BACK),
        RequestCode.CONSUMER_SEND_MSG_BACK,
        ConsumerSendMsgBackRequestHeader,
        SEND_BACK,
    ),
    (
        unregister_client("cid", "PG", None),
        RequestCode.UNREGISTER_CLIENT,
        UnregisterClientRequestHeader,
        UnregisterClientRequestHeader(client_id="cid", producer_group="PG"),
    ),
    (create_topic(CREATE), RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader, CREATE),
    (
        delete_topic_in_broker("T"),
        RequestCode.DELETE_TOPIC_IN_BROKER,
        DeleteTopicRequestHeader,
        DeleteTopicRequestHeader(topic="T"),
    ),
    (
        delete_topic_in_namesrv("T"),
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        DeleteTopicRequestHeader,
        DeleteTopicRequestHeader(topic="T"),
    ),
]


@pytest.mark.parametrize(
    "cmd,code,header_cls,expected", ROUND_TRIPS, ids=[RequestCode(c).name for _, c, _, _ in ROUND_TRIPS]
)
def test_builder_round_trips_through_the_codec_into_the_typed_header(cmd, code, header_cls, expected):
    got = _wire(cmd)
    assert got.code == code and not got.is_response
    assert got.language == LANGUAGE
    assert all(type(v) is str for v in got.ext_fields.values())  # the C++ client reads only strings
    if header_cls is SendMessageRequestHeader:  # its naming is the code's
        assert read_send_header(code, got.ext_fields) == expected
    else:
        assert header_cls.from_ext_fields(got.ext_fields) == expected


def test_send_uses_the_one_letter_v2_names_and_batch_picks_its_code():
    got = _wire(send_message(SEND, b"body"))
    assert set(got.ext_fields) == {
        SendMessageRequestHeader.WIRE_NAMES_V2[f]
        for f in (
            "producer_group",
            "topic",
            "default_topic",
            "default_topic_queue_nums",
            "queue_id",
            "sys_flag",
            "born_timestamp",
            "flag",
            "properties",
            "reconsume_times",
            "unit_mode",
            "batch",
        )
    }
    assert got.body_bytes() == b"body"
    batch = SendMessageRequestHeader(producer_group="PG", topic="T", queue_id=0, batch=True)
    assert send_message(batch, b"x").code == RequestCode.SEND_BATCH_MESSAGE
    # the C++ clients' form for brokers without SEND_BATCH_MESSAGE: V2 with the batch flag
    v2 = _wire(send_message(batch, b"x", code=RequestCode.SEND_MESSAGE_V2))
    assert v2.code == RequestCode.SEND_MESSAGE_V2 and SendMessageRequestHeader.from_ext_fields_v2(v2.ext_fields).batch
    assert send_message(SEND, b"x", oneway=True).is_oneway


def test_end_transaction_is_oneway_with_its_remark():
    got = _wire(end_transaction(END_TX, "checkLocalTransactionState Exception"))
    assert got.is_oneway and got.remark == "checkLocalTransactionState Exception"


def test_body_requests_carry_java_json_bodies():
    mqs = [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    for build, code in ((lock_batch_mq, RequestCode.LOCK_BATCH_MQ), (unlock_batch_mq, RequestCode.UNLOCK_BATCH_MQ)):
        got = _wire(build("G", "cid", mqs))
        assert got.code == code and got.ext_fields == {}
        body = json.loads(got.body_bytes())
        assert body["consumerGroup"] == "G" and body["clientId"] == "cid"
        assert {MessageQueue.from_json(d) for d in body["mqSet"]} == set(mqs)
    hb = _wire(heart_beat({"clientID": "cid", "producerDataSet": [], "consumerDataSet": []}))
    assert hb.code == RequestCode.HEART_BEAT and json.loads(hb.body_bytes())["clientID"] == "cid"
    sg = _wire(create_subscription_group({"groupName": "G", "retryMaxTimes": 16}))
    assert sg.code == RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    assert json.loads(sg.body_bytes()) == {"groupName": "G", "retryMaxTimes": 16}
    for build, code in (
        (get_all_topic_list, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        (get_broker_cluster_info, RequestCode.GET_BROKER_CLUSTER_INFO),
    ):
        got = _wire(build())
        assert got.code == code and got.ext_fields == {} and got.body_bytes() == b""


def test_every_builder_takes_a_fresh_opaque():
    assert len({get_max_offset("T", 0).opaque for _ in range(100)}) == 100


# ---------------------------------------------------------------------------------- golden replies


def _golden_pairs() -> list[tuple[int, RemotingCommand]]:
    """(request code, reply) of every answered request in the 4.9.8 quickstart capture."""
    rows = quickstart()
    requests = {}
    for r in rows:
        cmd = decode_frame(r["frame"])
        src, dst = r["stream"].split("->")
        if not cmd.is_response:
            requests[(f"{dst}->{src}", cmd.opaque)] = cmd.code
    out = []
    for r in rows:
        cmd = decode_frame(r["frame"])
        code = requests.get((r["stream"], cmd.opaque))
        if cmd.is_response and code is not None:
            out.append((code, cmd))
    return out


GOLDEN = _golden_pairs()


def _golden(code: int) -> list[RemotingCommand]:
    found = [resp for c, resp in GOLDEN if c == code]
    assert found, f"no golden reply to request {code}"
    return found


def test_golden_route_replies():
    routes = [parse_topic_route(r) for r in _golden(RequestCode.GET_ROUTEINFO_BY_TOPIC)]
    assert None in routes  # TOPIC_NOT_EXIST for the %RETRY% topic is a normal outcome
    found = [r for r in routes if r is not None]
    assert found and all(isinstance(r, TopicRouteData) for r in found)
    for route in found:
        assert route.master_addr("broker-a") == "127.0.0.1:10911"
        assert route.broker("broker-a").cluster == "DefaultCluster"
        n = route.queue_datas[0].read_queue_nums
        assert route.readable_queues() == [("broker-a", i) for i in range(n)]
        assert route.writable_queues() == [("broker-a", i) for i in range(route.queue_datas[0].write_queue_nums)]
        assert TopicRouteData.from_json(route.to_json()) == route


def test_golden_send_replies():
    for resp in _golden(RequestCode.SEND_MESSAGE_V2):
        result = parse_send(resp, MessageQueue("TopicTest", "broker-a", 99), "UNIQ")
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id == "UNIQ" and result.offset_msg_id == resp.ext_fields["msgId"]
        assert result.message_queue == MessageQueue("TopicTest", "broker-a", int(resp.ext_fields["queueId"]))
        assert result.queue_offset == int(resp.ext_fields["queueOffset"])
        assert parse_send(resp, result.message_queue).msg_id == result.offset_msg_id  # no UNIQ_KEY given


def test_golden_pull_replies():
    replies = _golden(RequestCode.PULL_MESSAGE)
    found = [r for r in replies if r.code == ResponseCode.SUCCESS]
    assert found
    for resp in found:
        reply = parse_pull(resp)
        assert reply.status is PullStatus.FOUND and reply.body == resp.body_bytes() and reply.body
        assert reply.next_begin_offset == int(resp.ext_fields["nextBeginOffset"])
        assert (reply.min_offset, reply.max_offset) == (
            int(resp.ext_fields["minOffset"]),
            int(resp.ext_fields["maxOffset"]),
        )
    not_latest = [r for r in replies if r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST]
    with pytest.raises(SubscriptionNotLatestError) as e:
        parse_pull(not_latest[0])
    assert e.value.retriable and "not latest" in e.value.remark


def test_every_golden_4_9_8_pull_reply_parses_and_its_records_agree():
    import base64
    import struct
    from pathlib import Path

    lines = (Path(__file__).resolve().parent.parent / "golden" / "rocketmq-4.9.8-pull-responses.jsonl").read_text()
    rows = [json.loads(line) for line in lines.splitlines() if line.strip()]
    assert rows
    found = 0
    for row in rows:
        resp = decode_frame(base64.b64decode(row["frame_b64"]))
        if resp.code == ResponseCode.SUBSCRIPTION_NOT_LATEST:
            with pytest.raises(SubscriptionNotLatestError):
                parse_pull(resp)
            continue
        reply = parse_pull(resp)
        assert reply.status is PullStatus.FOUND
        found += 1
        # the first record's QUEUEOFFSET (at byte 20) and the count agree with nextBeginOffset
        first = struct.unpack_from(">q", reply.body, 20)[0]
        count, pos = 0, 0
        while pos < len(reply.body):
            pos += struct.unpack_from(">i", reply.body, pos)[0]
            count += 1
        assert first + count == reply.next_begin_offset <= reply.max_offset
    assert found >= 30


def test_golden_offset_consumer_list_and_heartbeat_replies():
    assert [parse_query_consumer_offset(r) for r in _golden(RequestCode.QUERY_CONSUMER_OFFSET)] == [0, 0, 0]
    for resp in _golden(RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        assert parse_consumer_list(resp) == ["192.0.2.2@24849#886466652593"]
    for resp in _golden(RequestCode.HEART_BEAT):
        assert parse_heart_beat(resp) == resp.version
    for resp in _golden(RequestCode.UNREGISTER_CLIENT):
        check_success(resp)


# ---------------------------------------------------------------------------------- outcomes and errors


def _reply(code: int, ext: dict | None = None, body: bytes | None = None, remark: str | None = None):
    return get_max_offset("T", 0).response(code, remark, ext, body)


def test_normal_outcomes_are_values_not_exceptions():
    assert parse_query_consumer_offset(_reply(ResponseCode.QUERY_NOT_FOUND)) is None
    assert parse_topic_route(_reply(ResponseCode.TOPIC_NOT_EXIST, remark="No topic route info")) is None
    ext = {"suggestWhichBrokerId": "1", "nextBeginOffset": "10", "minOffset": "0", "maxOffset": "10"}
    for code, status in (
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ):
        reply = parse_pull(_reply(code, ext))
        assert reply.status is status and reply.body == b"" and reply.suggest_which_broker_id == 1
    sent = {"msgId": "ID", "queueId": "1", "queueOffset": "5"}
    for code, status in (
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ):
        assert parse_send(_reply(code, sent), MessageQueue("T", "b", 1)).status is status
    assert parse_offset(_reply(ResponseCode.SUCCESS, {"offset": "42"})) == 42
    assert parse_topic_list(_reply(0, body=b'{"topicList":["b","a"]}')) == ["a", "b"]
    assert parse_consumer_list(_reply(0)) == []
    assert parse_lock_batch_mq(
        _reply(0, body=json.dumps({"lockOKMQSet": [{"topic": "T", "brokerName": "b", "queueId": 2}]}).encode())
    ) == {MessageQueue("T", "b", 2)}


@pytest.mark.parametrize(
    "parse",
    [
        parse_offset,
        check_success,
        parse_topic_list,
        parse_cluster_info,
        parse_consumer_list,
        parse_lock_batch_mq,
        parse_heart_beat,
        parse_query_consumer_offset,
        parse_pull,
        parse_topic_route,
        lambda r: parse_send(r, MessageQueue("T", "b", 0)),
    ],
)
def test_refusals_raise_the_error_of_their_code(parse):
    with pytest.raises(SystemBusyError) as e:
        parse(_reply(ResponseCode.SYSTEM_BUSY, remark="[PCBUSY_CLEAN_QUEUE]broker busy"))
    assert e.value.retriable and e.value.code == ResponseCode.SYSTEM_BUSY and "busy" in e.value.remark
    with pytest.raises(for_code(ResponseCode.MESSAGE_ILLEGAL)) as e:
        parse(_reply(ResponseCode.MESSAGE_ILLEGAL, remark="bad"))
    assert not e.value.retriable


def test_topic_not_exist_on_a_send_is_an_error_that_refreshes_the_route():
    with pytest.raises(TopicNotExistError) as e:
        parse_send(_reply(ResponseCode.TOPIC_NOT_EXIST, remark="topic[T] not exist"), MessageQueue("T", "b", 0))
    assert e.value.retriable
    with pytest.raises(PullNotFoundError):  # not found is a pull outcome, an error for anything else
        check_success(_reply(ResponseCode.PULL_NOT_FOUND))


@pytest.mark.parametrize(
    "parse,resp",
    [
        (parse_offset, _reply(0, {})),
        (parse_offset, _reply(0, {"offset": "x"})),
        (parse_pull, _reply(0, {"nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"})),
        (lambda r: parse_send(r, MessageQueue("T", "b", 0)), _reply(0, {"msgId": "M", "queueOffset": "1"})),
        (parse_topic_route, _reply(0, body=b"{not json")),
        (parse_topic_route, _reply(0, body=b'{"queueDatas":[{"readQueueNums":1}]}')),
        (parse_topic_route, _reply(0, body=b"[]")),
        (parse_topic_list, _reply(0, body=b'{"topicList": 5}')),
        (parse_cluster_info, _reply(0, body=b'{"brokerAddrTable": {"b": {"brokerAddrs": {"x": "h"}}}}')),
        (parse_consumer_list, _reply(0, body=b"[1]")),
        (parse_lock_batch_mq, _reply(0, body=b'{"lockOKMQSet": [{"topic": "T"}]}')),
    ],
)
def test_malformed_replies_are_a_clear_not_retriable_error(parse, resp):
    with pytest.raises(RemotingCommandError) as e:
        parse(resp)
    assert not e.value.retriable


def test_cluster_info_masters_and_names():
    body = json.dumps(
        {
            "brokerAddrTable": {
                "a": {"cluster": "C", "brokerName": "a", "brokerAddrs": {"0": "h:1", "1": "h:2"}},
                "s": {"cluster": "C", "brokerName": "s", "brokerAddrs": {"1": "h:3"}},
                "x": {"cluster": "D", "brokerName": "x", "brokerAddrs": {"0": "h:4"}},
            },
            "clusterAddrTable": {"C": ["a", "s"], "D": ["x"]},
        }
    ).encode()
    info = parse_cluster_info(_reply(0, body=body))
    assert isinstance(info, ClusterInfo)
    assert info.master_addrs() == {"a": "h:1", "x": "h:4"}  # "s" has only a slave
    assert info.master_addrs("C") == {"a": "h:1"}
    with pytest.raises(KeyError):
        info.master_addrs("nope")
    assert info.names() == {"a", "s", "x", "C", "D", "C_REPLY_TOPIC", "D_REPLY_TOPIC"}


@pytest.mark.integration  # a child process
def test_spark_and_the_shared_vocabulary_do_not_load_the_asyncio_sdk():
    """The Spark connector's workers import the builders, parsers and blocking transport without
    rmq.client (the layers import downwards only: spark → remoting → common)."""
    import subprocess
    import sys

    code = (
        "import sys, rmq.protocol.requests, rmq.remoting.blocking, rmq.spark._client, rmq.spark._sink, "
        "rmq.spark._plan; print(sorted(m for m in sys.modules if m.startswith('rmq.client')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# The replies rmq admin's exports and cleanUnusedTopic read (305 GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
# 328 GET_ALL_PRODUCER_INFO): whatever a broker answers, a RemotingCommandError or a value.
_HOSTILE_REPLY_BODIES = [
    b"not json",
    b"\xff\xfe",
    b"[]",
    b'"x"',
    b"123",
    b"[" * 100_000,
    b'{"data": 5}',
    b'{"topicList": 5}',
    b'{"topicList": "abc"}',
]


@pytest.mark.parametrize("body", _HOSTILE_REPLY_BODIES, ids=lambda b: b[:16].decode("latin-1"))
@pytest.mark.parametrize("parse", [parse_topic_list, parse_all_producer_info], ids=lambda p: p.__name__)
def test_export_replies_a_hostile_broker_sends_fail_cleanly(parse, body):
    resp = RemotingCommand(code=ResponseCode.SUCCESS, flag=1, opaque=1, body=body)
    try:
        out = parse(resp)
    except RemotingCommandError as e:
        assert "malformed" in str(e)
    else:  # a JSON object without the expected member reads as empty, as fastjson leaves it null
        assert out == [] or out == ProducerTableInfo({}), out


def test_producer_info_numbers_out_of_range_read_as_zero():
    """A JSON number no int holds (1e400 is infinity as a float) or of the wrong type."""
    body = b'{"data": {"g": [{"clientId": "c", "version": 1e400, "lastUpdateTimestamp": "soon"}], "h": 5}}'
    info = parse_all_producer_info(RemotingCommand(code=ResponseCode.SUCCESS, flag=1, opaque=1, body=body))
    assert [(p.client_id, p.version, p.last_update_timestamp) for p in info.data["g"]] == [("c", 0, 0)]


def test_a_decoder_overflow_is_a_malformed_body():
    resp = RemotingCommand(code=ResponseCode.SUCCESS, flag=1, opaque=1, body=b"1e400")
    with pytest.raises(RemotingCommandError, match="malformed number body"):
        parse_body(resp, "number", lambda b: int(float(b)))
