"""The Jepsen checker's verdicts on made-up histories and reads (rmq._testing.jepsen.check), and
the fault schedule's shape: pure functions, no daemon."""

import random

from rmq._testing.jepsen import (
    FaultEvent,
    Op,
    QueueRead,
    Read,
    check,
    failover_faults,
    make_schedule,
    percentile,
    static_faults,
)


def _op(producer, seq, q, off, *, status="SEND_OK", start=None, addr="10.0.0.11:10911", broker="broker-a"):
    t = float(start if start is not None else seq)
    return Op(
        f"p{producer}",
        seq,
        b"p%d-%d" % (producer, seq),
        t,
        t + 0.01,
        status,
        broker,
        q,
        off,
        addr,
        1000 * seq,
    )


def _read(entries, *, broker_id=0, addr="10.0.0.11:10911", min_offset=0, broker="broker-a"):
    """``entries``: {queue: {offset: body}}."""
    return Read(
        broker,
        broker_id,
        addr,
        {q: QueueRead(min_offset, max(e, default=-1) + 1, dict(e)) for q, e in entries.items()},
    )


def _history():
    return [_op(0, 0, 0, 0), _op(1, 0, 0, 1), _op(0, 1, 1, 0), _op(1, 1, 0, 2)]


def _entries(history):
    out: dict = {}
    for op in history:
        out.setdefault(op.queue_id, {})[op.queue_offset] = op.payload
    return out


def test_a_clean_run_is_ok_and_says_so():
    h = _history()
    r = check(h, [_read(_entries(h)), _read(_entries(h), broker_id=1, addr="10.0.0.12:10911")], seed=7)
    assert r.ok, str(r)
    assert r.acked == r.readable == 4
    text = str(r)
    assert "seed 7" in text and text.endswith("RESULT: OK")
    assert r.masters_per_epoch == {("broker-a", 0): {"10.0.0.11:10911"}}


def test_an_acknowledged_message_missing_from_the_master_is_lost():
    h = _history()
    entries = _entries(h)
    del entries[0][2]
    r = check(h, [_read(entries)])
    assert not r.ok
    assert [op.seq for op in r.lost] == [1] and r.lost[0].producer == "p1"
    assert "1 acknowledged message(s) lost" in str(r)


def test_a_slave_alone_holding_it_does_not_count():
    """Acknowledged messages are checked on the master (broker id 0); a slave's copy does not
    make up for the master's."""
    h = _history()
    entries = _entries(h)
    r = check(h, [_read({0: {0: entries[0][0]}}), _read(entries, broker_id=1)])
    assert len(r.lost) == 3 and not r.replica_missing


def test_a_settled_slave_missing_an_acknowledged_message_fails():
    h = _history()
    slave = _entries(h)
    del slave[1][0]
    r = check(h, [_read(_entries(h)), _read(slave, broker_id=1, addr="10.0.0.12:10911")])
    assert r.replica_missing == {"broker-a id 1 10.0.0.12:10911": 1} and not r.lost
    assert not r.ok and "missing on a replica" in str(r)


def test_another_message_at_its_offset_is_lost_and_a_conflict_across_reads():
    h = _history()
    master = _entries(h)
    master[0][1] = b"something else"
    r = check(h, [_read(master), _read(_entries(h), broker_id=1, addr="10.0.0.12:10911")])
    assert [(op.producer, op.seq) for op in r.lost] == [("p1", 0)]
    assert r.conflicts == [("broker-a", 0, 1, sorted([b"p1-0", b"something else"]))]
    assert "CONFLICT broker-a q0@1" in str(r)


def test_found_at_another_offset_is_misplaced():
    h = _history()
    entries = _entries(h)
    entries[0][5] = entries[0].pop(2)
    r = check(h, [_read(entries)])
    assert [(op.seq, at) for op, at in r.misplaced] == [(1, 5)] and not r.lost
    assert not r.ok


def test_below_the_queue_minimum_is_retention_not_loss():
    h = _history()
    entries = _entries(h)
    del entries[0][0]
    r = check(h, [_read(entries, min_offset=1)])
    assert [op.seq for op in r.aged_out] == [0] and not r.lost
    assert r.ok


def test_a_producer_acknowledged_out_of_its_send_order_is_reported():
    h = [_op(0, 0, 0, 3), _op(0, 1, 0, 2)]
    r = check(h, [_read(_entries(h))])
    assert [(a.seq, b.seq) for a, b in r.order_violations] == [(0, 1)]
    assert not r.ok


def test_unacknowledged_outcomes_are_allowed_either_way():
    """A send that failed or was not replicated may or may not be stored; a payload stored
    twice (a retry) is allowed too."""
    h = _history() + [
        _op(2, 0, 1, 1, status="error:RemotingTimeoutError"),
        _op(2, 1, 1, 2, status="SLAVE_NOT_AVAILABLE"),
    ]
    entries = _entries(h[:4])
    entries[1][1] = h[4].payload
    entries[1][3] = h[4].payload  # stored again by the SDK's retry
    r = check(h, [_read(entries)])
    assert r.ok, str(r)
    assert r.unacked_stored == 1 and r.duplicates == 1
    assert r.statuses == {"SEND_OK": 4, "error": 1, "SLAVE_NOT_AVAILABLE": 1}


def test_two_writers_in_one_epoch_are_split_brain_but_not_in_two():
    h = _history()
    h[3].store_addr = "10.0.0.12:10911"
    reads = [_read(_entries(h))]
    r = check(h, reads)
    assert r.split_brain == {("broker-a", 0): {"10.0.0.11:10911", "10.0.0.12:10911"}}
    assert "two masters in one epoch" in str(r) and not r.ok
    epochs = check(h, reads, epoch_of=lambda op: 2 if op.store_addr == "10.0.0.12:10911" else 1)
    assert epochs.ok and not epochs.split_brain


def test_no_master_read_fails_the_check():
    h = _history()
    r = check(h, [_read(_entries(h), broker_id=1)])
    assert r.unread_masters == ["broker-a"] and not r.ok


def test_recovery_is_the_first_acknowledged_send_begun_after_a_master_fault():
    h = [_op(0, 0, 0, 0, start=1.0), _op(0, 1, 0, 1, start=5.0), _op(1, 0, 1, 0, start=4.0)]
    h[2].end = 4.5
    events = [FaultEvent(1, "master kill", injected_at=2.0, master_death=True), FaultEvent(2, "slave kill")]
    events[0].healed_at = 4.5
    r = check(h, [_read(_entries(h))], events=events)
    assert r.recoveries == [2.5]
    assert "p50 2.50 s" in str(r)
    assert events[0].during == {"SEND_OK": 1}  # begun at 4.0, within [2.0, 4.5)
    assert "sends begun meanwhile: SEND_OK 1" in str(r)


def test_percentile_by_nearest_rank():
    assert percentile([], 50) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert percentile([1.0, 9.0], 99) == 9.0


def test_the_schedule_covers_every_kind_before_repeating_and_replays_by_seed():
    faults = static_faults()
    names = [f.name for f in make_schedule(faults, 12, random.Random(5))]
    kinds = {f.name for f in faults}
    assert set(names[:5]) == kinds and set(names[5:10]) == kinds and len(names) == 12
    assert names == [f.name for f in make_schedule(static_faults(), 12, random.Random(5))]
    assert any([f.name for f in make_schedule(faults, 5, random.Random(s))] != names[:5] for s in range(6, 20)), (
        "the seed does not change the order"
    )


def test_the_failover_schedule_says_what_each_fault_needs_and_waits_for():
    """Master deaths wait for writes to come back (the failover) and count for the recovery
    figure; the others let a number of sends be answered, whatever their outcome."""
    faults = {f.name: f for f in failover_faults()}
    assert len(faults) == 6
    deaths = {n for n, f in faults.items() if f.master_death}
    assert deaths == {"master kill -9", "master SIGSTOP/SIGCONT (zombie)"}
    waits = deaths | {"master partitioned from the controllers"}  # writes come back by an election
    assert {n for n, f in faults.items() if f.during == "acks"} == waits
    assert {n for n, f in faults.items() if "netns" in f.needs} == {
        "master partitioned from the controllers",
        "slave partitioned from the master",
    }
    assert "disk" in faults["master disk full"].needs
    assert faults["master partitioned from the controllers"].effective is not None  # until another is elected
    static = {f.name: f for f in static_faults()}
    assert {n for n, f in static.items() if f.master_death} == {"master clean restart"}
    assert all(f.during == "ops" for f in static.values())


def test_a_master_cut_off_from_the_controllers_counts_as_noticed_only_when_they_acted():
    """Another master elected, or (Java ReplicasInfoManager.electMaster with no in-sync replica
    alive) the master cleared when the SyncStateSet held only the old master; a cleared master
    with another in-sync replica is not yet the end state (that replica elects itself)."""
    from rmq._testing.jepsen import master_gone_from_controllers
    from rmq.protocol.body.controller import SyncStateSet
    from rmq.protocol.headers.controller import GetReplicaInfoResponseHeader as H

    old = ("10.0.0.14:10911", 1, 5)

    def info(addr, mid, epoch, sss):
        return H(master_broker_id=mid, master_address=addr, master_epoch=epoch), SyncStateSet(frozenset(sss), 9)

    assert master_gone_from_controllers(info("10.0.0.15:10911", 2, 6, {2}), *old)
    assert master_gone_from_controllers(info(None, None, 6, {1}), *old)
    assert not master_gone_from_controllers(info(None, None, 6, {1, 2}), *old)
    assert not master_gone_from_controllers(info("10.0.0.14:10911", 1, 5, {1}), *old)
    assert not master_gone_from_controllers(info(None, None, 5, {1}), *old)  # (an older record)
    assert not master_gone_from_controllers(None, *old)
