"""Property-based tests of FrameDecoder: how a stream is cut into reads never changes the
commands decoded, and no input makes it fail other than with RemotingCommandError."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.errors import RemotingCommandError
from rmq.protocol.command import RemotingCommand
from rmq.remoting.codec import FrameDecoder, encode

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)

commands = st.builds(
    lambda code, fields, body, ser, resp: RemotingCommand(
        code, opaque=0, flag=1 if resp else 0, ext_fields=fields, body=body, serialize_type=ser
    ),
    st.integers(0, 400),
    st.dictionaries(st.from_regex(r"[A-Za-z][A-Za-z0-9]{0,10}", fullmatch=True), _text, max_size=5),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.sampled_from([0, 1]),
    st.booleans(),
)


def _stream(cmds: list[RemotingCommand]) -> bytes:
    return b"".join(bytes(p) for c in cmds for p in encode(c))


def _decode(chunks: list[bytes]) -> list[RemotingCommand]:
    dec, out = FrameDecoder(), []
    for chunk in chunks:
        dec.feed(chunk)
        out.extend(dec)
    assert dec.buffered == 0
    return out


def _key(c: RemotingCommand) -> tuple[object, ...]:
    return (c.code, c.flag, c.serialize_type, dict(c.ext_fields or {}), bytes(c.body) if c.body else b"")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, min_size=1, max_size=6), st.lists(st.integers(0, 2000), max_size=12))
def test_any_split_of_a_stream_decodes_the_same_commands(cmds, cuts):
    data = _stream(cmds)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    whole = _decode([data])
    assert [_key(c) for c in _decode(chunks)] == [_key(c) for c in whole]
    assert [_key(c) for c in whole] == [_key(c) for c in cmds]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.integers(1, 64))
def test_garbage_fails_only_with_remoting_command_error(data, step):
    dec = FrameDecoder(max_frame_length=4096)
    try:
        for i in range(0, len(data), step):
            dec.feed(data[i : i + step])
            for _ in dec:
                pass
    except RemotingCommandError:
        pass
