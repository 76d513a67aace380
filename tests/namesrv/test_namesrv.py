"""Name server over TCP: registration, routes, expiry, error paths."""

import json
import zlib

import pytest

from rmq._testing import run_namesrv, wait_until
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient


def topic_table(**topics):
    return {
        name: {
            "topicName": name,
            "readQueueNums": q,
            "writeQueueNums": q,
            "perm": 6,
            "topicSysFlag": 0,
            "topicFilterType": "SINGLE_TAG",
            "order": False,
        }
        for name, q in topics.items()
    }


def register_cmd(broker_addr="127.0.0.1:10911", name="broker-a", broker_id=0, counter=1, **topics):
    body = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": topic_table(**topics),
                "dataVersion": {"timestamp": 1, "counter": counter},
            },
            "filterServerList": [],
        }
    ).encode()
    ext = {
        "brokerAddr": broker_addr,
        "brokerId": broker_id,
        "brokerName": name,
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


@pytest.fixture
async def client():
    c = RemotingClient()
    yield c
    await c.close()


async def route(client, ns, topic):
    return await client.invoke(
        ns.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    )


async def test_register_then_route_has_master_under_key_0(client):
    async with run_namesrv() as ns:
        resp = await client.invoke(ns.address, register_cmd(TopicTest=4, TBW102=8))
        assert resp.code == ResponseCode.SUCCESS
        assert all(isinstance(v, str) for v in resp.ext_fields.values())

        resp = await route(client, ns, "TopicTest")
        assert resp.code == ResponseCode.SUCCESS
        data = json.loads(resp.body_bytes())
        assert data["brokerDatas"] == [
            {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:10911"}}
        ]
        assert data["queueDatas"] == [
            {"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}
        ]
        assert data["filterServerTable"] == {}
        assert (await route(client, ns, "TBW102")).code == ResponseCode.SUCCESS


async def test_unknown_topic_is_17_with_remark(client):
    async with run_namesrv() as ns:
        resp = await route(client, ns, "NoSuchTopic")
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert "NoSuchTopic" in resp.remark
        assert resp.ext_fields == {}


async def test_cluster_info_and_topic_list(client):
    async with run_namesrv() as ns:
        await client.invoke(ns.address, register_cmd(TopicA=2))
        await client.invoke(ns.address, register_cmd("127.0.0.1:10921", "broker-b", TopicA=2, TopicB=1))
        resp = await client.invoke(ns.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        info = json.loads(resp.body_bytes())
        assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}
        assert info["brokerAddrTable"]["broker-b"]["brokerAddrs"] == {"0": "127.0.0.1:10921"}
        resp = await client.invoke(ns.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        assert json.loads(resp.body_bytes()) == {"topicList": ["TopicA", "TopicB"]}
        data = json.loads((await route(client, ns, "TopicA")).body_bytes())
        assert [b["brokerName"] for b in data["brokerDatas"]] == ["broker-a", "broker-b"]


async def test_reregistration_drops_deleted_topics(client):
    # full tables: a broker always lists its own brokerName topic
    async with run_namesrv() as ns:
        await client.invoke(ns.address, register_cmd(TopicA=2, TopicB=2, counter=1, **{"broker-a": 1}))
        await client.invoke(ns.address, register_cmd(TopicA=2, counter=2, **{"broker-a": 1}))
        assert (await route(client, ns, "TopicB")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await route(client, ns, "TopicA")).code == ResponseCode.SUCCESS


async def test_incremental_registration_merges_and_the_next_full_one_still_prunes(client):
    """Java BrokerController.registerIncrementBrokerData sends only the created topic, with the
    table's version; Java's RouteInfoManager.registerBroker merges it. A later full table
    (listing the broker's own topic) of a new version prunes what it no longer lists."""
    async with run_namesrv() as ns:
        assert (
            await client.invoke(ns.address, register_cmd(TopicA=2, TopicB=2, counter=1, **{"broker-a": 1}))
        ).code == 0
        # the increment: one new topic, the version after its creation
        assert (await client.invoke(ns.address, register_cmd(TopicC=3, counter=2))).code == 0
        for topic in ("TopicA", "TopicB", "TopicC", "broker-a"):
            assert (await route(client, ns, topic)).code == ResponseCode.SUCCESS, topic
        data = json.loads((await route(client, ns, "TopicC")).body_bytes())
        assert data["queueDatas"][0]["readQueueNums"] == 3
        # the periodic full table of the increment's version changes nothing (as Java's)
        await client.invoke(ns.address, register_cmd(TopicA=2, TopicC=3, counter=2, **{"broker-a": 1}))
        assert (await route(client, ns, "TopicB")).code == ResponseCode.SUCCESS
        # TopicB deleted on the broker (a new version): the full table prunes it
        await client.invoke(ns.address, register_cmd(TopicA=2, TopicC=3, counter=3, **{"broker-a": 1}))
        assert (await route(client, ns, "TopicB")).code == ResponseCode.TOPIC_NOT_EXIST
        assert (await route(client, ns, "TopicC")).code == ResponseCode.SUCCESS


async def test_slave_registration_is_told_its_master(client):
    async with run_namesrv() as ns:
        await client.invoke(ns.address, register_cmd(TopicA=2))
        resp = await client.invoke(ns.address, register_cmd("127.0.0.1:10931", broker_id=1, TopicA=2))
        assert resp.ext_fields["masterAddr"] == "127.0.0.1:10911"
        data = json.loads((await route(client, ns, "TopicA")).body_bytes())
        assert data["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.1:10931"}


async def test_unregister_removes_routes(client):
    async with run_namesrv() as ns:
        await client.invoke(ns.address, register_cmd(TopicA=2))
        ext = {
            "brokerAddr": "127.0.0.1:10911",
            "brokerId": "0",
            "brokerName": "broker-a",
            "clusterName": "DefaultCluster",
        }
        resp = await client.invoke(ns.address, RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext))
        assert resp.code == ResponseCode.SUCCESS
        assert (await route(client, ns, "TopicA")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_silent_broker_expires(client):
    async with run_namesrv(broker_channel_expired_seconds=0.3, scan_not_active_broker_interval=0.1) as ns:
        await client.invoke(ns.address, register_cmd(TopicA=2))
        assert (await route(client, ns, "TopicA")).code == ResponseCode.SUCCESS
        observer = RemotingClient()  # the expiry closes the broker's connection, as Java does
        try:

            async def gone():
                return (await route(observer, ns, "TopicA")).code == ResponseCode.TOPIC_NOT_EXIST

            await wait_until(gone, what="the silent broker to expire")
        finally:
            await observer.close()


async def test_broker_connection_close_drops_it():
    async with run_namesrv() as ns:
        broker_side = RemotingClient()
        await broker_side.invoke(ns.address, register_cmd(TopicA=2))
        await broker_side.close()
        c = RemotingClient()
        try:

            async def gone():
                return (await route(c, ns, "TopicA")).code == ResponseCode.TOPIC_NOT_EXIST

            await wait_until(gone, what="the closed broker's routes to go")
        finally:
            await c.close()


async def test_bad_crc_and_bad_header_are_errors(client):
    async with run_namesrv() as ns:
        cmd = register_cmd(TopicA=2)
        cmd.ext_fields["bodyCrc32"] = "12345"
        resp = await client.invoke(ns.address, cmd)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "crc32" in resp.remark

        cmd = register_cmd(TopicA=2)
        del cmd.ext_fields["brokerName"]
        resp = await client.invoke(ns.address, cmd)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerName" in resp.remark

        cmd = register_cmd(TopicA=2)
        cmd.body = b"{not json"
        cmd.ext_fields["bodyCrc32"] = "0"
        resp = await client.invoke(ns.address, cmd)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "RegisterBrokerBody" in resp.remark
        # the name server is still serving
        assert (await route(client, ns, "TopicA")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_kv_by_value_is_an_error_but_not_unsupported(client):
    async with run_namesrv() as ns:
        resp = await client.invoke(
            ns.address, RemotingCommand.request(217, {"namespace": "PROJECT_CONFIG", "key": "x"})
        )
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        resp = await client.invoke(
            ns.address, RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
        )
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        await client.invoke(
            ns.address, RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"})
        )
        resp = await client.invoke(
            ns.address, RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
        )
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["value"] == "v"
        resp = await client.invoke(ns.address, RemotingCommand.request(9999))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in resp.remark
