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
