"""FrameDecoder / encode against real frames from Apache RocketMQ 4.9.8 and real clients."""

import json
import struct

import pytest
from remoting_golden import quickstart, serialize_frames

from rmq.errors import RemotingCommandError
from rmq.protocol.codes import LanguageCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import FrameDecoder, decode_frame, encode

QUICKSTART = quickstart()
SERIALIZE = serialize_frames()
JSON_FRAMES = [r for r in QUICKSTART + SERIALIZE if r["serialize"] == 0]
BINARY_FRAMES = [r for r in SERIALIZE if r["serialize"] == 1]


def _header_len(frame: bytes) -> int:
    return struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF


def _same(a: RemotingCommand, b: RemotingCommand) -> bool:
    return (
        a.code,
        a.language,
        a.version,
        a.opaque,
        a.flag,
        a.remark,
        a.ext_fields,
        a.body_bytes(),
        a.serialize_type,
    ) == (b.code, b.language, b.version, b.opaque, b.flag, b.remark, b.ext_fields, b.body_bytes(), b.serialize_type)


def test_golden_files_present():
    assert len(QUICKSTART) == 79 and len(BINARY_FRAMES) > 20


@pytest.mark.parametrize("row", JSON_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_json_golden_frame_decodes(row):
    frame = row["frame"]
    cmd = decode_frame(frame)
    hlen = _header_len(frame)
    expected = json.loads(frame[8 : 8 + hlen])
    assert cmd.code == expected["code"] == row["code"]
    assert cmd.flag == expected["flag"] == row["flag"]
    assert cmd.opaque == expected["opaque"]
    assert cmd.version == expected["version"]
    assert cmd.language == expected["language"]
    assert cmd.remark == expected.get("remark")
    assert cmd.ext_fields == expected.get("extFields", {})
    assert cmd.serialize_type == 0
    assert cmd.body_bytes() == frame[8 + hlen :]
    assert cmd.is_response == bool(row["flag"] & 1)


@pytest.mark.parametrize("row", BINARY_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_binary_golden_frame_decodes(row):
    frame = row["frame"]
    cmd = decode_frame(frame)
    d = row["decoded_header"]
    assert cmd.serialize_type == 1
    assert cmd.code == d["code"]
    assert LanguageCode[cmd.language] == d["language"]
    assert cmd.version == d["version"]
    assert cmd.opaque == d["opaque"]
    assert cmd.flag == d["flag"]
    assert cmd.remark == d["remark"]
    assert cmd.ext_fields == d["extFields"]
    assert cmd.body_bytes() == frame[8 + _header_len(frame) :]


def _request_for(row, rows):
    back = "->".join(reversed(row["stream"].split("->")))
    for q in rows:
        if (
            q["stream"] == back
            and q["flag"] & 1 == 0
            and q["code"] == row["request_code"]
            and decode_frame(q["frame"]).opaque == decode_frame(row["frame"]).opaque
        ):
            return decode_frame(q["frame"])
    return None


@pytest.mark.parametrize(
    "row", [r for r in BINARY_FRAMES if r["flag"] & 1], ids=lambda r: f"{r['stream']}-{r['request_code']}-{r['code']}"
)
def test_binary_reply_encodes_like_java(row):
    """Answer a binary request the way the Java server did: byte for byte."""
    golden = decode_frame(row["frame"])
    request = _request_for(row, SERIALIZE)
    if request is None:  # the capture kept the reply but not its request: build one
        request = RemotingCommand(row["request_code"], opaque=golden.opaque, serialize_type=1)
    assert request.serialize_type == 1
    reply = request.response(golden.code, golden.remark, dict(golden.ext_fields), golden.body)
    assert b"".join(encode(reply)) == row["frame"]


def test_some_binary_replies_have_their_request():
    replies = [r for r in BINARY_FRAMES if r["flag"] & 1]
    assert sum(_request_for(r, SERIALIZE) is not None for r in replies) >= len(replies) // 2


def test_every_golden_frame_split_at_every_offset(depth):
    for row in QUICKSTART + SERIALIZE:
        frame = row["frame"]
        whole = decode_frame(frame)
        for cut in range(1, len(frame), max(1, round(1 / depth))):
            dec = FrameDecoder()
            dec.feed(frame[:cut])
            assert dec.next_frame() is None
            dec.feed(frame[cut:])
            cmd = dec.next_frame()
            assert cmd is not None and _same(cmd, whole), (row["code"], cut)
            assert dec.next_frame() is None and dec.buffered == 0


def test_glued_frames_in_odd_chunks(depth):
    frames = [r["frame"] for r in QUICKSTART + SERIALIZE]
    expected = [decode_frame(f) for f in frames]
    stream = b"".join(frames)
    # one-byte feeds only in the full run: the unit loop splits every golden frame at every
    # tenth offset already (test_every_golden_frame_split_at_every_offset)
    for chunk in ((1,) if depth == 1 else ()) + (3, 7, 64, 1000, 4096, len(stream)):
        dec = FrameDecoder()
        got = []
        for i in range(0, len(stream), chunk):
            dec.feed(stream[i : i + chunk])
            got.extend(dec)
        assert len(got) == len(expected)
        assert all(_same(a, b) for a, b in zip(got, expected, strict=False)), chunk


@pytest.mark.parametrize("ser", [0, 1])
@pytest.mark.parametrize("body", [None, b"", b"x", bytes(range(256)) * 4096], ids=["none", "empty", "one", "1MiB"])
def test_round_trip(ser, body):
    cmd = RemotingCommand(
        310,
        language="PYTHON",
        version=409,
        opaque=2**31 - 1,
        flag=2,
        remark="héllo 世界 \u0001",
        ext_fields={"a": "grp", "b": "主题", "e": "3", "i": "TAGS\u0001A\u0002"},
        body=body,
        serialize_type=ser,
    )
    parts = encode(cmd)
    frame = b"".join(parts)
    back = decode_frame(frame)
    assert back.serialize_type == ser
    assert (back.code, back.language, back.opaque, back.flag, back.remark, back.ext_fields) == (
        310,
        "PYTHON",
        2**31 - 1,
        2,
        "héllo 世界 \u0001",
        cmd.ext_fields,
    )
    assert back.body_bytes() == (body or b"")
    if body:
        assert parts[1] is body  # never copied


def test_encode_body_parts_are_not_copied():
    backing = bytearray(range(256)) * 10
    views = [memoryview(backing)[i : i + 100] for i in range(0, 2000, 100)]
    cmd = RemotingCommand(0, flag=1, ext_fields={"nextBeginOffset": 5}, body=views)
    parts = encode(cmd)
    assert parts[1:] == views and all(a is b for a, b in zip(parts[1:], views, strict=False))
    back = decode_frame(b"".join(bytes(p) for p in parts))
    assert back.body_bytes() == bytes(backing[:2000])
    assert back.ext_fields == {"nextBeginOffset": "5"}


def test_json_reply_has_string_ext_fields_and_always_ext_fields():
    req = decode_frame(QUICKSTART[0]["frame"])
    reply = req.response(ResponseCode.SUCCESS, ext_fields={"offset": 12, "flag": True, "gone": None})
    frame = b"".join(encode(reply))
    word = struct.unpack_from(">i", frame, 4)[0]
    assert word >> 24 == 0
    header = json.loads(frame[8 : 8 + (word & 0xFFFFFF)])
    assert header["extFields"] == {"offset": "12", "flag": "true"}
    assert header["flag"] == 1 and header["opaque"] == req.opaque and header["code"] == 0
    empty = json.loads(b"".join(encode(req.response()))[8:])
    assert empty["extFields"] == {} and "remark" not in empty


def test_json_request_header_like_java():
    """Our JSON header has Java's key order and spelling (fastjson sorts keys)."""
    row = QUICKSTART[0]
    golden = decode_frame(row["frame"])
    again = b"".join(encode(golden))
    assert again == row["frame"]


def _frame(header: bytes, body: bytes = b"", ser: int = 0, length: int | None = None, hlen: int | None = None) -> bytes:
    hl = len(header) if hlen is None else hlen
    ln = 4 + len(header) + len(body) if length is None else length
    return struct.pack(">ii", ln, (ser << 24) | hl) + header + body


@pytest.mark.parametrize(
    "data, message",
    [
        (struct.pack(">i", 17 * 1024 * 1024), "over the maximum"),
        (struct.pack(">i", -5), "negative frame length"),
        (struct.pack(">i", 2), "too small"),
        (_frame(b'{"code":1}', hlen=500), "header length 500 is beyond the frame"),
        (_frame(b"{not json"), "not valid JSON"),
        (_frame(b"\xff\xfe\x00"), "not valid JSON"),
        (_frame(b"[1,2]"), "not an object"),
        (_frame(b'{"code":1}', ser=7), "unknown serialize type 7"),
        (_frame(b'{"code":"10"}'), "'code' must be a JSON integer"),
        (_frame(b'{"code":10,"opaque":1.5}'), "'opaque' must be a JSON integer"),
        (_frame(b'{"code":10,"flag":true}'), "'flag' must be a JSON integer"),
        (_frame(b'{"code":10,"extFields":[1]}'), "'extFields' must be an object"),
        (_frame(b'{"code":10,"extFields":{"a":{"b":1}}}'), "extFields['a']"),
        (_frame(b'{"code":10,"remark":5}'), "'remark' must be a string"),
        (_frame(b'{"opaque":1}'), "no 'code'"),
        (_frame(b"\x00\x0a\x00", ser=1), "shorter than its fixed part"),
        (_frame(struct.pack(">hbhiii", 10, 0, 409, 1, 0, 99) + b"\0\0\0\0", ser=1), "remark length 99"),
        (_frame(struct.pack(">hbhiii", 10, 0, 409, 1, 0, 0) + struct.pack(">i", 50), ser=1), "extFields length 50"),
    ],
    ids=[
        "over-max",
        "negative",
        "tiny",
        "hlen-beyond",
        "not-json",
        "not-utf8",
        "not-object",
        "ser-type",
        "code-str",
        "opaque-float",
        "flag-bool",
        "ext-list",
        "ext-nested",
        "remark-int",
        "no-code",
        "bin-short",
        "bin-remark",
        "bin-ext",
    ],
)
def test_bad_input_raises_clear_error(data, message):
    dec = FrameDecoder()
    dec.feed(data)
    with pytest.raises(RemotingCommandError) as info:
        dec.next_frame()
    assert message in str(info.value)
    assert info.value.retriable is False


def test_max_frame_length_configurable():
    frame = b"".join(encode(RemotingCommand(10, body=b"x" * 1000)))
    dec = FrameDecoder(max_frame_length=500)
    dec.feed(frame[:4])  # the length word alone is enough to refuse
    with pytest.raises(RemotingCommandError, match="over the maximum 500"):
        dec.next_frame()
    dec = FrameDecoder(max_frame_length=2000)
    dec.feed(frame)
    assert dec.next_frame().body_bytes() == b"x" * 1000


def test_decode_frame_rejects_partial_and_trailing():
    frame = b"".join(encode(RemotingCommand(10)))
    with pytest.raises(RemotingCommandError, match="incomplete"):
        decode_frame(frame[:-1])
    with pytest.raises(RemotingCommandError, match="after the frame"):
        decode_frame(frame + b"\0")


def test_mixed_json_types_from_clients_are_kept():
    header = (
        b'{"code":310,"extFields":{"d":4,"k":false,"g":"17","x":null,"f":1.0},'
        b'"flag":0,"language":"JAVA","opaque":4,"version":121}'
    )
    cmd = decode_frame(_frame(header))
    assert cmd.ext_fields == {"d": 4, "k": False, "g": "17", "x": None, "f": 1.0}
    assert cmd.version == 121
