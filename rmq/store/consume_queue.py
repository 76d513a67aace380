"""ConsumeQueue: the per-(topic, queue) index of 20-byte units into the CommitLog (Java ConsumeQueue)."""

from __future__ import annotations

import logging
import os

from rmq import _store
from rmq.store.mapped_file import MappedFile, MappedFileQueue

__all__ = ["ConsumeQueue", "CQ_STORE_UNIT_SIZE"]

log = logging.getLogger("rmq.store")

CQ_STORE_UNIT_SIZE = 20
#: how many of the last ConsumeQueue files a start checks (Java ConsumeQueue.recover: 3)
_RECOVER_LAST_FILES = 3


class ConsumeQueue:
    """Files ``<root>/consumequeue/<topic>/<queue_id>/<20-digit byte offset>`` of units
    ``int64 phy offset | int32 size | int64 tags code``. Logical offsets count units."""

    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int):
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.store_path = os.path.join(root_dir, topic, str(queue_id))
        self.mfq = MappedFileQueue(self.store_path, mapped_file_size)
        self.min_logic_offset = 0  # bytes
        self.max_physic_offset = -1  # end of the last dispatched record

    # -- loading / recovery ------------------------------------------------------------------
    def load(self) -> None:
        self.mfq.load()

    def recover(self, commitlog_max_offset: int) -> None:
        """Find the written end (first empty unit, or a unit past the CommitLog end) and cut
        there; zero what follows so it can never come back."""
        files = self.mfq.files
        keep_to = None
        if files:
            first = files[0]
            used = _store.cq_first_used(first.mm, self.mapped_file_size)
            if used >= self.mapped_file_size:
                used = 0
                keep_to = first.file_from_offset
                files = []
            self.min_logic_offset = first.file_from_offset + used
        skip = 0
        if len(files) > _RECOVER_LAST_FILES:
            # Java ConsumeQueue.recover checks the last three files only: units are written in
            # CommitLog order, so when the last unit of the file before them is within the
            # CommitLog every earlier one is too. Walking every file made a start read the
            # whole ConsumeQueue (20 bytes per message in the store). A cut further back (a
            # truncation) still walks from the first file.
            prev = files[-_RECOVER_LAST_FILES - 1]
            phy, size, _ = _store.read_cq_unit(prev.mm, self.mapped_file_size - CQ_STORE_UNIT_SIZE)
            if size > 0 and phy + size <= commitlog_max_offset:
                skip = len(files) - _RECOVER_LAST_FILES
        for i, mf in enumerate(files[skip:], skip):
            start = self.min_logic_offset - mf.file_from_offset if i == 0 else 0
            end = _store.cq_valid_end(mf.mm, self.mapped_file_size, commitlog_max_offset, start)
            if end < self.mapped_file_size:
                keep_to = mf.file_from_offset + end
                break
        if keep_to is None:
            keep_to = self.mfq.max_offset
        self.mfq.truncate_dirty_files(keep_to)
        self.mfq.flushed_where = keep_to
        self._refresh_max_physic()
        if not self.mfq.files:
            self.min_logic_offset = 0

    def _refresh_max_physic(self) -> None:
        last = self.mfq.last
        if last is not None and last.wrote_position >= CQ_STORE_UNIT_SIZE:
            phy, size, _ = _store.read_cq_unit(last.mm, last.wrote_position - CQ_STORE_UNIT_SIZE)
            self.max_physic_offset = phy + size
        elif len(self.mfq.files) >= 2:
            prev = self.mfq.files[-2]
            phy, size, _ = _store.read_cq_unit(prev.mm, prev.wrote_position - CQ_STORE_UNIT_SIZE)
            self.max_physic_offset = phy + size
        else:
            self.max_physic_offset = -1

    # -- offsets -------------------------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.mfq.max_offset // CQ_STORE_UNIT_SIZE

    def roll_next_file(self, index: int) -> int:
        units = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + units - index % units

    # -- writing (reput) ------------------------------------------------------------------------
    def put_message_position_info(self, phy_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Append the unit for ``queue_offset``. Idempotent: a unit already written (re-dispatch
        after recovery) is skipped. Returns True when a unit was written."""
        if phy_offset + size <= self.max_physic_offset:
            return False
        expected = self.mfq.max_offset
        at = queue_offset * CQ_STORE_UNIT_SIZE
        if at < expected:
            return False
        if not self.mfq.files:
            # The first unit may not be at 0 (queue recreated after retention): start there.
            mf = self.mfq.get_last_mapped_file(at)
            mf.wrote_position = mf.flushed_position = at - mf.file_from_offset
            self.mfq.flushed_where = at
            self.min_logic_offset = at
        elif at > expected:
            log.error(
                "ConsumeQueue %s-%d: logic offset %d ahead of the queue end %d; leaving a gap",
                self.topic,
                self.queue_id,
                queue_offset,
                expected // CQ_STORE_UNIT_SIZE,
            )
        while True:
            mf = self.mfq.get_last_mapped_file(at)
            if at < mf.file_from_offset + self.mapped_file_size:
                break
            mf.wrote_position = self.mapped_file_size
        pos = at - mf.file_from_offset
        if pos > mf.wrote_position:
            mf.wrote_position = pos
        _store.put_cq_unit(mf.mm, pos, phy_offset, size, tags_code)
        mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
        self.max_physic_offset = phy_offset + size
        return True

    # -- reading ----------------------------------------------------------------------------------
    def get_index_buffer(self, index: int) -> tuple[MappedFile, int, int] | None:
        """``(mapped_file, start, end)``: from unit ``index`` to the written end of its file
        (Java ``getIndexBuffer``), or None."""
        offset = index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mfq.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos >= mf.wrote_position:
            return None
        return mf, pos, mf.wrote_position

    def get_unit(self, index: int) -> tuple[int, int, int] | None:
        """``(phy_offset, size, tags_code)`` of unit ``index`` or None."""
        r = self.get_index_buffer(index)
        if r is None:
            return None
        mf, pos, _ = r
        return _store.read_cq_unit(mf.mm, pos)

    # -- retention ----------------------------------------------------------------------------
    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Move the minimum past units whose record is below the CommitLog minimum."""
        for mf in self.mfq.files:
            pos = max(0, self.min_logic_offset - mf.file_from_offset)
            while pos + CQ_STORE_UNIT_SIZE <= mf.wrote_position:
                phy, _size, _ = _store.read_cq_unit(mf.mm, pos)
                if phy >= min_phy_offset:
                    self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + pos)
                    return
                pos += CQ_STORE_UNIT_SIZE
            if mf.wrote_position < self.mapped_file_size:
                # Every written unit is below the minimum: the queue is empty from its end on.
                self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + mf.wrote_position)
                return
            self.min_logic_offset = max(self.min_logic_offset, mf.file_from_offset + mf.wrote_position)

    def delete_expired_file(self, min_phy_offset: int) -> int:
        """Delete leading files whose last unit points below ``min_phy_offset`` (never the
        last file). Returns how many were deleted."""
        n = 0
        files = self.mfq.files
        for mf in files[:-1]:
            if mf.wrote_position < CQ_STORE_UNIT_SIZE:
                break
            phy, _size, _ = _store.read_cq_unit(mf.mm, mf.wrote_position - CQ_STORE_UNIT_SIZE)
            if phy < min_phy_offset:
                n += 1
            else:
                break
        if n:
            self.mfq.delete_first_files(n)
        self.correct_min_offset(min_phy_offset)
        return n

    def flush(self, least_pages: int = 0) -> None:
        self.mfq.flush(least_pages)

    def destroy(self) -> None:
        self.mfq.destroy_all()
        self.max_physic_offset = -1
        self.min_logic_offset = 0

    def shutdown(self) -> None:
        self.mfq.shutdown()
