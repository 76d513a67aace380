"""The Jepsen checker against a static SYNC_MASTER + slave pair (``rmq broker`` processes), with
the faults that need no election: slave kill -9 + restart, slave SIGSTOP/SIGCONT, slave
partitioned from the master and rejoining, master clean restart, master disk full. And the
checker finding a loss planted behind its back."""

import logging
from pathlib import Path

import pytest

from rmq._testing import skip_or_fail, wait_until
from rmq._testing.faults import Network, kill9, netns_unavailable, small_disk_unavailable
from rmq._testing.jepsen import StaticPair, Workload, check, read_topic, run_rounds, static_faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(autouse=True)
def _quiet_sdk(caplog):
    # the producers log every failed send (rate-limited); the report says what matters
    caplog.set_level(logging.ERROR, logger="rmq")


def _following(pair: StaticPair):
    async def ok() -> bool:
        info = await pair.runtime(pair.master())
        return int(info.get("haConnectionCount", "0")) >= 1

    return ok


async def test_no_acknowledged_message_lost_through_every_fault_without_an_election(tmp_path):
    """Each static fault once, in a seeded random order (the seed is printed; RMQ_JEPSEN_SEED
    replays it): every SEND_OK message is on the master at its offset, master and slave agree
    offset by offset, each producer's messages stand in its order, one master acknowledged."""
    for reason in (netns_unavailable(), small_disk_unavailable()):
        if reason is not None:
            skip_or_fail(f"the partition and disk faults cannot run here: {reason}")
    lines: list[str] = []
    with Network.create() as net:
        async with StaticPair(tmp_path, net, disk_size=48 << 20) as pair:
            report = await run_rounds(pair, static_faults(), rounds=5, out=lines.append)
    text = "\n".join(lines)
    print(text)
    assert report.ok, text
    assert [e.name for e in report.events] and {e.name for e in report.events} == {f.name for f in static_faults()}
    assert report.readable == report.acked > 0
    assert not report.aged_out, "retention deleted acknowledged messages (DISK_GUARD should keep them)"
    # the faults had their effect: sends were refused or answered without the slave's ack
    assert set(report.statuses) - {"SEND_OK"}, report.statuses
    assert {r.broker_id for r in report.reads} == {0, 1} and all(r.error is None for r in report.reads)
    assert report.reads[0].queues == report.reads[1].queues, "the slave's queues differ from the master's"
    assert report.recoveries and len(report.recoveries) == 1  # the master's restart


def _zero_tail(store: Path, cut: int) -> None:
    """Zeros over the CommitLog from offset ``cut`` on: after a crash, recovery ends the log
    there and cuts the ConsumeQueues back to it."""
    for f in sorted((store / "commitlog").iterdir()):
        start, size = int(f.name), f.stat().st_size
        if start + size > cut:
            with open(f, "r+b") as fh:
                at = max(0, cut - start)
                fh.seek(at)
                fh.write(b"\0" * (size - at))


async def test_the_checker_reports_a_loss_planted_behind_its_back(tmp_path):
    """Both stores are cut back to the middle of what was acknowledged while the brokers are
    down (kill -9, so recovery walks the log), and new messages then take the freed offsets:
    the checker names exactly the acknowledged messages past the cut as lost, and sees the
    offsets that held one message before and another after."""
    with Network.create(isolated=False) as net:
        async with StaticPair(tmp_path, net, queues=2) as pair:
            first = Workload(pair.namesrv_addr, pair.topic, name="a")
            await first.start()
            await first.wait_acks(30, 0.0)
            await first.stop()
            await pair.settle()
            before = await read_topic(pair.namesrv_addr, pair.topic)
            acked = sorted((op for op in first.history if op.acked), key=lambda op: op.phy_offset or 0)
            cut = acked[len(acked) // 2].phy_offset
            assert cut is not None
            master, slave = pair.master(), pair.slaves()[0]
            kill9(slave)
            kill9(master)
            _zero_tail(master.dir / "store", cut)
            _zero_tail(slave.dir / "store", cut)
            await master.astart()
            await slave.astart()
            await wait_until(_following(pair), 60, 0.1, "the slave following again")
            second = Workload(pair.namesrv_addr, pair.topic, name="b")
            await second.start()
            await second.wait_acks(30, 0.0)
            await second.stop()
            await pair.settle()
            after = await read_topic(pair.namesrv_addr, pair.topic)
    history = first.history + second.history
    report = check(history, after)
    expected = {(op.producer, op.seq) for op in acked if (op.phy_offset or 0) >= cut}
    assert expected and {(op.producer, op.seq) for op in report.lost} == expected, str(report)
    assert not report.ok and "acknowledged message(s) lost" in str(report)
    assert report.readable == report.acked - len(expected)
    both = check(history, before + after)
    assert both.conflicts, "offsets rewritten after the cut were not seen holding two messages"
    assert all(len(bodies) == 2 for _, _, _, bodies in both.conflicts)
    assert "offset(s) holding two different messages" in str(both)


async def test_the_workload_records_what_the_broker_answered(tmp_path):
    """Each acknowledged send's queue, offset and writer come from the broker's answer: the
    writer is the master's address and the offsets of a queue are 0, 1, 2, ... without gaps."""
    with Network.create(isolated=False) as net:
        async with StaticPair(tmp_path, net, queues=2) as pair:
            wl = Workload(pair.namesrv_addr, pair.topic, producers=2)
            await wl.start()
            await wl.wait_acks(20, 0.0)
            await wl.stop()
            master_addr = pair.master().addr
            # a failed wait's account names what clients are told: the route, master at id 0
            state = await pair.describe()
            assert f"name server {pair.namesrv_addr}: route of {pair.topic}: brokers " in state, state
            assert f"0: '{master_addr}'" in state and " w2 perm 6" in state, state
    answered = [op for op in wl.history if op.queue_offset is not None]  # SEND_OK or stored unreplicated
    assert len([op for op in answered if op.acked]) >= 20
    assert {op.store_addr for op in answered} == {master_addr}
    for q in (0, 1):
        offsets = sorted(op.queue_offset for op in answered if op.queue_id == q)
        assert offsets == list(range(len(offsets)))
    assert all(op.end >= op.start for op in wl.history if op.status != "pending")
