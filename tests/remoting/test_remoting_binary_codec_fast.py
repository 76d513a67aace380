"""The fast ROCKETMQ binary header codec (rmq/protocol/_codec.pyx: binary_header_decode and
binary_header_encode) against the pure-Python reference in rmq/remoting/codec.py.

As for the JSON codec, the fast decoder must either decline (None: the reference runs and
words the error) or build exactly what the reference builds, and the fast encoder must write
the reference's bytes. Checked on every frame Java 4.9.8 wrote with
``rocketmq.serialize.type=ROCKETMQ`` (against the capture's ``decoded_header`` too), on
random commands (hypothesis), and on truncated, flipped and random headers.
"""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from remoting_golden import serialize_frames

from rmq.errors import RemotingCommandError
from rmq.protocol import _codec
from rmq.protocol.codes import LanguageCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import codec
from rmq.remoting.codec import FrameDecoder, decode_binary_header, decode_frame, encode

# Straight from the extension (which every install builds), so the comparison runs whether or
# not RMQ_NO_EXTENSIONS=1 has the codec wire them in.
FAST_DECODE = _codec.binary_header_decode
FAST_ENCODE = _codec.binary_header_encode
BINARY_FRAMES = [r for r in serialize_frames() if r["serialize"] == 1]
LANG_NAME = {lc.value: lc.name for lc in LanguageCode}


def _hdr(frame: bytes) -> bytes:
    return frame[8 : 8 + (struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF)]


def _shape(cmd: RemotingCommand) -> tuple:
    ext = [(type(k), k, type(v), v) for k, v in cmd.ext_fields.items()]
    return (
        type(cmd.code),
        cmd.code,
        cmd.language,
        cmd.version,
        cmd.opaque,
        cmd.flag,
        cmd.remark,
        type(cmd.ext_fields),
        ext,
        cmd.body,
        cmd.serialize_type,
    )


def _reference(buf, start, n):
    try:
        return "ok", _shape(codec._decode_binary_header_py(buf, start, n))
    except RemotingCommandError as exc:
        return "error", str(exc)
    except struct.error as exc:  # the reference reads past a buffer shorter than the span
        return "struct", str(exc)


def _check_decode(buf, start, n) -> bool:
    """Compare both paths on one span; True when the fast path took it."""
    ref = _reference(buf, start, n)
    fast = FAST_DECODE(buf, start, n, RemotingCommand, codec._LANG_BY_UBYTE)
    if fast is not None:
        assert ref == ("ok", _shape(fast)), bytes(buf)
    try:
        got = "ok", _shape(decode_binary_header(buf, start, n))
    except RemotingCommandError as exc:
        got = "error", str(exc)
    except struct.error as exc:
        got = "struct", str(exc)
    assert got == ref
    return fast is not None


def _fast_encode(cmd, body_len=-1):
    return FAST_ENCODE(
        cmd.code,
        cmd.ext_fields,
        cmd.flag,
        codec._BYTE_BY_LANG.get(cmd.language, 8),
        cmd.opaque,
        cmd.remark,
        cmd.version,
        body_len,
    )


def _reference_encode(cmd):
    try:
        return "ok", codec._encode_binary_header_py(cmd)
    except (RemotingCommandError, struct.error, AttributeError, TypeError, ValueError, UnicodeEncodeError) as exc:
        return "error", type(exc)


# ------------------------------------------------------------------------------ golden frames


def test_the_capture_has_binary_frames_both_ways():
    streams = {r["stream"] for r in BINARY_FRAMES}
    assert len(BINARY_FRAMES) >= 30 and {"client->broker", "broker->client"} <= streams


@pytest.mark.parametrize("row", BINARY_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_golden_frame_decodes_on_the_fast_path_as_java_wrote_it(row):
    header = _hdr(row["frame"])
    assert _check_decode(header, 0, len(header)), "a real frame fell back to the reference decoder"
    # in place inside a larger buffer, as FrameDecoder calls it
    data = b"xyz" + row["frame"] + b"tail"
    cmd = FAST_DECODE(data, 11, len(header), RemotingCommand, codec._LANG_BY_UBYTE)
    want = row["decoded_header"]
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields) == (
        want["code"],
        LANG_NAME[want["language"]],
        want["version"],
        want["opaque"],
        want["flag"],
        want["remark"],
        want["extFields"],
    )
    assert cmd.serialize_type == 1 and cmd.body is None


@pytest.mark.parametrize("row", BINARY_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_golden_frame_re_encodes_to_java_bytes_on_both_paths(row):
    cmd = decode_frame(row["frame"])
    assert cmd.serialize_type == 1
    assert _fast_encode(cmd) == codec._encode_binary_header_py(cmd) == _hdr(row["frame"])
    assert b"".join(encode(cmd)) == row["frame"]  # the whole frame, length words included


# ------------------------------------------------------------------------------ random commands

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_commands = st.builds(
    lambda code, lang, version, opaque, flag, remark, ext: RemotingCommand(
        code, language=lang, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, serialize_type=1
    ),
    st.integers(-32768, 32767),
    st.sampled_from(sorted(codec._BYTE_BY_LANG)),
    st.integers(-32768, 32767),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | _text,
    st.dictionaries(_text, _text | st.booleans() | st.integers(-(2**63), 2**63) | st.none(), max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(_commands)
def test_random_commands_encode_to_the_reference_bytes_and_round_trip(cmd):
    ref = codec._encode_binary_header_py(cmd)
    assert _fast_encode(cmd) == ref
    framed = _fast_encode(cmd, body_len=3)
    assert framed[8:] == ref and struct.unpack_from(">ii", framed) == (4 + len(ref) + 3, (1 << 24) | len(ref))
    assert _check_decode(ref, 0, len(ref))
    back = decode_binary_header(ref, 0, len(ref))
    want_ext = {
        k: ("true" if v is True else "false" if v is False else str(v))
        for k, v in cmd.ext_fields.items()
        if v is not None and k != ""
    }
    assert back.ext_fields == want_ext
    assert (back.code, back.language, back.version, back.opaque, back.flag) == (
        cmd.code,
        cmd.language,
        cmd.version,
        cmd.opaque,
        cmd.flag,
    )
    assert back.remark == (cmd.remark or None)  # an empty remark travels as null


@pytest.mark.parametrize(
    "cmd",
    [
        RemotingCommand(40000, serialize_type=1),  # code past int16
        RemotingCommand(1, version=70000, serialize_type=1),
        RemotingCommand(1, opaque=2**31, serialize_type=1),
        RemotingCommand(1, remark="\ud800", serialize_type=1),  # not UTF-8
        RemotingCommand(1, ext_fields={"k": "\udfff"}, serialize_type=1),
        RemotingCommand(1, ext_fields={"k" * 40000: "v"}, serialize_type=1),  # key length past int16
        RemotingCommand(1, ext_fields={1: "v"}, serialize_type=1),  # not a str key
        RemotingCommand(1.0, serialize_type=1),  # not an int code
    ],
)
def test_encoder_declines_what_the_reference_must_handle(cmd):
    assert _fast_encode(cmd) is None
    outcome = _reference_encode(cmd)
    if outcome[0] == "ok":  # e.g. int(1.0): the public encoder still writes the reference's bytes
        assert b"".join(encode(cmd))[8:] == outcome[1]


# ------------------------------------------------------------------------------ malformed input


def test_every_truncation_and_byte_flip_of_real_headers_agrees():
    taken = declined = 0
    for row in BINARY_FRAMES[:12]:
        header = _hdr(row["frame"])
        for cut in range(len(header)):
            if _check_decode(header, 0, cut):
                taken += 1
            else:
                declined += 1
        for i in range(len(header)):
            for flip in (0x80, 0xFF, 0x01):
                mutated = bytearray(header)
                mutated[i] ^= flip
                if _check_decode(bytes(mutated), 0, len(mutated)):
                    taken += 1
                else:
                    declined += 1
    assert taken and declined


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 8), st.integers(-4, 90))
def test_random_bytes_never_crash_and_agree(data, start, n):
    _check_decode(data, start, n)


def test_span_outside_the_buffer_is_declined():
    header = _hdr(BINARY_FRAMES[0]["frame"])
    assert FAST_DECODE(header, 0, len(header) + 1, RemotingCommand, codec._LANG_BY_UBYTE) is None
    assert FAST_DECODE(header, -1, len(header), RemotingCommand, codec._LANG_BY_UBYTE) is None
    assert FAST_DECODE(header, len(header) + 5, 21, RemotingCommand, codec._LANG_BY_UBYTE) is None
    with pytest.raises(RemotingCommandError, match="shorter than its fixed part"):
        decode_binary_header(header, 0, 20)


def test_frame_decoder_reads_binary_frames_split_anywhere():
    stream = b"".join(r["frame"] for r in BINARY_FRAMES)
    want = [_shape(decode_frame(r["frame"])) for r in BINARY_FRAMES]
    for step in (1, 7, 64, len(stream)):
        dec = FrameDecoder()
        got = []
        for i in range(0, len(stream), step):
            dec.feed(stream[i : i + step])
            got += [_shape(c)[:-2] + (c.body_bytes(), c.serialize_type) for c in dec]
        assert [g[:-2] for g in got] == [w[:-2] for w in want]
        assert all(g[-1] == 1 for g in got)


# ------------------------------------------------------------------------------ SEND reply frame

SEND_REPLY = codec._fast_bin_encode and _codec.send_reply_frame


def _generic_send_reply(ser, code, opaque, msg_id, queue_id, queue_offset, region, trace_on) -> bytes:
    cmd = RemotingCommand(
        code,
        opaque=opaque,
        flag=1,
        serialize_type=ser,
        ext_fields={
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(queue_offset),
            "TRACE_ON": "true" if trace_on else "false",
            "MSG_REGION": region,
        },
    )
    return b"".join(encode(cmd))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([0, 1]),
    st.sampled_from([0, 10, 11, 12]),
    st.integers(-(2**31), 2**31 - 1),
    _text,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    _text,
    st.booleans(),
)
def test_send_reply_frame_is_what_the_generic_encoder_writes(ser, code, opaque, msg_id, qid, qoff, region, trace):
    frame = SEND_REPLY(ser, code, opaque, msg_id, qid, qoff, region, trace)
    assert frame == _generic_send_reply(ser, code, opaque, msg_id, qid, qoff, region, trace)
    back = decode_frame(frame)
    assert (back.code, back.opaque, back.flag, back.serialize_type, back.remark) == (code, opaque, 1, ser, None)
    assert back.ext_fields["queueOffset"] == str(qoff) and back.ext_fields["msgId"] == msg_id


def test_send_reply_frame_matches_javas_binary_reply():
    """The capture's binary SEND replies, rebuilt from their fields, byte for byte."""
    replies = [r for r in BINARY_FRAMES if r["stream"] == "broker->client" and r.get("request_code") == 310]
    assert replies
    for row in replies:
        h = row["decoded_header"]
        ext = h["extFields"]
        frame = SEND_REPLY(
            1,
            h["code"],
            h["opaque"],
            ext["msgId"],
            int(ext["queueId"]),
            int(ext["queueOffset"]),
            ext["MSG_REGION"],
            ext["TRACE_ON"] == "true",
        )
        assert frame == row["frame"]


def test_send_reply_frame_declines_text_utf8_cannot_carry():
    assert SEND_REPLY(0, 0, 1, "\ud800", 0, 0, "R", True) is None
    assert SEND_REPLY(1, 0, 1, "id", 0, 0, "\udfff", True) is None
    assert SEND_REPLY(2, 0, 1, "id", 0, 0, "R", True) is None
    assert SEND_REPLY(0, 0, 1, None, 0, 0, "R", True) is None


# The writer keeps the constant pieces of a reply per (serialize type, code, trace switch,
# region) in a few slots (_codec.pyx, "SEND reply"): replies whose settings change between
# calls, more settings than slots, equal regions in different str objects and a region UTF-8
# cannot carry must all still give the generic encoder's bytes.
_regions = st.one_of(
    st.sampled_from(["DefaultRegion", "cn-hangzhou", "", "\u5317\u4eac", 'q"\\\n\x01\x7f', "r" * 300]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0, 1]),
            st.sampled_from([0, 10, 11, 12, -1, 32767]),
            st.integers(-(2**31), 2**31 - 1),
            st.sampled_from(["0A0000010000271F0000000000123456", "", "id,id2", '\u00e9"x\\']),
            st.integers(-(2**31), 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
            _regions,
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_send_reply_frame_across_changing_settings(calls):
    for ser, code, opaque, msg_id, qid, qoff, region, trace in calls:
        # a fresh str object of the same text too: the kept piece is found by value as well
        for r in (region, "".join(list(region))):
            frame = SEND_REPLY(ser, code, opaque, msg_id, qid, qoff, r, trace)
            assert frame == _generic_send_reply(ser, code, opaque, msg_id, qid, qoff, r, trace)


def test_send_reply_frame_numbers_at_their_bounds():
    for ser in (0, 1):
        for n in (0, 9, 10, 99, 100, 101, -1, -9, -10, -100, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 10**18):
            opaque = max(-(2**31), min(2**31 - 1, n))
            qid = max(-(2**31), min(2**31 - 1, n))
            frame = SEND_REPLY(ser, 0, opaque, "m", qid, n, "R", True)
            assert frame == _generic_send_reply(ser, 0, opaque, "m", qid, n, "R", True)


def test_send_reply_frame_declined_region_leaves_the_kept_pieces_alone():
    want = _generic_send_reply(0, 0, 7, "m", 1, 2, "R", True)
    assert SEND_REPLY(0, 0, 7, "m", 1, 2, "R", True) == want
    for i in range(20):  # more than the slots: every one replaced, none by a declined region
        ser, region, trace = i % 2, f"R{i}", bool(i % 3)
        assert SEND_REPLY(ser, 0, 7, "m", 1, 2, "\ud800", True) is None
        assert SEND_REPLY(ser, 0, 7, "m", 1, 2, region, trace) == _generic_send_reply(
            ser, 0, 7, "m", 1, 2, region, trace
        )
    assert SEND_REPLY(0, 0, 7, "m", 1, 2, "R", True) == want
