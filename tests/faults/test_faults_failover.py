"""The Jepsen checker against controller mode (etcd, two ``rmq controller`` processes, two
controller-mode brokers, each in its own network namespace): every failover fault once, in a
seeded random order (printed; RMQ_JEPSEN_SEED replays it). The long form is
``bench/jepsen_bench.py --rounds N``."""

import logging
import time
from functools import partial

import pytest

import rmq.client.instance as client_instance
from rmq._testing import skip_or_fail, wait_until
from rmq._testing.etcd import etcd_missing
from rmq._testing.faults import Network, netns_unavailable, small_disk_unavailable
from rmq._testing.jepsen import ControllerGroup, Workload, check, failover_faults, read_topic, run_rounds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@pytest.fixture(autouse=True)
def _quiet_sdk(caplog):
    # the producers log every failed send (rate-limited); the report says what matters
    caplog.set_level(logging.ERROR, logger="rmq")


async def test_failover_loses_nothing_acknowledged_and_never_has_two_masters_in_one_epoch(tmp_path, monkeypatch):
    """Master kill -9, zombie master, master cut off from the controllers, controller leader
    kill -9, slave cut off from the master, master disk full: every SEND_OK message is on the
    final master at its offset, the replicas agree offset by offset, each producer's messages
    stand in its order, each epoch had one writing master, and writes came back after each
    master death."""
    for reason in (etcd_missing(), netns_unavailable(), small_disk_unavailable()):
        if reason is not None:
            skip_or_fail(f"the failover faults cannot run here: {reason}")
    # the producers re-read routes every second (default 30 s), so a round's recovery is the
    # group's, not the SDK's poll period
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)
    lines: list[str] = []
    faults = failover_faults()
    with Network.create() as net:
        async with ControllerGroup(tmp_path, net, disk_size=48 << 20) as group:
            report = await run_rounds(group, faults, rounds=len(faults), out=lines.append)
    text = "\n".join(lines)
    print(text)
    assert report.ok, text
    assert sorted(e.name for e in report.events) == sorted(f.name for f in faults)
    assert report.readable == report.acked > 0
    assert not report.aged_out, "retention deleted acknowledged messages (DISK_GUARD should keep them)"
    assert len(report.recoveries) == 2, text  # kill -9 and zombie: writes came back after both
    epochs = sorted(epoch for _, epoch in report.masters_per_epoch)
    assert len(epochs) >= 3 and -1 not in epochs, text  # the first master and at least two elections
    assert {r.broker_id for r in report.reads} >= {0} and all(r.error is None for r in report.reads)
    master = next(r for r in report.reads if r.broker_id == 0)
    assert all(r.queues == master.queues for r in report.reads), "a replica's queues differ from the master's"


async def test_no_write_is_acknowledged_while_the_only_in_sync_slave_is_cut_off(tmp_path, monkeypatch):
    """allAckInSyncStateSet, two brokers: the master cut off from the controllers (the slave is
    elected, the old master rejoins as its slave), then the slave cut off from the master, twice
    over, so the second time the master is one that was master before. While the slave is cut
    off (its connection silent, not closed) it stays in the SyncStateSet for
    haMaxTimeSlaveNotCatchup (15 s), so every send is answered FLUSH_SLAVE_TIMEOUT, none SEND_OK.
    A round lasts 3 answered sends (one slaveTimeout of 3 s for 3 producers), well inside 15 s."""
    for reason in (etcd_missing(), netns_unavailable(), small_disk_unavailable()):
        if reason is not None:
            skip_or_fail(f"the failover faults cannot run here: {reason}")
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)
    lines: list[str] = []
    by_name = {f.name: f for f in failover_faults()}
    cut_off = "slave partitioned from the master"
    faults = [by_name["master partitioned from the controllers"], by_name[cut_off]]
    with Network.create() as net:
        async with ControllerGroup(tmp_path, net, disk_size=48 << 20) as group:
            report = await run_rounds(group, faults, rounds=4, out=lines.append, shuffle=False, ops_per_round=(3, 3))
    text = "\n".join(lines)
    print(text)
    assert report.ok, text
    rounds = [e for e in report.events if e.name == cut_off]
    assert len(rounds) == 2, text
    for e in rounds:
        assert e.during.get("FLUSH_SLAVE_TIMEOUT", 0) >= 1, text
        assert e.acked_in_force == 0, text


async def test_a_master_cut_off_from_the_controllers_with_no_in_sync_slave_stays_master(tmp_path, monkeypatch):
    """The master cut off from the controllers while its slave is out of the SyncStateSet (cut
    off from the master until the master took it out): the controllers find no in-sync replica
    alive and elect nobody (Java ReplicasInfoManager.electMaster without
    enableElectUncleanMaster clears the master and raises the epoch), the out-of-sync slave is
    not made master, and the old master, the SyncStateSet alone, keeps acknowledging writes. The
    fault counts as noticed in that state; once healed, the old master elects itself again and
    nothing acknowledged is lost."""
    if (reason := etcd_missing() or netns_unavailable()) is not None:
        skip_or_fail(f"the failover faults cannot run here: {reason}")
    monkeypatch.setattr(client_instance, "POLL_NAMESRV_INTERVAL", 1.0)
    fault = next(f for f in failover_faults() if f.name == "master partitioned from the controllers")
    assert fault.effective is not None
    with Network.create() as net:
        # a slave silent for 3 s leaves the SyncStateSet (default 15 s)
        async with ControllerGroup(tmp_path, net, haMaxTimeSlaveNotCatchup=3000) as group:
            wl = Workload(group.namesrv_addr, group.topic, producers=2)
            await wl.start()
            try:
                await wl.wait_acks(2, 0.0, 120)
                await group.refresh()
                master, slave = group.master(), group.slaves()[0]
                info = await group.replica_info()
                assert info is not None
                master_id = info[0].master_broker_id

                async def only_master_in_sync() -> bool:
                    i = await group.replica_info()
                    return i is not None and i[1].sync_state_set == {master_id}

                net.partition(group.node_of(master), group.node_of(slave))
                await wait_until(only_master_in_sync, 120, 0.1, "the master taking its silent slave out")
                await fault.inject(group)
                await wait_until(partial(fault.effective, group), 120, 0.1, "the controllers to act on the master")
                info = await group.replica_info()
                assert info is not None
                header, sss = info
                assert not header.master_address and header.master_broker_id is None, header
                assert sss.sync_state_set == {master_id}
                assert (await group.runtime(slave)).get("brokerRole") == "SLAVE"
                t = time.monotonic()
                await wl.wait_acks(3, t, 120, "writes acknowledged by the master cut off from the controllers")
                assert {op.store_addr for op in wl.history if op.acked and op.start >= t} == {master.addr}
                await fault.heal(group)
                net.heal(group.node_of(master), group.node_of(slave))
                await wait_until(group.whole, 120, 0.1, "the group whole again")
                assert group.master() is master
                t = time.monotonic()
                await wl.wait_acks(3, t, 120, "writes acknowledged after the heal")
            finally:
                net.heal_all()
                await wl.stop()
            await group.settle()
            report = check(wl.history, await read_topic(group.namesrv_addr, group.topic), epoch_of=group.epoch_of)
    assert report.ok, str(report)
    assert report.readable == report.acked > 0
