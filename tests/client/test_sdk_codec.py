"""Pure codec and value-type tests: no broker needed."""

import base64
import dataclasses
import json
import os
import struct
import zlib

import pytest

import rmq
from rmq.client._codec import (
    MessageSysFlag,
    RecordDecodeError,
    UniqKeyGenerator,
    create_offset_msg_id,
    decode_messages,
    decode_offset_msg_id,
    encode_batch,
    java_string_hash,
    message_properties,
    properties_to_string,
    string_to_properties,
)
from rmq.client.consumer.allocate import (
    AllocateConsistentHash,
    allocate_averagely,
    allocate_averagely_by_circle,
)
from rmq.client.consumer.base import SubscriptionData
from rmq.client.producer import select_by_hash, validate_group, validate_topic
from rmq.common.message import MESSAGE_MAGIC_CODE
from rmq.remoting import decode_frame

GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden", "rocketmq-4.9.8-pull-responses.jsonl")


def test_properties_roundtrip_and_lenient_parse():
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "a": "1"}
    s = properties_to_string(props)
    assert s == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02a\x011\x02"
    assert string_to_properties(s) == props
    assert string_to_properties("\x02junk\x02x\x01y=z\x01w\x02") == {"x": "y=z\x01w"}
    assert string_to_properties(None) == {}


def test_java_string_hash_matches_java():
    # values from Java's String.hashCode (the ali-ons heartbeat in wire-contract §6 has TagA)
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("hello world, this overflows") == int.from_bytes(
        struct.pack(">I", _java_hash_ref("hello world, this overflows")), "big", signed=True
    )


def _java_hash_ref(s):
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h


def test_offset_msg_id_golden():
    # ali-ons test/message/message_decoder.test.js fixture (wire-contract §11)
    assert create_offset_msg_id("10.218.145.166", 10700, 0x6500E59F3E) == "0ADA91A6000029CC0000006500E59F3E"
    assert decode_offset_msg_id("0ADA91A6000029CC0000006500E59F3E") == ("10.218.145.166", 10700, 0x6500E59F3E)
    with pytest.raises(ValueError):
        decode_offset_msg_id("ABCD")


def test_uniq_keys_are_unique_hex_with_ip_prefix():
    gen = UniqKeyGenerator("10.1.2.3")
    ids = [gen.new_id() for _ in range(5000)]
    assert len(set(ids)) == 5000
    assert all(len(i) == 32 and i == i.upper() for i in ids)
    assert ids[0].startswith("0A010203")


def _golden_frames():
    with open(GOLDEN) as f:
        for line in f:
            d = json.loads(line)
            if d["code"] == 0:
                yield decode_frame(base64.b64decode(d["frame_b64"]))


def test_decode_real_java_pull_response():
    frames = list(_golden_frames())
    assert frames
    total = 0
    for cmd in frames:
        msgs = decode_messages(cmd.body_bytes(), "broker-a")
        assert msgs
        ext = cmd.ext_fields
        # nextBeginOffset = last queue offset + 1 (wire-contract §7)
        assert msgs[-1].queue_offset + 1 == int(ext["nextBeginOffset"])
        for m in msgs:
            assert m.topic == "TopicTest" and m.tags == "TagA" and m.body
            assert m.msg_id == m.properties.get("UNIQ_KEY", m.offset_msg_id)
            ip, port, off = decode_offset_msg_id(m.offset_msg_id)
            assert off == m.commit_log_offset and m.store_host == f"{ip}:{port}"
            assert m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF
        total += len(msgs)
    assert total > 32


def _record(body: bytes, topic: str, props: str, *, sys_flag=0, queue_offset=7, phy=1234) -> bytes:
    tb, pb = topic.encode(), props.encode()
    head = struct.pack(
        ">iiiiiqqiq", 0, -626843481, zlib.crc32(body) & 0x7FFFFFFF, 2, 9, queue_offset, phy, sys_flag, 1700000000000
    )
    rest = (
        bytes([127, 0, 0, 1])
        + struct.pack(">i", 5555)
        + struct.pack(">q", 1700000000001)
        + bytes([127, 0, 0, 1])
        + struct.pack(">i", 10911)
        + struct.pack(">iq", 3, 0)
        + struct.pack(">i", len(body))
        + body
        + bytes([len(tb)])
        + tb
        + struct.pack(">h", len(pb))
        + pb
    )
    rec = head + rest
    return struct.pack(">i", len(rec)) + rec[4:]


def test_decode_compressed_retry_record_and_truncation():
    body = b"y" * 10000
    props = properties_to_string({"RETRY_TOPIC": "T", "TAGS": "A", "KEYS": "a b"})
    rec = _record(zlib.compress(body), "%RETRY%G", props, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    (m,) = decode_messages(rec + b"", "b")
    assert m.body == body and m.topic == "T" and m.real_topic == "%RETRY%G" and m.keys == ("a", "b")
    assert m.reconsume_times == 3 and m.queue_offset == 7 and m.commit_log_offset == 1234
    assert m.offset_msg_id == create_offset_msg_id("127.0.0.1", 10911, 1234)
    assert m.msg_id == m.offset_msg_id  # no UNIQ_KEY → offsetMsgId
    with pytest.raises(RecordDecodeError):
        decode_messages(rec + rec[:50])
    bad = bytearray(rec)
    bad[0:4] = struct.pack(">i", 10**6)
    with pytest.raises(RecordDecodeError):
        decode_messages(bytes(bad))


def _zlib_bomb(inflated: int) -> bytes:
    """A real zlib bomb: ``inflated`` zero bytes compress about a thousandfold."""
    comp = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    parts = [comp.compress(chunk) for _ in range(inflated >> 20)]
    return b"".join(parts) + comp.flush()


def test_zlib_bomb_record_is_a_bad_message_not_an_allocation():
    bomb = _zlib_bomb(64 << 20)  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) < 128 * 1024
    props = properties_to_string({"TAGS": "A"})
    good = _record(b"fine", "T", props, queue_offset=6)
    rec = _record(bomb, "T", props, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    with pytest.raises(RecordDecodeError, match=r"body of T@7 inflates past the limit of 4194304 bytes"):
        decode_messages(good + rec)
    # the bound is the caller's: a lower one refuses a body that the default allows
    small = _record(zlib.compress(b"z" * 5000), "T", props, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
    assert decode_messages(small)[0].body == b"z" * 5000
    with pytest.raises(RecordDecodeError, match="inflates past the limit of 4999 bytes"):
        decode_messages(small, max_body_size=4999)
    assert decode_messages(small, max_body_size=5000)[0].body == b"z" * 5000
    # without decompression the compressed bytes come back as they are
    assert decode_messages(rec, decompress=False)[0].body == bomb


def test_truncated_or_garbage_compressed_bodies_are_bad_messages():
    props = properties_to_string({"TAGS": "A"})
    whole = zlib.compress(b"q" * 1000)
    for body in (whole[:-3], b"not zlib at all", b""):
        rec = _record(body, "T", props, sys_flag=MessageSysFlag.COMPRESSED_FLAG)
        with pytest.raises(RecordDecodeError, match="T@7 does not inflate"):
            decode_messages(rec)


def test_records_with_a_bad_magic_are_refused():
    rec = bytearray(_record(b"x", "T", ""))
    rec[4:8] = b"\0\0\0\0"
    with pytest.raises(RecordDecodeError, match="unknown magic code 0x00000000"):
        decode_messages(bytes(rec))


def test_batch_body_layout():
    blob = encode_batch([(0, b"ab", "K\x01v\x02"), (5, b"", "")])
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", blob)
    assert (total, magic, crc, flag, blen) == (20 + 2 + 2 + 4, 0, 0, 0, 2)
    assert blob[20:22] == b"ab" and struct.unpack_from(">h", blob, 22)[0] == 4
    second = blob[total:]
    assert struct.unpack_from(">iiiii", second) == (22, 0, 0, 5, 0)
    assert len(blob) == total + 22


def test_message_validation_and_properties():
    m = rmq.Message(topic="T", body="héllo", tags="A", keys="k1 k2", properties={"x": "1"}, delay_level=3)
    assert m.body == "héllo".encode() and m.keys == ("k1", "k2")
    props = message_properties(m, "U1")
    assert props == {"KEYS": "k1 k2", "TAGS": "A", "DELAY": "3", "WAIT": "true", "UNIQ_KEY": "U1", "x": "1"}
    with pytest.raises(ValueError, match="reserved"):
        rmq.Message(topic="T", body=b"x", properties={"UNIQ_KEY": "1"})
    with pytest.raises(ValueError, match="separator"):
        rmq.Message(topic="T", body=b"x", properties={"a": "b\x02"})
    with pytest.raises(ValueError, match="delay_level"):
        rmq.Message(topic="T", body=b"x", delay_level=19)
    # any iterable of str as keys, bytes-likes and str (UTF-8) as body; read back as tuple / bytes
    m = rmq.Message("T", bytearray(b"ab"), None, (k for k in ["k1", "k2"]))
    assert m.body == b"ab" and type(m.body) is bytes and m.keys == ("k1", "k2")
    assert rmq.Message("T", memoryview(b"z"), keys=["k"]) == rmq.Message("T", "z", keys=("k",))
    assert dataclasses.replace(m, topic="U").keys == ("k1", "k2")
    mq = rmq.MessageQueue("T", "b", 1)
    assert {mq: 1}[rmq.MessageQueue("T", "b", 1)] == 1 and str(mq) == "T@b#1"


def test_group_and_topic_validation():
    validate_group("PG_1-%|x", reserved="DEFAULT_PRODUCER")
    for bad in ("", "a b", "x" * 256, "DEFAULT_PRODUCER", "é"):
        with pytest.raises(rmq.ClientError):
            validate_group(bad, reserved="DEFAULT_PRODUCER")
    for bad in ("", "TBW102", "a/b", "t" * 128):
        with pytest.raises(rmq.ClientError):
            validate_topic(bad)
    # topics only the broker writes (Java TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET): no sends,
    # but a consumer (an admin tool) may read them
    for system in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"):
        with pytest.raises(rmq.ClientError, match="only the broker writes"):
            validate_topic(system)
        validate_topic(system, for_send=False)
        rmq.PullConsumer("127.0.0.1:1", "G").subscribe(system)
    with pytest.raises(rmq.ClientError):
        rmq.Producer("127.0.0.1:1", "DEFAULT_PRODUCER")
    with pytest.raises(rmq.ClientError, match="out of range"):
        rmq.PushConsumer("127.0.0.1:1", "G", consume_concurrency=0)
    with pytest.raises(rmq.ClientError, match="out of range"):
        rmq.PushConsumer("127.0.0.1:1", "G", pull_threshold_for_queue=70000)
    with pytest.raises(rmq.ClientError, match="out of range"):
        rmq.PullConsumer("127.0.0.1:1", "G", pull_batch_size=2000)
    with pytest.raises(rmq.ClientError):
        rmq.PushConsumer("127.0.0.1:1", "DEFAULT_CONSUMER")


def _mqs(n, brokers=("a",)):
    return sorted(rmq.MessageQueue("T", b, i) for b in brokers for i in range(n))


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle, AllocateConsistentHash()])
@pytest.mark.parametrize("n_queues,n_cids", [(8, 3), (4, 4), (3, 5), (16, 2), (1, 1)])
def test_allocation_partitions_queues(strategy, n_queues, n_cids):
    mqs = _mqs(n_queues)
    cids = sorted(f"127.0.0.1@{i}#x" for i in range(n_cids))
    shares = [strategy("G", c, mqs, cids) for c in cids]
    flat = [mq for s in shares for mq in s]
    assert sorted(flat) == mqs  # every queue exactly once
    assert strategy("G", "not-a-member", mqs, cids) == []


def test_averagely_matches_java_blocks():
    mqs = _mqs(8)
    cids = ["a", "b", "c"]
    assert [[m.queue_id for m in allocate_averagely("G", c, mqs, cids)] for c in cids] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [[m.queue_id for m in allocate_averagely_by_circle("G", c, mqs, cids)] for c in cids] == [
        [0, 3, 6],
        [1, 4, 7],
        [2, 5],
    ]


def test_consistent_hash_moves_few_queues():
    mqs = _mqs(64)
    strat = AllocateConsistentHash()
    before = {c: set(strat("G", c, mqs, ["a", "b", "c"])) for c in "abc"}
    after = {c: set(strat("G", c, mqs, ["a", "b", "c", "d"])) for c in "abcd"}
    moved = sum(len(before[c] - after[c]) for c in "abc")
    assert moved == len(after["d"]) and moved < 40


def test_subscription_expressions():
    s = SubscriptionData.build("T", "TagA || TagB ||")
    assert s.tags_set == {"TagA", "TagB"} and s.code_set == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert s.matches("TagA") and not s.matches("TagC") and not s.matches(None)
    assert SubscriptionData.build("T", "*").matches(None)
    assert SubscriptionData.build("T", "").sub_string == "*"
    with pytest.raises(rmq.ClientError):
        SubscriptionData.build("T", "||")


def test_hash_selector_is_stable():
    mqs = _mqs(4)
    m = rmq.Message(topic="T", body=b"x")
    assert select_by_hash(mqs, m, "order-42") == mqs[abs(java_string_hash("order-42")) % 4]
    assert {select_by_hash(mqs, m, f"k{i}") for i in range(50)} == set(mqs)


def test_decode_ipv6_hosts_record():
    body, topic, props = b"v6", "T6", properties_to_string({"TAGS": "X"})
    tb, pb = topic.encode(), props.encode()
    flags = MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    v6 = bytes(15) + b"\x01"  # ::1
    rec = (
        struct.pack(">iIiiiqqiq", 0, MESSAGE_MAGIC_CODE, 0, 1, 0, 5, 99, flags, 1)
        + v6
        + struct.pack(">i", 1234)
        + struct.pack(">q", 2)
        + v6
        + struct.pack(">i", 10911)
        + struct.pack(">iq", 0, 0)
        + struct.pack(">i", len(body))
        + body
        + bytes([len(tb)])
        + tb
        + struct.pack(">h", len(pb))
        + pb
    )
    rec = struct.pack(">i", len(rec)) + rec[4:]
    (m,) = decode_messages(rec + rec[:0])
    assert (m.topic, m.body, m.tags, m.queue_offset) == ("T6", b"v6", "X", 5)
    assert m.store_host == "::1:10911" and m.born_host == "::1:1234"
    assert m.offset_msg_id == (v6 + struct.pack(">iq", 10911, 99)).hex().upper()
