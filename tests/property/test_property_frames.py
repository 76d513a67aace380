"""Property tests of the frame decoder (rmq.remoting.codec.FrameDecoder): any command survives
encode → decode whatever the chunking, several frames come out in order, and arbitrary bytes
only ever raise RemotingCommandError."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.errors import RemotingCommandError
from rmq.protocol.codes import LanguageCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import FrameDecoder, decode_frame, encode

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


SERIALIZE_TYPES = st.sampled_from([0, 1])


@st.composite
def commands(draw):
    ser = draw(SERIALIZE_TYPES)
    return RemotingCommand(
        draw(st.integers(-(2**15), 2**15 - 1)),
        language=draw(st.sampled_from([lc.name for lc in LanguageCode])),
        version=draw(st.integers(0, 2**15 - 1)),
        opaque=draw(st.integers(-(2**31), 2**31 - 1)),
        flag=draw(st.integers(0, 3)),
        remark=draw(st.none() | text.filter(bool)),
        ext_fields=draw(st.dictionaries(text.filter(bool), text, max_size=8)),
        body=draw(st.none() | st.binary(min_size=1, max_size=300)),
        serialize_type=ser,
    )


def wire(cmd: RemotingCommand) -> bytes:
    return b"".join(bytes(p) for p in encode(cmd))


def same(a: RemotingCommand, b: RemotingCommand) -> None:
    assert (a.code, a.language, a.version, a.opaque, a.flag, a.remark, a.serialize_type) == (
        b.code,
        b.language,
        b.version,
        b.opaque,
        b.flag,
        b.remark,
        b.serialize_type,
    )
    assert a.ext_fields == b.ext_fields
    assert a.body_bytes() == (b.body_bytes() or None) or (not a.body_bytes() and not b.body_bytes())


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@SETTINGS
@given(st.lists(commands(), min_size=1, max_size=5), st.lists(st.integers(0, 10_000), max_size=20))
def test_frames_round_trip_in_order_whatever_the_chunking(cmds, cuts):
    data = b"".join(wire(c) for c in cmds)
    dec = FrameDecoder()
    out = []
    for piece in chunked(data, cuts):
        dec.feed(piece)
        while (cmd := dec.next_frame()) is not None:
            out.append(cmd)
    assert len(out) == len(cmds) and dec.buffered == 0
    for got, sent in zip(out, cmds, strict=True):
        same(got, sent)


@SETTINGS
@given(commands())
def test_decode_frame_is_the_inverse_of_encode(cmd):
    same(decode_frame(wire(cmd)), cmd)


@SETTINGS
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=10))
def test_arbitrary_bytes_only_raise_remoting_command_error(data, cuts):
    dec = FrameDecoder(max_frame_length=1 << 16)
    try:
        for piece in chunked(data, cuts):
            dec.feed(piece)
            while dec.next_frame() is not None:
                pass
    except RemotingCommandError:
        pass


@SETTINGS
@given(commands(), st.integers(1, 64))
def test_a_frame_over_the_limit_is_refused_before_it_is_buffered(cmd, limit_cut):
    data = wire(cmd)
    limit = max(8, len(data) - 4 - limit_cut)
    dec = FrameDecoder(max_frame_length=limit)
    dec.feed(data[:4])  # the length word alone is enough to refuse
    if len(data) - 4 > limit:
        try:
            dec.next_frame()
        except RemotingCommandError as e:
            assert "maximum" in str(e)
        else:
            raise AssertionError("an over-long frame was not refused")


@SETTINGS
@given(commands(), st.binary(min_size=1, max_size=50))
def test_trailing_garbage_is_left_buffered_or_refused(cmd, junk):
    dec = FrameDecoder(max_frame_length=1 << 16)
    dec.feed(wire(cmd) + junk)
    same(dec.next_frame(), cmd)
    try:
        while dec.next_frame() is not None:
            pass
    except RemotingCommandError:
        return
    assert 0 < dec.buffered <= len(junk)
