"""The message index (Java IndexService / IndexFile): build by dispatch, query, roll,
crash cut-back and rebuild, retention, and the on-disk layout read by an independent decoder."""

import os
import shutil
import struct
import time

import pytest
from store_support import STORE_HOST, small_config

from rmq import _store
from rmq._testing import wait_until
from rmq.store import MessageInner, MessageStore
from rmq.store.index import MAX_KEYS_PER_RECORD, index_file_name

FOREVER = (1 << 63) - 1


def java_hash(s: str) -> int:
    """Java String.hashCode, written out here over UTF-16 code units (independent of rmq)."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_hash(topic: str, key: str) -> int:
    """IndexFile.indexKeyHashMethod(IndexService.buildKey(topic, key))."""
    h = abs(java_hash(f"{topic}#{key}"))
    return 0 if h == 1 << 31 else h


def decode_index_file(path: str, slots: int, num: int) -> dict:
    """Java's layout byte by byte: 40-byte header (beginTimestamp, endTimestamp, beginPhyOffset,
    endPhyOffset int64; hashSlotCount, indexCount int32), slots int32, entries (keyHash int32,
    phyOffset int64, timeDiff int32, prevIndex int32)."""
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 40 + 4 * slots + 20 * num
    bt, et, bp, ep, sc, ic = struct.unpack_from(">qqqqii", data, 0)
    slot_values = struct.unpack_from(f">{slots}i", data, 40)
    entries = []
    for i in range(ic):
        entries.append(struct.unpack_from(">iqii", data, 40 + 4 * slots + 20 * i))
    return {
        "begin_ts": bt,
        "end_ts": et,
        "begin_phy": bp,
        "end_phy": ep,
        "slot_count": sc,
        "count": ic,
        "slots": slot_values,
        "entries": entries,
    }


def lookup(dec: dict, khash: int, slots: int) -> list[int]:
    """Walk slot → prevIndex as Java's selectPhyOffset does (no time filter)."""
    out = []
    i = dec["slots"][khash % slots]
    while 0 < i < dec["count"]:
        h, phy, _diff, prev = dec["entries"][i]
        if h == khash:
            out.append(phy)
        if prev == i:
            break
        i = prev
    return out


async def put(store, topic="T", keys=None, uniq=None, body=b"x", sys_flag=0):
    props = {}
    if keys is not None:
        props["KEYS"] = keys
    if uniq is not None:
        props["UNIQ_KEY"] = uniq
    r = await store.put_message(MessageInner(topic, 0, body, properties=props, sys_flag=sys_flag))
    assert r.is_ok, r
    return r.append.wrote_offset


def found(store, key, topic="T", max_num=64, begin=0, end=FOREVER):
    res = store.query_message(topic, key, max_num, begin, end)
    return [struct.unpack_from(">q", b, 28)[0] for b in res.buffers], res


async def test_keys_and_unique_keys_are_found(make_store):
    store = await make_store()
    a = await put(store, keys="order-1 shared", uniq="U1")
    b = await put(store, keys="order-2  shared ", uniq="U2")  # extra spaces: empty items skipped
    c = await put(store, topic="Other", keys="order-1")
    store.do_reput()
    assert found(store, "order-1")[0] == [a]
    assert found(store, "order-1", topic="Other")[0] == [c]
    assert found(store, "shared")[0] == [a, b]  # oldest first, as Java sorts them
    assert found(store, "U2")[0] == [b]
    assert found(store, "nope")[0] == []
    offs, res = found(store, "order-2")
    assert offs == [b]
    assert res.index_last_update_phyoffset == c
    assert res.index_last_update_timestamp >= int(time.time() * 1000) - 60_000
    assert store.runtime_info()["indexFiles"] == "1"


async def test_hash_collisions_are_answered_and_told_apart_by_the_client(make_store):
    # "Aa" and "BB" have the same Java hashCode, so "T#Aa" and "T#BB" share slot and keyHash.
    assert java_hash("Aa") == java_hash("BB") and key_hash("T", "Aa") == key_hash("T", "BB")
    store = await make_store()
    a = await put(store, keys="Aa")
    b = await put(store, keys="BB")
    c = await put(store, keys="AaBB")  # different hash, maybe same slot
    store.do_reput()
    # Java answers every record whose entry has the key's hash: the client filters by key.
    assert found(store, "Aa")[0] == [a, b]
    assert found(store, "BB")[0] == [a, b]
    assert found(store, "AaBB")[0] == [c]


async def test_java_hash_code_over_utf16(make_store):
    for topic, key in [("T", "k"), ("Tö", "schlüssel"), ("T", "😀 emoji"), ("テスト", "キー"), ("T", "")]:
        assert _store.index_key_hash(topic, key) == key_hash(topic, key), (topic, key)
    store = await make_store()
    a = await put(store, topic="Tu", keys="schlüssel 😀")
    store.do_reput()
    assert found(store, "schlüssel", topic="Tu")[0] == [a]
    assert found(store, "😀", topic="Tu")[0] == [a]
    f = store.index.files[0]
    dec = decode_index_file(f.path, f.hash_slot_num, f.index_num)
    assert lookup(dec, key_hash("Tu", "😀"), f.hash_slot_num) == [a]


async def test_key_hash_of_every_length_and_non_ascii_position(make_store):
    # the dispatcher hashes a key's UTF-8 four bytes a step, then one by one: every length
    # around the step, with a non-ASCII character at each position, lands where Java's
    # String.hashCode puts it
    keys = ["abcdefghij"[:n] for n in range(1, 11)]
    keys += ["abcdefgh"[:at] + "é" + "xyz"[: 8 - at] for at in range(9)]
    store = await make_store()
    offs = {k: await put(store, topic="Th", keys=k) for k in keys}
    store.do_reput()
    f = store.index.files[0]
    dec = decode_index_file(f.path, f.hash_slot_num, f.index_num)
    for k, off in offs.items():
        assert off in lookup(dec, key_hash("Th", k), f.hash_slot_num), k
        assert found(store, k, topic="Th")[0] == [off], k


async def test_rollback_records_are_not_indexed_and_redispatch_does_not_duplicate(make_store):
    store = await make_store()
    await put(store, keys="tx", sys_flag=0xC)  # TRANSACTION_ROLLBACK_TYPE
    p = await put(store, keys="tx", sys_flag=0x4)  # PREPARED: Java indexes it
    store.do_reput()
    assert found(store, "tx")[0] == [p]
    # A second dispatch of the same records (what recovery does) adds nothing.
    store.reput.reput_from_offset = 0
    store.do_reput()
    assert found(store, "tx")[0] == [p]


async def test_files_roll_over_and_every_key_is_found_once(make_store):
    store = await make_store(max_hash_slot_num=7, max_index_num=20)
    offs = {}
    for i in range(60):
        offs[i] = await put(store, keys=f"k{i} all", uniq=f"U{i}")
    store.do_reput()
    files = store.index.files
    assert len(files) == 60 * 3 // 19 + 1  # 19 entries per file (entry 0 unused)
    names = [f.name for f in files]
    assert names == sorted(names) and all(len(n) == 17 and n.isdigit() for n in names)
    for prev, nxt in zip(files, files[1:], strict=False):
        # A new file starts at the end of the previous one (Java IndexFile's constructor).
        assert nxt.header()[2] == prev.end_phy_offset or nxt.header()[5] > 1
    for i in range(60):
        assert found(store, f"k{i}")[0] == [offs[i]]
        assert found(store, f"U{i}")[0] == [offs[i]]
    # max count: newest first in the index, answered oldest first; capped at maxMsgsNumBatch
    assert found(store, "all", max_num=5)[0] == [offs[i] for i in range(55, 60)]
    assert len(found(store, "all", max_num=1000)[0]) == 60  # 60 < 64
    for _ in range(60, 80):
        await put(store, keys="all")
    store.do_reput()
    assert len(found(store, "all", max_num=1000)[0]) == 64  # maxMsgsNumBatch


async def test_query_by_time_range(make_store):
    store = await make_store()
    old = [await put(store, keys="tk") for _ in range(3)]
    store.do_reput()
    t_old = int(time.time() * 1000)
    # The index keeps seconds since the file's begin timestamp: let two seconds pass.
    await wait_until(lambda: time.time() * 1000 > t_old + 2100, timeout=10, interval=0.05, what="two seconds")
    mid = int(time.time() * 1000)
    new = [await put(store, keys="tk") for _ in range(2)]
    store.do_reput()
    assert found(store, "tk")[0] == old + new
    # entries read back as begin + whole seconds: a new one reads after t_old + 1100
    assert found(store, "tk", begin=t_old + 1000)[0] == new
    assert found(store, "tk", end=t_old)[0] == old
    assert found(store, "tk", begin=mid + 3_600_000)[0] == []


async def test_keys_per_record_are_bounded(make_store):
    store = await make_store()
    keys = " ".join(f"key{i}" for i in range(MAX_KEYS_PER_RECORD + 10))
    a = await put(store, keys=keys, uniq="UQ")
    store.do_reput()
    assert found(store, "UQ")[0] == [a]
    assert found(store, f"key{MAX_KEYS_PER_RECORD - 2}")[0] == [a]  # UNIQ_KEY + 63 KEYS
    assert found(store, f"key{MAX_KEYS_PER_RECORD - 1}")[0] == []
    assert store.index.keys_capped == 1


async def test_index_disabled(make_store, tmp_path):
    store = await make_store(message_index_enable=False)
    await put(store, keys="k")
    store.do_reput()
    assert store.index is None
    res = store.query_message("T", "k", 32, 0, FOREVER)
    assert res.buffers == [] and res.index_last_update_timestamp == 0
    assert not os.path.exists(tmp_path / "store" / "index") or not os.listdir(tmp_path / "store" / "index")


async def test_file_layout_matches_java_byte_by_byte(make_store):
    store = await make_store(max_hash_slot_num=11, max_index_num=100)
    recs = []
    for i in range(30):
        phy = await put(store, keys=f"k{i % 7} z{i}", uniq=f"U{i}")
        recs.append((phy, [f"U{i}", f"k{i % 7}", f"z{i}"]))
    store.do_reput()
    await store.flush_consume_queue.flush_and_checkpoint(0, force_index=True)
    f = store.index.files[0]
    dec = decode_index_file(f.path, 11, 100)
    # named yyyyMMddHHmmssSSS (local time) at creation
    assert abs(time.mktime(time.strptime(f.name[:14], "%Y%m%d%H%M%S")) - time.time()) < 600
    assert dec["count"] == 1 + 30 * 3
    assert dec["begin_phy"] == recs[0][0] and dec["end_phy"] == recs[-1][0]
    assert dec["slot_count"] == sum(1 for v in dec["slots"] if v)
    first = store.look_message_by_offset(recs[0][0])
    last = store.look_message_by_offset(recs[-1][0])
    assert dec["begin_ts"] == first.store_timestamp and dec["end_ts"] == last.store_timestamp
    n = 1
    for phy, keys in recs:
        msg = store.look_message_by_offset(phy)
        for k in keys:
            h, ephy, diff, _prev = dec["entries"][n]
            assert (h, ephy) == (key_hash("T", k), phy)
            assert diff == (msg.store_timestamp - dec["begin_ts"]) // 1000
            n += 1
    for phy, keys in recs:
        for k in keys:
            assert phy in lookup(dec, key_hash("T", k), 11)
    # the checkpoint records the flushed cut (and Java's indexMsgTimestamp)
    cp = store.checkpoint.read()
    assert cp["index_file"] == f.name and cp["index_count"] == dec["count"]
    assert cp["index_msg_timestamp"] == dec["end_ts"]


async def test_a_file_java_wrote_is_read(make_store, tmp_path):
    """An index file built here by the test, following Java's putKey, is answered by the store."""
    root = tmp_path / "store"
    store = await make_store(root=root, max_hash_slot_num=5, max_index_num=10)
    phys = [await put(store, keys="jk") for _ in range(2)]
    store.do_reput()
    ts = store.look_message_by_offset(phys[0]).store_timestamp
    await store.shutdown()
    shutil.rmtree(root / "index")
    os.makedirs(root / "index")
    slots, num = 5, 10
    data = bytearray(40 + 4 * slots + 20 * num)
    h = key_hash("T", "jk")
    for i, phy in enumerate(phys, start=1):
        at = 40 + 4 * slots + 20 * i
        prev = struct.unpack_from(">i", data, 40 + 4 * (h % slots))[0]
        struct.pack_into(">iqii", data, at, h, phy, 0, prev)
        struct.pack_into(">i", data, 40 + 4 * (h % slots), i)
    struct.pack_into(">qqqqii", data, 0, ts, ts, phys[0], phys[1], 1, 3)
    (root / "index" / index_file_name(ts)).write_bytes(bytes(data))
    store2 = MessageStore(small_config(root, max_hash_slot_num=5, max_index_num=10), STORE_HOST)
    await store2.start()
    try:
        assert found(store2, "jk")[0] == phys
    finally:
        await store2.shutdown()


async def test_index_files_are_deleted_with_the_commitlog(make_store):
    store = await make_store(
        mapped_file_size_commitlog=8 * 1024,
        max_hash_slot_num=7,
        max_index_num=30,
        delete_when="99",
        disk_used_ratio=lambda path: 0.1,
    )
    offs = [await put(store, keys=f"d{i}", body=b"x" * 150) for i in range(400)]
    store.do_reput()
    n_files = len(store.index.files)
    assert n_files > 10
    old = time.time() - 73 * 3600
    for mf in store.commit_log.mfq.files[:5]:
        os.utime(mf.path, (old, old))
    assert store.delete_expired_files(manual=True) == 5
    new_min = store.min_phy_offset
    files = store.index.files
    assert 0 < len(files) < n_files
    # every file left holds a record at or above the new minimum; the deleted ones did not
    assert files[0].end_phy_offset >= new_min
    assert all(not f.destroyed for f in files)
    alive = [i for i, o in enumerate(offs) if o >= new_min]
    for i in alive:
        assert found(store, f"d{i}")[0] == [offs[i]]
    files_on_disk = sorted(os.listdir(os.path.dirname(files[0].path)))
    assert files_on_disk == [f.name for f in files]


@pytest.mark.parametrize("torn", [False, True])
async def test_crash_cuts_back_to_the_checkpoint_and_rebuilds(make_store, tmp_path, torn):
    """A copy of a running store's files is what a crash leaves (the abort marker is there).
    Entries past the last index flush may be torn: recovery cuts the file back to the flushed
    entries, drops newer files, re-indexes the CommitLog from there; every key once."""
    root = tmp_path / "live"
    store = await make_store(root=root, max_hash_slot_num=13, max_index_num=50)
    offs = {}
    for i in range(40):
        offs[i] = await put(store, keys=f"c{i}")
    store.do_reput()
    await store.flush_consume_queue.flush_and_checkpoint(0, force_index=True)
    cp = store.checkpoint.read()
    for i in range(40, 120):  # rolls into new files, unflushed
        offs[i] = await put(store, keys=f"c{i}")
    store.do_reput()
    assert len(store.index.files) > 1
    crash = tmp_path / "crash"
    shutil.copytree(root, crash, ignore=shutil.ignore_patterns("lock"))
    assert (crash / "abort").exists()
    if torn:
        # garbage in the cut file's slots and past its flushed entries, and a wrong header
        path = crash / "index" / cp["index_file"]
        with open(path, "r+b") as f:
            f.seek(40)
            f.write(struct.pack(">13i", *([cp["index_count"] + 5] * 13)))
            f.seek(40 + 4 * 13 + 20 * cp["index_count"])
            f.write(b"\x7f" * 200)
            f.seek(36)
            f.write(struct.pack(">i", 49))
    store2 = MessageStore(small_config(crash, max_hash_slot_num=13, max_index_num=50), STORE_HOST)
    await store2.start()
    try:
        assert store2.recovery_report["mode"] == "crash"
        for i in range(120):
            assert found(store2, f"c{i}")[0] == [offs[i]], i
        offs[120] = await put(store2, keys="c120")
        store2.do_reput()
        assert found(store2, "c120")[0] == [offs[120]]
    finally:
        await store2.shutdown()


async def test_clean_restart_keeps_the_index(make_store, tmp_path):
    root = tmp_path / "r"
    store = await make_store(root=root, max_hash_slot_num=13, max_index_num=50)
    offs = [await put(store, keys=f"r{i}") for i in range(30)]
    await store.shutdown()
    store2 = await make_store(root=root, max_hash_slot_num=13, max_index_num=50)
    for i in range(30):
        assert found(store2, f"r{i}")[0] == [offs[i]]
    # a changed geometry does not load the old files (logged), and nothing crashes
    await store2.shutdown()
    store3 = await make_store(root=root, max_hash_slot_num=17, max_index_num=50)
    assert store3.index.files == []
    assert found(store3, "r1")[0] == []


async def test_query_answer_is_bounded_in_bytes(make_store, monkeypatch):
    from rmq.store import message_store

    store = await make_store()
    offs = [await put(store, keys="big", body=b"y" * 500) for _ in range(3)]
    store.do_reput()
    assert found(store, "big")[0] == offs
    monkeypatch.setattr(message_store, "QUERY_MESSAGE_MAX_BYTES", 1200)
    assert found(store, "big")[0] == offs[:2]  # 2 records of ~600 bytes fit
    monkeypatch.setattr(message_store, "QUERY_MESSAGE_MAX_BYTES", 10)
    assert found(store, "big")[0] == offs[:1]  # always at least one


async def test_an_index_file_that_cannot_be_created_does_not_stop_dispatch(make_store, tmp_path):
    root = tmp_path / "blocked"
    root.mkdir()
    (root / "index").write_bytes(b"a file where the index directory should be")
    store = await make_store(root=root)
    assert "unusable" in store.runtime_info()["indexError"]
    await put(store, keys="k1")
    store.do_reput()
    assert store.get_max_offset_in_queue("T", 0) == 1  # dispatched all the same
    info = store.runtime_info()
    assert "cannot create an index file" in info["indexError"] and info["indexFiles"] == "0"
    assert found(store, "k1")[0] == []
    # fixed by the operator: the next dispatch creates the file and indexes again
    (root / "index").unlink()
    await put(store, keys="k2")
    store.do_reput()
    assert store.runtime_info()["indexError"] == ""
    assert len(found(store, "k2")[0]) == 1
