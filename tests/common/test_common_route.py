"""rmq.common.route: the route types the name server writes and the SDK reads."""

import json

import pytest

from rmq.common import fastjson
from rmq.common.route import BrokerData, QueueData


def test_round_trip_name_server_json_to_client_types():
    qd = QueueData("broker-a", 4, 2, 6, 1)
    bd = BrokerData("c1", "broker-a", {1: "h:2", 0: "h:1"})
    body = json.dumps({"queueDatas": [qd.to_json()], "brokerDatas": [bd.to_json()]}).encode()
    assert '"brokerAddrs": {"0": "h:1", "1": "h:2"}' in body.decode()  # string ids, sorted
    d = fastjson.loads(body)
    assert QueueData.from_json(d["queueDatas"][0]) == qd
    back = BrokerData.from_json(d["brokerDatas"][0])
    assert back == bd and back.select_broker_addr() == "h:1"
    assert BrokerData("c", "b", {2: "s:1"}).select_broker_addr() == "s:1"
    assert BrokerData("c", "b").select_broker_addr() is None


def test_fastjson_unquoted_int_keys_and_lenient_queue_data():
    text = (
        '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b"}],'
        '"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":8,"topicSynFlag":2,"writeQueueNums":8}]}'
    )
    d = fastjson.loads(text)
    assert BrokerData.from_json(d["brokerDatas"][0]).broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert QueueData.from_json(d["queueDatas"][0]) == QueueData("b", 8, 8, 6, 2)
    assert QueueData.from_json({"brokerName": "x"}) == QueueData("x", 0, 0, 6, 0)
    with pytest.raises(ValueError):
        fastjson.loads(b"{not json")
    with pytest.raises(KeyError):
        QueueData.from_json({"perm": 6})


def test_topic_route_data_queues_of_brokers_with_a_master():
    from rmq.common.route import TopicRouteData

    text = (
        '{"brokerDatas":[{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"b","cluster":"C"},'
        '{"brokerAddrs":{1:"h:3"},"brokerName":"s","cluster":"C"},'
        '{"brokerAddrs":{"0":"h:4"},"brokerName":"a","cluster":"C"}],'
        '"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"writeQueueNums":3},'
        '{"brokerName":"s","perm":6,"readQueueNums":4,"writeQueueNums":4},'
        '{"brokerName":"a","perm":4,"readQueueNums":1,"writeQueueNums":1}],"orderTopicConf":null}'
    )
    route = TopicRouteData.from_body(text)
    assert [b.broker_name for b in route.broker_datas] == ["a", "b", "s"]  # sorted, as Java's client sorts
    assert route.master_addr("b") == "h:1" and route.master_addr("s") is None and route.master_addr("x") is None
    # "s" has only a slave; "a" is read-only (perm 4)
    assert route.readable_queues() == [("a", 0), ("b", 0), ("b", 1)]
    assert route.writable_queues() == [("b", 0), ("b", 1), ("b", 2)]
    again = TopicRouteData.from_body(json.dumps(route.to_json()))
    assert again == route and again.same_as(route) and not again.same_as(None)
    again.queue_datas[0].perm = 6
    assert not again.same_as(route)
    with pytest.raises(TypeError):
        TopicRouteData.from_body(b"[1, 2]")


def test_cluster_info_reads_fastjson_ids():
    from rmq.common.route import ClusterInfo

    info = ClusterInfo.from_body(
        '{"brokerAddrTable":{"b":{"brokerAddrs":{0:"h:1"},"brokerName":"b",'
        '"cluster":"C"}},"clusterAddrTable":{"C":["b"]}}'
    )
    assert info.broker_addr_table["b"].broker_addrs == {0: "h:1"} and info.master_addrs("C") == {"b": "h:1"}
    assert ClusterInfo.from_body(b"") == ClusterInfo()
