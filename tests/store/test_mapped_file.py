"""MappedFile / MappedFileQueue on real files."""

import os

import pytest

from rmq.errors import StoreError
from rmq.store.mapped_file import MappedFile, MappedFileQueue


def test_zero_clears_large_ranges_in_chunks(tmp_path):
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 3 * 1024 * 1024 + 4096)
    mf.mm[:] = b"\xff" * len(mf.mm)
    mf.zero(100, 3 * 1024 * 1024 + 50)
    assert mf.mm[99] == 0xFF and mf.mm[100] == 0 and mf.mm[3 * 1024 * 1024 + 49] == 0
    assert mf.mm[3 * 1024 * 1024 + 50] == 0xFF
    assert mf.mm[100 : 3 * 1024 * 1024 + 50] == bytes(3 * 1024 * 1024 - 50)
    mf.close()


def test_queue_find_roll_flush_and_delete(tmp_path):
    q = MappedFileQueue(str(tmp_path / "q"), 4096)
    a = q.get_last_mapped_file(0)
    assert a.file_name == f"{0:020d}" and os.path.getsize(a.path) == 4096
    a.wrote_position = 4096
    b = q.get_last_mapped_file(0)
    assert b.file_from_offset == 4096 and q.find_by_offset(5000) is b and q.find_by_offset(10**6) is None
    b.wrote_position = 100
    assert q.flush() == 4196 and q.max_offset == 4196
    gone = q.delete_first_files(5)  # never the last file
    assert gone == [a] and a.destroyed and not os.path.exists(a.path) and q.min_offset == 4096
    q.shutdown()


def test_wrong_file_size_is_a_clear_error(tmp_path):
    d = tmp_path / "q"
    d.mkdir()
    (d / f"{0:020d}").write_bytes(b"x" * 100)
    (d / f"{4096:020d}").write_bytes(b"x" * 4096)
    with pytest.raises(StoreError, match="does not match"):
        MappedFileQueue(str(d), 4096).load()


def _dirty_kib(path: str) -> int:
    """Dirty KiB of this process's mapping of ``path`` (/proc/self/smaps: the page-table dirty
    bits, which a writeback clears)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):
                inside = line.rstrip().endswith(path)
            elif inside and first in ("Shared_Dirty:", "Private_Dirty:"):
                total += int(line.split()[1])
    return total


def test_flush_syncs_the_written_range_and_leaves_the_warmed_pages_past_it_dirty(tmp_path):
    # The warm-ahead pre-faults pages past the writer (dirty, still zeros): a flush of the
    # written range must not write them out (and write-protect them again before the writer
    # fills them); after a zero() outside that range the next flush syncs the whole file.
    from rmq import _store

    if not os.path.exists("/proc/self/smaps"):
        from rmq._testing import skip_or_fail

        skip_or_fail("no /proc/self/smaps to read the mapping's dirty pages from")
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 4 << 20, create=True)
    try:
        mf.mm[0:20_000] = b"r" * 20_000
        mf.wrote_position = 20_000
        assert _store.populate_write(mf.mm, 20_000, 1 << 20) == 0
        before = _dirty_kib(mf.path)
        assert before >= 1000  # the written 20 KB and the warmed MiB
        assert mf.flush() == 20_000
        after = _dirty_kib(mf.path)
        assert 1000 <= after <= before - 16  # the written pages clean, the warmed ones still dirty
        mf.zero(30_000, 40_000)
        mf.mm[20_000:25_000] = b"s" * 5000
        mf.wrote_position = 25_000
        assert mf.flush() == 25_000
        assert _dirty_kib(mf.path) < 100  # the whole file synced
        with open(mf.path, "rb") as f:
            assert f.read(25_000) == b"r" * 20_000 + b"s" * 5000
    finally:
        mf.close()
