"""Property tests of the route JSON reader (rmq.common.fastjson.loads) and the route
types it feeds (QueueData, BrokerData)."""

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.common import fastjson
from rmq.common.route import BrokerData, QueueData

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(text, c, max_size=4),
    max_leaves=20,
)
names = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
addrs = st.builds(lambda a, p: f"10.0.0.{a}:{p}", st.integers(0, 255), st.integers(1, 65535))


@SETTINGS
@given(json_values)
def test_plain_json_reads_as_json(value):
    raw = json.dumps(value, ensure_ascii=False)
    assert fastjson.loads(raw) == value
    assert fastjson.loads(raw.encode()) == value


@SETTINGS
@given(
    st.lists(st.builds(BrokerData, names, names, st.dictionaries(st.integers(0, 16), addrs, max_size=3)), max_size=4),
    st.lists(
        st.builds(
            QueueData,
            names,
            st.integers(0, 1024),
            st.integers(0, 1024),
            st.sampled_from([2, 4, 6]),
            st.integers(0, 2**31 - 1),
        ),
        max_size=4,
    ),
)
def test_fastjson_unquoted_int_keys_read_like_quoted_ones(brokers, queues):
    """Java's fastjson writes brokerAddrs as {0:"addr"}; it must read as the quoted form."""
    route = {
        "brokerDatas": [b.to_json() for b in brokers],
        "queueDatas": [q.to_json() for q in queues],
        "filterServerTable": {},
    }
    quoted = json.dumps(route)
    unquoted = re.sub(r'"(\d+)":', r"\1:", quoted)
    assert fastjson.loads(unquoted) == fastjson.loads(quoted) == route
    assert [BrokerData.from_json(b) for b in fastjson.loads(unquoted)["brokerDatas"]] == brokers
    assert [QueueData.from_json(q) for q in fastjson.loads(unquoted)["queueDatas"]] == queues


@SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_value_error_only(raw):
    try:
        fastjson.loads(raw)
    except ValueError:
        pass


@SETTINGS
@given(st.text(alphabet='{}[]:,"0123456789-ab \\', max_size=200))
def test_json_shaped_text_raises_value_error_only(raw):
    try:
        fastjson.loads(raw)
    except ValueError:
        pass
