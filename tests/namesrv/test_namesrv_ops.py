"""The name server's operations codes at the protocol level: write permission over several
brokers, UPDATE_NAMESRV_CONFIG's file rewrite and refusals, KV config persistence failures,
order confs in routes only with orderMessageEnable."""

import json
import os

from rmq._testing import invoke_once, run_namesrv
from rmq.config import rewrite_properties_file as _rewrite
from rmq.namesrv.route_manager import RouteInfoManager
from rmq.protocol.codes import RequestCode, ResponseCode


def _table(**topics):
    return {t: {"readQueueNums": 4, "writeQueueNums": 4, "perm": perm} for t, perm in topics.items()}


def test_wipe_and_add_write_perm_touch_only_that_broker():
    r = RouteInfoManager()
    r.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", _table(T1=6, T2=2, T3=7), {"counter": 1})
    r.register_broker("C", "127.0.0.1:2", "broker-b", 0, "", _table(T1=6, T4=6), {"counter": 1})
    assert r.wipe_write_perm_of_broker("broker-a") == 3
    perms = {t: {b: q.perm for b, q in qs.items()} for t, qs in r.topic_queue_table.items()}
    assert perms == {
        "T1": {"broker-a": 4, "broker-b": 6},
        "T2": {"broker-a": 0},
        "T3": {"broker-a": 5},
        "T4": {"broker-b": 6},
    }
    assert r.wipe_write_perm_of_broker("broker-a") == 3  # idempotent; Java counts the topics again
    # Java ADD_WRITE_PERM_OF_BROKER sets read + write, whatever the topic had (T2 was write-only)
    assert r.add_write_perm_of_broker("broker-a") == 3
    assert {t: qs["broker-a"].perm for t, qs in r.topic_queue_table.items() if "broker-a" in qs} == {
        "T1": 6,
        "T2": 6,
        "T3": 6,
    }
    assert r.wipe_write_perm_of_broker("nobody") == 0 and r.add_write_perm_of_broker("nobody") == 0
    # the periodic registration with the same table version keeps a wipe; a new version ends it
    r.wipe_write_perm_of_broker("broker-b")
    # (full tables: they list the broker's own topic, as every broker's does)
    full = _table(T1=6, T4=6, **{"broker-b": 7})
    r.register_broker("C", "127.0.0.1:2", "broker-b", 0, "", full, {"counter": 1})
    assert r.topic_queue_table["T4"]["broker-b"].perm == 4
    r.register_broker("C", "127.0.0.1:2", "broker-b", 0, "", full, {"counter": 2})
    assert r.topic_queue_table["T4"]["broker-b"].perm == 6


def test_config_file_rewrite_keeps_the_operators_lines(tmp_path):
    path = tmp_path / "namesrv.conf"
    path.write_text(
        "# comment\n! other comment\nmax_brokers = 3\nlistenPort=9876\n"
        "maxTopics=1\\\n  00\nmaxBrokers=4\n\nscanNotActiveBrokerInterval: 5\n"
    )
    _rewrite(str(path), {"maxBrokers": "7", "maxTopics": "200", "maxKvNamespaces": "9"})
    assert path.read_text() == (
        "# comment\n! other comment\nmaxBrokers=7\nlistenPort=9876\nmaxTopics=200\n\n"
        "scanNotActiveBrokerInterval: 5\nmaxKvNamespaces=9\n"
    )
    assert not os.path.exists(str(path) + ".tmp")
    _rewrite(str(tmp_path / "new.conf"), {"maxTopics": "5"})
    assert (tmp_path / "new.conf").read_text() == "maxTopics=5\n"


async def test_update_config_bodies_and_a_failed_persist(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    async with run_namesrv(config_store_path=str(not_a_dir / "namesrv.conf")) as ns:
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG)  # no body: nothing to do
        assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"maxTopics=\\uZZZZ\n")
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "string2Properties error")
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"maxTopics=77\n")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "config updated in memory but writing" in resp.remark
        assert ns.config.max_topics == 77 and ns.route_info_manager.limits.max_topics == 77
        resp = await invoke_once(ns.address, RequestCode.GET_NAMESRV_CONFIG)
        assert b"maxTopics=77\n" in resp.body_bytes() and b"listenPort=%d\n" % ns.port in resp.body_bytes()


async def test_kv_persist_failure_is_reported_and_memory_kept(tmp_path):
    (tmp_path / "file").write_text("")  # a file where the directory should be
    async with run_namesrv(kv_config_path=str(tmp_path / "file" / "kv.json")) as ns:
        resp = await invoke_once(ns.address, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "KV config changed in memory but writing" in resp.remark
        resp = await invoke_once(ns.address, RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert resp.ext_fields["value"] == "v"
        resp = await invoke_once(ns.address, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert resp.code == ResponseCode.SYSTEM_ERROR and "value" in resp.remark  # a required field
        resp = await invoke_once(ns.address, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "N"})
        assert json.loads(resp.body_bytes()) == {"table": {"k": "v"}}


async def _route(ns, topic):
    resp = await invoke_once(ns.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert resp.code == ResponseCode.SUCCESS
    return json.loads(resp.body_bytes())


async def _put_order_conf(ns, topic, conf):
    resp = await invoke_once(
        ns.address, RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": topic, "value": conf}
    )
    assert resp.code == ResponseCode.SUCCESS


async def test_order_conf_in_routes_only_with_order_message_enable():
    # Java DefaultRequestProcessor.getRouteInfoByTopic: orderTopicConf only with orderMessageEnable
    async with run_namesrv() as ns:
        ns.route_info_manager.register_broker("C", "127.0.0.1:1", "broker-a", 0, "", _table(OrdT=6), {"counter": 1})
        await _put_order_conf(ns, "OrdT", "broker-a:8")  # stale: the topic has 4 queues
        route = await _route(ns, "OrdT")
        assert "orderTopicConf" not in route and route["queueDatas"][0]["writeQueueNums"] == 4
        resp = await invoke_once(ns.address, RequestCode.GET_NAMESRV_CONFIG)
        assert b"orderMessageEnable=false\n" in resp.body_bytes()
        # live: the next route answer carries it, and turning it off drops it again
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
        assert resp.code == ResponseCode.SUCCESS and ns.config.order_message_enable is True
        assert (await _route(ns, "OrdT"))["orderTopicConf"] == "broker-a:8"
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=maybe\n")
        assert resp.code != ResponseCode.SUCCESS and "orderMessageEnable" in resp.remark
        assert ns.config.order_message_enable is True  # a refused update changes nothing
        resp = await invoke_once(ns.address, RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=false\n")
        assert resp.code == ResponseCode.SUCCESS
        assert "orderTopicConf" not in await _route(ns, "OrdT")
    async with run_namesrv(order_message_enable=True) as ns:
        ns.route_info_manager.register_broker(
            "C", "127.0.0.1:1", "broker-a", 0, "", _table(OrdT=6, Plain=6), {"counter": 1}
        )
        await _put_order_conf(ns, "OrdT", "broker-a:4")
        assert (await _route(ns, "OrdT"))["orderTopicConf"] == "broker-a:4"
        assert "orderTopicConf" not in await _route(ns, "Plain")  # no conf: none attached
