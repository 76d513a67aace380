"""A master broker and a slave broker with a name server, on loopback: the slave finds the
master's HA address in its REGISTER_BROKER answer, follows it, refuses sends; a SYNC_MASTER
answers SUCCESS after the slave's ack, SLAVE_NOT_AVAILABLE without a slave,
FLUSH_SLAVE_TIMEOUT with a stalled one."""

import asyncio
import socket

import pytest
from metrics_support import scrape

from rmq._testing import free_port, run_broker, run_namesrv, wait_until
from rmq._testing.env import BrokerEnv
from rmq.protocol.codes import ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.store.ha.codec import encode_offset_report


@pytest.fixture
async def cluster(tmp_path):
    """``start(role, slave=True)`` → (namesrv, master, slave or None, env on the master)."""
    stack = []

    async def start(role="ASYNC_MASTER", slave=True, **master_kw):
        ns_cm = run_namesrv()
        ns = await ns_cm.__aenter__()
        stack.append(ns_cm)
        m_cm = run_broker(tmp_path / "master", ns, broker_name="b1", broker_role=role, **master_kw)
        master = await m_cm.__aenter__()
        stack.append(m_cm)
        s = None
        if slave:
            s_cm = run_broker(tmp_path / "slave", ns, broker_name="b1", broker_id=1, broker_role="SLAVE")
            s = await s_cm.__aenter__()
            stack.append(s_cm)
        client = RemotingClient()
        stack.append(client)
        return ns, master, s, BrokerEnv(ns, master, client)

    yield start
    for item in reversed(stack):
        if isinstance(item, RemotingClient):
            await item.close()
        else:
            await item.__aexit__(None, None, None)


async def test_slave_finds_master_through_name_server_and_follows(cluster):
    ns, master, slave, env = await cluster()
    ha_addr = master.ha_server_addr
    assert ha_addr == f"127.0.0.1:{master.message_store.ha.port}"
    await wait_until(lambda: slave.message_store.ha_client.connected, 30, what="slave connected")
    assert slave.message_store.ha_client.master_address == ha_addr
    assert slave.broker_outer_api.master_addr == master.broker_addr
    await env.create_topic("HT", 2)
    ids = []
    for i in range(40):
        r = await env.send("HT", b"body-%d" % i, i % 2)
        assert r.code == ResponseCode.SUCCESS, r.remark
        ids.append(r.ext_fields["msgId"])
    ms, ss = master.message_store, slave.message_store
    await wait_until(
        lambda: (
            ss.commit_log.max_offset == ms.commit_log.max_offset and ss.reput_from_offset == ss.commit_log.max_offset
        ),
        30,
    )
    for q in range(2):
        assert ss.get_max_offset_in_queue("HT", q) == ms.get_max_offset_in_queue("HT", q) == 20
    m = ss.look_message_by_offset_msg_id(ids[7])
    assert m is not None and m.body == b"body-7"
    # a slave refuses sends as Java's store does (SERVICE_NOT_AVAILABLE, "messages are put to the slave")
    slave_env = BrokerEnv(ns, slave, env.client)
    r = await slave_env.send("HT", b"to-slave", 0, wait_dispatch=False)
    assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in r.remark
    # the replication state in the runtime info
    info = ms.runtime_info()
    assert info["haConnectionCount"] == "1"


async def test_sync_master_codes(cluster):
    _ns, master, slave, env = await cluster("SYNC_MASTER", slave_timeout=500)
    await wait_until(
        lambda: master.message_store.ha.connection_count == 1 and master.message_store.ha.push2slave_max_offset >= 0, 30
    )
    await env.create_topic("ST", 1)
    r = await env.send("ST", b"replicated")
    assert r.code == ResponseCode.SUCCESS, r.remark
    # acknowledged → on the slave already
    end = master.message_store.commit_log.max_offset
    assert slave.message_store.commit_log.max_offset >= end
    # the slave stops: SLAVE_NOT_AVAILABLE (stored all the same, with its send result header)
    await slave.shutdown()
    await wait_until(lambda: master.message_store.ha.connection_count == 0, 30)
    r = await env.send("ST", b"alone")
    assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
    assert r.ext_fields.get("msgId")
    # a stalled slave: reports once and never again → FLUSH_SLAVE_TIMEOUT after slaveTimeout
    end = master.message_store.commit_log.max_offset
    fake = await asyncio.to_thread(socket.create_connection, ("127.0.0.1", master.message_store.ha.port), 10)
    try:
        fake.sendall(encode_offset_report(end))
        await wait_until(lambda: master.message_store.ha.push2slave_max_offset >= end, 30)
        r = await env.send("ST", b"stalled")
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert r.ext_fields.get("msgId")
    finally:
        fake.close()


async def test_async_master_answers_at_once_without_a_slave(cluster):
    _ns, _master, _slave, env = await cluster("ASYNC_MASTER", slave=False)
    await env.create_topic("AT", 1)
    r = await env.send("AT", b"x")
    assert r.code == ResponseCode.SUCCESS


async def test_ha_listen_port_is_validated(tmp_path):
    from rmq._testing import free_port

    port = free_port()
    with pytest.raises(ValueError, match="haListenPort"):
        async with run_broker(tmp_path / "b", listen_port=port, ha_listen_port=port):
            pass
    # the default: listenPort + 1 (a port pair that was free a moment ago; the machine is shared)
    for attempt in range(5):
        port = _free_pair()
        try:
            async with run_broker(tmp_path / f"c{attempt}", listen_port=port) as broker:
                assert broker.message_store.ha.port == port + 1
                assert broker.ha_server_addr == f"127.0.0.1:{port + 1}"
            return
        except OSError as e:
            print(f"port pair {port}/{port + 1} taken meanwhile ({e}); trying another")
    raise AssertionError("no free port pair in 5 attempts")


def _free_pair() -> int:
    while True:
        a = socket.socket()
        b = socket.socket()
        try:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            if port < 65535:
                try:
                    b.bind(("127.0.0.1", port + 1))
                    return port
                except OSError:
                    pass
        finally:
            a.close()
            b.close()


async def test_master_metrics_show_each_slaves_commitlog_diff(cluster):
    """rocketmq-exporter's rocketmq_broker_commitlog_diff, one series per acknowledging slave,
    served by the master's /metrics; 0 once the slave has caught up."""
    port = free_port()
    _ns, master, _slave, env = await cluster(metrics_port=port)
    await wait_until(lambda: master.message_store.ha.push2slave_max_offset >= 0, 30, what="slave reported")
    await env.create_topic("MT", 1)
    for i in range(20):
        assert (await env.send("MT", b"m%d" % i)).code == ResponseCode.SUCCESS
    end = master.message_store.commit_log.max_offset
    await wait_until(lambda: master.message_store.ha.push2slave_max_offset == end, 30, what="slave acked the end")
    samples = await scrape(port)
    [(labels, diff)] = samples["rocketmq_broker_commitlog_diff"]
    assert labels["broker"] == "b1" and labels["brokerIP"] and diff == 0
