"""Property tests of the compressed RegisterBrokerBody's topic-line reader: the native reader
(rmq.protocol._codec.register_topic_lines) gives what the pure-Python reference gives for every
body it takes, and leaves every body outside the usual shape to the reference, which decodes it
or names what is wrong."""

import json
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.protocol import _codec
from rmq.protocol.body import register
from rmq.protocol.body.register import TopicEntry, decode_compressed_register_body

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# fields as a broker writes them and as a peer might: digits, signs, underscores, other scripts'
# digits, spaces, empty fields, bytes that are not UTF-8
fields = st.one_of(
    st.integers(0, 70_000).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b"+5", b"-1", b"1_0", b"0x10", b"08", b"1234567890", b"\xd9\xa3", b" ", b"8 8"]),
)
names = st.one_of(
    st.from_regex(rb"[A-Za-z0-9%|_-]{1,40}", fullmatch=True),
    st.binary(min_size=0, max_size=12),
    st.text(min_size=1, max_size=8).map(lambda t: t.encode("utf-8", "surrogatepass")),
)
lines = st.builds(
    lambda n, r, w, p, f, extra: b" ".join([n, r, w, p, f, *extra]),
    names,
    fields,
    fields,
    fields,
    st.sampled_from([b"SINGLE_TAG", b"MULTI_TAG", b""]),
    st.lists(st.sampled_from([b"", b"x"]), max_size=1),
)


def raw_of(entries: list[bytes], count: int | None = None, lengths: list[int] | None = None) -> bytes:
    dv = json.dumps({"timestamp": 1, "counter": 2}).encode()
    out = bytearray(struct.pack(">i", len(dv)) + dv + struct.pack(">i", len(entries) if count is None else count))
    for i, line in enumerate(entries):
        out += struct.pack(">i", len(line) if lengths is None else lengths[i]) + line
    return bytes(out + struct.pack(">i", 2) + b"[]")


def reference(raw: bytes, count: int) -> dict[str, TopicEntry] | str:
    r = register._Reader(raw)
    r.take(r.read_int("dv") + 4, "dv")
    try:
        return register._topic_lines_py(r, count)
    except ValueError as e:
        return str(e)


@SETTINGS
@given(st.lists(lines, max_size=20))
def test_the_native_reader_agrees_with_the_reference(entries):
    raw = raw_of(entries)
    start = 4 + struct.unpack(">i", raw[:4])[0] + 4
    fast = _codec.register_topic_lines(raw, start, len(entries), TopicEntry)
    ref = reference(raw, len(entries))
    if fast is not None:
        assert fast == ref
    # the decoder as the name server calls it: the reference's table or its error
    body = zlib.compress(raw, 1)
    if isinstance(ref, str):
        with pytest.raises(ValueError, match="compressed RegisterBrokerBody"):
            decode_compressed_register_body(body, 100)
    else:
        assert decode_compressed_register_body(body, 100) == (ref, {"timestamp": 1, "counter": 2})


def test_the_native_reader_takes_the_usual_lines_and_leaves_the_rest():
    usual = [b"TopicA 8 8 6 SINGLE_TAG", "Tópico 4 2 4 ".encode(), b"T 0 0 0 MULTI_TAG", b"T 1 1 7 SINGLE_TAG"]
    raw = raw_of(usual)
    start = 4 + struct.unpack(">i", raw[:4])[0] + 4
    # a repeated name: the later line wins, as in the reference's dict
    assert _codec.register_topic_lines(raw, start, 4, TopicEntry) == {
        "TopicA": TopicEntry(8, 8, 6),
        "Tópico": TopicEntry(4, 2, 4),
        "T": TopicEntry(1, 1, 7),
    }
    for odd in (
        [b" 1 1 6 X"],  # no name
        [b"A 1 1 6"],  # four fields
        [b"A 1 1 6 X Y"],  # six
        [b"A +1 1 6 X"],
        [b"A 1234567890 1 6 X"],  # ten digits
        [b"A 1 1 \xd9\xa3 X"],  # an Arabic-Indic three, which int() takes
    ):
        raw = raw_of(odd)
        assert _codec.register_topic_lines(raw, start, 1, TopicEntry) is None, odd
    for lengths in ([0], [257], [-1], [10_000]):
        assert _codec.register_topic_lines(raw_of([b"A 1 1 6 X"], lengths=lengths), start, 1, TopicEntry) is None
    assert _codec.register_topic_lines(raw_of([b"A 1 1 6 X"], count=2), start, 3, TopicEntry) is None  # past the end
    assert _codec.register_topic_lines(raw_of([]), start, 0, TopicEntry) == {}
    assert _codec.register_topic_lines(raw_of([]), -1, 0, TopicEntry) is None
    with pytest.raises(TypeError):
        _codec.register_topic_lines(None, 0, 0, TopicEntry)  # type: ignore[arg-type]
