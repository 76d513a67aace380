"""Property tests of the record walker (rmq._store.walk_records / record_span, and its pure-Python
reference rmq.common.message.walk_record) and of the layers' projections of it.

* encode → walk → decode gives back what was encoded (v1 records from the store's writer, and
  v1/v2 records with IPv4/IPv6 hosts built here from the layout);
* on arbitrary bytes, and on valid records with bytes changed, the Cython walker and the
  reference give the same spans or the same RecordDecodeError message, and nothing else is
  ever raised (by the walker, the SDK's decode_messages or the Spark reader's decode_records).
"""

from __future__ import annotations

import struct
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq import _store
from rmq.client._codec import decode_messages
from rmq.common.message import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RecordDecodeError,
    host_bytes,
    properties_to_string,
    string_to_properties,
    walk_record,
    walk_records_py,
)
from rmq.spark._records import Columns, decode_records

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_name = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12)
_value = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20)
_props = st.dictionaries(_name, _value, max_size=5)
_topic = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda t: len(t.encode()) <= 255
)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


def _both(buf: bytes, pos: int = 0, end: int = -1, check_crc: bool = False):
    out = []
    for fn in (_store.record_span, walk_record):
        try:
            out.append(("ok", tuple(fn(buf, pos, end, check_crc))))
        except RecordDecodeError as e:
            out.append(("error", str(e)))
    assert out[0] == out[1]
    return out[0]


def _build(
    version: int,
    v6_born: bool,
    v6_store: bool,
    body: bytes,
    topic: bytes,
    props: bytes,
    queue_offset: int = 7,
    phy: int = 99,
    sys_flag: int = 0,
) -> bytes:
    """A record written from the layout in rmq.common.message, independently of the writer."""
    flags = sys_flag | (0x10 if v6_born else 0) | (0x20 if v6_store else 0)
    born = (bytes(15) + b"\x01" if v6_born else b"\x7f\x00\x00\x01") + struct.pack(">i", 5555)
    store = (bytes(15) + b"\x02" if v6_store else b"\x0a\x00\x00\x02") + struct.pack(">i", 10911)
    magic = MESSAGE_MAGIC_CODE if version == 1 else MESSAGE_MAGIC_CODE_V2
    rec = (
        struct.pack(">iIiiiqqiq", 0, magic, zlib.crc32(body) & 0x7FFFFFFF, 3, 0, queue_offset, phy, flags, 1)
        + born
        + struct.pack(">q", 2)
        + store
        + struct.pack(">iq", 4, 5)
        + struct.pack(">i", len(body))
        + body
        + (bytes([len(topic)]) if version == 1 else struct.pack(">H", len(topic)))
        + topic
        + struct.pack(">h", len(props))
        + props
    )
    return struct.pack(">i", len(rec)) + rec[4:]


@SETTINGS
@given(
    body=st.binary(max_size=3000),
    topic=_topic,
    props=_props,
    queue_id=_i32,
    flag=_i32,
    qoff=_i64,
    phy=_i64,
    sys_flag=_i32,
    born_ts=_i64,
    store_ts=_i64,
    reconsume=_i32,
    prepared=_i64,
    port=st.integers(0, 2**31 - 1),
)
def test_store_writer_then_walker_and_decoders_round_trip(
    body, topic, props, queue_id, flag, qoff, phy, sys_flag, born_ts, store_ts, reconsume, prepared, port
):
    tb = topic.encode()
    pb = properties_to_string(props, trailing_separator=False).encode()
    host = host_bytes(("10.1.2.3", port))
    buf = bytearray(_store.record_size(len(body), len(tb), len(pb)))
    size = _store.encode_record(
        buf, 0, body, tb, pb, queue_id, flag, qoff, phy, sys_flag, born_ts, host, store_ts, host, reconsume, prepared
    )
    rec = bytes(buf)
    verdict, span = _both(rec, check_crc=True)
    assert verdict == "ok" and span[1] == size == len(rec)
    d = _store.decode_record(rec, 0, True)
    assert (
        d["body"],
        d["topic"],
        d["properties"],
        d["queue_id"],
        d["flag"],
        d["queue_offset"],
        d["commit_log_offset"],
        d["born_timestamp"],
        d["store_timestamp"],
        d["reconsume_times"],
        d["prepared_transaction_offset"],
    ) == (body, topic, pb, queue_id, flag, qoff, phy, born_ts, store_ts, reconsume, prepared)
    assert d["sys_flag"] == sys_flag & ~0x30
    (m,) = decode_messages(rec, decompress=False)
    assert (m.body, m.real_topic, m.properties, m.queue_offset) == (body, topic, props, qoff)
    # two records back to back walk as two
    assert [s[0] for s in _store.walk_records(rec + rec)] == [0, size]


@SETTINGS
@given(
    version=st.sampled_from([1, 2]),
    v6_born=st.booleans(),
    v6_store=st.booleans(),
    body=st.binary(max_size=500),
    topic=_topic,
    props=_props,
    compressed=st.booleans(),
)
def test_any_layout_walks_the_same_on_both_walkers_and_decodes(
    version, v6_born, v6_store, body, topic, props, compressed
):
    stored = zlib.compress(body) if compressed else body
    pb = properties_to_string(props, trailing_separator=True).encode()
    rec = _build(version, v6_born, v6_store, stored, topic.encode(), pb, sys_flag=1 if compressed else 0)
    verdict, span = _both(rec, check_crc=True)
    assert verdict == "ok"
    assert span[2] == version and span[5] == (20 if v6_born else 8) and span[7] == (20 if v6_store else 8)
    assert rec[span[8] : span[8] + span[9]] == stored
    assert rec[span[10] : span[10] + span[11]] == topic.encode()
    assert string_to_properties(rec[span[12] : span[12] + span[13]]) == props
    (m,) = decode_messages(rec + b"")
    assert (m.body, m.real_topic, m.properties) == (body, topic, props)
    cols = Columns(["value", "topic", "offset"])
    assert decode_records(rec, cols, start=0, end=100) == (7, 8)
    assert (cols.value, cols.topic) == ([body], [topic])


@SETTINGS
@given(data=st.binary(max_size=400), pos=st.integers(-2, 10), end=st.integers(-1, 420), crc=st.booleans())
def test_arbitrary_bytes_give_the_same_verdict_and_only_record_decode_error(data, pos, end, crc):
    _both(data, pos, end, crc)
    for walk in (_store.walk_records, walk_records_py):
        try:
            walk(data, 0, -1, crc)
        except RecordDecodeError:
            pass
    try:
        a = [tuple(s) for s in walk_records_py(data)]
    except RecordDecodeError as e:
        a = str(e)
    try:
        b = _store.walk_records(data)
    except RecordDecodeError as e:
        b = str(e)
    assert a == b


@SETTINGS
@given(
    version=st.sampled_from([1, 2]),
    v6=st.booleans(),
    body=st.binary(max_size=64),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(0, 10_000),
    compressed=st.booleans(),
)
def test_damaged_records_never_raise_anything_but_the_declared_error(version, v6, body, edits, cut, compressed):
    rec = bytearray(
        _build(
            version,
            v6,
            not v6,
            zlib.compress(body) if compressed else body,
            b"Topic",
            b"TAGS\x01A",
            sys_flag=1 if compressed else 0,
        )
    )
    for at, value in edits:
        rec[at % len(rec)] = value
    data = bytes(rec[: cut % (len(rec) + 1)] if cut % 3 == 0 else rec)
    _both(data, check_crc=True)
    try:
        decode_messages(data)
    except RecordDecodeError:
        pass
    try:
        decode_records(data, Columns(["value", "topic", "tags", "msgId", "properties"]), start=0, end=2**62)
    except RecordDecodeError:
        pass
    _recs, end, outcome, _ = _store.scan_records(data, 0, len(data), 0, True)
    assert 0 <= end <= len(data) and outcome in (
        _store.SCAN_LIMIT,
        _store.SCAN_BLANK,
        _store.SCAN_END,
        _store.SCAN_CORRUPT,
        _store.SCAN_TORN,
    )
