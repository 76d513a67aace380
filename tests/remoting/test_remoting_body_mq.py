"""rmq.protocol.body._mq: the one MessageQueue map-key encoder/decoder, round trips through
rmq.common.fastjson.loads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.common import fastjson
from rmq.protocol.body._mq import dumps_mq_map, mq_key, mq_of, mq_table
from rmq.types import MessageQueue

queues = st.builds(MessageQueue, st.text(max_size=8), st.text(max_size=8), st.integers(0, 2**31 - 1))


def test_key_is_what_fastjson_writes():
    assert mq_key(MessageQueue("T", "b", 0)) == '{"brokerName":"b","queueId":0,"topic":"T"}'
    assert dumps_mq_map({MessageQueue("T", "b", 1): 5, MessageQueue("T", "b", 0): {"x": 1}}) == (
        '{{"brokerName":"b","queueId":0,"topic":"T"}:{"x":1},{"brokerName":"b","queueId":1,"topic":"T"}:5}'
    )


@given(st.dictionaries(queues, st.integers(-(2**63), 2**63 - 1), max_size=8), st.booleans())
@settings(max_examples=150, deadline=None)
def test_round_trip(table, sort):
    text = dumps_mq_map(table, lambda v: {"offset": v}, sort=sort)
    assert {mq: v["offset"] for mq, v in mq_table(fastjson.loads(text)).items()} == table


def test_other_key_forms_and_refusals():
    mq = MessageQueue("T", "b", 2)
    assert mq_of({"topic": "T", "brokerName": "b", "queueId": 2}) == mq == mq_of("T|b|2")
    assert mq_table([[{"topic": "T", "brokerName": "b", "queueId": 2}, 9]]) == {mq: 9}
    assert mq_table(None) == {}
    for bad in ("{", '{"topic":"T"}', "x", 7, "T|b|x"):
        with pytest.raises(ValueError):
            mq_of(bad)
