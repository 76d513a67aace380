"""The fast JSON header codec (msgspec decoder, Cython encoder in rmq/protocol/_codec.pyx) against the
pure-Python reference in codec.py.

The fast decoder must, for every input, either decline (None → the reference runs) or build
exactly what the reference builds; the fast encoder must write the reference's bytes. So the
tests run both on golden frames, on random headers heavy in unicode and escapes, and on
malformed input, and compare. Errors always come from the reference, so their messages are
the same whichever path a frame takes.
"""

import enum
import json
import random
import struct

import pytest
from remoting_golden import client_requests, quickstart, serialize_frames

from rmq.errors import RemotingCommandError
from rmq.protocol import _codec
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import codec
from rmq.remoting.codec import FrameDecoder, decode_frame, decode_json_header, encode

# The fast pair itself (the msgspec decoder, the extension's encoder), so the comparison runs
# whether or not RMQ_NO_EXTENSIONS=1 has the codec wire them in.
FAST_DECODE = codec._msgspec_decode
FAST_ENCODE = _codec.json_header_encode
JSON_FRAMES = [r for r in quickstart() + serialize_frames() if r["serialize"] == 0]


def _hdr(frame: bytes) -> bytes:
    return frame[8 : 8 + (struct.unpack_from(">i", frame, 4)[0] & 0xFFFFFF)]


def _shape(cmd: RemotingCommand) -> tuple:
    """Everything a command holds, with value types (True == 1 in Python, not on the wire)."""
    ext = [(type(k), k, type(v), v) for k, v in cmd.ext_fields.items()]
    return (
        type(cmd.code),
        cmd.code,
        cmd.language,
        type(cmd.version),
        cmd.version,
        cmd.opaque,
        cmd.flag,
        cmd.remark,
        type(cmd.ext_fields),
        ext,
        cmd.body,
        cmd.serialize_type,
    )


def _reference(header: bytes):
    """('ok', shape) or ('error', message) from the pure-Python decoder."""
    try:
        return "ok", _shape(codec._decode_json_header_py(header))
    except RemotingCommandError as exc:
        return "error", str(exc)


def _check_decode(header: bytes) -> bool:
    """Compare the paths on one header; True when the fast path took it."""
    ref = _reference(header)
    fast = FAST_DECODE(header, 0, len(header), RemotingCommand)
    if fast is not None:
        assert ref == ("ok", _shape(fast)), header
    # the public function (fast, then reference) answers like the reference
    try:
        got = "ok", _shape(decode_json_header(header))
    except RemotingCommandError as exc:
        got = "error", str(exc)
    assert got == ref, header
    return fast is not None


# ------------------------------------------------------------------------------ golden frames


@pytest.mark.parametrize("row", JSON_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_golden_frame_takes_the_fast_path_with_the_same_result(row):
    header = _hdr(row["frame"])
    assert _check_decode(header), "a real frame fell back to the reference decoder"
    # and in place inside a buffer, as FrameDecoder calls it
    data = b"xyz" + row["frame"] + b"tail"
    cmd = FAST_DECODE(data, 11, 11 + len(header), RemotingCommand)
    assert _shape(cmd) == _reference(header)[1]


@pytest.mark.parametrize("row", JSON_FRAMES, ids=lambda r: f"{r['stream']}-{r['code']}")
def test_golden_frame_re_encodes_to_the_same_bytes_on_both_paths(row):
    cmd = decode_frame(row["frame"])
    fast = b"".join(encode(cmd))
    assert fast[8:].startswith(
        FAST_ENCODE(cmd.code, cmd.ext_fields, cmd.flag, cmd.language, cmd.opaque, cmd.remark, cmd.version)
    )
    assert codec._encode_json_header_py(cmd) == FAST_ENCODE(
        cmd.code, cmd.ext_fields, cmd.flag, cmd.language, cmd.opaque, cmd.remark, cmd.version
    )
    golden = _hdr(row["frame"])
    if b'"extFields"' in golden and all(type(v) is str for v in cmd.ext_fields.values()):
        # where Java wrote extFields of strings, it wrote our bytes exactly (fastjson, sorted keys)
        assert _hdr(fast) == golden


@pytest.mark.parametrize("style", ["compact", "spaced", "ascii", "indented"])
def test_real_client_requests_in_several_json_styles(style):
    taken = 0
    rows = client_requests()
    for _name, row in rows:
        h = row["header"]
        if style == "compact":
            text = json.dumps(h, separators=(",", ":"), ensure_ascii=False)
        elif style == "spaced":
            text = json.dumps(h, ensure_ascii=False)
        elif style == "ascii":
            text = json.dumps(h)
        else:
            text = " \r\n" + json.dumps(h, indent="\t") + "\n "
        taken += _check_decode(text.encode("utf-8"))
    assert taken == len(rows)


# ------------------------------------------------------------------------------ random headers

_ALPHABET = (
    "abcXYZ09 _-%|.:,{}[]"
    + '"\\/'
    + "\x00\x01\x02\x1f\x7f\x80"
    + "\b\f\n\r\t"
    + "éß中文字符€"
    + "\U0001f600\U00010000\U0010ffff"
)
_SURROGATES = "\ud800\udbff\udc00\udfff"


def _rand_str(rng: random.Random, n: int = 12) -> str:
    s = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, n)))
    if s and rng.random() < 0.03:  # a lone surrogate (json.loads keeps one written as \uXXXX)
        i = rng.randrange(len(s))
        s = s[:i] + rng.choice(_SURROGATES) + s[i:]
    return s


def _rand_scalar(rng: random.Random, odd: float = 1.0):
    r = rng.random() * odd
    if r < 0.45:
        return _rand_str(rng)
    if r < 0.6:
        return rng.choice([0, 1, -1, 7, 2**31 - 1, -(2**31), 2**63 - 1, 10**17, 10**18, 10**19, -(10**25)])
    if r < 0.7:
        return rng.choice([True, False])
    if r < 0.78:
        return None
    if r < 0.86:
        return rng.choice([1.0, -0.5, 1e300, 3.25e-7])
    if r < 0.9:
        return rng.choice([[1], {"n": 1}, [], {}])
    return rng.randint(-(2**40), 2**40)


def _escape_randomly(rng: random.Random, s: str) -> str:
    """A JSON string literal for s using a random mix of raw characters, short escapes,
    \\uXXXX (upper or lower hex) and surrogate pairs written as two escapes."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        must = ch in '"\\' or o < 0x20 or 0xD800 <= o <= 0xDFFF
        if not must and rng.random() < 0.6:
            out.append(ch)
            continue
        short = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f", "/": "\\/"}
        if ch in short and rng.random() < 0.5:
            out.append(short[ch])
        elif o > 0xFFFF:
            v = o - 0x10000
            hi, lo = 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)
            fmt = "\\u%04X" if rng.random() < 0.5 else "\\u%04x"
            out.append(fmt % hi + fmt % lo)
        else:
            out.append(("\\u%04X" if rng.random() < 0.5 else "\\u%04x") % o)
    out.append('"')
    return "".join(out)


def _rand_json(rng: random.Random, v) -> str:
    if isinstance(v, str):
        if rng.random() < 0.5:
            return json.dumps(v, ensure_ascii=rng.random() < 0.5)
        return _escape_randomly(rng, v)
    if isinstance(v, dict):
        ws = rng.choice(["", " ", "\n\t"])
        items = [f"{_rand_json(rng, k)}{ws}:{ws}{_rand_json(rng, x)}" for k, x in v.items()]
        return "{" + ws + f",{ws}".join(items) + ws + "}"
    return json.dumps(v)


def _rand_header(rng: random.Random) -> dict:
    h: dict = {}
    tame = rng.random() < 0.7  # mostly the common shape; the rest probes the fallback
    if tame or rng.random() < 0.97:
        h["code"] = rng.choice([10, 11, 310, 320, 0, -1, 65535]) if tame or rng.random() < 0.9 else _rand_scalar(rng)
    for key, good in (
        ("language", lambda: rng.choice(["JAVA", "CPP", "PYTHON", "GO", ""])),
        ("version", lambda: rng.choice([409, 121, 63, 0])),
        ("opaque", lambda: rng.randint(0, 2**31 - 1)),
        ("flag", lambda: rng.choice([0, 1, 2, 3])),
        ("remark", lambda: _rand_str(rng, 30)),
        ("serializeTypeCurrentRPC", lambda: "JSON"),
        ("unknownKey", lambda: _rand_scalar(rng)),
    ):
        if key == "unknownKey" and rng.random() < 0.85:
            continue  # real clients send none; an unknown key sends the header to the reference
        r = rng.random()
        if r < 0.75 + 0.2 * tame:
            h[key] = good()
        elif r < 0.85 + 0.1 * tame:
            h[key] = _rand_scalar(rng)
    if rng.random() < 0.9:
        ext = {}
        for _ in range(rng.randint(0, 12)):
            k = rng.choice(["topic", "a", "b", "queueId", "properties", _rand_str(rng, 6)])
            ext[k] = (
                _rand_scalar(rng, 0.8 if rng.random() < 0.95 else 1.0) if rng.random() < 0.5 else _rand_str(rng, 40)
            )
        h["extFields"] = ext if tame or rng.random() < 0.9 else rng.choice([None, [1], "x"])
    keys = list(h)
    rng.shuffle(keys)
    return {k: h[k] for k in keys}


def test_random_headers_agree_with_the_reference(depth):
    rng = random.Random(7)
    taken = total = 0
    for _ in range(int(4000 * depth)):
        h = _rand_header(rng)
        text = _rand_json(rng, h)
        if rng.random() < 0.1:  # a repeated key: json.loads keeps the last value
            k = rng.choice(["code", "opaque", "remark", "extFields", "flag"])
            text = text[:-1] + ("," if len(text) > 2 else "") + f'"{k}":{_rand_json(rng, _rand_scalar(rng))}' + "}"
        # lone surrogates cannot be UTF-8: written raw they are invalid bytes (both refuse)
        data = text.encode("utf-8", "surrogatepass")
        taken += _check_decode(data)
        total += 1
    # most of them are in the common shape (the rest exercise the fallback)
    assert 0.25 * total < taken < total


def test_surrogate_pairs_and_lone_surrogates_like_json_loads():
    cases = [
        r'"\ud83d\ude00"',
        r'"\uD83D\uDE00x"',
        r'"\ud83d"',
        r'"\ude00\ud83d"',
        r'"\ud83d\u0041"',
        r'"\ud83dx\ude00"',
        r'"\ud83d\n"',
        r'"\ud800\ud800\udc00"',
        r'"\udbff\udfff"',
        r'"\ud83d\ud83d"',
        r'"\ud83d\u"',
        r'"\ud83d\uzzzz"',
        r'"\u00e9\u4e2d\u0000"',
        r'"\u12"',
        r'"\x"',
        r'"a\/b"',
    ]
    for lit in cases:
        header = f'{{"code":10,"remark":{lit},"extFields":{{"k":{lit},{lit}:"v"}}}}'.encode()
        _check_decode(header)
    ok = decode_json_header(b'{"code":1,"extFields":{"e":"\\ud83d\\ude00\\ud800"}}')
    assert ok.ext_fields["e"] == "\U0001f600\ud800"


@pytest.mark.parametrize(
    "raw",
    [
        "é".encode(),
        "中".encode(),
        "\U0001f600".encode(),  # valid multi-byte
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xed\xa0\x80",  # overlong / encoded surrogate
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\x80",  # beyond U+10FFFF / not a lead
        b"\xe4\xb8",
        b"\xf0\x9f\x98",  # truncated
    ],
)
def test_utf8_validation_matches_bytes_decode(raw):
    for header in (
        b'{"code":1,"remark":"' + raw + b'"}',
        b'{"code":1,"extFields":{"k":"x\\n' + raw + b'"}}',
        b'{"code":1,"extFields":{"' + raw + b'":"v"}}',
    ):
        _check_decode(header)


# ------------------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    "header, message",
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        (b"[1,2]", "not an object"),
        (b'{"code":"10"}', "'code' must be a JSON integer"),
        (b'{"code":10,"opaque":1.5}', "'opaque' must be a JSON integer"),
        (b'{"code":10,"flag":true}', "'flag' must be a JSON integer"),
        (b'{"code":10,"extFields":[1]}', "'extFields' must be an object"),
        (b'{"code":10,"extFields":{"a":{"b":1}}}', "extFields['a']"),
        (b'{"code":10,"remark":5}', "'remark' must be a string"),
        (b'{"opaque":1}', "no 'code'"),
        (b"{}", "no 'code'"),
        (b'{"code":null}', "no 'code'"),
        (b'{"code":1} x', "extra data"),
        (b'{"code":1,}', "not valid JSON"),
        (b'{"code":01}', "not valid JSON"),
        (b'{"code":1,"remark":"a\x01"}', "not valid JSON"),
        (b'{"code":1,"language":[]}', "'language' must be a string"),
        (b"", "not valid JSON"),
    ],
)
def test_malformed_headers_fall_back_and_get_the_reference_error(header, message):
    assert FAST_DECODE(header, 0, len(header), RemotingCommand) is None
    with pytest.raises(RemotingCommandError) as info:
        decode_json_header(header)
    assert message in str(info.value)
    dec = FrameDecoder()
    dec.feed(struct.pack(">ii", 4 + len(header), len(header)) + header)
    with pytest.raises(RemotingCommandError) as info2:
        dec.next_frame()
    assert str(info2.value) == str(info.value)


def test_every_truncation_and_byte_flip_of_real_headers_agrees():
    rng = random.Random(3)
    headers = [_hdr(r["frame"]) for r in JSON_FRAMES[:25]]
    for h in headers:
        for cut in range(len(h)):
            _check_decode(h[:cut])
        for _ in range(60):
            b = bytearray(h)
            i = rng.randrange(len(b))
            b[i] = rng.choice(b'{}[]":,\\ 0-9.eEtfnu\x00\x80\xff' + bytes([rng.randrange(256)]))
            _check_decode(bytes(b))


def test_numbers_at_the_edges():
    for lit in [
        "0",
        "-0",
        "7",
        "-7",
        "999999999999999999",
        "-999999999999999999",
        "1000000000000000000",
        "12345678901234567890",
        "1.0",
        "1e3",
        "1E3",
        "-",
        "--1",
        "00",
        "-01",
        "NaN",
        "Infinity",
        "-Infinity",
        "2147483648",
        "9223372036854775807",
        "9223372036854775808",
    ]:
        _check_decode(b'{"code":%s,"opaque":%s,"extFields":{"n":%s}}' % (lit.encode(), lit.encode(), lit.encode()))
        _check_decode(b'{"code":1,"extFields":{"n":%s}}' % lit.encode())


def test_decoder_refuses_a_span_outside_the_buffer():
    with pytest.raises(ValueError, match="outside"):
        FAST_DECODE(b'{"code":1}', 0, 99, RemotingCommand)


# ------------------------------------------------------------------------------ encoding


class _Color(enum.IntEnum):
    RED = 3


class _Weird:
    def __str__(self):
        return 'we"ird\n'


class _Broken:
    def __str__(self):
        raise RuntimeError("no str for you")


def _encode_both(cmd: RemotingCommand):
    """(fast, reference) results of encoding cmd: bytes or the exception's (type, text)."""

    def run(fn):
        try:
            return b"".join(fn(cmd))
        except Exception as exc:  # compared, not swallowed
            return type(exc), str(exc)

    fast = run(encode)
    saved = codec._fast_encode
    codec._fast_encode = None
    try:
        ref = run(encode)
    finally:
        codec._fast_encode = saved
    return fast, ref


def test_random_replies_encode_to_the_reference_bytes(depth):
    rng = random.Random(11)
    taken = 0
    n = int(3000 * depth)
    for _i in range(n):
        ext = {}
        for _ in range(rng.randint(0, 8)):
            r = rng.random()
            k = _rand_str(rng, 8) if r < 0.9 else rng.choice([1, 2.5, True, None])
            ext[k] = rng.choice(
                [
                    _rand_str(rng, 30),
                    rng.randint(-(2**70), 2**70),
                    True,
                    False,
                    None,
                    1.5,
                    _Color.RED,
                    _Weird(),
                    ResponseCode.SUCCESS,
                    _Broken() if rng.random() < 0.05 else "ok",
                ]
            )
        cmd = RemotingCommand(
            rng.choice([0, 1, 17, ResponseCode.SYSTEM_ERROR, RequestCode.SEND_MESSAGE_V2, 2**40, -3, 2**64, 1.0]),
            language=rng.choice(["JAVA", "CPP", "PYTHON", "OTHER", 'x"y', "é", 5]),
            version=rng.choice([409, 0, -1, 2**63 - 1, -(2**63), 2**63]),
            opaque=rng.randint(0, 2**31 - 1),
            flag=rng.choice([0, 1, 2, 3, True]),
            remark=rng.choice([None, _rand_str(rng, 60), "", 5]),
            ext_fields=ext,
            body=rng.choice([None, b"", b"xyz", [b"ab", memoryview(b"cdef")], bytearray(b"q"), memoryview(b"12")]),
        )
        fast, ref = _encode_both(cmd)
        assert fast == ref, cmd
        if isinstance(fast, bytes):
            taken += 1
            hl = struct.unpack_from(">i", fast, 4)[0] & 0xFFFFFF
            assert struct.unpack_from(">i", fast, 0)[0] == len(fast) - 4
            json.loads(fast[8 : 8 + hl])  # what clients parse
    assert taken > n // 3


def test_encoder_handles_and_declines_what_the_reference_does():
    ext = {"s": 'a"b\\c\x00\x1f\x7f\b\f\n\r\té中\U0001f600', "i": 12, "t": True, "f": False, "n": None}
    cmd = RemotingCommand(0, flag=1, opaque=5, remark="r\u2028", ext_fields=ext)
    head = FAST_ENCODE(cmd.code, cmd.ext_fields, cmd.flag, cmd.language, cmd.opaque, cmd.remark, cmd.version)
    assert head == codec._encode_json_header_py(cmd)
    assert (
        head
        == (
            '{"code":0,"extFields":{"s":"a\\"b\\\\c\\u0000\\u001f\x7f\\b\\f\\n\\r\\té中\U0001f600","i":"12",'
            '"t":"true","f":"false"},"flag":1,"language":"JAVA","opaque":5,"remark":"r\u2028",'
            '"serializeTypeCurrentRPC":"JSON","version":409}'
        ).encode()
    )
    # declined (the reference decides): lone surrogates, non-str keys, float code, non-dict ext
    assert FAST_ENCODE(0, {"k": "\ud800"}, 0, "JAVA", 0, None, 409) is None
    assert FAST_ENCODE(0, {1: "v"}, 0, "JAVA", 0, None, 409) is None
    assert FAST_ENCODE(1.0, {}, 0, "JAVA", 0, None, 409) is None
    assert FAST_ENCODE(0, [("k", "v")], 0, "JAVA", 0, None, 409) is None
    assert FAST_ENCODE(0, {}, 0, "JAVA", 2**63, None, 409) is None
    big = RemotingCommand(0, remark="x" * (1 << 24))
    fast, ref = _encode_both(big)
    assert fast == ref and ref[0] is RemotingCommandError


def _no_surrogates(s: str) -> str:
    return "".join(ch for ch in s if not 0xD800 <= ord(ch) <= 0xDFFF)


def test_frames_survive_a_round_trip():
    rng = random.Random(5)
    for _ in range(500):
        cmd = RemotingCommand(
            rng.randint(0, 400),
            opaque=rng.randint(0, 2**31 - 1),
            remark=_no_surrogates(_rand_str(rng)),
            ext_fields={_no_surrogates(_rand_str(rng, 5)): "v", "n": 3},
            body=b"body",
        )
        back = decode_frame(b"".join(encode(cmd)))
        assert back.code == cmd.code and back.remark == cmd.remark and back.body_bytes() == b"body"
        assert back.ext_fields == {k: str(v) for k, v in cmd.ext_fields.items()}


def test_fast_built_commands_have_every_slot_set():
    """The fast decoder and RemotingCommand.response() fill the slots without __init__."""
    assert RemotingCommand.__slots__ == (
        "code",
        "language",
        "version",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "serialize_type",
    )
    cmd = FAST_DECODE(b'{"code":10}', 0, 11, RemotingCommand)
    reply = cmd.response()
    for c in (cmd, reply):
        for slot in RemotingCommand.__slots__:
            getattr(c, slot)  # AttributeError if one was left unset
    assert _shape(cmd) == _shape(RemotingCommand(10, version=0))
    assert (reply.code, reply.flag, reply.opaque, reply.ext_fields, reply.body) == (0, 1, 0, {}, None)


def test_unknown_fields_go_to_the_reference_even_deeply_nested():
    """The msgspec Struct refuses unknown fields, so nothing the reference would refuse (a
    nesting too deep for json.loads) is skipped over on the fast path."""
    for depth in (1, 50, 5000):
        header = b'{"code":1,"x":' + b"[" * depth + b"]" * depth + b"}"
        assert FAST_DECODE(header, 0, len(header), RemotingCommand) is None
        _check_decode(header)
    known = b'{"code":1,"serializeTypeCurrentRPC":"JSON"}'
    assert FAST_DECODE(known, 0, len(known), RemotingCommand).code == 1
