"""The record codec against real CommitLog records from Apache RocketMQ 4.9.8."""

import base64
import json
import os
import random
import struct
import zlib

import pytest

from rmq import _store
from rmq.store import StoredMessage, decode_offset_msg_id, offset_msg_id, string_to_properties
from rmq.store.message import host_bytes, properties_to_string

# Frames captured from Apache RocketMQ 4.9.8 (a project fixture copied from shared/golden).
GOLDEN = os.path.join(os.path.dirname(__file__), "..", "golden", "remoting", "rocketmq-4.9.8-quickstart-frames.jsonl")


def _pull_bodies():
    out = []
    with open(GOLDEN) as f:
        for line in f:
            d = json.loads(line)
            if d.get("request_code") == 11 and d["stream"] == "broker->client":
                frame = base64.b64decode(d["frame_b64"])
                hlen = struct.unpack(">i", frame[4:8])[0] & 0xFFFFFF
                body = frame[8 + hlen :]
                if body:
                    out.append(body)
    return out


def _records(body):
    pos = 0
    while pos < len(body):
        size = struct.unpack(">i", body[pos : pos + 4])[0]
        yield pos, body[pos : pos + size]
        pos += size


def test_golden_records_decode_and_reencode_byte_identical():
    bodies = _pull_bodies()
    assert len(bodies) >= 20
    n = quickstart = 0
    for body in bodies:
        for pos, raw in _records(body):
            r = _store.decode_record(body, pos, True)  # CRC checked too
            assert r["magic_code"] == _store.MESSAGE_MAGIC_CODE
            assert r["store_size"] == len(raw)
            assert r["topic"] == "TopicTest"
            props = string_to_properties(r["properties"])
            assert props["UNIQ_KEY"] and int(props["UNIQ_KEY"], 16) >= 0
            if r["body"].startswith(b"Hello RocketMQ "):  # the quickstart producer's 1000
                assert props["TAGS"] == "TagA" and props["CLUSTER"] == "DefaultCluster"
                quickstart += 1
            buf = bytearray(len(raw))
            size = _store.encode_record(
                buf,
                0,
                r["body"],
                r["topic"].encode(),
                r["properties"],
                r["queue_id"],
                r["flag"],
                r["queue_offset"],
                r["commit_log_offset"],
                r["sys_flag"],
                r["born_timestamp"],
                r["born_host"],
                r["store_timestamp"],
                r["store_host"],
                r["reconsume_times"],
                r["prepared_transaction_offset"],
            )
            assert size == len(raw)
            assert bytes(buf) == raw
            # Our properties codec round-trips Java's string (no trailing separator in 4.9.8).
            assert properties_to_string(props).encode() == r["properties"]
            ext = StoredMessage.from_record(r)
            assert ext.store_host == ("127.0.0.1", 10911)
            assert ext.msg_id == (raw[64:72] + raw[28:36]).hex().upper()
            n += 1
    assert n >= 1003 and quickstart == 1000


def test_offset_msg_id_matches_wire_contract_example():
    host = host_bytes(("10.218.145.166", 10700))
    assert offset_msg_id(host, 0x6500E59F3E) == "0ADA91A6000029CC0000006500E59F3E"
    assert decode_offset_msg_id("0ADA91A6000029CC0000006500E59F3E") == ("10.218.145.166", 10700, 0x6500E59F3E)
    with pytest.raises(ValueError):
        decode_offset_msg_id("ABCD")


@pytest.mark.parametrize(
    "s, expected",
    [
        ("", 0),
        ("TagA", 2598919),
        ("a", 97),
        ("hello world", 1794106052),
        ("TagB" * 20, None),
        ("标签", None),
        ("emoji😀", None),
    ],
)
def test_java_hash_code(s, expected):
    # Reference: Java's definition over UTF-16 code units, computed here in plain Python.
    u16 = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(u16), 2):
        h = (31 * h + int.from_bytes(u16[i : i + 2], "big")) & 0xFFFFFFFF
    ref = h - (1 << 32) if h >= 1 << 31 else h
    if expected is not None:
        assert ref == expected
    assert _store.java_hash_code(s) == ref
    assert _store.java_hash_code(s.encode()) == ref


def test_tags_code_of_properties():
    props = b"UNIQ_KEY\x01X\x02TAGS\x01TagA\x02KEYS\x01k1"
    assert _store.tags_code_of_properties(props) == _store.java_hash_code("TagA")
    assert _store.tags_code_of_properties(b"XTAGS\x01TagA") == 0  # not a key boundary
    assert _store.tags_code_of_properties(b"TAGS\x01") == 0
    assert _store.tags_code_of_properties(b"") == 0
    assert _store.find_property(props, "KEYS") == b"k1"
    assert _store.find_property(props, "NOPE") is None


def _batch_item(body, props: bytes, flag=0):
    total = 20 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def test_batch_split_and_encode_appends_outer_properties_like_java_4_9_8():
    items = [
        _batch_item(b"one", b"UNIQ_KEY\x01A\x02TAGS\x01x", 7),
        _batch_item(b"", b""),
        _batch_item(b"three", b"UNIQ_KEY\x01C\x02"),
    ]
    batch = b"".join(items)
    outer = b"WAIT\x01true"
    split = _store.split_batch(batch, 1, outer)
    assert [s[1] for s in split] == [3, 0, 5]
    buf = bytearray(4096)
    host = host_bytes(("127.0.0.1", 10911))
    total = _store.encode_batch(buf, 0, batch, split, b"T", outer, 2, 0, 111, host, 222, host, 0, 10, 5000)
    assert total == sum(s[5] for s in split)
    pos, recs = 0, []
    while pos < total:
        r = _store.decode_record(buf, pos, True)
        recs.append(r)
        pos += r["store_size"]
    assert [r["queue_offset"] for r in recs] == [10, 11, 12]
    assert recs[1]["commit_log_offset"] == 5000 + recs[0]["store_size"]
    assert recs[0]["flag"] == 7 and recs[0]["body"] == b"one"
    assert recs[0]["body_crc"] == zlib.crc32(b"one") & 0x7FFFFFFF
    # item props + \x02 (added: the item's props did not end with one) + outer props
    assert recs[0]["properties"] == b"UNIQ_KEY\x01A\x02TAGS\x01x\x02WAIT\x01true"
    assert recs[1]["properties"] == b"WAIT\x01true"
    assert recs[2]["properties"] == b"UNIQ_KEY\x01C\x02WAIT\x01true"


@pytest.mark.parametrize(
    "batch, what",
    [
        (b"", "empty"),
        (b"\x00\x00\x00\x20\x00\x00", "truncated"),
        (struct.pack(">iiiii", 30, 0, 0, 0, 1000) + b"x", "body length"),
        (struct.pack(">iiiii", 99, 0, 0, 0, 1) + b"x" + struct.pack(">h", 0), "TOTALSIZE"),
        (struct.pack(">iiiii", 23, 0, 0, 0, 1) + b"x" + struct.pack(">h", 50), "properties length"),
    ],
)
def test_bad_batch_bodies_are_rejected_with_a_reason(batch, what):
    with pytest.raises(ValueError, match=what):
        _store.split_batch(batch, 1, b"")


def test_scan_records_classifies_corruption():
    buf = bytearray(4096)
    host = host_bytes(("127.0.0.1", 1))
    s1 = _store.encode_record(buf, 0, b"hello", b"T", b"TAGS\x01a", 0, 0, 0, 0, 0, 1, host, 2, host, 0, 0)
    s2 = _store.encode_record(buf, s1, b"world", b"T", b"", 0, 0, 1, s1, 0, 1, host, 2, host, 0, 0)
    recs, end, outcome, _ = _store.scan_records(buf, 0, len(buf), 0)
    assert [r[0] for r in recs] == [0, s1] and end == s1 + s2 and outcome == _store.SCAN_END
    assert recs[0][5] == _store.java_hash_code("a")
    bad = bytearray(buf)
    bad[s1 + 90] ^= 0xFF  # a body byte of the second record: CRC mismatch
    recs, end, outcome, _ = _store.scan_records(bad, 0, len(bad), 0)
    assert len(recs) == 1 and end == s1 and outcome == _store.SCAN_CORRUPT
    recs, end, outcome, _ = _store.scan_records(bad, 0, len(bad), 0, False)
    assert len(recs) == 2  # without CRC checking it passes
    recs, end, outcome, _ = _store.scan_records(buf, 0, s1 + s2 - 3, 0)
    assert len(recs) == 1 and outcome == _store.SCAN_TORN
    recs, end, outcome, _ = _store.scan_records(buf, 0, len(buf), 100)  # wrong PHYSICALOFFSET
    assert recs == [] and outcome == _store.SCAN_CORRUPT
    _store.write_blank(buf, s1 + s2, len(buf) - s1 - s2)
    recs, end, outcome, blank = _store.scan_records(buf, 0, len(buf), 0)
    assert outcome == _store.SCAN_BLANK and blank == len(buf) - s1 - s2


def test_malformed_records_never_read_out_of_bounds():
    """Random garbage, truncated records and IPv6 sysFlag bits on a minimal record: the
    scanner classifies, never crashes."""
    import random

    rng = random.Random(5)
    host = host_bytes(("127.0.0.1", 1))
    base = bytearray(200)
    size = _store.encode_record(base, 0, b"", b"T", b"", 0, 0, 0, 0, 0, 0, host, 0, host, 0, 0)
    v6 = bytearray(base[:size])
    v6[36:40] = struct.pack(">i", 0x30)
    recs, end, outcome, _ = _store.scan_records(bytes(v6), 0, len(v6), 0)
    assert recs == [] and outcome == _store.SCAN_CORRUPT
    for _ in range(3000):
        n = rng.randint(0, 300)
        buf = bytearray(rng.randbytes(n))
        if n >= 8 and rng.random() < 0.7:
            buf[4:8] = struct.pack(">I", _store.MESSAGE_MAGIC_CODE)
            buf[0:4] = struct.pack(">i", rng.randint(-5, n + 5))
        recs, end, outcome, _ = _store.scan_records(bytes(buf), 0, n, 0, rng.random() < 0.5)
        assert 0 <= end <= n
        try:
            _store.decode_record(bytes(buf), 0)
        except ValueError:
            pass


# ------------------------------------------------------------------------------ the record walker


def _walk_both(buf, pos=0, end=-1, check_crc=False):
    """('ok', span) or ('error', message) from the Cython walker and from the Python reference;
    they must agree on every input."""
    from rmq.common.message import RecordDecodeError, walk_record

    out = []
    for fn in (_store.record_span, walk_record):
        try:
            out.append(("ok", tuple(fn(buf, pos, end, check_crc))))
        except RecordDecodeError as e:
            out.append(("error", str(e)))
    assert out[0] == out[1], buf[:100]
    return out[0]


def test_layout_constants_agree_with_rmq_common_message():
    from rmq.common import message

    assert _store.LAYOUT and all(getattr(message, k) == v for k, v in _store.LAYOUT.items())
    assert _store.RECORD_FIXED_SIZE == message.RECORD_FIXED_SIZE == message.MIN_RECORD_V4 == 91
    assert (_store.MESSAGE_MAGIC_CODE, _store.MESSAGE_MAGIC_CODE_V2, _store.BLANK_MAGIC_CODE) == (
        message.MESSAGE_MAGIC_CODE,
        message.MESSAGE_MAGIC_CODE_V2,
        message.BLANK_MAGIC_CODE,
    )


@pytest.mark.parametrize("module", ["rmq._store", "rmq.protocol._codec", "rmq.broker.processors._sendpath"])
def test_stub_declares_everything_the_extension_exports(module):
    import ast
    import importlib

    ext = importlib.import_module(module)
    stub_path = os.path.join(os.path.dirname(ext.__file__), module.rsplit(".", 1)[1] + ".pyi")
    with open(stub_path) as f:
        stub = ast.parse(f.read())
    declared = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            declared.add(node.target.id)
    public = {n for n in dir(ext) if not n.startswith("_")}
    assert public - declared == set()
    assert declared - public == set()
    assert {"walk_records", "Appender", "HeaderReader", "SendFastPath"} & declared


def test_walker_agrees_with_the_reference_on_golden_records_and_every_mutation():
    import random

    rng = random.Random(11)
    bodies = _pull_bodies()[:4]
    for body in bodies:
        spans = _store.walk_records(body, 0, -1, True)
        from rmq.common.message import walk_records_py

        assert spans == [tuple(s) for s in walk_records_py(body, 0, -1, True)]
        assert [s[0] for s in spans] == [pos for pos, _ in _records(body)]
        raw = body[: spans[0][1]]
        for cut in range(0, len(raw) + 1, 3):
            _walk_both(raw[:cut])
        for _ in range(400):
            b = bytearray(raw)
            i = rng.randrange(len(b))
            b[i] = rng.randrange(256)
            _walk_both(bytes(b), check_crc=rng.random() < 0.5)
            _walk_both(bytes(b), rng.randrange(4), rng.choice([-1, len(b) - 1, len(b) + 5]))


def test_walker_checks_the_crc_only_when_asked():
    buf = bytearray(300)
    host = host_bytes(("127.0.0.1", 1))
    size = _store.encode_record(buf, 0, b"payload", b"T", b"", 0, 0, 0, 0, 0, 0, host, 0, host, 0, 0)
    rec = bytearray(buf[:size])
    rec[90] ^= 0x01  # inside the body
    assert _walk_both(bytes(rec))[0] == "ok"
    verdict, msg = _walk_both(bytes(rec), check_crc=True)
    assert verdict == "error" and "BODYCRC" in msg


def test_crc_runs_on_large_buffers_without_a_copy_and_matches_zlib():
    import mmap

    big = mmap.mmap(-1, 3 << 20)
    big[:11] = b"hello world"
    big[-5:] = b"tail!"
    assert _store.body_crc(big) == zlib.crc32(big) & 0x7FFFFFFF  # GIL released above 4 KiB
    assert _store.body_crc(memoryview(big)[:100]) == zlib.crc32(big[:100]) & 0x7FFFFFFF
    assert _store.body_crc(b"") == 0
    big.close()  # no export left behind


def test_batch_records_are_written_by_the_same_writer_as_single_records():
    host = host_bytes(("127.0.0.1", 1))
    from rmq.common.message import encode_batch

    batch = encode_batch([(0, b"one", "TAGS\x01a\x02"), (3, b"two", "")])
    items = _store.split_batch(batch, 1, b"WAIT\x01true")
    out = bytearray(1000)
    n = _store.encode_batch(out, 0, batch, items, b"T", b"WAIT\x01true", 2, 0, 5, host, 6, host, 0, 10, 0)
    one = bytearray(1000)
    s1 = _store.encode_record(
        one, 0, b"one", b"T", b"TAGS\x01a\x02WAIT\x01true", 2, 0, 10, 0, 0, 5, host, 6, host, 0, 0
    )
    s2 = _store.encode_record(one, s1, b"two", b"T", b"WAIT\x01true", 2, 3, 11, s1, 0, 5, host, 6, host, 0, 0)
    assert n == s1 + s2 and out[:n] == one[:n]


def test_none_is_read_as_empty_where_it_always_was():
    assert _store.java_hash_code(None) == 0 == _store.java_hash_code("")
    assert _store.tags_code_of_properties(None) == 0
    assert _store.find_property(None, "TAGS") is None
    from rmq.common.message import encode_batch

    assert _store.split_batch(encode_batch([(0, b"x", "")]), 1, None) == _store.split_batch(
        encode_batch([(0, b"x", "")]), 1, b""
    )


def test_the_extension_raises_the_common_record_error_registered_at_import():
    """rmq._store imports nothing from rmq at run time (it cimports only the header-only
    rmq/common/_bytes.pxd); rmq.common.message registers its RecordDecodeError."""
    from rmq.common.message import RecordDecodeError

    with pytest.raises(RecordDecodeError, match="truncated record at 0"):
        _store.decode_record(b"\0" * 10)
    with pytest.raises(TypeError):
        _store.set_record_error(KeyError)
    with open(os.path.join(os.path.dirname(_store.__file__), "_store.pyx")) as f:
        src = f.read()
    src = src.replace("nothing from rmq", "").replace("from rmq.common._bytes cimport", "")
    assert "from rmq" not in src and "import rmq" not in src
    assert not os.path.exists(os.path.join(os.path.dirname(_store.__file__), "common", "_bytes.pyx"))


def test_body_crc_is_zlibs_crc32_at_every_length_and_alignment():
    """BODYCRC through the carry-less-multiply crc32 (rmq/common/_bytes.pxd) against zlib's,
    for every length around the 16-byte folds and the 64-byte minimum, at odd alignments."""
    rng = random.Random(29)
    data = bytes(rng.randrange(256) for _ in range(6000))
    lengths = [*range(0, 300), 1023, 1024, 1025, 4095, 4096, 4097, 5990]
    for n in lengths:
        for off in (0, 1, 7, 13):
            chunk = data[off : off + n]
            assert _store.body_crc(chunk) == zlib.crc32(chunk) & 0x7FFFFFFF, (n, off)
    assert _store.body_crc(memoryview(bytes(1 << 20))) == zlib.crc32(bytes(1 << 20)) & 0x7FFFFFFF
