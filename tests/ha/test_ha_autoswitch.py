"""Controller mode between real MessageStores on loopback (docs/design.md "Controller mode"):
runtime role changes, the epoch handshake and truncation to the last common epoch, the
SyncStateSet and the SYNC_MASTER acknowledgement it governs."""

import pytest
from test_ha_store import HOST, commitlog_bytes, config

from rmq._testing import loop_turn, wait_until
from rmq.store import MessageInner, MessageStore, PutMessageStatus
from rmq.store.ha.epoch import EpochEntry


async def _store(tmp_path, name, broker_id, **kw) -> MessageStore:
    s = MessageStore(config(tmp_path / name, **kw), HOST)
    s.ha_listen_host = "127.0.0.1"
    s.controller_mode = True
    s.broker_id = broker_id
    await s.start()
    return s


def _msg(i: int) -> MessageInner:
    return MessageInner(f"T{i % 2}", i % 4, f"body-{i}-".encode() * 20, properties={"KEYS": f"k{i}"})


async def _put_all(store, start, n):
    out = []
    for i in range(start, start + n):
        r = await store.put_message(_msg(i))
        out.append(r)
    return out


@pytest.fixture
async def pair(tmp_path):
    opened: list[MessageStore] = []

    async def make(name, broker_id, **kw):
        s = await _store(tmp_path, name, broker_id, **kw)
        opened.append(s)
        return s

    yield make
    for s in reversed(opened):
        await s.shutdown()


async def test_sync_state_set_governs_sync_master_acks(pair):
    a = await pair("a", 1, broker_role="SLAVE", all_ack_in_sync_state_set=True, min_in_sync_replicas=2)
    assert await a.change_to_master(1, "SYNC_MASTER")
    changes: list[frozenset[int]] = []  # what the master proposes to a controller that has not answered
    a.ha.on_sync_state_set_changed = changes.append
    # Alone in its SyncStateSet, below minInSyncReplicas=2: refused, nothing stored.
    end = a.max_phy_offset
    r = await a.put_message(_msg(0))
    assert r.status == PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH and "minInSyncReplicas=2" in r.remark
    assert a.max_phy_offset == end
    a.config.min_in_sync_replicas = 1
    # Alone and allowed: acknowledged without waiting for anyone.
    assert all(r.status == PutMessageStatus.PUT_OK for r in await _put_all(a, 0, 20))
    b = await pair("b", 2, broker_role="SLAVE", ha_master_address=f"127.0.0.1:{a.ha.port}")
    await wait_until(lambda: 2 in a.ha.sync_state_set, what="the slave to join the SyncStateSet")
    assert changes[-1] == frozenset({1, 2})
    assert b.epochs.entries == [EpochEntry(1, 0)]  # adopted from the master at the handshake
    # Now every put waits for b's ack: after each one, b has it.
    for r in await _put_all(a, 20, 10):
        assert r.status == PutMessageStatus.PUT_OK
        assert b.max_phy_offset >= r.append.wrote_offset + r.append.wrote_bytes
    # b stops reading (a stuck slave: still connected, its heartbeats repeat an old offset):
    # puts time out; after haMaxTimeSlaveNotCatchup the master proposes the set without b, but
    # keeps waiting for b until the controller agrees (it could still elect b).
    a.config.slave_timeout = 300
    a.config.ha_max_time_slave_not_catchup = 500
    b.ha_client._proto.transport.pause_reading()
    r = await a.put_message(_msg(99))
    assert r.status == PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    await wait_until(lambda: changes[-1] == frozenset({1}), what="the stuck slave proposed out of the set")
    assert a.ha.sync_state_set == {1, 2}
    r = await a.put_message(_msg(100))
    assert r.status == PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    # consumers do not see what b does not have (the confirm offset bounds dispatch)
    await loop_turn()
    assert a.reput_from_offset == a.ha.confirm_offset < a.max_phy_offset
    assert a.get_max_offset_in_queue("T0", 0) == r.append.logics_offset  # message 100 not visible
    a.ha.set_sync_state_set(frozenset({1}))  # the controller's answer
    await wait_until(lambda: a.get_max_offset_in_queue("T0", 0) > r.append.logics_offset, what="dispatch")
    r = await a.put_message(_msg(101))
    assert r.status == PutMessageStatus.PUT_OK
    # reading again, it catches up and joins again
    b.ha_client._proto.transport.resume_reading()
    await wait_until(lambda: a.ha.sync_state_set == {1, 2}, what="the slave to join again")
    # a disconnected member is proposed out at once (Java AutoSwitchHAService.removeConnection)
    await b.ha_client.stop()
    await wait_until(lambda: changes[-1] == frozenset({1}), what="the disconnected slave proposed out")
    # without a controller (no listener) the master decides alone
    a.ha.on_sync_state_set_changed = None
    a.ha.maybe_shrink()
    assert a.ha.sync_state_set == {1}


async def test_failover_and_the_old_master_rejoins_after_truncating(pair):
    a = await pair("a", 1, broker_role="SLAVE")
    assert await a.change_to_master(1, "ASYNC_MASTER")
    b = await pair("b", 2, broker_role="SLAVE", ha_master_address=f"127.0.0.1:{a.ha.port}")
    await _put_all(a, 0, 200)
    await wait_until(lambda: b.max_phy_offset == a.max_phy_offset, what="b to catch up")
    common = a.max_phy_offset
    # b is elected (epoch 2) while a, cut off from the controller, still writes (a zombie).
    await b.ha_client.stop()
    zombie = await _put_all(a, 200, 40)
    assert all(r.is_ok for r in zombie)
    assert await b.change_to_master(2, "ASYNC_MASTER")
    assert b.epochs.entries == [EpochEntry(1, 0), EpochEntry(2, common)]
    after = await _put_all(b, 500, 30)
    assert after[0].append.wrote_offset == common
    # b's queues continue from where replication left them
    q0 = after[0]  # message 500: T0, queue 0
    assert q0.append.logics_offset == 50  # T0/queue 0 held messages 0, 4, ..., 196 (50 of them)
    # a learns the new epoch: it stops writing and follows b, cutting its zombie records.
    assert not await a.change_to_slave(f"127.0.0.1:{b.ha.port}", 0)  # an older epoch is refused
    assert await a.change_to_slave(f"127.0.0.1:{b.ha.port}", 2)
    r = await a.put_message(_msg(999))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    await _put_all(b, 530, 30)
    await wait_until(lambda: a.max_phy_offset == b.max_phy_offset, what="a to follow b")
    assert a.epochs.entries == [EpochEntry(1, 0), EpochEntry(2, common)]
    assert commitlog_bytes(a, 0, a.max_phy_offset) == commitlog_bytes(b, 0, b.max_phy_offset)
    await wait_until(lambda: a.reput_from_offset == a.max_phy_offset, what="a's dispatch")
    # the zombie records are gone from a: their offsets hold b's records, their keys nothing
    assert a.look_message_by_offset(zombie[0].append.wrote_offset).body == _msg(500).body
    for i in range(200, 240, 7):
        assert a.query_message(f"T{i % 2}", f"k{i}", 10, 0, 1 << 62).buffers == []
    assert len(a.query_message("T0", "k500", 10, 0, 1 << 62).buffers) == 1
    for topic in ("T0", "T1"):
        for qid in range(4):
            assert a.get_max_offset_in_queue(topic, qid) == b.get_max_offset_in_queue(topic, qid)
    # and a becomes master again later (epoch 3), b follows it without cutting anything
    assert await b.change_to_slave(None, 3)
    assert await a.change_to_master(3, "ASYNC_MASTER")
    b.update_ha_master_address(f"127.0.0.1:{a.ha.port}")
    more = await _put_all(a, 600, 10)
    assert more[0].append.wrote_offset == b.max_phy_offset
    await wait_until(lambda: b.max_phy_offset == a.max_phy_offset, what="b to follow a")
    assert [e.epoch for e in b.epochs.entries] == [1, 2, 3]


async def test_a_slave_without_common_epoch_stops(pair):
    a = await pair("a", 1, broker_role="SLAVE")
    assert await a.change_to_master(5, "ASYNC_MASTER")
    await _put_all(a, 0, 5)
    c = await pair("c", 3, broker_role="SLAVE")
    assert await c.change_to_master(4, "ASYNC_MASTER")
    await _put_all(c, 0, 5)
    assert await c.change_to_slave(f"127.0.0.1:{a.ha.port}", 5)
    await wait_until(lambda: c.ha_client.diverged, what="c to see the divergence")
    assert "no epoch in common" in c.ha_client.diverged
    assert c.max_phy_offset > 0  # its data is kept for an operator to look at


async def test_a_former_masters_service_proposes_nothing_in_a_later_term(pair):
    # A master of epoch 1 steps down and is elected again (epoch 3): the HA service of its first
    # term, shut down, must not go on proposing its old SyncStateSet without the slave (it has no
    # connection left) to the controller, which would take the in-sync slave out of the new term's
    # set and let a put be acknowledged while the slave is cut off.
    proposals: list[frozenset[int]] = []
    a = await pair("a", 1, broker_role="SLAVE", all_ack_in_sync_state_set=True, ha_max_time_slave_not_catchup=60_000)

    def controller(proposed: frozenset[int]) -> None:
        # a controller that agrees to everything, applied to the store's live service (what the
        # broker's ReplicasManager does with the answer)
        proposals.append(proposed)
        if a.ha is not None:
            a.ha.set_sync_state_set(proposed)

    assert await a.change_to_master(1, "SYNC_MASTER")
    a.ha.on_sync_state_set_changed = controller
    b = await pair("b", 2, broker_role="SLAVE", ha_master_address=f"127.0.0.1:{a.ha.port}")
    await wait_until(lambda: a.ha.sync_state_set == {1, 2}, what="b to join the SyncStateSet")
    first = a.ha
    assert await a.change_to_slave(None, 2)
    assert first.sync_state_set == {1, 2}
    # the old service's shrink check (its loop, or the broker's periodic one) proposes nothing
    first.maybe_shrink()
    assert frozenset({1}) not in proposals
    assert await b.change_to_slave(None, 3)
    assert await a.change_to_master(3, "SYNC_MASTER")
    a.ha.on_sync_state_set_changed = controller
    b.update_ha_master_address(f"127.0.0.1:{a.ha.port}")
    await wait_until(lambda: a.ha.sync_state_set == {1, 2}, what="b to join the new term's SyncStateSet")
    assert all(r.status == PutMessageStatus.PUT_OK for r in await _put_all(a, 0, 5))
    # b is cut off (stops reading: still connected, never acknowledging): every put waits for it
    # and times out; nothing proposes it out before haMaxTimeSlaveNotCatchup (60 s).
    a.config.slave_timeout = 1500
    b.ha_client._proto.transport.pause_reading()
    for r in await _put_all(a, 5, 2):
        assert r.status == PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    first.maybe_shrink()
    assert a.ha.sync_state_set == {1, 2}
    assert frozenset({1}) not in proposals
    b.ha_client._proto.transport.resume_reading()


async def test_a_slave_serves_only_what_every_in_sync_replica_has(pair):
    # Java 5 AutoSwitchHAClient / ReputMessageService.getReputEndOffset: a slave dispatches no
    # further than the master's confirm offset (the lowest ack of the SyncStateSet), carried in
    # every transfer header. A record one in-sync replica lacks is in b's CommitLog but not in
    # its queues; when that replica becomes master, b truncates the record: no consumer of b
    # ever read it. The master's heartbeat interval is a minute: every confirm offset below
    # arrives because it moved (the master's writer sends it at once), not by a heartbeat.
    slow = dict(ha_housekeeping_interval=120_000)
    a = await pair("a", 1, broker_role="SLAVE", ha_send_heartbeat_interval=60_000, **slow)
    assert await a.change_to_master(1, "ASYNC_MASTER")
    master = f"127.0.0.1:{a.ha.port}"
    b = await pair("b", 2, broker_role="SLAVE", ha_master_address=master, **slow)
    c = await pair("c", 3, broker_role="SLAVE", ha_master_address=master, **slow)
    # d reads uncommitted (Java readUnCommitted): it shows what b must not
    d = await pair("d", 4, broker_role="SLAVE", ha_master_address=master, read_uncommitted=True, **slow)
    await wait_until(lambda: a.ha.sync_state_set == {1, 2, 3, 4}, what="the slaves to join the SyncStateSet")
    first = await _put_all(a, 0, 40)
    end = a.max_phy_offset
    for name, s in (("b", b), ("c", c), ("d", d)):
        await wait_until(lambda s=s: s.reput_from_offset == end, what=f"{name} to dispatch everything")
    assert b.ha_client.confirm_offset == end
    assert b.runtime_info()["haConfirmOffset"] == str(end)
    assert b.get_max_offset_in_queue("T0", 0) == 10 == a.get_max_offset_in_queue("T0", 0)
    # c stops reading: connected, acknowledging nothing more
    c.ha_client._proto.transport.pause_reading()
    unconfirmed = await _put_all(a, 40, 8)
    assert all(r.status == PutMessageStatus.PUT_OK for r in unconfirmed)  # ASYNC_MASTER: no wait
    await wait_until(lambda: b.max_phy_offset == a.max_phy_offset, what="b to receive the new records")
    await wait_until(lambda: d.reput_from_offset == a.max_phy_offset, what="d to dispatch uncommitted records")
    await loop_turn()  # (b's dispatch run after its last append)
    assert a.ha.confirm_offset == end  # c's ack
    assert b.ha_client.confirm_offset == end
    assert b.reput_from_offset == end < b.max_phy_offset
    assert b.get_max_offset_in_queue("T0", 0) == 10  # message 40 (T0, queue 0) is not served by b
    assert d.get_max_offset_in_queue("T0", 0) == 12  # ... but is by d (messages 40 and 44)
    r = b.get_message("g", "T0", 0, 10, 32)
    r.release()
    assert r.status.name == "OFFSET_OVERFLOW_ONE"
    # a dies; c (in the SyncStateSet, without the 8 records) is elected; b follows c.
    await a.shutdown()
    await d.shutdown()
    assert await c.change_to_master(2, "ASYNC_MASTER")
    assert c.max_phy_offset == end
    assert await b.change_to_slave(f"127.0.0.1:{c.ha.port}", 2)
    after = await _put_all(c, 100, 8)
    await wait_until(lambda: b.reput_from_offset == c.max_phy_offset, what="b to follow c and dispatch")
    assert b.epochs.entries == [EpochEntry(1, 0), EpochEntry(2, end)]
    assert b.get_max_offset_in_queue("T0", 0) == 12
    # queue offset 10 of T0/0 was message 40 on a (and d); on b it is, and always was, message 100
    r = b.get_message("g", "T0", 0, 10, 1)
    r.release()
    assert r.status.name == "FOUND"
    assert b.look_message_by_offset(after[0].append.wrote_offset).body == _msg(100).body
    assert first[-1].append.wrote_offset < end


async def test_a_restarted_slave_still_waits_for_the_confirm_offset(pair):
    # What a controller-mode replica holds past its queues may be what no other in-sync replica
    # has: its recovery does not dispatch it; the master's confirm offset does, once it covers it.
    a = await pair("a", 1, broker_role="SLAVE")
    assert await a.change_to_master(1, "ASYNC_MASTER")
    master = f"127.0.0.1:{a.ha.port}"
    b = await pair("b", 2, broker_role="SLAVE", ha_master_address=master)
    c = await pair("c", 3, broker_role="SLAVE", ha_master_address=master)
    await wait_until(lambda: a.ha.sync_state_set == {1, 2, 3}, what="the slaves to join the SyncStateSet")
    await _put_all(a, 0, 20)
    end = a.max_phy_offset
    await wait_until(lambda: b.reput_from_offset == end and c.reput_from_offset == end, what="dispatch")
    c.ha_client._proto.transport.pause_reading()
    await _put_all(a, 20, 8)
    await wait_until(lambda: b.max_phy_offset == a.max_phy_offset, what="b to receive the new records")
    await b.shutdown()
    await b.start()  # (its HA client follows a again: the confirm offset is still c's ack)
    assert b.max_phy_offset == a.max_phy_offset
    assert b.reput_from_offset == end
    await wait_until(lambda: b.ha_client.connected, what="b to follow a again")
    await loop_turn()
    assert b.reput_from_offset == end and b.get_max_offset_in_queue("T0", 0) == 5
    c.ha_client._proto.transport.resume_reading()
    await wait_until(lambda: b.reput_from_offset == a.max_phy_offset, what="b to dispatch once c has it all")
    assert b.get_max_offset_in_queue("T0", 0) == 7  # messages 20 and 24
