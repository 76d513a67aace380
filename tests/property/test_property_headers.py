"""Property tests of both header codecs: JSON (rmq.remoting.codec.decode_json_header, the
Cython fast path and the pure-Python reference) and ROCKETMQ binary (decode_binary_header)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.errors import RemotingCommandError
from rmq.protocol.codes import LanguageCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting import codec
from rmq.remoting.codec import decode_binary_header, decode_json_header, encode_header

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
reference = codec._decode_json_header_py


def command(ser, code, lang, version, opaque, flag, remark, ext):
    return RemotingCommand(
        code,
        language=lang,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=ser,
    )


fields = {
    "code": st.integers(-(2**15), 2**15 - 1),
    "lang": st.sampled_from([lc.name for lc in LanguageCode]),
    "version": st.integers(0, 2**15 - 1),
    "opaque": st.integers(-(2**31), 2**31 - 1),
    "flag": st.integers(0, 3),
    "remark": st.none() | text.filter(bool),
    "ext": st.dictionaries(text.filter(bool), text, max_size=10),
}


def key(cmd):
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)


@SETTINGS
@given(**fields)
def test_json_header_round_trip(code, lang, version, opaque, flag, remark, ext):
    cmd = command(0, code, lang, version, opaque, flag, remark, ext)
    raw = encode_header(cmd)
    assert key(decode_json_header(raw)) == key(cmd)
    assert key(reference(raw)) == key(cmd)


@SETTINGS
@given(**fields)
def test_binary_header_round_trip_at_any_offset(code, lang, version, opaque, flag, remark, ext):
    cmd = command(1, code, lang, version, opaque, flag, remark, ext)
    raw = encode_header(cmd)
    buf = b"\xee" * 5 + raw + b"\xee" * 3
    assert key(decode_binary_header(buf, 5, len(raw))) == key(cmd)


json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | text
json_values = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3), max_leaves=12
)
header_like = st.fixed_dictionaries(
    {},
    optional={
        "code": json_values,
        "language": json_values,
        "version": json_values,
        "opaque": json_values,
        "flag": json_values,
        "remark": json_values,
        "serializeTypeCurrentRPC": json_values,
        "extFields": st.dictionaries(text, json_values, max_size=5) | json_values,
    },
)


@SETTINGS
@given(header_like)
def test_json_fast_path_agrees_with_the_reference(obj):
    """Whatever JSON object arrives, the compiled decoder and the reference give the same
    command or both refuse it, with RemotingCommandError only."""
    raw = json.dumps(obj, ensure_ascii=False).encode()
    results = []
    for decode in (decode_json_header, reference):
        try:
            results.append(key(decode(raw)))
        except RemotingCommandError:
            results.append("refused")
    assert results[0] == results[1]


@SETTINGS
@given(st.binary(max_size=500))
def test_json_header_arbitrary_bytes_only_raise_remoting_command_error(raw):
    try:
        decode_json_header(raw)
    except RemotingCommandError:
        pass


@SETTINGS
@given(st.binary(max_size=500), st.integers(0, 16), st.integers(-4, 600))
def test_binary_header_arbitrary_bytes_only_raise_remoting_command_error(raw, start, header_len):
    start = min(start, len(raw))
    header_len = max(0, min(header_len, len(raw) - start))
    try:
        decode_binary_header(raw, start, header_len)
    except RemotingCommandError:
        pass
