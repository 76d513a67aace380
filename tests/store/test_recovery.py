"""Recovery (SPEC S5): clean restarts, SIGKILL at random moments, corrupt tails."""

import logging
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from crash_writer import body_for

from rmq import _store
from rmq._testing import wait_until_sync
from rmq.store import GetMessageStatus, MessageInner

HERE = os.path.dirname(__file__)
CRASH_CFG = dict(mapped_file_size_commitlog=32 * 1024, mapped_file_size_consume_queue=20 * 64)


async def test_clean_restart_is_fast_and_keeps_everything(make_store, tmp_path):
    root = tmp_path / "s"
    store = await make_store(root=root)
    rs = [
        await store.put_message(MessageInner(f"T{i % 3}", i % 2, os.urandom(500), properties={"TAGS": "a"}))
        for i in range(300)
    ]
    store.do_reput()
    maxes = {(t, q): store.get_max_offset_in_queue(t, q) for t in ("T0", "T1", "T2") for q in (0, 1)}
    end = store.max_phy_offset
    await store.shutdown()
    assert not os.path.exists(root / "abort")
    store = await make_store(root=root)
    assert store.recovery_report["mode"] == "clean" and store.max_phy_offset == end
    assert {k: store.get_max_offset_in_queue(*k) for k in maxes} == maxes
    r = await store.put_message(MessageInner("T0", 0, b"next"))
    assert r.append.wrote_offset == end and r.append.logics_offset == maxes[("T0", 0)]
    for a in (x.append for x in rs[-5:]):
        assert store.look_message_by_offset(a.wrote_offset).msg_id == a.msg_id


def verify_store(store, acked):
    """Every acked record present and intact; ConsumeQueues agree with the CommitLog; every
    pulled record passes its CRC."""
    for phy, size, topic, qid, qoff, seed, seq in acked:
        m = store.look_message_by_offset(phy)
        assert m is not None, f"acknowledged record at {phy} lost"
        assert (m.topic, m.queue_id, m.queue_offset, m.store_size) == (topic, qid, qoff, size)
        assert m.body == body_for(seed, seq)
        unit = store.find_consume_queue(topic, qid, create=False).get_unit(qoff)
        assert unit[:2] == (phy, size)
    for topic, queues in store.consume_queue_table.items():
        for qid, cq in queues.items():
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            assert store.commit_log.topic_queue_table.get((topic, qid), 0) == hi
            prev_end = -1
            for i in range(lo, hi):
                phy, size, tags = cq.get_unit(i)
                assert phy >= prev_end
                prev_end = phy + size
                m = store.look_message_by_offset(phy, size)
                assert m is not None and (m.topic, m.queue_id, m.queue_offset) == (topic, qid, i)
                assert tags == _store.java_hash_code(m.tags)
            offset = lo
            while offset < hi:
                res = store.get_message("G", topic, qid, offset, 32)
                assert res.status == GetMessageStatus.FOUND
                for rec in res.iter_records():
                    _store.decode_record(rec, 0, True)  # raises on a bad CRC
                offset = res.next_begin_offset
                res.release()


def read_acks(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 7:
                continue  # the line being written at the kill
            phy, size, topic, qid, qoff, seed, seq = parts
            out.append((int(phy), int(size), topic, int(qid), int(qoff), int(seed), int(seq)))
    return out


def run_writer_and_kill(root, ack, seed, delay, mode="sync"):
    args = [sys.executable, os.path.join(HERE, "crash_writer.py"), str(root), str(ack), str(seed)]
    if mode == "async":
        args.append("async")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        assert line.strip() == b"ready", proc.stderr.read().decode()
        time.sleep(delay)  # the behaviour under test: a SIGKILL at a random moment of the writes
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.integration  # a child process
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_sigkill_at_random_moments(make_store, tmp_path, mode):
    root, ack = tmp_path / "s", tmp_path / "acks"
    rng = random.Random(7 if mode == "sync" else 8)
    rounds = 14 if mode == "sync" else 6
    for rnd in range(rounds):
        run_writer_and_kill(root, ack, rnd, rng.uniform(0.02, 0.35), mode)
        acked = read_acks(ack)
        store = await make_store(root=root, **CRASH_CFG)
        assert store.recovery_report["mode"] == "crash"
        verify_store(store, acked)
        if rnd % 3 == 2:
            # Sometimes crash right after a clean restart, sometimes after a crash restart.
            await store.shutdown()
        else:
            await store.shutdown()
            with open(root / "abort", "wb"):
                pass  # as if this run had crashed too
    assert len(read_acks(ack)) > 100


async def _write_then_crash(tmp_path, n=40):
    """A writer killed after its SYNC acks: returns (root, acked)."""
    root, ack = tmp_path / "s", tmp_path / "acks"
    args = [sys.executable, os.path.join(HERE, "crash_writer.py"), str(root), str(ack), "99"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        wait_until_sync(lambda: len(read_acks(ack)) >= n, what=f"{n} acknowledged writes")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()
    return root, read_acks(ack)


def _last_record(root):
    """(path, position, size, phy) of the last record in the CommitLog."""
    cdir = root / "commitlog"
    names = sorted(os.listdir(cdir))
    best = None
    for name in names:
        data = (cdir / name).read_bytes()
        recs, _, _, _ = _store.scan_records(data, 0, len(data), int(name))
        if recs:
            phy, size = recs[-1][0], recs[-1][1]
            best = (cdir / name, phy - int(name), size, phy)
    return best


@pytest.mark.integration  # a child process
@pytest.mark.parametrize("where", ["body", "magic", "size"])
async def test_flipped_bytes_in_the_last_record_are_truncated_and_logged(make_store, tmp_path, caplog, where):
    root, acked = await _write_then_crash(tmp_path)
    path, pos, size, phy = _last_record(root)
    at = {"body": pos + size - 5 - 30 if size > 200 else pos + 90, "magic": pos + 5, "size": pos + 1}[where]
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))
    caplog.set_level(logging.WARNING, logger="rmq.store")
    store = await make_store(root=root, **CRASH_CFG)
    rep = store.recovery_report
    assert rep["mode"] == "crash" and rep["end"] == phy and rep["truncated_bytes"] >= size
    assert f"at offset {phy}; truncating" in caplog.text
    assert store.max_phy_offset == phy
    assert store.look_message_by_offset(phy) is None
    verify_store(store, [a for a in acked if a[0] < phy])
    # The store keeps working, and the cut record never comes back.
    r = await store.put_message(MessageInner("T0", 0, b"after"))
    assert r.append.wrote_offset == phy
    await store.shutdown()
    store = await make_store(root=root, **CRASH_CFG)
    assert store.look_message_by_offset(phy).body == b"after"


async def test_torn_tail_without_checkpoint(make_store, tmp_path, caplog):
    """A half-written record at the end (no checkpoint at all): cut at its start."""
    root = tmp_path / "s"
    store = await make_store(root=root, **CRASH_CFG)
    rs = [await store.put_message(MessageInner("T", 0, os.urandom(700))) for _ in range(30)]
    end = store.max_phy_offset
    await store.shutdown()
    # Simulate a crash while appending: abort marker back, no checkpoint, a torn record.
    os.unlink(root / "checkpoint")
    open(root / "abort", "wb").close()
    last = rs[-1].append
    path = root / "commitlog" / f"{last.wrote_offset - last.wrote_offset % (32 * 1024):020d}"
    with open(path, "r+b") as f:
        f.seek(last.wrote_offset % (32 * 1024) + last.wrote_bytes - 100)
        f.write(b"\x00" * 100)  # the tail never reached the file
    caplog.set_level(logging.WARNING, logger="rmq.store")
    store = await make_store(root=root, **CRASH_CFG)
    assert store.max_phy_offset == last.wrote_offset < end
    assert store.get_max_offset_in_queue("T", 0) == 29
    assert "truncating" in caplog.text


async def test_interrupted_file_creation_is_repaired(make_store, tmp_path, caplog):
    """SIGKILL between creating the next file and sizing it leaves a short last file."""
    root = tmp_path / "s"
    store = await make_store(root=root, **CRASH_CFG)
    for _ in range(10):
        await store.put_message(MessageInner("T", 0, os.urandom(700)))
    end = store.max_phy_offset
    await store.shutdown()
    open(root / "abort", "wb").close()
    (root / "commitlog" / f"{32 * 1024:020d}").write_bytes(b"")
    store = await make_store(root=root, **CRASH_CFG)
    assert "file creation was interrupted" in caplog.text
    assert store.max_phy_offset == end and store.get_max_offset_in_queue("T", 0) == 10
    assert (await store.put_message(MessageInner("T", 0, b"x"))).is_ok


async def test_the_same_object_restarts(make_store):
    store = await make_store()
    r = await store.put_message(MessageInner("T", 0, b"one"))
    await store.shutdown()
    await store.start()
    assert store.recovery_report["mode"] == "clean"
    assert store.look_message_by_offset(r.append.wrote_offset).body == b"one"
    assert (await store.put_message(MessageInner("T", 0, b"two"))).append.logics_offset == 1
    store.do_reput()
    res = store.get_message("G", "T", 0, 0, 32)
    assert res.message_count == 2
    res.release()


@pytest.mark.integration  # a child process
async def test_power_loss_lost_abort_marker_and_older_checkpoint(make_store, tmp_path, caplog):
    """After a power cut the abort marker (created after the last clean stop) can be gone and
    the checkpoint older than SYNC_FLUSH-acknowledged records. The start then looks clean, and
    must still keep every acknowledged record: records past the checkpoint are validated, not
    dropped."""
    root, ack = tmp_path / "s", tmp_path / "acks"
    store = await make_store(root=root, flush_disk_type="SYNC_FLUSH", **CRASH_CFG)
    for i in range(20):
        assert (await store.put_message(MessageInner("T0", 0, b"before the clean stop %d" % i))).is_ok
    await store.shutdown()
    old_checkpoint = (root / "checkpoint").read_bytes()  # the clean stop's checkpoint
    clean_end = store.max_phy_offset

    run_writer_and_kill(root, ack, 5, 0.4)  # SYNC_FLUSH writer, acks after fsync
    acked = read_acks(ack)
    assert acked and max(a[0] for a in acked) > clean_end
    # The power cut: the writer's abort marker and its newer checkpoints never reached the disk.
    os.unlink(root / "abort")
    (root / "checkpoint").write_bytes(old_checkpoint)

    caplog.set_level(logging.WARNING, "rmq.store")
    store = await make_store(root=root, **CRASH_CFG)
    assert store.recovery_report["mode"] == "clean"
    assert store.max_phy_offset >= max(a[0] + a[1] for a in acked)
    verify_store(store, acked)
    assert "the checkpoint ends at" in caplog.text
    for i in range(20):
        res = store.get_message("G", "T0", 0, i, 1)
        assert res.status == GetMessageStatus.FOUND
        res.release()


async def test_checkpoint_is_java_store_checkpoint_page(make_store, tmp_path):
    """The checkpoint is Java 4.9.8's StoreCheckpoint page (physicMsgTimestamp,
    logicsMsgTimestamp, indexMsgTimestamp as big-endian longs at 0, 8, 16 of 4096 bytes), so a
    Java broker's crash recovery on this store starts at the right CommitLog file; our offsets
    follow at 24. Java rewriting the first 24 bytes leaves them readable; a page without them
    (Java's own) and rmq's earlier msgpack-only file still load."""
    import struct

    import msgpack

    root = tmp_path / "s"
    store = await make_store(root=root, mapped_file_size_commitlog=32 * 1024)
    before = int(time.time() * 1000)
    for i in range(200):  # several 32 KiB files
        assert (await store.put_message(MessageInner("J", i % 2, os.urandom(400), properties={"KEYS": f"k{i}"}))).is_ok
    end = store.max_phy_offset
    last_file_start = store.commit_log.mfq.files[-1].file_from_offset
    first_of_last = store.look_message_by_offset(last_file_start).store_timestamp
    await store.shutdown()
    page = (root / "checkpoint").read_bytes()
    assert len(page) == 4096
    physic_ts, logics_ts, index_ts = struct.unpack_from(">qqq", page, 0)
    # the first record of the file holding the flushed end: no newer than any record past it
    assert physic_ts == logics_ts == first_of_last >= before
    assert index_ts >= before
    # Java's StoreCheckpoint.flush rewrites the 24 bytes only: our offsets stay readable
    (root / "checkpoint").write_bytes(struct.pack(">qqq", 1, 2, 3) + page[24:])
    store = await make_store(root=root, mapped_file_size_commitlog=32 * 1024)
    assert store.recovery_report["mode"] == "clean" and store.recovery_report["scanned_from"] == end
    await store.shutdown()
    # rmq's earlier layout: the file is one msgpack map
    cp = store.checkpoint.read()
    (root / "checkpoint").write_bytes(msgpack.packb(cp))
    assert store.checkpoint.read() == cp
    # Java's own page (no map): read as no checkpoint, the CommitLog validated from its start
    (root / "checkpoint").write_bytes(page[:24] + bytes(4096 - 24))
    assert store.checkpoint.read() == {}
    store = await make_store(root=root, mapped_file_size_commitlog=32 * 1024)
    assert store.recovery_report["scanned_from"] == 0 and store.max_phy_offset == end
    await store.shutdown()


async def test_crash_recovery_does_not_reindex_records_without_keys(make_store, tmp_path, caplog):
    """Records without keys add no index entry, so the index's endPhyOffset stays at the last
    keyed record; after a crash the rebuild starts at the checkpoint's ``index_dispatched``
    (every record below went through the index build) instead of walking every keyless record
    since, which on a large store was a walk as long as the store."""
    root = tmp_path / "s"
    forever = 1 << 62
    store = await make_store(root=root, **CRASH_CFG)
    for i in range(5):
        assert (await store.put_message(MessageInner("K", 0, b"keyed", properties={"KEYS": f"k{i}"}))).is_ok
    for _ in range(200):  # several CommitLog files of records without keys
        assert (await store.put_message(MessageInner("K", 1, os.urandom(700)))).is_ok
    store.do_reput()
    end = store.max_phy_offset
    await store.shutdown()
    open(root / "abort", "wb").close()  # the next start is a crash recovery
    caplog.set_level(logging.INFO, logger="rmq.store")
    store = await make_store(root=root, **CRASH_CFG)
    assert store.recovery_report["mode"] == "crash" and store.max_phy_offset == end
    assert "index rebuilt from CommitLog offset" not in caplog.text
    assert len(store.query_message("K", "k3", 32, 0, forever).buffers) == 1
    assert (await store.put_message(MessageInner("K", 0, b"new", properties={"KEYS": "k9"}))).is_ok
    store.do_reput()
    assert len(store.query_message("K", "k9", 32, 0, forever).buffers) == 1


async def test_consume_queue_recovery_checks_only_its_last_three_files(make_store, tmp_path, caplog):
    """A start checks the last three files of a ConsumeQueue (Java ConsumeQueue.recover), not
    every file: the whole ConsumeQueue of a large store is 20 bytes per message. The files
    before them are trusted once the last unit before the three is within the CommitLog; a unit
    damaged there (never written so by the store) shows it was not read. A damaged unit in the
    last three is found: the queue is cut there and dispatch writes the units again."""
    root = tmp_path / "s"
    store = await make_store(root=root, **CRASH_CFG)  # 64 units per ConsumeQueue file
    for _ in range(6 * 64 + 10):
        assert (await store.put_message(MessageInner("Q", 0, b"x" * 40))).is_ok
    store.do_reput()
    n = store.get_max_offset_in_queue("Q", 0)
    assert n == 6 * 64 + 10
    cq_dir = root / "consumequeue" / "Q" / "0"
    files = sorted(cq_dir.iterdir())
    assert len(files) == 7
    await store.shutdown()
    with open(files[1], "r+b") as f:  # a unit in the middle of the second file: zeroed
        f.seek(20 * 10)
        f.write(bytes(20))
    caplog.set_level(logging.WARNING, logger="rmq.store")
    store = await make_store(root=root, **CRASH_CFG)
    assert store.get_max_offset_in_queue("Q", 0) == n
    assert "truncate: deleting" not in caplog.text  # not cut at the zeroed unit
    assert store.find_consume_queue("Q", 0, create=False).get_unit(64 + 10)[1] == 0  # nor rewritten
    await store.shutdown()
    with open(files[5], "r+b") as f:  # one of the last three: checked, cut there
        f.seek(20 * 3)
        f.write(bytes(20))
    store = await make_store(root=root, **CRASH_CFG)
    assert f"truncate: deleting {files[6]}" in caplog.text
    assert store.get_max_offset_in_queue("Q", 0) == n  # dispatched again from the cut
    assert store.find_consume_queue("Q", 0, create=False).get_unit(5 * 64 + 3)[1] > 0
