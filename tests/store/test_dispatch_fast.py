"""The C dispatcher (rmq/_dispatch.pxi) against the Python dispatch path: the same CommitLog
dispatched both ways gives byte-identical ConsumeQueue and index files and the same arrivals;
its per-queue cache never outlives a ConsumeQueue that was destroyed or truncated."""

import os
import random
import shutil

from store_support import STORE_HOST, small_config

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.store import MessageInner, MessageStore

SCHEDULE = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
PREPARED, ROLLBACK = 0x4, 0xC
# Small files: ConsumeQueue files roll every 7 units, CommitLog files every 64 KiB, index files
# every few hundred keys.
CONFIG = dict(mapped_file_size_consume_queue=20 * 7, max_index_num=300, max_hash_slot_num=97)


def _messages(n: int, seed: int = 7) -> list[MessageInner]:
    """Many topics and queues, tags, keys (a record past the 64-key cap), PREPARED / ROLLBACK
    records, scheduled messages (tags code = delivery time), non-ASCII keys and one queue
    with more distinct tags than the C dispatcher tracks per call."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        topic = ["DiffA", "DiffB", "DiffC", "%RETRY%grp", "Many"][i % 5]
        qid = rnd.randrange(4) if topic != "Many" else 0
        props = {"TAGS": f"m{i % 12}" if topic == "Many" else rnd.choice(["a", "b", "c", "d"]), "UNIQ_KEY": f"U{i:08d}"}
        nkeys = 70 if i == 11 else rnd.randrange(4)
        if nkeys:
            props["KEYS"] = " ".join(f"k{i}_{j}" for j in range(nkeys)) + (" ключ-é" if i % 9 == 0 else "")
        sys_flag = 0
        if i % 17 == 3:
            sys_flag = PREPARED
        elif i % 17 == 5:
            sys_flag = ROLLBACK
        elif i % 13 == 7:
            level = 1 + i % 4
            topic, qid = SCHEDULE, level - 1
            props.update({"DELAY": str(level), "REAL_TOPIC": "DiffA", "REAL_QID": "0"})
        out.append(
            MessageInner(topic, qid, b"body-%d-" % i + bytes(rnd.randrange(200)), properties=props, sys_flag=sys_flag)
        )
    return out


def _tree(root, sub: str) -> dict[str, bytes]:
    """Relative path -> bytes of every file under ``root/sub``."""
    base = os.path.join(root, sub)
    out = {}
    for d, _dirs, files in os.walk(base):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, base)] = fh.read()
    return out


def _index_files(root) -> list[bytes]:
    """The index files' bytes in name (creation) order: names are creation times."""
    d = os.path.join(root, "index")
    out = []
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as fh:
            out.append(fh.read())
    return out


async def _write_commitlog(root, msgs) -> None:
    s = MessageStore(small_config(root, **CONFIG), STORE_HOST)
    await s.start()
    for m in msgs:
        assert s.append_message(m).is_ok
    await s.shutdown()


async def _dispatch_copy(src, dst, fast: bool, skip_first_file: bool = False):
    """A new store on a copy of ``src``'s CommitLog: its recovery dispatches every record."""
    os.makedirs(os.path.join(dst, "commitlog"))
    names = sorted(os.listdir(os.path.join(src, "commitlog")))
    for name in names[1:] if skip_first_file else names:
        shutil.copy(os.path.join(src, "commitlog", name), os.path.join(dst, "commitlog", name))
    s = MessageStore(small_config(dst, dispatch_fast_path=fast, **CONFIG), STORE_HOST)
    await s.start()
    return s


async def test_recovery_dispatch_is_byte_identical_through_both_paths(tmp_path, depth):
    msgs = _messages(1500)
    # the index is compared file by file below; the lookups sample its keys (every 7th message,
    # every 70th in the unit loop: the lookups were most of the test's time)
    step = round(7 / depth)
    await _write_commitlog(tmp_path / "w", msgs)
    assert len(os.listdir(tmp_path / "w" / "commitlog")) >= 4  # CommitLog rolls
    for skip_first in (False, True):
        # skip_first: the first CommitLog file aged out, so every queue starts past offset 0
        # (the ConsumeQueue's first file is created mid-way, Java's retention case).
        tag = "skip" if skip_first else "all"
        fast = await _dispatch_copy(tmp_path / "w", tmp_path / f"fast-{tag}", True, skip_first)
        slow = await _dispatch_copy(tmp_path / "w", tmp_path / f"slow-{tag}", False, skip_first)
        try:
            assert slow.reput.fast is None
            assert fast.reput.fast is not None and fast.reput.fast.taken > 700, fast.reput.fast.taken
            assert fast.reput.reput_from_offset == slow.reput.reput_from_offset == slow.commit_log.max_offset
            assert fast.reput.dispatched == slow.reput.dispatched
            # (the files of both stores are written through their mappings: read after shutdown)
            queries = []
            for s in (fast, slow):
                q = []
                for i in range(0, 1500, step):
                    for key in (f"U{i:08d}", f"k{i}_0", f"k{i}_1", "ключ-é"):
                        for topic in ("DiffA", "DiffB", "%RETRY%grp", "Many", SCHEDULE):
                            q.append(s.index.query_offset(topic, key, 64, 0, 1 << 62).phy_offsets)
                queries.append(q)
            assert queries[0] == queries[1]
            assert sum(len(x) for x in queries[0]) > 500 * 7 / step
            assert fast.index.keys_capped == slow.index.keys_capped == (0 if skip_first else 1)
        finally:
            await fast.shutdown()
            await slow.shutdown()
        cq_fast = _tree(tmp_path / f"fast-{tag}", "consumequeue")
        cq_slow = _tree(tmp_path / f"slow-{tag}", "consumequeue")
        assert cq_fast.keys() == cq_slow.keys()
        assert len(cq_fast) > 40  # ConsumeQueue files rolled
        assert any(p.startswith(SCHEDULE) for p in cq_fast)
        for p in cq_fast:
            assert cq_fast[p] == cq_slow[p], p
        idx_fast, idx_slow = _index_files(tmp_path / f"fast-{tag}"), _index_files(tmp_path / f"slow-{tag}")
        assert len(idx_fast) == len(idx_slow) > 3  # index files rolled
        assert idx_fast == idx_slow


async def test_live_dispatch_gives_the_same_queues_and_arrivals(make_store, tmp_path):
    fast = await make_store(root=tmp_path / "f", **CONFIG)
    slow = await make_store(root=tmp_path / "p", dispatch_fast_path=False, **CONFIG)
    watcher = await make_store(root=tmp_path / "w", **CONFIG)
    watched = {("DiffB", 1), ("Many", 0), (SCHEDULE, 1)}
    calls: dict[str, list] = {"fast": [], "slow": [], "watcher": []}
    fast.add_arrival_listener(lambda *a: calls["fast"].append(a))
    slow.add_arrival_listener(lambda *a: calls["slow"].append(a))
    # only a watching listener: the C dispatcher makes arrivals for those queues only
    watcher.add_arrival_listener(lambda *a: calls["watcher"].append(a), watched=watched)
    msgs = _messages(900, seed=11)
    runs: dict[str, list] = {"fast": [], "slow": [], "watcher": []}
    at = 0
    sizes = [1, 37, 5, 120, 16, 300]
    i = 0
    while at < len(msgs):
        chunk = msgs[at : at + sizes[i % len(sizes)]]
        at += len(chunk)
        for name, s in (("fast", fast), ("slow", slow), ("watcher", watcher)):
            for m in chunk:
                assert s.append_message(m).is_ok
            # bounded runs, as the reput callback makes them (BATCH_RECORDS)
            while s.do_reput(max_records=sizes[(i + 2) % len(sizes)]):
                # Scheduled units' tags code is the delivery time: store time, which differs
                # per store (so does the number of distinct codes): their queues' ends only.
                ends: dict = {}
                for t, q, nxt, _tags in calls[name]:
                    if t == SCHEDULE:
                        ends[(t, q)] = max(ends.get((t, q), 0), nxt)
                runs[name].append(
                    sorted(
                        [c for c in calls[name] if c[0] != SCHEDULE]
                        + [(t, q, nxt, None) for (t, q), nxt in ends.items()]
                    )
                )
                calls[name].clear()
        i += 1
    assert runs["fast"] == runs["slow"]
    assert any(len({c[3] for c in run if c[0] == "Many"}) > 8 for run in runs["fast"])
    assert runs["watcher"] == [[c for c in run if (c[0], c[1]) in watched] for run in runs["fast"]]
    assert fast.reput.fast.taken > 450 and watcher.reput.fast.taken > 450
    for topic, queues in slow.consume_queue_table.items():
        for qid, cq in queues.items():
            other = fast.find_consume_queue(topic, qid, create=False)
            assert other is not None
            assert other.get_max_offset_in_queue() == cq.get_max_offset_in_queue()
            assert other.max_physic_offset == cq.max_physic_offset
            assert other.mfq.flushed_where == cq.mfq.flushed_where
            assert [mf.wrote_position for mf in other.mfq.files] == [mf.wrote_position for mf in cq.mfq.files]
            if topic != SCHEDULE:
                assert [bytes(mf.mm) for mf in other.mfq.files] == [bytes(mf.mm) for mf in cq.mfq.files]


async def test_a_destroyed_queue_is_never_written_through_the_cache(make_store):
    store = await make_store(**CONFIG)
    first = [store.append_message(MessageInner("Gone", 0, b"a%d" % i)) for i in range(10)]
    assert store.do_reput() == 10
    old = store.find_consume_queue("Gone", 0, create=False)
    # (the first record and the ConsumeQueue roll go through Python)
    assert old is not None and len(store.reput.fast) >= 1 and store.reput.fast.taken >= 8
    store.delete_topics(["Gone"])  # Java deleteTopics: the queue is destroyed
    assert old.mfq.files == []
    assert len(store.reput.fast) == 0  # not kept alive by the cache
    again = [store.append_message(MessageInner("Gone", 0, b"b%d" % i)) for i in range(9)]
    taken = store.reput.fast.taken
    assert store.do_reput() == 9
    new = store.find_consume_queue("Gone", 0, create=False)
    assert new is not None and new is not old
    assert old.mfq.files == [] and old.max_physic_offset == -1  # the old object was not written
    assert store.reput.fast.taken > taken  # the new queue went through the cache
    assert new.get_max_offset_in_queue() == 9
    assert [new.get_unit(i)[0] for i in range(9)] == [r.append.wrote_offset for r in again]
    assert first[0].append.wrote_offset not in [new.get_unit(i)[0] for i in range(9)]


async def test_a_truncated_queue_is_redispatched_from_its_new_end(make_store):
    """A ConsumeQueue cut back (ConsumeQueue.recover, as a slave's recovery cuts it after its
    CommitLog lost a tail) between two runs: the next run starts from the cut, not from the
    end the previous run knew."""
    store = await make_store(**CONFIG)
    results = [store.append_message(MessageInner("Cut", 0, b"x%d" % i, properties={"TAGS": "t"})) for i in range(20)]
    assert store.do_reput() == 20
    cq = store.find_consume_queue("Cut", 0, create=False)
    before = [cq.get_unit(i) for i in range(20)]
    cut_at = results[10].append.wrote_offset
    cq.recover(cut_at)  # units of records 10.. are past the end: cut
    assert cq.get_max_offset_in_queue() == 10
    store.reput.reput_from_offset = cut_at
    taken = store.reput.fast.taken
    calls = []
    store.add_arrival_listener(lambda *a: calls.append(a))
    assert store.do_reput() == 10
    assert store.reput.fast.taken - taken >= 8  # (the roll: Python)
    assert [cq.get_unit(i) for i in range(20)] == before
    assert cq.get_max_offset_in_queue() == 20
    assert calls == [("Cut", 0, 20, _store.java_hash_code("t"))]


async def test_a_replaced_queue_is_detected_even_without_forget(make_store):
    """The cache checks each queue against the store's table at its first record of a call:
    a ConsumeQueue replaced by any path that does not call forget_queues is not written."""
    store = await make_store(**CONFIG)
    for i in range(3):
        store.append_message(MessageInner("Swap", 1, b"a%d" % i))
    store.do_reput()
    old = store.find_consume_queue("Swap", 1, create=False)
    assert old is not None and len(store.reput.fast) == 1
    old_end = old.max_physic_offset
    del store.consume_queue_table["Swap"]  # as a destroy would, but the cache is kept
    store.commit_log.topic_queue_table.pop(("Swap", 1))
    again = [store.append_message(MessageInner("Swap", 1, b"b%d" % i)) for i in range(4)]
    assert store.do_reput() == 4
    new = store.find_consume_queue("Swap", 1, create=False)
    assert new is not None and new is not old
    # (both objects map the same file; the old one's own state is what must not move)
    assert old.get_max_offset_in_queue() == 3 and old.max_physic_offset == old_end
    assert new.get_max_offset_in_queue() == 4
    assert [new.get_unit(i)[0] for i in range(4)] == [r.append.wrote_offset for r in again]
