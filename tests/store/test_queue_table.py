"""The CommitLog writer's QueueTable (rmq/_qtable.pxi): ``{(topic, queue_id): next queue
offset}`` with a C array per topic for queue ids 0..1023 and a dict beyond, and the topics'
cached names; and a store recovering a CommitLog whose records carry queue ids outside the
array (beyond it, negative) and an offset at the int64 maximum."""

import mmap
import os

import pytest
from store_support import STORE_HOST

from rmq import _store
from rmq.store import MessageInner, PutMessageStatus
from rmq.store.message import host_bytes

INT64_MAX = (1 << 63) - 1
ARRAY = 1024  # QUEUE_ARRAY_MAX in rmq/_store.pxd


def test_mapping_semantics():
    t = _store.QueueTable()
    assert len(t) == 0 and t.get(("T", 0)) is None and t.get(("T", 0), -5) == -5 and ("T", 0) not in t
    t["T", 0] = 0
    t["T", 3] = 7
    t["U", 1] = 2
    assert len(t) == 3 and t["T", 0] == 0 and t.get(("T", 3)) == 7 and ("U", 1) in t
    assert t.get(("T", 1)) is None and t.get(("T", 2), 0) == 0  # slots between are absent
    t["T", 3] = 8  # an update is not a new queue
    assert len(t) == 3 and t["T", 3] == 8
    assert t.items() == [(("T", 0), 0), (("T", 3), 8), (("U", 1), 2)] and list(t) == [("T", 0), ("T", 3), ("U", 1)]
    with pytest.raises(KeyError):
        t["T", 1]
    with pytest.raises(ValueError):
        t["T", 1] = -1
    with pytest.raises(OverflowError):
        t["T", 1] = INT64_MAX + 1
    with pytest.raises(OverflowError):
        t["T", 1 << 31] = 0  # queue ids are int32
    with pytest.raises(TypeError):
        t[b"T", 1] = 0
    assert len(t) == 3 and ("T", 1) not in t
    t["T", 1] = INT64_MAX
    assert t["T", 1] == INT64_MAX


def test_growth_and_the_array_bound():
    t = _store.QueueTable()
    for qid in range(ARRAY + 8):  # through the array's last slot into the dict
        t["T", qid] = qid * 10
    assert len(t) == ARRAY + 8
    assert all(t["T", q] == q * 10 for q in range(ARRAY + 8))
    assert [k for k, _ in t.items()] == [("T", q) for q in range(ARRAY + 8)]
    # one large id first: no slots are made for it, the small ones still get theirs
    u = _store.QueueTable()
    u["U", (1 << 31) - 1] = 1
    u["U", ARRAY - 1] = 2
    u["U", 0] = 3
    assert u.items() == [(("U", 0), 3), (("U", ARRAY - 1), 2), (("U", (1 << 31) - 1), 1)]


def test_negative_and_far_queue_ids():
    t = _store.QueueTable()
    far = [-(1 << 31), -1, ARRAY, 70_000, (1 << 31) - 1]
    for i, qid in enumerate(far):
        t["T", qid] = i
    assert len(t) == len(far) and [t["T", q] for q in far] == list(range(len(far)))
    assert t.get(("T", -2)) is None and t.get(("T", ARRAY + 1)) is None
    assert t.pop(("T", -1)) == 1 and t.pop(("T", 70_000)) == 3
    assert len(t) == 3 and ("T", -1) not in t and t.pop(("T", -1), None) is None


def test_deletion():
    t = _store.QueueTable()
    t["T", 0], t["T", 5], t["T", 2000] = 1, 2, 3
    assert t.pop(("T", 5)) == 2 and t.get(("T", 5)) is None and len(t) == 2
    with pytest.raises(KeyError):
        t.pop(("T", 5))
    assert t.pop(("T", 5), "none") == "none" and t.pop(("nope", 0), None) is None
    del t["T", 2000]
    with pytest.raises(KeyError):
        del t["T", 2000]
    assert t.items() == [(("T", 0), 1)]
    t.pop(("T", 0))
    assert len(t) == 0 and t.items() == []
    t["T", 0] = 9  # a topic whose last queue went comes back
    assert t.items() == [(("T", 0), 9)]


def test_topic_names_are_bounded_and_survive_clear():
    t = _store.QueueTable(max_topics=2)
    assert t.max_topics == 2 and t.topic_bytes("A") is None
    assert t.cache_topic("A", b"A") and t.cache_topic("B", b"B")
    assert not t.cache_topic("C", b"C") and t.topic_bytes("C") is None and t.cached_topics == 2
    assert t.cache_topic("A", b"A")  # re-caching a cached name is not a new one
    assert t.cached_topics == 2
    t["A", 0], t["C", 1] = 4, 5
    t.pop(("A", 0))
    assert t.topic_bytes("A") == b"A"  # the name outlives its last offset
    t.clear()
    assert len(t) == 0 and t.items() == [] and t.get(("C", 1)) is None
    assert t.topic_bytes("A") == b"A" and t.topic_bytes("B") == b"B" and t.cached_topics == 2
    t["A", 2] = 1
    assert t.items() == [(("A", 2), 1)]


async def test_recovery_of_queue_ids_outside_the_array(make_store, tmp_path):
    root = tmp_path / "s"
    store = await make_store(root=root)
    for qid in (0, ARRAY - 1, ARRAY, 70_000):
        for _ in range(2):
            assert (await store.put_message(MessageInner("T", qid, b"x"))).status == PutMessageStatus.PUT_OK
    store.do_reput()
    end = store.max_phy_offset
    await store.shutdown()
    # records written past the end by hand, as a CommitLog from elsewhere may hold them: a
    # negative queue id, the largest int32 one, and a queue offset at the int64 maximum
    last = sorted(os.listdir(root / "commitlog"))[-1]
    with open(root / "commitlog" / last, "r+b") as f, mmap.mmap(f.fileno(), 0) as mm:
        pos = end - int(last)
        for qid, qoff in ((-3, 7), ((1 << 31) - 1, 41), (5, INT64_MAX)):
            pos += _store.encode_record(
                mm, pos, b"raw", b"T", b"", qid, 0, qoff, int(last) + pos, 0, 1,
                host_bytes(("127.0.0.1", 1)), 2, host_bytes(STORE_HOST), 0, 0,
            )  # fmt: skip
    store = await make_store(root=root)
    table = store.commit_log.topic_queue_table
    assert dict(table.items()) == {
        ("T", 0): 2,
        ("T", ARRAY - 1): 2,
        ("T", ARRAY): 2,
        ("T", 70_000): 2,
        ("T", -3): 8,
        ("T", (1 << 31) - 1): 42,
        ("T", 5): INT64_MAX,
    }
    # the queues go on from there; the one at the int64 maximum refuses, nothing is written
    for qid, expect in ((0, 2), (ARRAY - 1, 2), (70_000, 2), ((1 << 31) - 1, 42)):
        r = await store.put_message(MessageInner("T", qid, b"y"))
        assert r.status == PutMessageStatus.PUT_OK and r.append.logics_offset == expect
    at = store.max_phy_offset
    r = await store.put_message(MessageInner("T", 5, b"y"))
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL and "no queue offset left" in r.remark
    assert store.max_phy_offset == at and table["T", 5] == INT64_MAX
    assert table["T", 0] == 3 and table["T", 70_000] == 3
