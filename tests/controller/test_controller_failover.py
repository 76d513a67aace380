"""``rmq controller`` processes on a real etcd, driven over TCP with the protocol as a broker
drives them (rmq._testing.controller.BrokerReplica: a real server receiving the role notices,
the registration of Java's ``ReplicasManager``, heartbeats to every controller): registration,
election on heartbeat loss, leader failover between controllers, fencing of a deposed leader
(SIGSTOP past its lease), an etcd restart."""

from __future__ import annotations

import json

import pytest

from rmq._testing import wait_until
from rmq._testing.controller import BrokerReplica, ControllerDriver
from rmq.controller.etcd import EtcdClient
from rmq.protocol.codes import ResponseCode
from rmq.protocol.requests import controller as w

pytestmark = pytest.mark.integration  # etcd and controllers as processes


async def replicas(driver, n, name="broker-a"):
    out = [await BrokerReplica(driver, name).start() for _ in range(n)]
    return out


async def replica_info(driver, name="broker-a"):
    return w.parse_replica_info(await driver.invoke(lambda: w.get_replica_info(name)))


async def master_set(driver, first, others):
    """``first`` registers and elects itself; ``others`` register as slaves and join the set."""
    header, sss = await first.register()
    assert header.master_broker_id is None and sss.sync_state_set == frozenset()
    h, body, elected = await first.elect_self()
    assert elected and h.master_broker_id == first.broker_id and h.master_epoch == 1
    assert body.broker_member_group.broker_addrs == {first.broker_id: first.address}
    for r in others:
        header, _ = await r.register()
        assert header.master_broker_id == first.broker_id and header.master_address == first.address
    ids = {first.broker_id, *(r.broker_id for r in others)}
    resp = await driver.invoke(lambda: w.alter_sync_state_set("broker-a", first.broker_id, 1, ids, 1))
    assert w.parse_alter_sync_state_set(resp).sync_state_set == ids


async def test_registration_election_and_sync_state_set(start_controller):
    c = start_controller()
    driver = ControllerDriver([c.addr])
    a, b, x = await replicas(driver, 3)
    try:
        await master_set(driver, a, [b])
        # the third registers but stays out of the SyncStateSet
        await x.register()
        assert (a.broker_id, b.broker_id, x.broker_id) == (1, 2, 3)
        h, sss = await replica_info(driver)
        assert (h.master_broker_id, h.master_address, h.master_epoch) == (1, a.address, 1)
        assert sss.sync_state_set == {1, 2} and sss.sync_state_set_epoch == 2
        data = w.parse_sync_state_data(await driver.invoke(lambda: w.get_sync_state_data(["broker-a", "nope"])))
        info = data.replicas_info_table["broker-a"]
        assert [r.broker_id for r in info.in_sync_replicas] == [1, 2]
        assert [(r.broker_id, r.alive) for r in info.not_in_sync_replicas] == [(3, True)]
        assert "nope" not in data.replicas_info_table
        # fenced: a stale SyncStateSet epoch, a non-master, an old master epoch
        stale = await driver.invoke(lambda: w.alter_sync_state_set("broker-a", 1, 1, {1, 2, 3}, 1))
        assert stale.code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        assert (await driver.invoke(lambda: w.alter_sync_state_set("broker-a", 2, 1, {1, 2, 3}, 2))).code == (
            ResponseCode.CONTROLLER_INVALID_MASTER
        )
        # another broker claiming id 1 is refused; a heartbeat without brokerId too
        resp = await driver.invoke(lambda: w.apply_broker_id("DefaultCluster", "broker-a", 1, "other:1;9"))
        assert resp.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
        hb = a.heartbeat_command()
        del hb.ext_fields["brokerId"]
        hb.flag = 0
        assert (await driver.client.invoke(c.addr, hb)).code == ResponseCode.CONTROLLER_INVALID_REQUEST
    finally:
        for r in (a, b, x):
            await r.close()
        await driver.close()


async def test_election_on_heartbeat_loss_only_among_in_sync_replicas(start_controller):
    c = start_controller()
    driver = ControllerDriver([c.addr])
    a, b, x = await replicas(driver, 3)
    try:
        await master_set(driver, a, [b])
        await x.register()  # alive, not in sync, and with the longest log: never elected
        x.max_offset, b.max_offset = 10_000, 100
        await a.stop_heartbeats()
        h, sss = await wait_until(lambda: _master_is(driver, b.broker_id), timeout=20, what="the in-sync slave elected")
        assert h.master_epoch == 2 and h.master_address == b.address
        assert sss.sync_state_set == {b.broker_id} and sss.sync_state_set_epoch == 3
        # the live replicas were told (NOTIFY_BROKER_ROLE_CHANGED, oneway)
        for r in (b, x):
            notice = await wait_until(lambda r=r: r.notices, timeout=10, what="a role notice")
            assert (notice[-1].master_broker_id, notice[-1].master_epoch, notice[-1].master_address) == (
                b.broker_id,
                2,
                b.address,
            )
        assert [n.master_epoch for n in a.notices] == [1]  # told of its own election; dead at the second
        # the new master dies too, only the out-of-sync replica lives: no unclean election,
        # the master is cleared (and the epoch raised) rather than a dead one handed out
        await b.stop_heartbeats()
        h, _ = await wait_until(lambda: _master_is(driver, None), timeout=20, what="the master cleared")
        assert h.master_epoch == 3
        # b, the last in-sync replica, returns and takes the master back
        b.start_heartbeats()
        _, _, elected = await b.elect_self()
        assert elected
        h, _ = await replica_info(driver)
        assert (h.master_broker_id, h.master_epoch) == (b.broker_id, 4)
    finally:
        for r in (a, b, x):
            await r.close()
        await driver.close()


async def _master_is(driver, broker_id):
    h, sss = await replica_info(driver)
    return (h, sss) if h.master_broker_id == broker_id else None


async def test_leader_failover_between_two_controllers(start_controller):
    c1, c2 = start_controller(), start_controller()
    driver = ControllerDriver([c1.addr, c2.addr])
    a, b = await replicas(driver, 2)
    try:
        leader = await wait_until(driver.find_leader, timeout=20, what="a leader")
        follower, other = (c2, c1) if leader == c1.addr else (c1, c2)
        # the follower (once it has read the leader key) refuses state requests naming the
        # leader, and answers the metadata
        await wait_until(
            lambda: _knows_leader(driver, follower.addr, leader), timeout=20, what="the follower knowing the leader"
        )
        resp = await driver.client.invoke(follower.addr, w.get_replica_info("broker-a"))
        assert resp.code == ResponseCode.CONTROLLER_NOT_LEADER and leader in (resp.remark or "")
        meta = await driver.metadata(follower.addr)
        assert meta.controller_leader_address == leader and not meta.is_leader
        assert {p.split(":", 1)[1] for p in meta.peers.split(";") if p} == {c1.addr, c2.addr}
        await master_set(driver, a, [b])
        other.kill()  # kill -9 the leader
        await wait_until(lambda: _is_leader(driver, follower.addr), timeout=20, what="the follower leading")
        h, sss = await replica_info(driver)
        assert (h.master_broker_id, h.master_epoch, sss.sync_state_set) == (1, 1, {1, 2})
        # the new leader heard the heartbeats all along: it elects when the master dies
        await a.stop_heartbeats()
        h, _ = await wait_until(lambda: _master_is(driver, b.broker_id), timeout=20, what="b elected by the new leader")
        assert h.master_epoch == 2
    finally:
        for r in (a, b):
            await r.close()
        await driver.close()


async def _knows_leader(driver, addr, leader):
    return (await driver.metadata(addr)).controller_leader_address == leader


async def _is_leader(driver, addr):
    try:
        return (await driver.metadata(addr)).is_leader
    except Exception:  # not answering yet
        return False


async def test_a_deposed_leader_is_fenced_and_steps_down(start_controller, etcd):
    c1, c2 = start_controller(), start_controller()
    driver = ControllerDriver([c1.addr, c2.addr])
    a, b = await replicas(driver, 2)
    etcd_client = EtcdClient([etcd.endpoint])
    try:
        leader_addr = await wait_until(driver.find_leader, timeout=20, what="a leader")
        old, new = (c1, c2) if leader_addr == c1.addr else (c2, c1)
        await master_set(driver, a, [b])
        old.pause()  # SIGSTOP: a zombie leader, its sockets open, its lease running out
        try:
            await wait_until(lambda: _is_leader(driver, new.addr), timeout=20, what="the other controller leading")
            await a.stop_heartbeats()
            await wait_until(lambda: _master_is(driver, b.broker_id), timeout=20, what="b elected by the new leader")
        finally:
            old.resume()  # SIGCONT
        # the zombie learns it lost: it answers like a follower and says why in its log
        await wait_until(
            lambda: _knows_leader(driver, old.addr, new.addr), timeout=20, what="the old leader following the new"
        )
        assert not (await driver.metadata(old.addr)).is_leader
        resp = await driver.client.invoke(old.addr, w.elect_master("broker-a", 1, cluster_name="DefaultCluster"))
        assert resp.code == ResponseCode.CONTROLLER_NOT_LEADER and new.addr in (resp.remark or "")
        assert "steps down" in old.run_log()
        # what etcd holds is the new leader's election, untouched by the zombie
        kv = await etcd_client.get("/rmq/controller/DefaultCluster/brokers/broker-a")
        assert kv is not None
        record = json.loads(kv.value)
        assert (record["masterBrokerId"], record["masterEpoch"]) == (b.broker_id, 2)
        leader_kv = await etcd_client.get("/rmq/controller/DefaultCluster/leader")
        assert leader_kv is not None and json.loads(leader_kv.value)["address"] == new.addr
    finally:
        for r in (a, b):
            await r.close()
        await driver.close()
        await etcd_client.close()


async def _not_leader(driver, addr):
    return not (await driver.metadata(addr)).is_leader


async def test_etcd_restart(start_controller, etcd):
    c = start_controller()
    driver = ControllerDriver([c.addr])
    (a,) = await replicas(driver, 1)
    try:
        await a.register()
        await a.elect_self()
        etcd.stop()
        # without etcd the controller cannot stay leader: it steps down and refuses writes
        await wait_until(lambda: _not_leader(driver, c.addr), timeout=20, what="the controller stepping down")
        resp = await driver.client.invoke(c.addr, w.get_replica_info("broker-a"))
        assert resp.code == ResponseCode.CONTROLLER_NOT_LEADER
        etcd.start()
        await wait_until(lambda: _is_leader(driver, c.addr), timeout=30, what="leading again after etcd is back")
        h, sss = await replica_info(driver)
        assert (h.master_broker_id, h.master_epoch, sss.sync_state_set) == (1, 1, {1})
    finally:
        await a.close()
        await driver.close()
