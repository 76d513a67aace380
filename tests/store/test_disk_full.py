"""A full disk: files are allocated before they are mapped, so a full disk gives a clear
refusal (never SIGBUS), and writes resume once space frees. On a real small file system (a
16 MiB tmpfs mounted for the test)."""

import os
import subprocess

import pytest
from store_support import STORE_HOST, small_config

from rmq.store import MessageInner, MessageStore, PutMessageStatus

pytestmark = pytest.mark.integration  # mounts a tmpfs (mount/umount)

MiB = 1024 * 1024


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (root only: the sandbox and CI run the tests as root)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a 16 MiB tmpfs for a real full disk ({r.stderr.strip() or r.returncode}); needs root"
        )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def _fill(store, body, limit=400):
    """Put until the store refuses; returns (acked append results, the refusal)."""
    acked = []
    for i in range(limit):
        r = await store.put_message(MessageInner("Full", i % 2, body, properties={"KEYS": f"k{i}"}))
        if not r.is_ok:
            return acked, r
        acked.append(r.append)
    raise AssertionError(f"{limit} puts of {len(body)} bytes fit on a 16 MiB disk")


async def _all_readable(store, acked):
    from rmq._testing import wait_until

    await wait_until(lambda: store.dispatch_behind_bytes() == 0, what="dispatch")
    for a in acked:
        m = store.look_message_by_offset(a.wrote_offset)
        assert m is not None and m.queue_offset == a.logics_offset


@pytest.mark.parametrize("guard", [90, 99])
async def test_full_disk_refuses_clearly_and_resumes(small_disk, guard):
    """guard 90: Java's diskSpaceWarningLevelRatio stops writes when a new CommitLog file
    pushes the disk past 90 %. guard 99: the free-space check when creating a file does."""
    cfg = small_config(
        small_disk / "store",
        mapped_file_size_commitlog=MiB,
        disk_space_warning_level_ratio=guard,
        disk_space_clean_forcibly_ratio=85,
        file_reserved_time=72,
        delete_when="99",
    )
    store = MessageStore(cfg, STORE_HOST)
    await store.start()
    try:
        body = os.urandom(100 * 1024)
        acked, refusal = await _fill(store, body)
        assert len(acked) > 100  # ~14 MiB of messages went in
        assert refusal.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert "disk full" in refusal.remark, refusal.remark
        assert store.runtime_info()["diskFull"] == "True"
        # Refusals stay refusals (no SIGBUS, no half-written record) ...
        again = await store.put_message(MessageInner("Full", 0, body))
        assert again.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
        await _all_readable(store, acked)
        # ... until retention frees space (above 85 % it deletes the oldest files at once);
        # the next clean run sees the space and writes resume.
        store.delete_expired_files()
        store.delete_expired_files()
        assert store.runtime_info()["diskFull"] == "False"
        r = await store.put_message(MessageInner("Full", 0, body))
        assert r.is_ok, r.remark
        # what retention kept is still readable
        await _all_readable(store, [a for a in acked if a.wrote_offset >= store.min_phy_offset])
    finally:
        await store.shutdown()
    store = MessageStore(cfg, STORE_HOST)
    await store.start()
    try:
        assert store.recovery_report["mode"] == "clean"
        assert (await store.put_message(MessageInner("Full", 1, b"after restart"))).is_ok
    finally:
        await store.shutdown()


async def test_enospc_from_posix_fallocate_is_a_clean_refusal(small_disk):
    """A sparse CommitLog file (as an older version left it) on a disk that cannot hold it:
    posix_fallocate fails with ENOSPC at start and the store refuses writes instead of
    faulting on the first page the disk cannot back."""
    root = small_disk / "store"
    file_size = 24 * MiB  # larger than the whole disk
    cfg = small_config(root, mapped_file_size_commitlog=file_size, disk_space_warning_level_ratio=99)
    (root / "commitlog").mkdir(parents=True)
    sparse = root / "commitlog" / f"{0:020d}"
    sparse.touch()
    os.truncate(sparse, file_size)  # sparse: allowed on tmpfs, no block behind it
    store = MessageStore(cfg, STORE_HOST)
    await store.start()
    try:
        r = await store.put_message(MessageInner("Sparse", 0, b"x" * 4096))
        assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk full" in r.remark, r.remark
        assert "allocate" in r.remark
        assert store.max_phy_offset == 0
    finally:
        await store.shutdown()
