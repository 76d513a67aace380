"""Property tests of the SEND_BATCH_MESSAGE body codec: rmq.common.message.encode_batch (the SDK's
and Spark sink's writer) against rmq._store.split_batch / encode_batch (the broker's reader and
record writer): a round trip gives the items back, and arbitrary bytes never raise anything but
the splitter's declared ValueError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq import _store
from rmq.common.message import encode_batch, host_bytes, walk_record

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_props = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
_item = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), _props)
_outer = st.sampled_from([b"", b"WAIT\x01true", b"WAIT\x01false\x02CLUSTER\x01c"])


@SETTINGS
@given(items=st.lists(_item, min_size=1, max_size=8), outer=_outer)
def test_batch_round_trip_through_the_broker_splitter_and_writer(items, outer):
    batch = encode_batch(items)
    split = _store.split_batch(batch, 1, outer)
    assert len(split) == len(items)
    for (flag, body, props), (bpos, blen, ppos, plen, got_flag, _size) in zip(items, split, strict=True):
        assert batch[bpos : bpos + blen] == body and got_flag == flag
        assert batch[ppos : ppos + plen] == props.encode()
    host = host_bytes(("127.0.0.1", 1))
    out = bytearray(sum(s[5] for s in split))
    n = _store.encode_batch(out, 0, batch, split, b"T", outer, 0, 0, 1, host, 2, host, 0, 0, 0)
    assert n == len(out)
    pos = 0
    for _flag, body, props in items:
        span = walk_record(bytes(out), pos, -1, True)
        assert out[span.body_at : span.body_at + span.body_len] == body
        stored = bytes(out[span.props_at : span.props_at + span.props_len])
        p = props.encode()
        sep = b"\x02" if p and outer and not p.endswith(b"\x02") else b""
        assert stored == p + sep + outer
        pos += span.total


@SETTINGS
@given(data=st.binary(max_size=300), outer=_outer, topic_len=st.integers(0, 255))
def test_arbitrary_batch_bodies_only_raise_value_error(data, outer, topic_len):
    try:
        split = _store.split_batch(data, topic_len, outer)
    except ValueError:
        return
    assert sum(22 + s[1] + s[3] for s in split) == len(data)
