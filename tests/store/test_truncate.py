"""MessageStore.truncate_files (controller mode's log truncation, Java
DefaultMessageStore.truncateFiles): the CommitLog, ConsumeQueues, index, queue offsets, epoch
file and checkpoint cut back together, in place and across a kill -9 in the middle."""

import os
import signal
import subprocess
import sys

import pytest
from test_recovery import CRASH_CFG, verify_store

from rmq.store import MessageInner
from rmq.store.message_store import TRUNCATE_MARKER

HERE = os.path.dirname(__file__)


def _body(i: int) -> bytes:
    return f"m{i}:".encode() + bytes([i % 251]) * (300 + 37 * (i % 11))


async def _fill(store, n, start=0):
    acked = []
    for i in range(start, start + n):
        topic, qid = f"T{i % 2}", i % 3
        r = await store.put_message(MessageInner(topic, qid, _body(i), properties={"TAGS": "a", "KEYS": f"k{i}"}))
        assert r.is_ok
        a = r.append
        acked.append((a.wrote_offset, a.wrote_bytes, topic, qid, a.logics_offset, i))
    store.do_reput()
    return acked


def _verify(store, acked):
    # verify_store's tuples: (phy, size, topic, qid, qoff, seed, seq); bodies are ours here
    for phy, _size, topic, qid, qoff, i in acked:
        m = store.look_message_by_offset(phy)
        assert m is not None and m.body == _body(i) and (m.topic, m.queue_id, m.queue_offset) == (topic, qid, qoff)
    verify_store(store, [])


def _expect_after_cut(store, acked, cut):
    kept = [a for a in acked if a[0] < cut]
    gone = [a for a in acked if a[0] >= cut]
    assert store.max_phy_offset == cut
    _verify(store, kept)
    for topic in ("T0", "T1"):
        for qid in range(3):
            n = sum(1 for a in kept if a[2] == topic and a[3] == qid)
            assert store.get_max_offset_in_queue(topic, qid) == n
            assert store.commit_log.topic_queue_table.get((topic, qid), 0) == n
    for a in gone[:5]:
        assert store.look_message_by_offset(a[0]) is None
        assert store.query_message(a[2], f"k{a[5]}", 10, 0, 1 << 62).buffers == []
    for a in kept[-3:]:
        assert len(store.query_message(a[2], f"k{a[5]}", 10, 0, 1 << 62).buffers) == 1
    return kept


async def _writes_continue(store, kept, cut):
    """After the cut the store, made a master again, writes at ``cut`` with the next queue
    offsets, and indexes the new records."""
    store.config.broker_role = "ASYNC_MASTER"
    more = await _fill(store, 30, start=1000)
    assert more[0][0] == cut
    for phy, _size, topic, qid, qoff, i in more:
        assert qoff == sum(1 for a in kept + more if a[2] == topic and a[3] == qid and a[0] < phy)
        res = store.query_message(topic, f"k{i}", 10, 0, 1 << 62)
        assert len(res.buffers) == 1
    return kept + more


async def test_truncate_in_place_then_write_and_restart(make_store, tmp_path):
    root = tmp_path / "s"
    store = await make_store(root=root, **CRASH_CFG)
    acked = await _fill(store, 200)
    store.epochs.append(1, 0)
    cut = acked[120][0]
    store.epochs.append(2, acked[100][0])
    store.epochs.append(3, acked[150][0])  # starts past the cut: dropped with it
    with pytest.raises(Exception, match="SLAVE"):
        await store.truncate_files(cut)  # a store that takes writes is never cut
    store.config.broker_role = "SLAVE"
    assert not await store.truncate_files(cut + 1)  # inside a record: refused, nothing cut
    assert store.max_phy_offset == acked[-1][0] + acked[-1][1]
    assert await store.truncate_files(cut)
    assert not os.path.exists(root / TRUNCATE_MARKER)
    assert [e.epoch for e in store.epochs.entries] == [1, 2]
    kept = _expect_after_cut(store, acked, cut)
    everything = await _writes_continue(store, kept, cut)
    await store.shutdown()
    store = await make_store(root=root, **CRASH_CFG)
    assert store.recovery_report["mode"] == "clean"
    _verify(store, everything)
    assert [e.epoch for e in store.epochs.entries] == [1, 2]


@pytest.mark.integration  # a child process killed with SIGKILL
@pytest.mark.parametrize("point", ["marker", "cut"])
async def test_kill_9_in_the_middle_of_a_truncation(make_store, tmp_path, point):
    root = tmp_path / "s"
    store = await make_store(root=root, **CRASH_CFG)
    acked = await _fill(store, 200)
    store.epochs.append(1, 0)
    store.epochs.append(2, acked[150][0])
    await store.run_blocking(store.epochs.save)
    await store.shutdown()
    cut = acked[90][0]
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "truncate_child.py"), str(root), str(cut), point],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == f"at {point}".encode(), proc.stderr.read().decode()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    assert os.path.exists(root / TRUNCATE_MARKER)
    store = await make_store(root=root, broker_role="SLAVE", **CRASH_CFG)
    assert store.recovery_report["mode"] == "crash"
    assert not os.path.exists(root / TRUNCATE_MARKER)
    assert [e.epoch for e in store.epochs.entries] == [1]
    kept = _expect_after_cut(store, acked, cut)
    everything = await _writes_continue(store, kept, cut)
    await store.shutdown()
    store = await make_store(root=root, **CRASH_CFG)
    _verify(store, everything)


async def test_truncate_across_index_files(make_store, tmp_path):
    """The index rolls every 49 keys here: the cut deletes the files past it and cuts the one
    holding it, and the records written again are indexed."""
    store = await make_store(root=tmp_path / "s", max_index_num=50, **CRASH_CFG)
    acked = await _fill(store, 200)
    assert len(store.index.files) >= 4
    store.config.broker_role = "SLAVE"
    cut = acked[70][0]
    assert await store.truncate_files(cut)
    assert all(f.end_phy_offset < cut for f in store.index.files)
    kept = _expect_after_cut(store, acked, cut)
    for a in kept[::9]:
        assert len(store.query_message(a[2], f"k{a[5]}", 10, 0, 1 << 62).buffers) == 1
    await _writes_continue(store, kept, cut)
