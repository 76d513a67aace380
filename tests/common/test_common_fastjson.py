"""rmq.common.fastjson: fastjson's non-string map keys read, anything else a ValueError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.common import fastjson

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=20,
)


@given(values)
@settings(max_examples=200, deadline=None)
def test_standard_json_reads_as_json_does(v):
    text = json.dumps(v)
    assert fastjson.loads(text) == json.loads(text)
    # the fallback parser itself (standard JSON wrapped under an integer key, which json refuses)
    assert fastjson.loads("{7:" + text + "}") == {"7": json.loads(text)}


@given(st.dictionaries(st.integers(0, 99), st.text(max_size=5), max_size=4), st.text(max_size=5))
@settings(max_examples=100, deadline=None)
def test_object_and_integer_keys(ints, name):
    key = {"brokerName": name, "queueId": 3, "topic": "T"}
    body = "{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in ints.items()) + "}"
    text = '{"t":{' + json.dumps(key) + ':{"maxOffset":1}},"ids":' + body + "}"
    d = fastjson.loads(text)
    [k] = d["t"]
    assert fastjson.object_key(k) == key and d["ids"] == {str(k): v for k, v in ints.items()}


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_garbage_is_a_value_error_never_a_crash(text):
    try:
        fastjson.loads("{" + text)
    except ValueError:
        pass


mqs = st.builds(
    lambda t, b, q: {"brokerName": b, "queueId": q, "topic": t},
    st.text(max_size=6),
    st.text(max_size=6),
    st.integers(-1, 2**31 - 1),
)


@given(st.lists(st.tuples(mqs, values), max_size=6), st.dictionaries(st.integers(-5, 10**12), values, max_size=4))
@settings(max_examples=200, deadline=None)
def test_round_trip_of_object_and_integer_keyed_maps(entries, by_int):
    """What fastjson writes for Map<MessageQueue, V> and Map<Integer, V> reads back as plain
    JSON data whose keys object_key turns back into the objects and numbers."""
    table = {fastjson.canonical(k): v for k, v in entries}
    text = (
        '{"offsetTable":{'
        + ",".join(f"{k}:{json.dumps(v)}" for k, v in table.items())
        + '},"ids":{'
        + ",".join(f"{k}:{json.dumps(v)}" for k, v in by_int.items())
        + "}}"
    )
    d = fastjson.loads(text)
    assert d == {
        "offsetTable": {k: json.loads(json.dumps(v)) for k, v in table.items()},
        "ids": {str(k): json.loads(json.dumps(v)) for k, v in by_int.items()},
    }
    assert {json.dumps(fastjson.object_key(k), sort_keys=True) for k in d["offsetTable"]} == {
        json.dumps(k, sort_keys=True) for k, _ in entries
    }
    assert fastjson.loads(text.encode()) == d == fastjson.loads(memoryview(text.encode()))


def test_depth_and_size_are_bounded():
    nested = "{1:" * fastjson.MAX_DEPTH + "0" + "}" * fastjson.MAX_DEPTH
    assert fastjson.loads(nested)["1"]["1"] is not None
    with pytest.raises(ValueError, match="nested deeper"):
        fastjson.loads("{1:" + nested + "}")
    with pytest.raises(ValueError):  # plain JSON past the C decoders' limit
        fastjson.loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="over the limit"):
        fastjson.loads(b"[" + b"0," * 100 + b"0]", max_size=100)
    assert fastjson.loads(b"[" + b"0," * 100 + b"0]") == [0] * 101


def test_a_pathological_body_stays_linear():
    """Every container fails the C scanner only at its end (an integer key deep inside): the
    retries are budgeted, so this parses quickly instead of rescanning the text per level."""
    text = '{"a":' * 60 + "[" + ",".join(['{"x":[1,2,3]}'] * 20_000) + ",{7:1}]" + "}" * 60
    d = fastjson.loads(text)
    for _ in range(60):
        d = d["a"]
    assert len(d) == 20_001 and d[-1] == {"7": 1}


def test_non_string_scalar_keys():
    assert fastjson.loads('{true:1,null:2,1.5:3,"s":4}') == {"true": 1, "null": 2, "1.5": 3, "s": 4}


@given(values)
@settings(max_examples=100, deadline=None)
def test_dumps_is_compact_utf8_and_reads_back(v):
    raw = fastjson.dumps(v)
    assert raw == json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
    assert fastjson.loads(raw) == json.loads(raw)
