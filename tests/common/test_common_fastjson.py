"""rmq.common.fastjson: fastjson's non-string map keys read, anything else a ValueError."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.common import fastjson
from rmq.common.route import loads_fastjson

scalars = st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.text(max_size=8) | st.floats(
    allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids,
                                                                                          max_size=4), max_leaves=20)


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
    body = ("{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in ints.items()) + "}")
    text = '{"t":{' + json.dumps(key) + ':{"maxOffset":1}},"ids":' + body + "}"
    d = loads_fastjson(text)
    [k] = d["t"]
    assert fastjson.object_key(k) == key and d["ids"] == {str(k): v for k, v in ints.items()}


@given(st.text(max_size=40))
@settings(max_examples=300, deadline=None)
def test_garbage_is_a_value_error_never_a_crash(text):
    try:
        fastjson.loads("{" + text)
    except ValueError:
        pass
