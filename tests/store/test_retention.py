"""Retention: expired CommitLog files, full disks, and what getMessage says after."""

import os
import time

import pytest

from rmq.store import GetMessageStatus, MessageInner, PutMessageStatus

CL = 8 * 1024


async def fill(store, n=500, topic="T"):
    rs = [await store.put_message(MessageInner(topic, 0, b"x" * 150)) for _ in range(n)]
    store.do_reput()
    return rs


def roomy_disk(path):
    """The real disk may be fuller than diskMaxUsedSpaceRatio (75 %) on a busy machine, which
    turns on age-blind cleaning; these tests are about age and deleteWhen, so the disk is roomy."""
    return 0.10


def age_files(store, count, hours=73):
    old = time.time() - hours * 3600
    for mf in store.commit_log.mfq.files[:count]:
        os.utime(mf.path, (old, old))


async def test_expired_files_are_deleted_and_queues_follow(make_store):
    store = await make_store(mapped_file_size_commitlog=CL, delete_when="99", disk_used_ratio=roomy_disk)
    rs = await fill(store)
    files = list(store.commit_log.mfq.files)
    assert len(files) > 8
    cq = store.find_consume_queue("T", 0, create=False)
    n_cq_files = len(cq.mfq.files)
    age_files(store, 4)
    assert store.delete_expired_files() == 0  # not deleteWhen, disk not full
    assert store.delete_expired_files(manual=True) == 4  # only the expired ones, in order
    assert [f.file_name for f in store.commit_log.mfq.files] == [f.file_name for f in files[4:]]
    assert all(not os.path.exists(f.path) for f in files[:4])
    new_min = files[4].file_from_offset
    assert store.min_phy_offset == new_min
    lo = store.get_min_offset_in_queue("T", 0)
    first_live = next(i for i, r in enumerate(rs) if r.append.wrote_offset >= new_min)
    assert lo == first_live
    assert len(cq.mfq.files) == n_cq_files - lo // 100  # 100 units per ConsumeQueue file
    # getMessage below the new minimum: OFFSET_TOO_SMALL, corrected to the minimum.
    res = store.get_message("G", "T", 0, 0, 32)
    assert (res.status, res.next_begin_offset, res.min_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, lo, lo)
    res = store.get_message("G", "T", 0, lo, 32)
    assert res.status == GetMessageStatus.FOUND and res.message_count == 32
    res.release()
    assert store.look_message_by_offset(rs[0].append.wrote_offset) is None
    # Nothing else is old: a further manual run deletes nothing.
    assert store.delete_expired_files(manual=True) == 0


async def test_delete_when_hour(make_store):
    store = await make_store(
        mapped_file_size_commitlog=CL,
        delete_when=f"{(time.localtime().tm_hour + 1) % 24:02d};{time.localtime().tm_hour:02d}",
        disk_used_ratio=roomy_disk,
    )
    await fill(store, 200)
    age_files(store, 2)
    assert store.delete_expired_files() == 2


async def test_disk_over_max_used_ratio_deletes_regardless_of_age(make_store):
    ratio = {"v": 0.5}
    store = await make_store(mapped_file_size_commitlog=CL, delete_when="99", disk_used_ratio=lambda path: ratio["v"])
    await fill(store, 600)
    n = len(store.commit_log.mfq.files)
    assert store.delete_expired_files() == 0
    ratio["v"] = 0.80  # above 75 %
    assert store.delete_expired_files() == min(10, n - 1)  # at most 10 per run, never the last
    assert len(store.commit_log.mfq.files) == n - min(10, n - 1)


async def test_writes_refused_above_90_percent_disk_use(make_store, caplog):
    ratio = {"v": 0.95}
    store = await make_store(mapped_file_size_commitlog=CL, delete_when="99", disk_used_ratio=lambda path: ratio["v"])
    r = await store.put_message(MessageInner("T", 0, b"x"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk full" in r.remark
    assert "refusing writes" in caplog.text
    assert store.runtime_info()["diskFull"] == "True"
    ratio["v"] = 0.5
    store.delete_expired_files()  # the clean service re-checks the disk
    assert (await store.put_message(MessageInner("T", 0, b"x"))).is_ok


async def test_retention_survives_restart(make_store, tmp_path):
    root = tmp_path / "r"
    store = await make_store(root=root, mapped_file_size_commitlog=CL, delete_when="99")
    await fill(store, 300)
    age_files(store, 3)
    store.delete_expired_files(manual=True)
    lo, hi, mn = store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0), store.min_phy_offset
    await store.shutdown()
    store = await make_store(root=root, mapped_file_size_commitlog=CL)
    assert (store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0)) == (lo, hi)
    assert store.min_phy_offset == mn
    await store.shutdown()
    open(root / "abort", "wb").close()
    store = await make_store(root=root, mapped_file_size_commitlog=CL)
    assert store.recovery_report["mode"] == "crash"
    assert (store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0)) == (lo, hi)


@pytest.mark.integration  # a child process
def test_disk_used_ratio_counts_as_df_and_java_do(tmp_path):
    """Used over used + available, rounded up (Java UtilAll.getDiskPartitionSpaceUsedPercent, and
    df's Use%): blocks reserved for root count on neither side."""
    import subprocess

    from rmq.store.clean import disk_used_ratio

    out = subprocess.run(["df", "-P", str(tmp_path)], capture_output=True, text=True, check=True).stdout
    used_k, avail_k = (int(v) for v in out.splitlines()[1].split()[2:4])
    df_pcent = -(-used_k * 100 // (used_k + avail_k))  # df -P rounds Use% up
    assert abs(disk_used_ratio(str(tmp_path)) * 100 - df_pcent) <= 1  # (the disk may move between the calls)
    assert disk_used_ratio(str(tmp_path / "missing")) == 1.0
