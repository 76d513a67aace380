"""rmq.common.route: the route types the name server writes and the SDK reads."""
import json

import pytest

from rmq.common.route import BrokerData, QueueData, loads_fastjson


def test_round_trip_name_server_json_to_client_types():
    qd = QueueData("broker-a", 4, 2, 6, 1)
    bd = BrokerData("c1", "broker-a", {1: "h:2", 0: "h:1"})
    body = json.dumps({"queueDatas": [qd.to_json()], "brokerDatas": [bd.to_json()]}).encode()
    assert '"brokerAddrs": {"0": "h:1", "1": "h:2"}' in body.decode()   # string ids, sorted
    d = loads_fastjson(body)
    assert QueueData.from_json(d["queueDatas"][0]) == qd
    back = BrokerData.from_json(d["brokerDatas"][0])
    assert back == bd and back.select_broker_addr() == "h:1"
    assert BrokerData("c", "b", {2: "s:1"}).select_broker_addr() == "s:1"
    assert BrokerData("c", "b").select_broker_addr() is None


def test_fastjson_unquoted_int_keys_and_lenient_queue_data():
    text = '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b"}],' \
           '"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"topicSynFlag":2,"writeQueueNums":8}]}'
    d = loads_fastjson(text)
    assert BrokerData.from_json(d["brokerDatas"][0]).broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert QueueData.from_json(d["queueDatas"][0]) == QueueData("b", 8, 8, 6, 2)
    assert QueueData.from_json({"brokerName": "x"}) == QueueData("x", 0, 0, 6, 0)
    with pytest.raises(ValueError):
        loads_fastjson(b"{not json")
    with pytest.raises(KeyError):
        QueueData.from_json({"perm": 6})
