"""Unit tests of the Spark connector's pure parts: options, offsets JSON, range planning,
rate limiting, and the pull-record / batch-item codecs. No JVM, no pyspark: these run in
``make unit`` too."""

from __future__ import annotations

import struct
import zlib

import pytest

from rmq._testing import wait_until_sync
from rmq.spark._plan import QueueRange, plan_ranges, rate_limit
from rmq.spark._records import (
    MAGIC_V1,
    MAGIC_V2,
    Columns,
    RecordDecodeError,
    decode_records,
    encode_batch_item,
    encode_properties,
    parse_properties,
)
from rmq.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    offsets_from_json,
    offsets_to_json,
    parse_offsets_json,
    parse_sink_options,
    parse_source_options,
    tag_set,
)

NS = {"nameServer": "127.0.0.1:9876"}


# ------------------------------------------------------------------------------ options


def test_minimal_batch_options_and_defaults():
    o = parse_source_options({**NS, "subscribe": "T1, T2,T1"}, streaming=False)
    assert o.name_servers == ("127.0.0.1:9876",)
    assert o.subscribe == ("T1", "T2")  # trimmed, de-duplicated, order kept
    assert o.starting.kind == "earliest" and o.ending.kind == "latest"
    assert o.fail_on_data_loss is True and o.tags is None and o.pull_batch_size == 32


def test_streaming_defaults_to_latest_and_options_are_case_insensitive():
    o = parse_source_options(
        {"NAMESERVER": "a:1;b:2", "Topic": "T", "FAILONDATALOSS": "false", "maxoffsetspertrigger": "100"},
        streaming=True,
    )
    assert o.name_servers == ("a:1", "b:2")
    assert o.starting.kind == "latest" and o.fail_on_data_loss is False
    assert o.max_offsets_per_trigger == 100


@pytest.mark.parametrize(
    "opts, match",
    [
        ({"subscribe": "T"}, "nameServer: required"),
        ({**NS}, "exactly one of subscribe"),
        ({**NS, "subscribe": "T", "subscribePattern": "T.*"}, "got subscribe, subscribePattern"),
        ({"nameServer": "localhost", "subscribe": "T"}, "is not host:port"),
        ({**NS, "subscribePattern": "T("}, "invalid regular expression"),
        ({**NS, "subscribe": "T", "startingOffsets": "first"}, "expected 'earliest', 'latest' or a JSON"),
        ({**NS, "subscribe": "T", "startingOffsets": "{bad json"}, "not valid JSON"),
        ({**NS, "subscribe": "T", "startingOffsets": '{"T": {"0": -5}}'}, "is negative"),
        ({**NS, "subscribe": "T", "startingOffsets": '{"T": {"0": "x"}}'}, "must be an integer"),
        ({**NS, "subscribe": "T", "startingOffsets": '{"T": {"b": {"0": 1}, "1": 2}}'}, "mixes broker names"),
        ({**NS, "subscribe": "T", "startingOffsets": '{"T": {"q": 1}}'}, "is not an integer"),
        ({**NS, "subscribe": "T", "endingOffsets": "earliest"}, "not allowed as an ending offset"),
        ({**NS, "subscribe": "T", "endingOffsets": '{"T": {"0": -2}}'}, "not allowed as an ending offset"),
        ({**NS, "subscribe": "T", "startingOffsets": "latest"}, "not allowed for a batch"),
        ({**NS, "subscribe": "T", "maxOffsetsPerTrigger": "10"}, "only for streaming"),
        ({**NS, "subscribe": "T", "minPartitions": "0"}, "minPartitions: expected a positive integer"),
        ({**NS, "subscribe": "T", "failOnDataLoss": "maybe"}, "failOnDataLoss: expected true or false"),
        ({**NS, "subscribe": "T", "group": "g"}, "streaming queries only"),
        ({**NS, "subscribe": "T", "startingTimestamp": "yesterday"}, "startingTimestamp"),
        ({**NS, "assign": '{"T": "0"}'}, "must map to a list of queue ids"),
        ({**NS, "assign": '{"T": [-1]}'}, "is negative"),
        ({**NS, "subscribe": "T", "subExpression": "||"}, "names no tag"),
    ],
)
def test_bad_batch_options_are_refused_with_the_option_named(opts, match):
    with pytest.raises(OptionError, match=match):
        parse_source_options(opts, streaming=False)


def test_stream_refuses_ending_offsets():
    with pytest.raises(OptionError, match="batch queries only"):
        parse_source_options({**NS, "subscribe": "T", "endingOffsets": "latest"}, streaming=True)


def test_offsets_json_both_forms():
    got = parse_offsets_json("startingOffsets", '{"T1": {"broker-a": {"0": 42, "1": -2}}, "T2": {"3": -1}}')
    assert got == {("T1", "broker-a", 0): 42, ("T1", "broker-a", 1): EARLIEST, ("T2", None, 3): LATEST}


def test_timestamp_precedence_follows_spark_kafka():
    o = parse_source_options(
        {
            **NS,
            "subscribe": "T",
            "startingOffsets": "earliest",
            "startingOffsetsByTimestamp": '{"T": {"0": 5}}',
            "startingTimestamp": "1000",
        },
        streaming=False,
    )
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1000
    o = parse_source_options(
        {**NS, "subscribe": "T", "startingOffsetsByTimestamp": '{"T": {"0": 5}}', "endingTimestamp": "2000"},
        streaming=False,
    )
    assert o.starting.kind == "timestamps" and o.starting.per_queue == {("T", None, 0): 5}
    assert o.ending.kind == "timestamp" and o.ending.timestamp == 2000


def test_assign_forms():
    o = parse_source_options({**NS, "assign": '{"T": [1, 0, 1], "U": {"b": [2]}}'}, streaming=False)
    assert o.assign == {"T": {None: [0, 1]}, "U": {"b": [2]}}


def test_tag_expressions():
    assert tag_set("*") is None and tag_set("") is None
    assert tag_set("TagA || TagB ||TagC") == frozenset({"TagA", "TagB", "TagC"})


def test_sink_options():
    o = parse_sink_options({**NS, "topic": "out", "batchSize": "10"})
    assert o.topic == "out" and o.batch_size == 10 and o.max_in_flight == 8
    with pytest.raises(OptionError, match="not a valid topic name"):
        parse_sink_options({**NS, "topic": "bad topic"})
    with pytest.raises(OptionError, match="nameServer"):
        parse_sink_options({"topic": "t"})


def test_checkpoint_offsets_round_trip():
    offs = {("T", "broker-a", 0): 5, ("T", "broker-a", 1): 7, ("U", "broker-b", 0): 0}
    js = offsets_to_json(offs)
    assert js == {"T": {"broker-a": {"0": 5, "1": 7}}, "U": {"broker-b": {"0": 0}}}
    assert offsets_from_json(js) == offs
    with pytest.raises(OptionError, match="malformed offsets"):
        offsets_from_json({"T": {"broker-a": {"zero": 1}}})


# ------------------------------------------------------------------------------ planning


def _q(n, addr="h:1"):
    return {("T", "b", i): addr for i in range(n)}


def test_plan_one_partition_per_queue_and_drops_empty_ranges():
    qs = _q(3)
    ranges = plan_ranges(qs, {k: 0 for k in qs}, {("T", "b", 0): 10, ("T", "b", 1): 0, ("T", "b", 2): 5})
    assert [(r.queue_id, r.start, r.end) for r in ranges] == [(0, 0, 10), (2, 0, 5)]


def test_min_partitions_splits_in_proportion_and_covers_every_offset():
    qs = _q(2)
    start = {("T", "b", 0): 100, ("T", "b", 1): 0}
    end = {("T", "b", 0): 1100, ("T", "b", 1): 10}
    ranges = plan_ranges(qs, start, end, min_partitions=8)
    assert len(ranges) >= 8
    for k in qs:
        mine = sorted((r.start, r.end) for r in ranges if r.key == k)
        assert mine[0][0] == start[k] and mine[-1][1] == end[k]
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))  # contiguous, no overlap
    assert sum(len(r) for r in ranges) == 1010


def test_max_records_per_partition():
    qs = _q(1)
    ranges = plan_ranges(qs, {("T", "b", 0): 0}, {("T", "b", 0): 25}, max_records=10)
    assert [(r.start, r.end) for r in ranges] == [(0, 9), (9, 17), (17, 25)]


def test_rate_limit_shares_backlog_and_never_exceeds():
    begin = {("T", "b", 0): 0, ("T", "b", 1): 100, ("T", "b", 2): 5}
    end = {("T", "b", 0): 300, ("T", "b", 1): 200, ("T", "b", 2): 5}
    got = rate_limit(begin, end, 100)
    moved = {k: got[k] - begin[k] for k in begin}
    assert sum(moved.values()) == 100
    assert moved[("T", "b", 0)] > moved[("T", "b", 1)] > 0 and moved[("T", "b", 2)] == 0
    assert rate_limit(begin, end, 1000) == end
    tiny = rate_limit({("T", "b", i): 0 for i in range(4)}, {("T", "b", i): 1 for i in range(4)}, 1)
    assert sum(tiny.values()) == 1


# ------------------------------------------------------------------------------ records


def _record(
    qoff,
    body,
    *,
    topic="T",
    props=None,
    qid=0,
    phy=0,
    store_ts=1_700_000_000_000,
    born_ts=1_699_999_999_000,
    sysflag=0,
    store_host=(b"\x7f\x00\x00\x01", 10911),
):
    """A v1 CommitLog record as a broker sends it in a pull body (wire-contract §9)."""
    pb = encode_properties(props or {}).encode()
    tb = topic.encode()
    head = struct.pack(">iIiiiqqiq", 0, MAGIC_V1, zlib.crc32(body) & 0x7FFFFFFF, qid, 0, qoff, phy, sysflag, born_ts)
    rest = (
        b"\x0a\x00\x00\x02"
        + struct.pack(">i", 5555)
        + struct.pack(">q", store_ts)
        + store_host[0]
        + struct.pack(">i", store_host[1])
        + struct.pack(">iq", 0, 0)
        + struct.pack(">i", len(body))
        + body
        + bytes([len(tb)])
        + tb
        + struct.pack(">h", len(pb))
        + pb
    )
    rec = head + rest
    return struct.pack(">i", len(rec)) + rec[4:]


def test_decode_records_cuts_the_range_filters_tags_and_inflates():
    raw = b"x" * 5000
    body = b"".join(
        [
            _record(9, b"before", props={"TAGS": "A"}),
            _record(10, b"m10", props={"TAGS": "A", "KEYS": "k10", "u": "1"}, phy=0x1234),
            _record(11, zlib.compress(raw), props={"TAGS": "B"}, sysflag=1),
            _record(12, b"m12", props={"TAGS": "C"}),
            _record(13, b"after-end", props={"TAGS": "A"}),
        ]
    )
    cols = Columns(["key", "value", "topic", "partition", "offset", "timestamp", "tags", "msgId", "properties"])
    first, after = decode_records(body, cols, start=10, end=13, tags=frozenset({"A", "B"}))
    assert (first, after) == (10, 13)
    assert cols.n == 2
    assert cols.value == [b"m10", raw]
    assert cols.offset == [10, 11] and cols.tags == ["A", "B"] and cols.key == [b"k10", None]
    assert cols.properties[0] == {"TAGS": "A", "KEYS": "k10", "u": "1"}
    assert cols.msgId[0] == "7F00000100002A9F0000000000001234"
    assert cols.timestamp == [1_700_000_000_000] * 2


def test_decode_only_what_is_asked():
    cols = Columns(["offset"])
    decode_records(_record(0, b"v", props={"TAGS": "A"}), cols, start=0, end=10)
    assert cols.offset == [0] and cols.value == [] and cols.properties == []


@pytest.mark.parametrize(
    "mangle, match",
    [
        (lambda b: b[:50], "truncated record at 0: 50 bytes left"),
        (lambda b: b[:-3], "has TOTALSIZE"),
        (lambda b: b[:4] + b"\x00\x00\x00\x01" + b[8:], "unknown magic"),
    ],
)
def test_malformed_records_raise_clear_errors(mangle, match):
    with pytest.raises(RecordDecodeError, match=match):
        decode_records(mangle(_record(0, b"value", props={"TAGS": "A"})), Columns(["value"]), start=0, end=5)


def test_a_zlib_bomb_is_a_bad_record_not_an_allocation():
    comp = zlib.compressobj(9)
    bomb = b"".join(comp.compress(bytes(1 << 20)) for _ in range(16)) + comp.flush()  # 16 MiB of zeros
    body = _record(0, bomb, props={"TAGS": "A"}, sysflag=1)
    with pytest.raises(RecordDecodeError, match="body of queue offset 0 inflates past the limit of 4194304 bytes"):
        decode_records(body, Columns(["value"]), start=0, end=5)


def test_v2_records_have_a_two_byte_topic_length():
    v1 = _record(3, b"v2body", topic="TopicV2", props={"TAGS": "A"})
    # rebuild as v2: magic, and the topic length as uint16
    at = len(v1) - (2 + len(encode_properties({"TAGS": "A"}))) - len("TopicV2") - 1
    v2 = bytearray(v1[:at] + struct.pack(">H", len("TopicV2")) + v1[at + 1 :])
    v2[0:8] = struct.pack(">iI", len(v2), MAGIC_V2)
    cols = Columns(["topic", "value", "offset", "tags"])
    assert decode_records(bytes(v2), cols, start=0, end=10) == (3, 4)
    assert (cols.topic, cols.value, cols.offset, cols.tags) == (["TopicV2"], [b"v2body"], [3], ["A"])


def test_properties_codec_and_reserved_separators():
    assert parse_properties("a\x011\x02b\x01\x02\x02junk\x02") == {"a": "1", "b": ""}
    assert encode_properties({"a": "1"}) == "a\x011\x02"
    with pytest.raises(ValueError, match="reserved separator"):
        encode_properties({"a": "x\x02y"})


def test_batch_item_layout():
    item = encode_batch_item(b"body", "TAGS\x01A\x02", flag=7)
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", item)
    assert total == len(item) == 20 + 4 + 2 + 7
    assert (magic, crc, flag, blen) == (0, 0, 7, 4)
    assert item[20:24] == b"body" and struct.unpack_from(">h", item, 24)[0] == 7


def test_arrow_batch_has_exactly_the_requested_schema():
    pa = pytest.importorskip("pyarrow", reason="pyarrow comes with the spark extra")
    from rmq.spark._records import to_arrow_batch

    cols = Columns(["value", "offset", "timestamp", "properties", "brokerName", "timestampType"])
    cols.brokerName = "broker-a"
    decode_records(_record(3, b"v", props={"TAGS": "A", "x": "y"}), cols, start=0, end=10)
    schema = pa.schema(
        [
            ("value", pa.binary()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("properties", pa.map_(pa.string(), pa.string())),
            ("brokerName", pa.string()),
            ("timestampType", pa.int32()),
        ]
    )
    names = ["value", "offset", "timestamp", "properties", "brokerName", "timestampType"]
    batch = to_arrow_batch(cols, names, schema, ["native"] * 6)
    assert batch.schema.equals(schema)
    row = batch.to_pylist()[0]
    assert row["value"] == b"v" and row["offset"] == 3 and row["brokerName"] == "broker-a"
    assert row["timestamp"].timestamp() == 1_700_000_000 and row["timestampType"] == 1
    assert dict(row["properties"]) == {"TAGS": "A", "x": "y"}


def test_queue_range_length():
    assert len(QueueRange("T", "b", 0, 5, 3, "h:1")) == 0
    assert len(QueueRange("T", "b", 0, 3, 5, "h:1")) == 2


@pytest.mark.parametrize("tags", [None, frozenset({"A"})])
@pytest.mark.parametrize("compressed", [False, True])
def test_vectorized_chunk_decoding_matches_the_record_loop(tags, compressed):
    pa = pytest.importorskip("pyarrow", reason="pyarrow comes with the spark extra")
    from rmq.spark._records import Chunk, chunk_to_arrow, record_starts, to_arrow_batch

    bodies = []
    for b in range(3):  # three pull bodies; the first one starts before the range
        recs = []
        for i in range(5):
            q = b * 5 + i
            value = b"v" * (q * 3)  # 0..42 bytes: inline (<= 12) and buffer-backed views
            if compressed and q == 7:
                recs.append(_record(q, zlib.compress(value), props={"TAGS": "A"}, sysflag=1, phy=q * 100))
            else:
                recs.append(
                    _record(
                        q,
                        value,
                        props={"TAGS": "A" if q % 2 else "B", "KEYS": f"k{q}"},
                        phy=q * 100,
                        qid=1,
                        store_ts=1_700_000_000_000 + q,
                    )
                )
        bodies.append(b"".join(recs))
    names = [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "brokerName",
        "tags",
        "bornTimestamp",
        "msgId",
        "properties",
        "headers",
    ]
    ts = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", ts),
            ("timestampType", pa.int32()),
            ("brokerName", pa.string()),
            ("tags", pa.string()),
            ("bornTimestamp", ts),
            ("msgId", pa.string()),
            ("properties", pa.map_(pa.string(), pa.string())),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )
    chunk = Chunk()
    slow = Columns(names)
    slow.brokerName = "broker-a"
    for body in bodies:
        chunk.add(body, record_starts(body), 3, 13)
        decode_records(body, slow, start=3, end=13, tags=tags)
    fast = chunk_to_arrow(chunk, names, schema, ["native"] * len(names), tags=tags, broker_name="broker-a")
    ref = to_arrow_batch(slow, names, schema, ["native"] * len(names))
    assert fast.schema.equals(schema)
    assert fast.to_pylist() == ref.to_pylist()
    offsets = fast.column(4).to_pylist()
    assert offsets == [q for q in range(3, 13) if tags is None or q % 2 or (compressed and q == 7)]
    for row in fast.to_pylist():  # headers: the properties as Spark-Kafka's key/value structs
        assert row["headers"] == [{"key": k, "value": v.encode()} for k, v in row["properties"]]


def test_include_headers_and_timestamp_strategy_options():
    from rmq.spark.options import include_headers

    o = parse_source_options({**NS, "subscribe": "T"}, streaming=False)
    assert not o.include_headers and o.starting.no_match == "error" and o.ending.no_match == "latest"
    o = parse_source_options(
        {
            **NS,
            "subscribe": "T",
            "INCLUDEHEADERS": "true",
            "startingOffsetsByTimestampStrategy": "Latest",
            "startingTimestamp": "5",
        },
        streaming=True,
    )
    assert o.include_headers and o.starting.no_match == "latest" and o.starting.timestamp == 5
    assert include_headers({"includeHeaders": "true"}) and not include_headers({})
    with pytest.raises(OptionError, match="includeHeaders: expected true or false"):
        include_headers({"includeheaders": "maybe"})
    with pytest.raises(OptionError, match="startingOffsetsByTimestampStrategy: expected one of error, latest"):
        parse_source_options(
            {**NS, "subscribe": "T", "startingOffsetsByTimestampStrategy": "earliest"}, streaming=False
        )


def test_vectorized_properties_parse_like_parse_properties():
    pytest.importorskip("pyarrow", reason="pyarrow comes with the spark extra")
    import numpy as np

    from rmq.spark._records import _prop_column, _props_arrow

    strings = ["a\x011\x02b\x01\x02\x02junk\x02\x01x\x02", "", "TAGS\x01T\x02KEYS\x01k k2\x02"]
    data = "".join(strings).encode()
    starts = np.cumsum([0] + [len(s.encode()) for s in strings[:-1]])
    lengths = np.array([len(s.encode()) for s in strings])
    offsets, keys, values = _props_arrow(np.frombuffer(data, np.uint8), data, starts, lengths)
    rows = [
        dict(zip(keys.to_pylist()[a:b], values.to_pylist()[a:b], strict=True))
        for a, b in zip(offsets[:-1], offsets[1:], strict=True)
    ]
    assert rows == [parse_properties(s) for s in strings]
    assert _prop_column((offsets, keys, values), "KEYS").to_pylist() == [None, None, "k k2"]
    bad = b"\xff\xfe\x01x\x02"
    assert _props_arrow(np.frombuffer(bad, np.uint8), bad, np.array([0]), np.array([len(bad)])) is None


def test_vectorized_sink_encoding_matches_the_row_path():
    """MessageSender's Arrow path and its per-row path produce the same batch bodies (routing
    and SEND are replaced by recording; the encoding is what is compared)."""
    pa = pytest.importorskip("pyarrow", reason="pyarrow comes with the spark extra")
    from rmq.common.route import BrokerData, QueueData, TopicRouteData
    from rmq.spark._sink import MessageSender, _TopicTarget

    class Recording(MessageSender):
        def __init__(self):
            super().__init__(None, parse_sink_options({**NS, "batchSize": "3"}))
            self.bodies = []
            self._ids.next = lambda: "ID"  # the same UNIQ_KEY on both paths
            self._ids.array = lambda n: pa.array(["UNIQ_KEY\x01ID\x02"] * n)

        def _target(self, topic):
            route = TopicRouteData([QueueData("b", 2, 2, 6)], [BrokerData("c", "b", {0: "h:1"})])
            t = self._targets[topic] = _TopicTarget(topic, route, None)
            t.rr = 0
            return t

        def _queue_send(self, topic, broker, qid, body, count):
            self.bodies.append((topic, qid, bytes(body), count))

    rows = {
        "value": [b"a", "bé".encode(), b"c" * 20, b"d", b"e"],
        "key": ["k1", None, "k1", "", "k2"],
        "topic": ["T", "T", "U", "T", "U"],
        "tags": ["x", None, "y", "x", None],
        "properties": [{"p": "1"}, None, [("q", "2"), ("r", None)], {}, {"s": ""}],
        "partition": [None, 1, None, 0, None],
    }
    fast = Recording()
    batch = pa.RecordBatch.from_pydict(
        rows,
        schema=pa.schema(
            [
                ("value", pa.binary()),
                ("key", pa.string()),
                ("topic", pa.string()),
                ("tags", pa.string()),
                ("properties", pa.map_(pa.string(), pa.string())),
                ("partition", pa.int32()),
            ]
        ),
    )
    fast.add_arrow_batch(batch)
    slow = Recording()
    slow.add_columns(5, rows["value"], rows["key"], rows["topic"], rows["tags"], rows["properties"], rows["partition"])
    slow.flush()
    assert sorted(fast.bodies) == sorted(slow.bodies)
    assert sum(c for *_, c in fast.bodies) == 5
    with pytest.raises(Exception, match="is set by the sink"):
        Recording().add_arrow_batch(
            pa.RecordBatch.from_pydict(
                {"value": [b"v"], "topic": ["T"], "properties": [{"TAGS": "no"}]},
                schema=pa.schema(
                    [("value", pa.binary()), ("topic", pa.string()), ("properties", pa.map_(pa.string(), pa.string()))]
                ),
            )
        )


def test_auto_registration_hook_as_spark_looks_it_up(monkeypatch):
    """Spark registers ``DefaultSource`` of every top-level ``pyspark_*`` module it finds on the
    path (pyspark/sql/worker/lookup_data_sources.py); an installed rmq ships one."""
    pytest.importorskip("pyspark", reason="pyspark comes with the spark extra")
    import importlib
    import pathlib
    import pkgutil

    from pyspark.sql.datasource import DataSource

    root = str(pathlib.Path(__file__).resolve().parents[2])  # where an install puts it: on sys.path
    monkeypatch.syspath_prepend(root)
    found = {}
    for info in pkgutil.iter_modules([root]):
        if info.name.startswith("pyspark_"):
            mod = importlib.import_module(info.name)
            if hasattr(mod, "DefaultSource") and issubclass(mod.DefaultSource, DataSource):
                found[mod.DefaultSource.name()] = mod.DefaultSource
    from rmq.spark.source import RocketMQDataSource

    assert found == {"rocketmq": RocketMQDataSource}


@pytest.mark.integration  # a listening socket for the client to talk to
def test_client_replaces_a_connection_the_peer_closed():
    """A cached connection the server closed (idle timeout between Spark tasks) is replaced
    before use, so even a non-idempotent send does not fail on it."""
    import socket
    import threading

    from rmq.protocol.command import RemotingCommand
    from rmq.remoting.codec import FrameDecoder, encode
    from rmq.spark._client import RocketMQClient

    srv = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    accepted = []

    def serve():
        # First connection: closed at once without answering; later ones echo one reply.
        for i in range(2):
            conn, _ = srv.accept()
            accepted.append(conn)
            if i == 0:
                conn.close()
                continue
            dec = FrameDecoder()
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                dec.feed(data)
                for cmd in dec:
                    conn.sendall(b"".join(bytes(p) for p in encode(cmd.response(0, None, {"ok": "1"}))))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = RocketMQClient(["127.0.0.1:9"], timeout=5)
    try:
        conn = client._conn(addr)  # connect; the server closes it
        wait_until_sync(conn.looks_dead, what="the server's FIN")
        resp = client.invoke(addr, RemotingCommand.request(10, {"x": "y"}), idempotent=False)
        assert resp.ext_fields == {"ok": "1"} and len(accepted) == 2
    finally:
        client.close()
        srv.close()


# ------------------------------------------------------------------------------ run_stream


class _Query:
    """What run_stream uses of a pyspark StreamingQuery: a query that ends with ``error``."""

    def __init__(self, error: str | None, raises: bool) -> None:
        self.id = "q"
        self.error = error
        self.raises = raises

    def awaitTermination(self, timeout):
        if self.error is not None and self.raises:
            raise RuntimeError(self.error)
        return True

    def exception(self):
        return None if self.error is None else RuntimeError(self.error)


@pytest.mark.parametrize("raises", [False, True])
def test_run_stream_starts_again_only_when_the_python_worker_did_not_connect_back(raises):
    from rmq._testing.spark import WORKER_START_TIMEOUT, run_stream

    late = f"[STREAM_FAILED] ... terminated with exception: {WORKER_START_TIMEOUT}. SQLSTATE: XXKST"
    errors = iter([late, late, None])
    started = []

    def start():
        started.append(_Query(next(errors), raises))
        return started[-1]

    q = run_stream(start, timeout=1)
    assert len(started) == 3 and q is started[-1] and q.exception() is None

    # any other failure is the query's own: no second start
    started.clear()
    errors = iter(["[STREAM_FAILED] bad option"])
    if raises:
        with pytest.raises(RuntimeError, match="bad option"):
            run_stream(start, timeout=1)
    else:
        assert "bad option" in str(run_stream(start, timeout=1).exception())
    assert len(started) == 1

    # and the worker's lateness only so many times
    started.clear()
    errors = iter([late] * 3)
    if raises:
        with pytest.raises(RuntimeError, match=WORKER_START_TIMEOUT):
            run_stream(start, timeout=1, attempts=3)
    else:
        assert WORKER_START_TIMEOUT in str(run_stream(start, timeout=1, attempts=3).exception())
    assert len(started) == 3
