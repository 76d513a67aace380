"""rmq.common.message: the one message codec every layer uses (flags, properties, ids, batches)."""

import struct

import pytest

from rmq import _store
from rmq.common.message import (
    MIN_RECORD_HEADER,
    RECORD_FIXED_V4,
    RECORD_HEAD,
    MessageConst,
    MessageSysFlag,
    PullSysFlag,
    RecordDecodeError,
    create_offset_msg_id,
    decode_offset_msg_id,
    encode_batch,
    encode_batch_item,
    host_bytes,
    java_string_hash,
    offset_msg_id,
    properties_to_string,
    string_to_properties,
)
from rmq.errors import RemotingCommandError


def test_properties_both_java_forms_and_lenient_read():
    props = {"TAGS": "A", "KEYS": "k1 k2", "x": ""}
    broker = properties_to_string(props, trailing_separator=False)
    client = properties_to_string(props, trailing_separator=True)
    assert broker == "TAGS\x01A\x02KEYS\x01k1 k2\x02x\x01"
    assert client == broker + "\x02"
    assert string_to_properties(broker) == string_to_properties(client) == props
    assert string_to_properties(client.encode()) == props
    assert string_to_properties(memoryview(b"\x02\x02noval\x02\x01v\x02a\x01b")) == {"a": "b"}
    assert properties_to_string({}, trailing_separator=True) == ""
    assert properties_to_string({"a": None, "b": "1"}, trailing_separator=False) == "b\x011"


def test_properties_separator_check():
    with pytest.raises(ValueError, match="reserved separator"):
        properties_to_string({"a": "x\x02y"}, trailing_separator=True, check_separators=True)
    with pytest.raises(ValueError, match="reserved separator"):
        properties_to_string({"a\x01": "v"}, trailing_separator=True, check_separators=True)
    # without the check the caller is trusted (broker rewrites of stored properties)
    assert properties_to_string({"a": "x"}, trailing_separator=True) == "a\x01x\x02"


@pytest.mark.parametrize("s", ["", "TagA", "hello world, this overflows", "ü€", "\U0001f600tag", "a" * 1000])
def test_java_string_hash_agrees_with_the_store_scan(s):
    assert java_string_hash(s) == _store.java_hash_code(s)


def test_java_string_hash_known_values():
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("d") == 100
    assert java_string_hash("polygenelubricants") == -2147483648


def test_offset_msg_id_forms_agree():
    host = host_bytes(("10.218.145.166", 10700))
    want = "0ADA91A6000029CC0000006500E59F3E"
    assert offset_msg_id(host, 0x6500E59F3E) == want
    assert create_offset_msg_id("10.218.145.166", 10700, 0x6500E59F3E) == want
    assert decode_offset_msg_id(want) == ("10.218.145.166", 10700, 0x6500E59F3E)
    with pytest.raises(ValueError):
        decode_offset_msg_id("ABCD")
    with pytest.raises(ValueError):
        decode_offset_msg_id("not hex at all, not hex at all!!")


def test_host_bytes_ipv6_and_mapped():
    assert host_bytes(("::ffff:10.0.0.1", 5)) == bytes([10, 0, 0, 1]) + struct.pack(">i", 5)
    assert host_bytes(("fe80::1", 5)) == b"\x00" * 4 + struct.pack(">i", 5)
    assert host_bytes(("[127.0.0.1]", 80)) == b"\x7f\x00\x00\x01" + struct.pack(">i", 80)


def test_sys_flags():
    f = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_PREPARED_TYPE
    assert MessageSysFlag.get_transaction_value(f) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
    g = MessageSysFlag.reset_transaction_value(f, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
    assert g == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_COMMIT_TYPE
    assert MessageSysFlag.reset_transaction_value(g, MessageSysFlag.TRANSACTION_NOT_TYPE) == 1
    assert PullSysFlag.build(True, True, True) == 7
    assert PullSysFlag.build(False, False, True, class_filter=True) == 12


def test_batch_items():
    one = encode_batch_item(b"ab", "K\x01v\x02", flag=3)
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", one)
    assert (total, magic, crc, flag, blen) == (len(one), 0, 0, 3, 2)
    assert one[20:22] == b"ab" and struct.unpack_from(">h", one, 22)[0] == 4 and one[24:] == b"K\x01v\x02"
    assert encode_batch([(3, b"ab", "K\x01v\x02"), (0, b"", "")]) == one + encode_batch_item(b"", "")
    with pytest.raises(ValueError, match="32767"):
        encode_batch_item(b"", "x" * 40000)


def test_layout_constants_and_error_type():
    assert RECORD_HEAD.size == 48 and RECORD_FIXED_V4.size == MIN_RECORD_HEADER == 88
    e = RecordDecodeError("bad")
    assert isinstance(e, RemotingCommandError) and isinstance(e, ValueError) and not e.retriable
    assert MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY" and "TAGS" in MessageConst.RESERVED


def test_layers_share_the_one_codec():
    import rmq.client._codec as client_codec
    import rmq.spark._records as spark_records
    import rmq.store as store
    import rmq.types as types

    assert client_codec.MessageSysFlag is store.MessageSysFlag is MessageSysFlag
    assert client_codec.RecordDecodeError is spark_records.RecordDecodeError is RecordDecodeError
    assert types.MessageConst is MessageConst
    assert store.string_to_properties is client_codec.string_to_properties is string_to_properties
    assert store.properties_to_string({"a": "1"}) == "a\x011"  # broker form
    assert client_codec.properties_to_string({"a": "1"}) == "a\x011\x02"  # client form
