"""The controller's edges: the etcd client against a real etcd (failover between endpoints,
compare-and-swap, leases, watches), the etcd fence of a leader that still believes it leads,
hostile input beside a NoisyNeighbour, the bounds, ``rmq admin``'s controller commands and the
controller's /metrics."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import pytest

from rmq._testing import NoisyNeighbour, free_port, wait_until, wait_until_sync
from rmq._testing.controller import BrokerReplica, ControllerDriver
from rmq.client.admin import Admin
from rmq.controller.config import ControllerConfig
from rmq.controller.etcd import EtcdClient, EtcdUnavailable
from rmq.controller.manager import ControllerManager
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import controller as w
from rmq.remoting.codec import FrameDecoder, encode

pytestmark = pytest.mark.integration  # etcd, controllers


async def test_etcd_client_cas_leases_watch_and_endpoint_failover(etcd):
    dead = f"http://127.0.0.1:{free_port()}"
    async with EtcdClient([dead, etcd.endpoint], timeout=2) as c:
        rev = await c.put("k", "v1")  # the dead endpoint is skipped
        kv = await c.get("k")
        assert kv is not None and kv.value == b"v1" and kv.mod_revision == rev
        # compare-and-swap on mod_revision: the stale writer loses
        ok = await c.txn([c.cmp_mod("k", rev)], [c.op_put("k", "v2")], [c.op_get("k")])
        stale = await c.txn([c.cmp_mod("k", rev)], [c.op_put("k", "v3")], [c.op_get("k")])
        assert ok.succeeded and not stale.succeeded and stale.kvs[0].value == b"v2"
        assert not (await c.put_if_absent("k", "x")).succeeded
        # a key bound to a lease goes with it
        lease, ttl = await c.lease_grant(2)
        assert ttl >= 2 and await c.lease_keepalive(lease) >= 2
        assert (await c.put_if_absent("leased", "me", lease=lease)).succeeded
        leased = await c.get("leased")
        assert leased is not None

        async def first_event():
            # from the revision after the put: the revoke below may come before the watch is
            # set up on a busy machine, and a watch "from now" would then miss its DELETE
            async for ev in c.watch("leased", start_revision=leased.mod_revision + 1):
                return ev

        watcher = asyncio.ensure_future(first_event())
        await c.lease_revoke(lease)
        ev = await asyncio.wait_for(watcher, 10)
        assert ev.type == "DELETE" and ev.kv.key == b"leased"
        assert await c.get("leased") is None and await c.lease_keepalive(lease) == 0
        kvs, _ = await c.get_prefix("")
        assert [kv.key for kv in kvs] == [b"k"]
    async with EtcdClient([dead], timeout=0.5) as c:
        t0 = time.monotonic()
        with pytest.raises(EtcdUnavailable, match="no etcd endpoint answered"):
            await c.get("k")
        assert time.monotonic() - t0 < 5


async def test_a_leader_that_still_believes_it_leads_is_fenced_by_etcd(etcd):
    def config():
        c = ControllerConfig(etcd=etcd.endpoint, listen_port=0)
        c.etcd_lease_ttl_seconds = 2
        c.scan_not_active_broker_interval = 100
        return c

    a = ControllerManager(config())
    await a.start()
    b = None
    driver = None
    try:
        await wait_until(a.is_leader, timeout=20, what="a leading")
        driver = ControllerDriver([a.address])
        (r,) = [await BrokerReplica(driver, "broker-a").start()]
        await r.register()
        await r.elect_self()
        b = ControllerManager(config())
        await b.start()
        # a's lease ends (revoked from outside, as if it had expired): b takes over
        async with EtcdClient([etcd.endpoint]) as admin_etcd:
            await admin_etcd.lease_revoke(a._lease)
        await wait_until(b.is_leader, timeout=20, what="b leading")
        # a, like a process waking from SIGSTOP before its keepalive runs, still believes it
        # leads: its first write is refused by etcd (the leader key is not its campaign's)
        a._leader = True
        a._lease_deadline = time.monotonic() + 60
        a.leader_info = {"id": a.id, "address": a.address}
        resp = await driver.client.invoke(a.address, w.apply_broker_id("DefaultCluster", "broker-a", 2, "x:2;1"))
        assert resp.code == ResponseCode.CONTROLLER_NOT_LEADER, resp
        assert a.stats.fenced_writes == 1 and not a.is_leader()
        assert sorted(b.states["broker-a"].replicas) == [1]  # nothing of a's reached etcd
        async with EtcdClient([etcd.endpoint]) as check:
            kv = await check.get("/rmq/controller/DefaultCluster/brokers/broker-a")
        assert kv is not None and list(json.loads(kv.value)["replicas"]) == ["1"]
        await r.close()
    finally:
        if driver is not None:
            await driver.close()
        for m in (a, b):
            if m is not None:
                await m.shutdown()


def _frame(code: int, ext: dict[str, str], body: bytes | None = None) -> bytes:
    return b"".join(bytes(p) for p in encode(RemotingCommand.request(code, ext, body)))


def _answers(sock: socket.socket, n: int) -> list[RemotingCommand]:
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < n:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:  # closed by the server: no answer
            break
        if not chunk:
            break
        dec.feed(chunk)
        out.extend(dec)
    return out


HOSTILE = [
    # (code, extFields, body): every one answered, none changes anything
    (
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {"clusterName": "C", "brokerName": "b", "appliedBrokerId": "x", "registerCheckCode": "a"},
        None,
    ),
    (
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {"clusterName": "C", "brokerName": "b" * 5000, "appliedBrokerId": "1", "registerCheckCode": "a"},
        None,
    ),
    (
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {"clusterName": "C", "brokerName": "b\n", "appliedBrokerId": "1", "registerCheckCode": "a"},
        None,
    ),
    (
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {"clusterName": "C", "brokerName": "b", "appliedBrokerId": "1", "registerCheckCode": "a" * 5000},
        None,
    ),
    (RequestCode.CONTROLLER_ELECT_MASTER, {"brokerName": "b", "brokerId": str(1 << 70)}, None),
    (
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
        b"not json",
    ),
    (
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": "1"},
        json.dumps({"syncStateSet": list(range(100)), "syncStateSetEpoch": 1}).encode(),
    ),
    (RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {}, json.dumps([f"n{i}" for i in range(5000)]).encode()),
    (RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, {}, b'{"a": 1}'),
    (
        RequestCode.BROKER_HEARTBEAT,
        {"clusterName": "C", "brokerAddr": "x", "brokerName": "b", "brokerId": "1", "epoch": "99999999999"},
        None,
    ),
    (RequestCode.CLEAN_BROKER_DATA, {"brokerName": "nope", "brokerControllerIdsToClean": "1;x"}, None),
    (RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"etcd=http://evil:1"),
    (99999, {"junk": "x" * 1000}, b"\x00" * 100),
]


async def test_hostile_requests_beside_a_noisy_neighbour(start_controller):
    c = start_controller(maxBrokerNames=2)
    driver = ControllerDriver([c.addr])
    # the bound on broker names: a third name is refused, the two first stay
    for name in ("n1", "n2"):
        r = await driver.invoke(lambda name=name: w.apply_broker_id("C", name, 1, "a:1;1"))
        assert r.code == ResponseCode.SUCCESS
    r = await driver.invoke(lambda: w.apply_broker_id("C", "n3", 1, "a:1;1"))
    assert r.code == ResponseCode.CONTROLLER_INVALID_REQUEST and "maxBrokerNames" in (r.remark or "")
    await driver.close()

    def hostile_client() -> list[int]:
        codes = []
        with socket.create_connection(("127.0.0.1", c.port), timeout=10) as s:
            for _ in range(20):
                s.sendall(b"".join(_frame(code, ext, body) for code, ext, body in HOSTILE))
                got = _answers(s, len(HOSTILE))
                assert len(got) == len(HOSTILE)
                codes.extend(a.code for a in got)
            # the connection still serves
            s.sendall(_frame(RequestCode.CONTROLLER_GET_METADATA_INFO, {}))
            (meta,) = _answers(s, 1)
            assert meta.code == ResponseCode.SUCCESS
        return codes

    with NoisyNeighbour(c.addr, code=RequestCode.CONTROLLER_GET_METADATA_INFO, ext_fields={}) as probe:
        codes = await asyncio.to_thread(hostile_client)
    assert set(codes) <= {
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
        ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ResponseCode.CONTROLLER_INVALID_REQUEST,
        ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
        ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
    }, set(codes)
    assert ResponseCode.SYSTEM_ERROR in codes
    assert probe.failures == 0 and probe.worst < 2.0, probe.summary()
    # nothing hostile reached the state: the same two names
    driver = ControllerDriver([c.addr])
    data = w.parse_sync_state_data(await driver.invoke(lambda: w.get_sync_state_data(["n1", "n2"])))
    assert sorted(data.replicas_info_table) == ["n1", "n2"]
    data = w.parse_sync_state_data(await driver.invoke(lambda: w.get_sync_state_data(["b", "n3"])))
    assert data.replicas_info_table == {}
    # a frame over maxFrameBytes closes that connection only
    with socket.create_connection(("127.0.0.1", c.port), timeout=10) as s:
        s.sendall(struct.pack(">I", 8 << 20) + b"\x00" * 64)
        assert _answers(s, 1) == []
    assert (await driver.metadata(c.addr)).is_leader
    await driver.close()


def _admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmq", "admin", *args, "-n", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


async def test_admin_commands_and_metrics(start_controller):
    metrics_port = free_port()
    c1 = start_controller(metricsPort=metrics_port)
    c2 = start_controller()
    driver = ControllerDriver([c1.addr, c2.addr])
    a, b = [await BrokerReplica(driver, "broker-a").start() for _ in range(2)]
    try:
        await wait_until(lambda: driver.find_leader(), timeout=20, what="a leader")
        await a.register()
        await a.elect_self()
        await b.register()
        await driver.invoke(lambda: w.alter_sync_state_set("broker-a", 1, 1, {1, 2}, 1))
        both = f"{c2.addr};{c1.addr}"  # any controller of the group will do
        r = await asyncio.to_thread(_admin, "getControllerMetaData", "-a", c2.addr)
        assert r.returncode == 0, r.stderr
        assert "#ControllerLeaderAddress\t" in r.stdout and r.stdout.count("#Peer:\t") == 2
        r = await asyncio.to_thread(_admin, "getSyncStateSet", "-a", both, "-b", "broker-a")
        assert r.returncode == 0, r.stderr
        assert "#MasterBrokerId\t1" in r.stdout and "#SyncStateSetNums\t2" in r.stdout
        ident = f"ReplicaIdentity{{brokerName='broker-a', brokerId=2, brokerAddress='{b.address}', alive=true}}"
        assert f"InSyncReplica:\t{ident}" in r.stdout
        r = await asyncio.to_thread(
            _admin, "electMaster", "-a", both, "-b", "2", "-bn", "broker-a", "-c", "DefaultCluster"
        )
        assert r.returncode == 0, r.stderr
        assert f"#BrokerMasterAddr\t{b.address}" in r.stdout and "#MasterEpoch\t2" in r.stdout
        assert f"\t#Broker\t2\t{b.address}" in r.stdout
        # a replica that is not in sync cannot be made master
        r = await asyncio.to_thread(
            _admin, "electMaster", "-a", both, "-b", "7", "-bn", "broker-a", "-c", "DefaultCluster"
        )
        assert r.returncode == 1 and "2012" in r.stderr
        # GET_BROKER_EPOCH_CACHE (the broker's answer, here the test replica's)
        await wait_until(lambda: [n for n in a.notices if n.master_epoch == 2], timeout=10, what="a told")
        async with Admin("127.0.0.1:1") as admin:
            cache = await admin.get_broker_epoch_cache(a.address)
        assert cache.broker_name == "broker-a" and [e.epoch for e in cache.epoch_list] == [1, 2]

        # metrics of the controller on metricsPort (whichever leads, both report their role)
        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as resp:
                return resp.read().decode()

        text = await asyncio.to_thread(wait_until_sync, scrape, 20)
        assert f'rocketmq_controller_role{{address="{c1.addr}"}}' in text
        if (await driver.metadata(c1.addr)).is_leader:
            assert 'rocketmq_controller_master_epoch{broker_set="broker-a",cluster="DefaultCluster"} 2.0' in text
            assert 'rocketmq_controller_sync_state_set_size{broker_set="broker-a",cluster="DefaultCluster"} 1.0' in text
            assert 'election_result="new_master_elected"' in text
        assert "rocketmq_controller_request_total" in text
    finally:
        for r_ in (a, b):
            await r_.close()
        await driver.close()


PLAIN_ACL = """globalWhiteRemoteAddresses:
accounts:
  - accessKey: ctladmin01
    secretKey: ctladmin-secret
    admin: true
  - accessKey: justauser
    secretKey: user-secret-1
    admin: false
"""


async def test_acl_guards_the_writing_codes_and_leaves_reads_open(tmp_path, start_controller):
    from rmq.remoting.acl import AclClientRPCHook, SessionCredentials
    from rmq.remoting.client import RemotingClient

    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    c = start_controller(aclEnable="true", rocketmqHome=str(home))

    async def call(creds, make):
        client = RemotingClient()
        if creds is not None:
            client.add_rpc_hook(AclClientRPCHook(creds))
        try:
            return await client.invoke(c.addr, make(), timeout=10)
        finally:
            await client.close()

    driver = ControllerDriver([c.addr])
    await wait_until(driver.find_leader, timeout=20, what="a leader")
    await driver.close()
    apply = lambda: w.apply_broker_id("C", "b", 1, "a:1;1")  # noqa: E731
    resp = await call(None, apply)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "AclException" in (resp.remark or "")
    resp = await call(SessionCredentials("justauser", "user-secret-1"), apply)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "Need admin permission" in (resp.remark or "")
    # reads open; the admin account writes
    assert (await call(None, lambda: w.get_replica_info("b"))).code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST
    assert (await call(SessionCredentials("ctladmin01", "ctladmin-secret"), apply)).code == ResponseCode.SUCCESS
    assert (await call(None, lambda: w.get_replica_info("b"))).code == ResponseCode.SUCCESS


def test_bad_configuration_stops_start_up_naming_the_property(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "rmq", "controller", *args], capture_output=True, text=True, timeout=60
        )

    r = run("--listen-port", "0")
    assert r.returncode == 2 and "bad value for etcd" in r.stderr and "no etcd endpoint given" in r.stderr
    r = run("--etcd", "http://127.0.0.1:1", "--etcdLeaseTtlSeconds=1")
    assert r.returncode == 2 and "etcdLeaseTtlSeconds" in r.stderr
    r = run("--etcd", "127.0.0.1:2379")
    assert r.returncode == 2 and "etcd" in r.stderr and "http://host:port" in r.stderr
    r = run("--etcd", "http://127.0.0.1:1", "--aclEnable=true", "--listen-port", "0")
    assert r.returncode == 2 and "rocketmqHome" in r.stderr


async def test_tls_on_the_controller_port(tmp_path, start_controller):
    from tls_support import make_pki

    from rmq.remoting.client import RemotingClient

    pki = make_pki(str(tmp_path / "pki"))
    c = start_controller(**pki.server_props("enforcing"))
    tls_client = RemotingClient(tls=pki.client_context())
    try:
        meta = await wait_until(
            lambda: _metadata_over(tls_client, c.addr), timeout=20, what="a TLS answer naming the leader"
        )
        assert meta.is_leader and meta.controller_leader_address == c.addr
    finally:
        await tls_client.close()
    # plain TCP to an enforcing port gets nothing
    with socket.create_connection(("127.0.0.1", c.port), timeout=10) as s:
        s.sendall(_frame(RequestCode.CONTROLLER_GET_METADATA_INFO, {}))
        assert _answers(s, 1) == []


async def _metadata_over(client, addr):
    meta = w.parse_controller_metadata(await client.invoke(addr, w.get_controller_metadata(), timeout=10))
    return meta if meta.is_leader else None
