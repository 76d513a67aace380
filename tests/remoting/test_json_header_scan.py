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
        # names not in fastjson's form (space before the colon, an escaped first letter): each
        # of the eight read as any string and told by its text
        json.dumps(base, separators=(",", " :")),
        "{" + ",".join(f'"\\u{ord(k[0]):04x}{k[1:]}":{json.dumps(v)}' for k, v in base.items()) + "}",
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


# The common shape read the short way (_codec.pyx, "JSON header scan"): fastjson's names matched
# with their quotes and colon by one compare, SEND_MESSAGE_V2's one-letter extFields names
# written straight to the map, whitespace skipped by one comparison where there is none. The
# headers below are that shape (compact, sorted names, one-letter names, properties with their
# \u0001/\u0002 separators) and the same headers with whitespace between the tokens and names
# written with escapes: the scan must take every one, with the decoder's values.
_ascii = st.text(st.characters(min_codepoint=0x01, max_codepoint=0x7F), max_size=40)
_props = st.dictionaries(st.sampled_from(["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "DELAY"]), _ascii, max_size=4).map(
    lambda d: "".join(f"{k}\x01{v}\x02" for k, v in d.items())
)
_v2_ext = st.dictionaries(
    st.one_of(st.sampled_from(list("abcdefghijklmn")), st.characters(min_codepoint=0x01, max_codepoint=0x7F), _ascii),
    st.one_of(_ascii, _props),
    max_size=14,
)
_fastjson_header = st.fixed_dictionaries(
    {
        "code": st.sampled_from([310, 10, 11, 34, 0, -1]),
        "extFields": _v2_ext,
        "flag": st.sampled_from([0, 2, 3]),
        "language": st.sampled_from(["JAVA", "CPP", "PYTHON", ""]),
        "opaque": st.integers(-(2**31), 2**31 - 1),
        "serializeTypeCurrentRPC": st.just("JSON"),
        "version": st.sampled_from([409, 395, 0]),
    },
    optional={"remark": st.one_of(_ascii, st.none())},
)
_WS = (" ", "\t", "\n", "\r", "  \r\n\t")


def _spaced(text: str, where: list[int]) -> str:
    """``text`` with whitespace after the structural characters outside strings chosen by ``where``."""
    out, in_str, esc, k = [], False, False, 0
    for ch in text:
        out.append(ch)
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{}:,":
            if k in where:
                out.append(_WS[k % len(_WS)])
            k += 1
    return "".join(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fastjson_header, st.lists(st.integers(0, 60), max_size=12), st.booleans())
def test_scan_takes_fastjson_headers_with_any_spacing_and_escaped_names(h, where, escape_names):
    compact = json.dumps(h, separators=(",", ":"), sort_keys=True)
    variants = [compact, json.dumps(h, sort_keys=True), json.dumps(h, indent=2), _spaced(compact, where)]
    if escape_names:
        # the names the scan matches by their bytes, written with escapes the decoder reads
        variants += [
            compact.replace('"code":', '"\\u0063ode":').replace('"a":', '"\\u0061":'),
            compact.replace('"version":', '"versio\\u006e" :').replace('"extFields":', '"ext\\u0046ields" : '),
        ]
    for text in variants:
        assert _check(text.encode()), text


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fastjson_header)
def test_scan_declines_every_cut_of_a_fastjson_header(h):
    # each prefix stops inside a name, a value or before the closing brace: never a header
    header = json.dumps(h, separators=(",", ":"), sort_keys=True).encode()
    assert _check(header)
    for k in range(len(header)):
        assert json_header_scan_py(header[:k]) is None, header[:k]


def test_near_miss_names_are_read_as_any_name():
    # a name that opens like one of the eight but is not it goes the general way (and is refused)
    for bad in (
        b'{"code":310,"extFields":{},"flagx":0}',
        b'{"codex":310}',
        b'{"code":310,"versio":1}',
        b'{"code":310,"serializeTypeCurrentRPc":"JSON"}',
        b'{"code":310,"extFields":{"a" "x"}}',
        b'{"code":310,"extFields":{"a":"x" "b":"y"}}',
        b'{"code":310,"extFields":{"ab:"x"}}',
        b'{"code" 310}',
    ):
        assert json_header_scan_py(bad) is None, bad
        _check(bad)
    for good in (
        b'{"code" :310,"extFields":{"a" :"x","b": "y" , "c":"z"} }',
        b'{ "code":310 , "extFields" : { "a":"x" } , "flag":0 }',
        b'{"code":310,"extFields":{"\\"":"q","\\\\":"b","\\u0001":"c"}}',
    ):
        assert _check(good), good


def test_integers_up_to_eighteen_digits():
    # the scan keeps at most 18 digits (an int64 cannot overflow); longer ones go to the decoder
    for k in range(1, 22):
        for x in (10 ** (k - 1), 10**k - 1):
            for sign in ("", "-"):
                header = f'{{"code":310,"extFields":{{}},"opaque":{sign}{x},"flag":0}}'.encode()
                assert _check(header) is (k <= 18), header
                if k <= 18:
                    assert json_header_scan_py(header)[2] == int(f"{sign}{x}")
