"""Name server against hostile or misconfigured brokers, over TCP with raw remoting clients:
malformed REGISTER_BROKER bodies leave nothing behind, a second live holder of a brokerName +
brokerId is refused, a connection that did not register an address cannot remove it, and
every table has a bound."""

import json
import logging

import pytest

from rmq._testing import run_namesrv, wait_until
from rmq._testing.floods import register_broker_body, register_broker_cmd
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient

REAL = "127.0.0.1:10911"
SPOOF = "127.0.0.1:20911"


def register_cmd(addr=REAL, name="broker-a", broker_id=0, body=None, counter=1, **topics):
    """A REGISTER_BROKER from ``addr`` of ``topics`` (name → queue count), or of ``body`` as given."""
    if body is None:
        body = register_broker_body(topics, counter)
    return register_broker_cmd(body, addr=addr, name=name, broker_id=broker_id)


def unregister_cmd(addr=REAL, name="broker-a", broker_id=0):
    ext = {"brokerAddr": addr, "brokerId": str(broker_id), "brokerName": name, "clusterName": "DefaultCluster"}
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, ext)


def _addr(ns):
    return getattr(ns, "address", None) or ns.namesrv_addr  # a NamesrvController or a StandaloneProcess


async def cluster_info(client, ns):
    resp = await client.invoke(_addr(ns), RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    return json.loads(resp.body_bytes())


async def route(client, ns, topic):
    resp = await client.invoke(_addr(ns), RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return json.loads(resp.body_bytes()) if resp.code == ResponseCode.SUCCESS else None


@pytest.fixture
async def clients():
    """Three clients, hence three connections: the real broker, the newcomer, an observer."""
    cs = [RemotingClient() for _ in range(3)]
    yield cs
    for c in cs:
        await c.close()


def body_with(table=None, raw=None):
    if raw is not None:
        return raw
    return json.dumps(
        {"topicConfigSerializeWrapper": {"topicConfigTable": table, "dataVersion": {"timestamp": 1, "counter": 1}}}
    ).encode()


MALFORMED = [
    (b"[1, 2, 3]", "RegisterBrokerBody"),
    (b"\xff\xfe{}", "RegisterBrokerBody"),
    (b"[" * 100_000 + b"]" * 100_000, "RegisterBrokerBody"),
    (body_with({"T": {"readQueueNums": "x"}}), "readQueueNums"),
    (body_with({"T": {"readQueueNums": 2**70}}), "readQueueNums"),
    (body_with({"T": {"perm": 16}}), "perm"),
    (body_with({"T": {"perm": 2**70}}), "perm"),
    (body_with({"T": {"writeQueueNums": -1}}), "writeQueueNums"),
    (body_with({"T": {"topicSysFlag": [1]}}), "topicSysFlag"),
    (body_with({"T": "not an object"}), "topicConfigTable[T]"),
    (body_with({"bad\ntopic": {}}), "illegal topic name"),
    (body_with({"x" * 300: {}}), "illegal topic name"),
    (body_with({"  ": {}}), "illegal topic name"),
    (body_with(["T"]), "topicConfigTable"),
    (json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {}, "dataVersion": 5}}).encode(), "dataVersion"),
]


@pytest.mark.parametrize("body,why", MALFORMED, ids=range(len(MALFORMED)))
async def test_malformed_body_is_refused_and_leaves_no_broker(clients, body, why):
    real, _, observer = clients
    async with run_namesrv() as ns:
        # A good topic first in the table: checking must finish before anything is stored.
        if body.startswith(b'{"topicConfigSerializeWrapper": {"topicConfigTable": {"'):
            body = body.replace(b'"topicConfigTable": {', b'"topicConfigTable": {"Good": {"readQueueNums": 1}, ', 1)
        resp = await real.invoke(ns.address, register_cmd(body=body))
        assert resp.code == ResponseCode.SYSTEM_ERROR, resp
        assert why in resp.remark and len(resp.remark) < 1000
        info = await cluster_info(observer, ns)
        assert info == {"brokerAddrTable": {}, "clusterAddrTable": {}}
        assert await route(observer, ns, "Good") is None
        # the same connection registers properly afterwards
        assert (await real.invoke(ns.address, register_cmd(Good=2))).code == ResponseCode.SUCCESS
        assert (await route(observer, ns, "Good"))["brokerDatas"][0]["brokerAddrs"] == {"0": REAL}


@pytest.mark.parametrize(
    "field,value,why",
    [
        ("brokerAddr", "no-port", "host:port"),
        ("brokerAddr", "", "brokerAddr"),
        ("brokerName", "a\nb", "brokerName"),
        ("brokerName", "n" * 5000, "brokerName"),
        ("clusterName", "", "clusterName"),
        ("brokerId", "-1", "brokerId"),
        ("brokerId", str(2**64), "brokerId"),
    ],
)
async def test_malformed_header_is_refused_and_leaves_no_broker(clients, field, value, why):
    real, _, observer = clients
    async with run_namesrv() as ns:
        cmd = register_cmd(T=1)
        cmd.ext_fields[field] = value
        resp = await real.invoke(ns.address, cmd)
        assert resp.code == ResponseCode.SYSTEM_ERROR and why in resp.remark, resp
        assert await cluster_info(observer, ns) == {"brokerAddrTable": {}, "clusterAddrTable": {}}


async def test_java_style_names_are_accepted(clients):
    """A Java broker named after its host registers a topic of that name (brokerTopicEnable)."""
    real, _, observer = clients
    async with run_namesrv() as ns:
        resp = await real.invoke(
            ns.address,
            register_cmd(
                name="host-1.example.com",
                **{
                    "host-1.example.com": 1,
                    "DefaultCluster_REPLY_TOPIC": 1,
                    "%RETRY%GID_x": 1,
                    "SCHEDULE_TOPIC_XXXX": 18,
                },
            ),
        )
        assert resp.code == ResponseCode.SUCCESS, resp
        assert (await route(observer, ns, "host-1.example.com"))["queueDatas"][0]["brokerName"] == "host-1.example.com"


async def test_spoof_then_disconnect_leaves_the_real_brokers_routes(clients, caplog):
    real, spoofer, observer = clients
    async with run_namesrv() as ns:
        assert (await real.invoke(ns.address, register_cmd(REAL, TopicA=4))).code == ResponseCode.SUCCESS
        with caplog.at_level(logging.WARNING, logger="rmq.namesrv"):
            resp = await spoofer.invoke(ns.address, register_cmd(SPOOF, TopicA=1, Evil=1))
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "broker-a" in resp.remark and REAL in resp.remark and "refused" in resp.remark
        assert any(
            "refused registration of broker-a" in r.getMessage() and SPOOF in r.getMessage() for r in caplog.records
        )
        # The spoofer also registers a broker of its own over the same connection, so that its
        # disappearance shows the name server has handled the close.
        assert (await spoofer.invoke(ns.address, register_cmd(SPOOF, name="broker-z", Z=1))).code == 0
        # Same address as the real broker, from the spoofer's connection: accepted (a broker
        # that reconnects does this), but it must not let the spoofer's close remove it.
        assert (await spoofer.invoke(ns.address, register_cmd(REAL, TopicA=4))).code == ResponseCode.SUCCESS
        await spoofer.close()

        async def broker_z_gone():
            return "broker-z" not in (await cluster_info(observer, ns))["brokerAddrTable"]

        await wait_until(broker_z_gone, what="the spoofer's close to be handled")
        data = await route(observer, ns, "TopicA")
        assert data is not None, "the real broker's routes were removed by another connection's close"
        assert data["brokerDatas"][0]["brokerAddrs"] == {"0": REAL}
        assert data["queueDatas"][0]["writeQueueNums"] == 4
        assert await route(observer, ns, "Evil") is None

        # The real broker's own close does remove it.
        await real.close()

        async def a_gone():
            return await route(observer, ns, "TopicA") is None

        await wait_until(a_gone, what="the real broker's close to remove its routes")


async def test_duplicate_live_registration_refused_until_the_holder_unregisters(clients):
    real, newcomer, observer = clients
    async with run_namesrv() as ns:
        assert (await real.invoke(ns.address, register_cmd(REAL, TopicA=4))).code == ResponseCode.SUCCESS
        for _ in range(3):  # repeated: still refused, the holder keeps its routes
            resp = await newcomer.invoke(ns.address, register_cmd(SPOOF, TopicB=2))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "already registered from " + REAL in resp.remark
        assert await route(observer, ns, "TopicB") is None
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"] == {"0": REAL}
        # a slave of broker-a (another id) from the newcomer is no conflict
        resp = await newcomer.invoke(ns.address, register_cmd("127.0.0.1:10931", broker_id=1, TopicA=4))
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["masterAddr"] == REAL
        # nor may another connection unregister it
        resp = await newcomer.invoke(ns.address, unregister_cmd(REAL))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "UNREGISTER_BROKER from this one refused" in resp.remark
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"]["0"] == REAL
        # the holder refreshing its registration is fine
        assert (await real.invoke(ns.address, register_cmd(REAL, TopicA=4, counter=2))).code == ResponseCode.SUCCESS

        assert (await real.invoke(ns.address, unregister_cmd(REAL))).code == ResponseCode.SUCCESS
        resp = await newcomer.invoke(ns.address, register_cmd(SPOOF, TopicB=2))
        assert resp.code == ResponseCode.SUCCESS
        data = await route(observer, ns, "TopicB")
        assert data["brokerDatas"][0]["brokerAddrs"] == {"0": SPOOF, "1": "127.0.0.1:10931"}
        # and now the old one is the newcomer
        resp = await real.invoke(ns.address, register_cmd(REAL, TopicA=4))
        assert resp.code == ResponseCode.SYSTEM_ERROR and SPOOF in resp.remark


async def test_newcomer_accepted_once_the_holder_disconnected_or_expired(clients):
    real, newcomer, observer = clients
    async with run_namesrv(broker_channel_expired_seconds=0.5, scan_not_active_broker_interval=3600) as ns:
        # expiry: the holder stopped registering; the scan has not run, but the holder is not live
        assert (await real.invoke(ns.address, register_cmd(REAL, TopicA=4))).code == ResponseCode.SUCCESS
        assert (await newcomer.invoke(ns.address, register_cmd(SPOOF, TopicA=1))).code == ResponseCode.SYSTEM_ERROR

        async def accepted():
            return (await newcomer.invoke(ns.address, register_cmd(SPOOF, TopicA=1))).code == ResponseCode.SUCCESS

        await wait_until(accepted, timeout=20, interval=0.1, what="the holder to expire")
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"] == {"0": SPOOF}


async def test_holder_connection_closed_lets_the_newcomer_in(clients):
    real, newcomer, observer = clients
    async with run_namesrv() as ns:
        assert (await real.invoke(ns.address, register_cmd(REAL, TopicA=4))).code == ResponseCode.SUCCESS
        await real.close()

        async def accepted():
            return (await newcomer.invoke(ns.address, register_cmd(SPOOF, TopicA=1))).code == ResponseCode.SUCCESS

        await wait_until(accepted, what="the newcomer to be accepted after the holder's close")
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"] == {"0": SPOOF}


async def test_table_bounds(clients):
    real, other, observer = clients
    async with run_namesrv(max_brokers=3, max_topics_per_broker=3, max_topics=6) as ns:
        resp = await real.invoke(ns.address, register_cmd(REAL, A=1, B=1, C=1, D=1))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxTopicsPerBroker=3" in resp.remark
        assert (await real.invoke(ns.address, register_cmd(REAL, A=1, B=1, C=1))).code == ResponseCode.SUCCESS
        # shared topics do not count twice; two new ones past maxTopics=6 refuse the whole registration
        assert (await other.invoke(ns.address, register_cmd(SPOOF, name="broker-b", A=1, D=1, E=1))).code == 0
        resp = await other.invoke(ns.address, register_cmd("127.0.0.1:30911", name="broker-c", F=1, G=1))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxTopics=6" in resp.remark
        assert (await other.invoke(ns.address, register_cmd("127.0.0.1:30911", name="broker-c", A=1))).code == 0
        resp = await other.invoke(ns.address, register_cmd("127.0.0.1:40911", name="broker-d", A=1))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxBrokers=3" in resp.remark
        info = await cluster_info(observer, ns)
        assert sorted(info["brokerAddrTable"]) == ["broker-a", "broker-b", "broker-c"]
        # a registered broker still refreshes while the table is full; an increment (no
        # broker-a topic) removes nothing, a full table drops what it no longer lists
        assert (await real.invoke(ns.address, register_cmd(REAL, A=1, B=1, counter=2))).code == ResponseCode.SUCCESS
        assert await route(observer, ns, "C") is not None
        full = register_cmd(REAL, A=1, B=1, counter=3, **{"broker-a": 1})
        assert (await real.invoke(ns.address, full)).code == ResponseCode.SUCCESS
        assert await route(observer, ns, "C") is None


async def test_kv_config_bounds(clients):
    c = clients[0]
    async with run_namesrv(
        max_kv_namespaces=2, max_kv_entries_per_namespace=2, max_kv_value_chars=10, max_kv_key_chars=8
    ) as ns:

        async def put(ns_, key, value):
            return await c.invoke(
                ns.address,
                RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": ns_, "key": key, "value": value}),
            )

        assert (await put("n1", "k1", "v")).code == ResponseCode.SUCCESS
        assert (await put("n1", "k2", "v")).code == ResponseCode.SUCCESS
        resp = await put("n1", "k3", "v")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxKvEntriesPerNamespace=2" in resp.remark
        assert (await put("n1", "k1", "v2")).code == ResponseCode.SUCCESS  # replacing is fine
        assert (await put("n2", "k", "v")).code == ResponseCode.SUCCESS
        resp = await put("n3", "k", "v")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxKvNamespaces=2" in resp.remark
        resp = await put("n2", "k", "v" * 11)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxKvValueChars=10" in resp.remark
        resp = await put("n2", "k" * 9, "v")
        assert resp.code == ResponseCode.SYSTEM_ERROR and "maxKvKeyChars" in resp.remark
        # deleting the last key of a namespace frees the namespace
        for k in ("k",):
            await c.invoke(
                ns.address, RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, {"namespace": "n2", "key": k})
            )
        assert (await put("n3", "k", "v")).code == ResponseCode.SUCCESS


@pytest.mark.slow
async def test_standalone_broker_keeps_its_routes_against_a_spoofer(tmp_path):
    """The real broker of `rmq standalone` (its own registration body passes the checks); a
    client spoofing its name, flooding malformed registrations and disconnecting changes
    nothing, while a second client's route lookups stay prompt."""
    from rmq._testing import NoisyNeighbour, StandaloneProcess

    with StandaloneProcess(tmp_path / "store") as proc:
        observer, spoofer = RemotingClient(), RemotingClient()
        try:

            async def registered():
                data = await route(observer, proc, "TBW102")
                return data and data["brokerDatas"][0]["brokerAddrs"].get("0") == proc.broker_addr

            await wait_until(registered, what="the standalone broker's registration")
            with NoisyNeighbour(
                proc.namesrv_addr, code=RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "TBW102"}
            ) as probe:
                resp = await spoofer.invoke(proc.namesrv_addr, register_cmd(SPOOF, TBW102=8))
                assert resp.code == ResponseCode.SYSTEM_ERROR and proc.broker_addr in resp.remark
                bad = [body for body, _ in MALFORMED]
                for body in bad * 5:
                    resp = await spoofer.invoke(proc.namesrv_addr, register_cmd(SPOOF, name="broker-z", body=body))
                    assert resp.code == ResponseCode.SYSTEM_ERROR
                resp = await spoofer.invoke(proc.namesrv_addr, unregister_cmd(proc.broker_addr))
                assert resp.code == ResponseCode.SYSTEM_ERROR
                await spoofer.close()
            assert probe.failures == 0 and probe.worst < 2.0, probe.summary()
            data = await route(observer, proc, "TBW102")
            assert data["brokerDatas"][0]["brokerAddrs"] == {"0": proc.broker_addr}
            info = await cluster_info(observer, proc)
            assert list(info["brokerAddrTable"]) == ["broker-a"]
        finally:
            await spoofer.close()
            await observer.close()
        assert "refused registration of broker-a id=0 from " + SPOOF in proc.log_text()


def epoch_body(epoch: int, counter: int = 1, **topics) -> bytes:
    """A registration body whose dataVersion carries ``stateVersion`` (a controller-mode
    broker's master epoch, Java 5)."""
    d = json.loads(register_broker_body(topics, counter))
    if epoch:
        d["topicConfigSerializeWrapper"]["dataVersion"]["stateVersion"] = epoch
    return json.dumps(d).encode()


async def test_a_newer_master_epoch_takes_the_id_over_from_a_live_holder(clients):
    """Controller mode: the elected master registers brokerId 0 with a newer stateVersion while
    the old one (stopped, or cut off from the controller) still holds it: the newcomer takes
    it; the old one's registrations under the old epoch are refused; with no stateVersion (4.x
    brokers) the live holder keeps it."""
    old, new, observer = clients
    async with run_namesrv() as ns:
        assert (await old.invoke(ns.address, register_cmd(REAL, body=epoch_body(1, TopicA=4)))).code == 0
        resp = await new.invoke(ns.address, register_cmd(SPOOF, body=epoch_body(0, TopicA=4)))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "already registered from " + REAL in resp.remark
        resp = await new.invoke(ns.address, register_cmd(SPOOF, body=epoch_body(2, TopicA=4)))
        assert resp.code == ResponseCode.SUCCESS
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"] == {"0": SPOOF}
        resp = await old.invoke(ns.address, register_cmd(REAL, body=epoch_body(1, counter=2, TopicA=4)))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "already registered from " + SPOOF in resp.remark
        # the old master, told of epoch 2, registers as a slave: both listed
        resp = await old.invoke(ns.address, register_cmd(REAL, broker_id=1, body=epoch_body(2, counter=3, TopicA=4)))
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["masterAddr"] == SPOOF
        assert (await route(observer, ns, "TopicA"))["brokerDatas"][0]["brokerAddrs"] == {"0": SPOOF, "1": REAL}
