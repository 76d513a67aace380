"""The controller's decisions without I/O (rmq.controller.state, Java ``ReplicasInfoManager`` and
``DefaultElectPolicy``): who may take an id, who is elected, which SyncStateSet changes are
fenced, and the etcd record's JSON."""

import pytest

from rmq.controller import state as st
from rmq.controller.config import ControllerConfig
from rmq.protocol.body.controller import ElectMasterResponseBody, SyncStateSet
from rmq.protocol.codes import ResponseCode
from rmq.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    ElectMasterRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)


def apply(state, bid, addr, code=None):
    req = ApplyBrokerIdRequestHeader(
        cluster_name="C", broker_name="b", applied_broker_id=bid, register_check_code=code or f"{addr};1"
    )
    return st.apply_broker_id(req, state, max_replicas=3)


def three_replicas():
    s = apply(None, 1, "a:1").new_state
    s = apply(s, 2, "a:2").new_state
    return apply(s, 3, "a:3").new_state


def elect(state, bid=-1, alive=lambda n, b: True, info=lambda n, b: None, designate=False, unclean=False):
    req = ElectMasterRequestHeader(cluster_name="C", broker_name="b", broker_id=bid, designate_elect=designate)
    return st.elect_master(req, state, alive, info, unclean=unclean)


def test_apply_broker_id_rules():
    assert apply(None, 2, "a:2").code == ResponseCode.CONTROLLER_BROKER_ID_INVALID  # a new name starts at 1
    s = apply(None, 1, "a:1").new_state
    assert s.next_assign_broker_id == 2 and s.replicas[1].address == "a:1"
    # the same broker again (same check code): accepted, nothing to write
    again = apply(s, 1, "a:1")
    assert again.code == ResponseCode.SUCCESS and again.new_state is None
    # another broker wanting id 1: refused
    assert apply(s, 1, "a:9", "a:9;5").code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    s3 = three_replicas()
    assert apply(s3, 4, "a:4").code == ResponseCode.CONTROLLER_BROKER_ID_INVALID  # max_replicas=3
    d = st.get_next_broker_id("C", "b", s3)
    assert d.header.next_broker_id == 4


def test_first_election_makes_the_asker_master_then_the_policy_decides():
    s = three_replicas()
    d = elect(s, 2)
    assert d.code == ResponseCode.SUCCESS and d.elected
    ns = d.new_state
    assert (ns.master_broker_id, ns.master_epoch, ns.sync_state_set, ns.sync_state_set_epoch) == (2, 1, {2}, 1)
    body = ElectMasterResponseBody.decode(d.body)
    assert body.broker_member_group.broker_addrs == {1: "a:1", 2: "a:2", 3: "a:3"}
    # the master alive: a second election keeps it
    again = elect(ns, 3)
    assert again.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST and again.new_state is None
    assert again.header.master_broker_id == 2


def test_policy_elects_the_best_alive_in_sync_replica():
    s = three_replicas().replace(master_broker_id=1, master_epoch=3, sync_state_set=frozenset({1, 2, 3}))
    infos = {2: st.LiveInfo(epoch=3, max_offset=100), 3: st.LiveInfo(epoch=3, max_offset=200)}
    d = elect(s, alive=lambda n, b: b != 1, info=lambda n, b: infos.get(b))
    assert d.new_state.master_broker_id == 3 and d.new_state.master_epoch == 4
    assert d.new_state.sync_state_set == {3}
    # a higher epoch beats a longer log; then the lower electionPriority
    infos[2] = st.LiveInfo(epoch=4, max_offset=1)
    assert elect(s, alive=lambda n, b: b != 1, info=lambda n, b: infos.get(b)).new_state.master_broker_id == 2
    infos = {2: st.LiveInfo(3, 5, 5, 2), 3: st.LiveInfo(3, 5, 5, 1)}
    assert elect(s, alive=lambda n, b: b != 1, info=lambda n, b: infos.get(b)).new_state.master_broker_id == 3


def test_no_unclean_election_by_default():
    s = three_replicas().replace(master_broker_id=1, master_epoch=2, sync_state_set=frozenset({1}))
    alive = lambda n, b: b == 3  # noqa: E731 - only a replica outside the SyncStateSet lives
    d = elect(s, alive=alive)
    assert d.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert d.new_state.master_broker_id is None and d.new_state.master_epoch == 3  # no stale master handed out
    # a broker asking for itself is refused, not recorded
    assert elect(s, 3, alive=alive).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert elect(s, alive=alive, unclean=True).new_state.master_broker_id == 3


def test_designated_election_by_the_admin():
    s = three_replicas().replace(master_broker_id=1, master_epoch=2, sync_state_set=frozenset({1, 2}))
    assert elect(s, 2, designate=True).new_state.master_broker_id == 2
    assert elect(s, 3, designate=True).code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED  # not in sync


def test_alter_sync_state_set_is_fenced_by_master_and_both_epochs():
    s = three_replicas().replace(
        master_broker_id=1, master_epoch=2, sync_state_set=frozenset({1}), sync_state_set_epoch=5
    )

    def alter(master=1, mepoch=2, members=(1, 2), sepoch=5, alive=lambda n, b: True):
        h = AlterSyncStateSetRequestHeader(broker_name="b", master_broker_id=master, master_epoch=mepoch)
        return st.alter_sync_state_set(h, SyncStateSet(frozenset(members), sepoch), s, alive)

    ok = alter()
    assert ok.code == ResponseCode.SUCCESS and ok.new_state.sync_state_set == {1, 2}
    assert ok.header.new_sync_state_set_epoch == 6 and SyncStateSet.decode(ok.body).sync_state_set_epoch == 6
    assert alter(master=2).code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert alter(mepoch=1).code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert alter(sepoch=4).code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert alter(members=(1, 9)).code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert alter(alive=lambda n, b: b == 1).code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    assert alter(members=(2,)).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # master left out
    assert alter(members=(1,)).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED  # unchanged


def test_register_names_a_live_master_and_records_a_new_address():
    s = three_replicas().replace(master_broker_id=1, master_epoch=2, sync_state_set=frozenset({1}))
    req = RegisterBrokerToControllerRequestHeader(cluster_name="C", broker_name="b", broker_id=2, broker_address="x:2")
    d = st.register_broker(req, s, lambda n, b: True)
    assert d.header.master_address == "a:1" and d.new_state.replicas[2].address == "x:2"
    dead = st.register_broker(req, s, lambda n, b: b != 1)
    assert dead.header.master_broker_id is None  # a dead master is not handed out
    unknown = RegisterBrokerToControllerRequestHeader(cluster_name="C", broker_name="b", broker_id=7, broker_address="")
    assert (
        st.register_broker(unknown, s, lambda n, b: True).code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    )


def test_record_json_round_trip():
    s = three_replicas().replace(master_broker_id=2, master_epoch=7, sync_state_set=frozenset({2, 3}))
    assert st.BrokerSet.from_json(s.to_json()) == s
    with pytest.raises(ValueError):
        st.BrokerSet.from_json(b"[1]")


def test_config_prefix_and_checks():
    from rmq.config import ConfigError, apply_properties, check_config

    c = ControllerConfig()
    apply_properties({"etcd": "http://127.0.0.1:2379", "clusterName": "X"}, c)
    check_config(c)
    assert c.prefix() == "/rmq/controller/X/"
    with pytest.raises(ConfigError, match="etcd"):
        apply_properties({"etcd": "127.0.0.1:2379"}, c)
    with pytest.raises(ConfigError, match="etcdLeaseTtlSeconds"):
        apply_properties({"etcdLeaseTtlSeconds": "1"}, c)


def test_heartbeat_table_liveness_order_and_bound():
    from rmq.controller.manager import HeartbeatTable
    from rmq.protocol.headers.controller import BrokerHeartbeatRequestHeader

    now = [100.0]
    table = HeartbeatTable(max_entries=2, clock=lambda: now[0])

    def beat(bid, epoch=1, offset=0, timeout=None, priority=None, conn=None):
        h = BrokerHeartbeatRequestHeader(
            cluster_name="C",
            broker_addr=f"a:{bid}",
            broker_name="b",
            broker_id=bid,
            epoch=epoch,
            max_offset=offset,
            heartbeat_timeout_mills=timeout,
            election_priority=priority,
        )
        return table.beat(h, conn, 10_000)

    assert beat(1, timeout=1000) and beat(2)
    assert not beat(3)  # the table is full: a third replica is refused
    now[0] += 1.5
    assert not table.alive("b", 1) and table.alive("b", 2)  # its own timeout, then the default
    # an older (epoch, offset) does not replace a newer one; the priority always applies
    assert beat(2, epoch=2, offset=50) and beat(2, epoch=1, offset=99, priority=3)
    info = table.info("b", 2)
    assert (info.epoch, info.max_offset, info.election_priority) == (2, 50, 3)
    assert table.expire() == [("b", 1)] and table.info("b", 1) is None
    marker = object()
    assert beat(4, conn=marker)
    assert table.drop_connection(marker) == [("b", 4)] and not table.alive("b", 4)
    assert table.active_per_name() == {"b": 1}
