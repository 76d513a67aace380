"""The timer store's files (Java ``TimerLog``, ``TimerWheel``, ``TimerCheckpoint``).

``<root>/timerlog/<20-digit offset>``: the timer log, append-only records of
``TIMER_UNIT_SIZE`` (64) bytes in mapped files of ``mappedFileSizeTimerLog`` bytes (a multiple
of 64, so no record spans two files). The record layout is drawn in rmq/_timer.pxi.

``<root>/timerwheel``: the ring of ``2 * 7 * 86400`` slots of 32 bytes (Java
``TIMER_WHEEL_TTL_DAY * DAY_SECS`` slots, the file twice that, whatever the precision), one
per tick: slot ``(t / timerPrecisionMs) % slots`` holds tick ``t`` while its time field is
``t``.

``<root>/config/timercheck``: the checkpoint (big-endian, with a CRC32 of the rest):
``lastReadTimeMs`` (every tick before it was delivered), ``lastTimerLogFlushPos`` (the timer
log is durable up to it), ``lastTimerQueueOffset`` (every unit of the timer topic's queue
before it is in the timer log), ``masterTimerQueueOffset`` (kept 0, Java's field).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
import zlib

from rmq import _store
from rmq.common.files import atomic_write
from rmq.store.mapped_file import MappedFile, MappedFileQueue

__all__ = ["TimerCheckpoint", "TimerLog", "TimerWheel", "WHEEL_SLOTS"]

log = logging.getLogger("rmq.store.timer")

UNIT = _store.TIMER_UNIT_SIZE
SLOT = _store.TIMER_SLOT_SIZE
#: Java TimerMessageStore.TIMER_WHEEL_TTL_DAY * DAY_SECS slots, the wheel file twice that.
SLOTS_TOTAL = 7 * 24 * 3600
WHEEL_SLOTS = 2 * SLOTS_TOTAL


class TimerLog:
    """The append-only timer log: ``append`` hands out the next record's place."""

    def __init__(self, root: str, file_size: int):
        if file_size % UNIT:
            raise ValueError(f"mappedFileSizeTimerLog must be a multiple of {UNIT} bytes, not {file_size}")
        self.path = os.path.join(root, "timerlog")
        self.file_size = file_size
        self.mfq = MappedFileQueue(self.path, file_size)

    def load(self) -> None:
        self.mfq.load()

    @property
    def write_pos(self) -> int:
        return self.mfq.max_offset

    @property
    def min_pos(self) -> int:
        return self.mfq.min_offset

    def place(self) -> tuple[MappedFile, int, int]:
        """The file, position in it and global position of the next record (a new file when
        the last is full)."""
        mf = self.mfq.get_last_mapped_file(0)
        return mf, mf.wrote_position, mf.file_from_offset + mf.wrote_position

    def buffers(self) -> list[mmap.mmap]:
        return [mf.mm for mf in self.mfq.files]

    def recover(self, start: int) -> list[tuple[int, int, int]]:
        """Find the end of the records from ``start`` (the checkpoint's flushed position) and
        set the write position there; returns ``(pos, slot time, queue offset)`` of the
        records found past ``start`` (those the wheel may not hold yet)."""
        files = self.mfq.files
        found: list[tuple[int, int, int]] = []
        if not files:
            return found
        start = max(start, files[0].file_from_offset)
        end = start
        for mf in files:
            base = mf.file_from_offset
            if base + self.file_size <= start:
                continue
            pos = max(0, start - base)
            while pos + UNIT <= self.file_size:
                rec = _store.timer_read_record(mf.mm, pos)
                if rec[0] != UNIT or rec[1] not in (_store.TIMER_MAGIC_DEFAULT, _store.TIMER_MAGIC_DEFAULT | 2):
                    break
                found.append((base + pos, _slot_time_of(mf.mm, pos), rec[8]))
                pos += UNIT
            end = base + pos
            if pos < self.file_size:
                break
        # Everything past the end is dropped: files after it and the rest of its file.
        self.mfq.truncate_dirty_files(end)
        for mf in self.mfq.files:
            stop = min(self.file_size, end - mf.file_from_offset)
            mf.wrote_position = mf.flushed_position = max(0, stop)
        return found

    def flush(self) -> int:
        """fdatasync what was written (flush thread); returns the flushed position."""
        return self.mfq.flush(0)

    def delete_below(self, pos: int) -> int:
        """Delete the files that end at or below ``pos`` (never the last); returns how many."""
        n = 0
        for mf in self.mfq.files[:-1]:
            if mf.file_from_offset + self.file_size <= pos:
                n += 1
            else:
                break
        return len(self.mfq.delete_first_files(n)) if n else 0

    def shutdown(self) -> None:
        self.mfq.shutdown()


def _slot_time_of(buf: mmap.mmap, pos: int) -> int:
    # the record's last field: the tick whose slot links it (rmq/_timer.pxi)
    return int(struct.unpack_from(">q", buf, pos + 56)[0])


class TimerWheel:
    """The mapped ring of slots (``<root>/timerwheel``)."""

    def __init__(self, root: str, precision_ms: int, slots: int = WHEEL_SLOTS):
        self.path = os.path.join(root, "timerwheel")
        self.precision = precision_ms
        self.slots = slots
        self.size = slots * SLOT
        self.mm: mmap.mmap | None = None

    def load(self) -> bool:
        """Map the file, creating it when missing; True when it was created (empty)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            have = os.fstat(fd).st_size
            if have not in (0, self.size):
                raise ValueError(f"{self.path} is {have} bytes, expected {self.size}")
            if have == 0:
                # allocated for real: a write into the mapping never faults on a full disk
                os.posix_fallocate(fd, 0, self.size)
            self.mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        return have == 0

    @property
    def buf(self) -> mmap.mmap:
        if self.mm is None:
            raise ValueError("timer wheel not loaded")
        return self.mm

    def slot(self, tick: int) -> tuple[int, int, int]:
        return _store.timer_slot(self.buf, self.slots, self.precision, tick)

    def scan(self, from_tick: int, to_tick: int) -> tuple[int, int, int]:
        """``(records, first tick with records or -1, smallest first position or -1)`` over
        the ticks from ``from_tick`` to ``to_tick`` (at most one turn)."""
        return _store.timer_wheel_scan(self.buf, self.slots, self.precision, from_tick, to_tick)

    def flush(self) -> None:
        if self.mm is not None:
            self.mm.flush()

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None


class TimerCheckpoint:
    """``<root>/config/timercheck`` (Java ``TimerCheckpoint``): written whole, atomically."""

    _FMT = struct.Struct(">qqqq")

    def __init__(self, root: str):
        self.path = os.path.join(root, "config", "timercheck")
        self.last_read_time_ms = 0
        self.last_timer_log_flush_pos = 0
        self.last_timer_queue_offset = 0
        self.master_timer_queue_offset = 0
        self.loaded = False
        # Java TimerCheckpoint's DataVersion, as GET_TIMER_CHECK_POINT reports it: not in the file
        self.version_timestamp = int(time.time() * 1000)
        self.version_counter = 0

    def load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        n = self._FMT.size
        if len(data) != n + 4 or zlib.crc32(data[:n]) != struct.unpack(">I", data[n:])[0]:
            log.warning("%s is damaged (%d bytes); recovering the timer store without it", self.path, len(data))
            return
        (
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
        ) = self._FMT.unpack(data[:n])
        self.loaded = True

    def encode(self, read_time: int, flush_pos: int, queue_offset: int) -> bytes:
        body = self._FMT.pack(read_time, flush_pos, queue_offset, self.master_timer_queue_offset)
        return body + struct.pack(">I", zlib.crc32(body))

    def write(self, read_time: int, flush_pos: int, queue_offset: int) -> None:
        """Replace the file (tmp, fsync, rename; flush thread)."""
        atomic_write(self.path, self.encode(read_time, flush_pos, queue_offset))
        self.last_read_time_ms = read_time
        self.last_timer_log_flush_pos = flush_pos
        self.last_timer_queue_offset = queue_offset
        self.version_timestamp = int(time.time() * 1000)
        self.version_counter += 1

    def to_wire(self) -> bytes:
        """GET_TIMER_CHECK_POINT's body (Java ``TimerCheckpoint.encode``): seven big-endian
        longs, ``lastReadTimeMs``, ``lastTimerLogFlushPos``, ``lastTimerQueueOffset``,
        ``masterTimerQueueOffset`` and the DataVersion's ``stateVersion`` (0), ``timestamp``,
        ``counter`` (checkpoint writes since start)."""
        return struct.pack(
            ">qqqqqqq",
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            0,
            self.version_timestamp,
            self.version_counter,
        )
