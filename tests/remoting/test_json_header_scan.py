"""The JSON request-header scan of the SEND fast path (``json_header_scan`` in
rmq/protocol/_codec.pyx) against the general decoder (msgspec, rmq/remoting/codec.py).

The scan reads a header straight from its bytes or declines it; whatever it takes, the general
decoder must decode to the same code, flag, opaque, version and extFields (string values), and
whatever the general decoder refuses, the scan must decline too. It must take every SEND
header the Java, C++ and ali-ons clients were captured sending (tests/golden).
"""

import json
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from remoting_golden import client_requests, mqadmin_frames, quickstart, serialize_frames

from rmq.protocol._codec import json_header_scan_py
from rmq.remoting.codec import json_header_decoder

DECODE = json_header_decoder()
assert DECODE is not None  # the native codec is built for the tests


def _hdr(frame: bytes) -> bytes | None:
    if len(frame) < 8:
        return None
    word = struct.unpack_from(">i", frame, 4)[0]
    if word >> 24 != 0:  # ROCKETMQ binary
        return None
    return frame[8 : 8 + (word & 0xFFFFFF)]


def _check(header: bytes) -> bool:
    """The scan and the general decoder agree on ``header``; True when the scan took it."""
    got = json_header_scan_py(header)
    try:
        h = DECODE(header)
    except Exception:  # the decoder refuses it: the scan must too
        h = None
    if got is None:
        return False
    assert h is not None, header
    code, flag, opaque, version, ext = got
    assert (h.code, h.flag, h.opaque, h.version) == (code, flag, opaque, version), header
    assert h.extFields == ext, header
    assert all(type(v) is str for v in h.extFields.values()), header
    return True


def _golden_json_headers() -> list[tuple[int, bytes]]:
    rows = quickstart() + serialize_frames() + mqadmin_frames() + [row for _, row in client_requests()]
    out = []
    for row in rows:
        frame = row.get("frame")
        if not frame:
            continue
        header = _hdr(frame)
        if header is None:
            continue
        try:
            code = json.loads(header)["code"]
        except (ValueError, KeyError, TypeError):
            continue
        out.append((code, header))
    return out


def test_golden_headers_agree_and_every_send_is_taken():
    headers = _golden_json_headers()
    sends = [h for code, h in headers if code in (10, 310)]
    assert len(sends) >= 3  # Java's SEND_MESSAGE_V2, the C++ core's and ali-ons' SENDs
    for _code, header in headers:
        _check(header)
    for header in sends:
        assert _check(header), header


def test_whitespace_key_order_and_escapes():
    base = {
        "code": 310,
        "extFields": {"a": "PG", "b": "Topic", "i": "UNIQ_KEY\u0001ab\u0002WAIT\u0001true\u0002", "n": 'b"\\/x'},
        "flag": 0,
        "language": "CPP",
        "opaque": -5,
        "remark": None,
        "serializeTypeCurrentRPC": "JSON",
        "version": 395,
    }
    for text in (
        json.dumps(base),
        json.dumps(base, indent=2),
        json.dumps(dict(reversed(list(base.items())))),
        json.dumps(base, separators=(",", ":")) + " \n",
        json.dumps(base).replace('"PG"', '"\\u0050\\u0047"'),
    ):
        assert _check(text.encode()), text


def test_declined_shapes():
    ok = b'{"code":310,"extFields":{"a":"x"},"flag":0,"opaque":1}'
    assert _check(ok)
    for bad in (
        b'{"code":310,"extFields":{"a":1},"flag":0,"opaque":1}',  # a number in extFields
        b'{"code":310,"extFields":{"a":null},"flag":0,"opaque":1}',
        b'{"code":310,"extFields":{"a":"\xc3\xa9"},"flag":0,"opaque":1}',  # non-ASCII
        b'{"code":310,"extFields":{"a":"\\u00e9"},"flag":0,"opaque":1}',
        b'{"code":310,"extFields":{"a":"x"},"flag":0,"opaque":1,"other":2}',  # unknown key
        b'{"code":310,"code":310,"extFields":{}}',  # a repeated key
        b'{"code":310.0,"extFields":{}}',
        b'{"code":0310,"extFields":{}}',
        b'{"code":310,"extFields":{}} x',
        b'{"code":310,"extFields":{"a":"x\x01"}}',  # a raw control character
        b'{"code":310,"extFields":{"a":"\\x"}}',
        b'{"code":310,"language":null}',
        b'{"code":1234567890123456789}',
        b'{"extFields":{}}',
        b'{"code":310,"extFields":{"a":"x",}}',
        b'{"code":310,"extFields":{"a":"x"}',
    ):
        assert json_header_scan_py(bad) is None, bad
        _check(bad)


_text = st.text(alphabet=st.characters(max_codepoint=0x2FF, exclude_categories=("Cs",)), max_size=12)
_value = st.one_of(_text, st.integers(-(2**40), 2**40), st.none(), st.booleans(), st.floats(allow_nan=False))
_ext = st.dictionaries(st.one_of(st.sampled_from(list("abcdefghijklmn")), _text), _value, max_size=8)
_header = st.fixed_dictionaries(
    {"code": st.one_of(st.sampled_from([10, 310, 11, 34]), st.integers(-(2**63), 2**63))},
    optional={
        "extFields": st.one_of(_ext, st.none()),
        "flag": st.one_of(st.integers(-(2**33), 2**33), st.sampled_from([0, 1, 2])),
        "language": st.one_of(st.sampled_from(["JAVA", "CPP", "GO"]), _text, st.none()),
        "opaque": st.integers(-(2**33), 2**33),
        "remark": st.one_of(_text, st.none()),
        "serializeTypeCurrentRPC": st.one_of(st.just("JSON"), st.none()),
        "version": st.integers(-(2**20), 2**20),
        "extra": _value,
    },
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_header, st.booleans(), st.booleans())
def test_scan_agrees_with_the_decoder_on_generated_headers(h, ascii_only, spaced):
    text = json.dumps(h, ensure_ascii=ascii_only, indent=1 if spaced else None)
    _check(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([h for _, h in _golden_json_headers()] or [b"{}"]), st.integers(0, 10**6), st.binary(max_size=3))
def test_scan_agrees_with_the_decoder_on_mutated_golden_headers(header, where, junk):
    at = where % (len(header) + 1)
    _check(header[:at] + junk + header[at + len(junk) :])
    _check(header[:at] + junk + header[at:])


# Strings are scanned 16 bytes at a time (SSE2) with the tail byte by byte: the long texts
# below put every kind of byte (quote, backslash, raw control characters, DEL, bytes >= 0x80,
# escapes) at every offset of a block and at the ends of the header.
_long_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "\\", "\x00", "\x01", "\x02", "\x1f", "\x7f", "\x80", "é", "/", "\t"]),
        st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    ),
    max_size=70,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.one_of(st.sampled_from(list("abin")), _long_text), _long_text, max_size=5), _long_text)
def test_scan_agrees_with_the_decoder_on_long_strings(ext, language):
    h = {"code": 310, "extFields": ext, "flag": 0, "language": language, "opaque": 7}
    for text in (json.dumps(h), json.dumps(h, ensure_ascii=False)):
        _check(text.encode("utf-8", "surrogatepass"))


def test_every_offset_of_a_long_value():
    # one byte of each kind at each offset of a 40-byte value: taken exactly when it is a
    # plain character or a JSON escape below U+0080, with the same value as the decoder's
    for at in range(40):
        for piece, taken in (
            (b"x", True),
            (b"\x7f", True),
            (b'\\"', True),
            (b"\\\\", True),
            (b"\\u0001", True),
            (b"\\u007F", True),
            (b"\\u0080", False),
            (b"\\u0100", False),
            (b"\\u00g1", False),
            (b"\x01", False),
            (b"\x1f", False),
            (b"\xc3\xa9", False),
            (b'"', False),
        ):
            value = b"v" * at + piece + b"w" * (40 - at)
            header = b'{"code":310,"extFields":{"i":"' + value + b'","b":"T"},"flag":0,"opaque":1}'
            assert _check(header) is taken, header
            if taken:
                ext = json_header_scan_py(header)[4]
                assert ext["i"] == json.loads(b'"' + value + b'"') and ext["b"] == "T", header
