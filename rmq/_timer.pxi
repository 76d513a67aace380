# ---------------------------------------------------------------------------------------------
# Timer messages (rmq/store/timer, after Java 5's TimerLog / TimerWheel): the per-message
# encoding of timer-log records and the loops over the wheel's slots, on the mapped files.
#
# Timer log record (TIMER_UNIT bytes, big-endian; Java's TimerLog unit with the delay as an
# absolute time, plus the timer queue's offset and the tick of the slot that links it, which
# recovery uses to link again records written after the last checkpoint):
#
#   +------+-------+----------+------------+------------+-----------+--------+-----------+--------------+-----------+
#   | size | magic | prev pos | enqueue ms | deliver ms | CommitLog | record | real topic| timer queue  | slot time |
#   | i32  | i32   | i64      | i64        | i64        | offset i64| size i32| hash i32 | offset i64   | i64       |
#   +------+-------+----------+------------+------------+-----------+--------+-----------+--------------+-----------+
#     0      4       8          16           24           32          40       44          48             56
#
# ``prev pos`` links the records of one slot (newest first, -1 ends the chain), as Java's.
#
# Wheel slot (TIMER_SLOT bytes; Java TimerWheel's Slot): time ms i64 | first pos i64 | last pos
# i64 | num i32 | magic i32. A slot holds the records of one tick only while its time is that
# tick's: a slot whose time differs is empty for the tick asked about.
# ---------------------------------------------------------------------------------------------

cdef enum:
    TIMER_UNIT = 64
    TIMER_SLOT = 32

TIMER_UNIT_SIZE = TIMER_UNIT
TIMER_SLOT_SIZE = TIMER_SLOT
TIMER_MAGIC_DEFAULT = 1          # Java TimerMessageStore.MAGIC_DEFAULT
TIMER_MAGIC_ROLL = 1 << 1        # Java MAGIC_ROLL: the record only carries the message one window on


cdef inline int64_t _slot_index(int64_t time_ms, int64_t precision, int64_t nslots) noexcept nogil:
    cdef int64_t i = (time_ms // precision) % nslots
    return i + nslots if i < 0 else i


def timer_enqueue(log_buf, Py_ssize_t file_pos, int64_t pos, wheel_buf, int64_t nslots, int64_t precision,
                  int64_t slot_time, int32_t magic, int64_t enqueue_ms, int64_t deliver_ms, int64_t phy,
                  int32_t size_py, int32_t topic_hash, int64_t queue_offset):
    """Write one timer-log record at ``file_pos`` of ``log_buf`` (global position ``pos``) and
    link it as the newest of the slot of ``slot_time`` (a slot holding another time is reset
    first). Returns the slot's new count."""
    cdef RecordBuf lb = record_buf(log_buf, True)
    cdef RecordBuf wb = record_buf(wheel_buf, True)
    cdef int64_t idx = _slot_index(slot_time, precision, nslots)
    cdef uint8_t* s
    cdef uint8_t* r
    cdef int64_t first, last
    cdef int32_t num
    if file_pos < 0 or file_pos + TIMER_UNIT > lb.size:
        raise ValueError("timer log record does not fit in the file")
    if (idx + 1) * TIMER_SLOT > wb.size:
        raise ValueError("timer wheel file is smaller than its slots")
    s = wb.wptr + idx * TIMER_SLOT
    if rd64(s) != slot_time:
        first = -1
        last = -1
        num = 0
    else:
        first = rd64(s + 8)
        last = rd64(s + 16)
        num = rd32(s + 24)
    r = lb.wptr + file_pos
    wr32(r, TIMER_UNIT)
    wr32(r + 4, magic)
    wr64(r + 8, last)
    wr64(r + 16, enqueue_ms)
    wr64(r + 24, deliver_ms)
    wr64(r + 32, phy)
    wr32(r + 40, size_py)
    wr32(r + 44, topic_hash)
    wr64(r + 48, queue_offset)
    wr64(r + 56, slot_time)
    # the record is complete before the slot points at it (a kill between the two leaves a
    # record recovery links again, never a slot pointing at garbage)
    wr64(s, slot_time)
    wr64(s + 8, pos if first < 0 else first)
    wr64(s + 16, pos)
    wr32(s + 24, num + 1)
    wr32(s + 28, 0)
    return num + 1


def timer_slot(wheel_buf, int64_t nslots, int64_t precision, int64_t slot_time):
    """``(first pos, last pos, num)`` of the slot of ``slot_time``; ``(-1, -1, 0)`` when the
    slot holds another time."""
    cdef RecordBuf wb = record_buf(wheel_buf)
    cdef int64_t idx = _slot_index(slot_time, precision, nslots)
    cdef const uint8_t* s
    if (idx + 1) * TIMER_SLOT > wb.size:
        raise ValueError("timer wheel file is smaller than its slots")
    s = wb.ptr + idx * TIMER_SLOT
    if rd64(s) != slot_time:
        return -1, -1, 0
    return rd64(s + 8), rd64(s + 16), rd32(s + 24)


def timer_read_record(log_buf, Py_ssize_t file_pos):
    """``(size, magic, prev, enqueue ms, deliver ms, phy, size_py, topic hash, queue offset)``
    of the record at ``file_pos``."""
    cdef RecordBuf lb = record_buf(log_buf)
    cdef const uint8_t* r
    if file_pos < 0 or file_pos + TIMER_UNIT > lb.size:
        raise ValueError("timer log position out of the file")
    r = lb.ptr + file_pos
    return (rd32(r), rd32(r + 4), rd64(r + 8), rd64(r + 16), rd64(r + 24), rd64(r + 32), rd32(r + 40),
            rd32(r + 44), rd64(r + 48))


def timer_slot_records(list files, int64_t first_offset, int64_t file_size, int64_t last_pos, int64_t min_pos,
                       Py_ssize_t limit):
    """Walk a slot's chain from ``last_pos`` back (``files``: the timer log's mapped buffers in
    order, the first at ``first_offset``), at most ``limit`` records. Returns ``(records, next,
    broken)``: the records walked, oldest first, as ``(pos, magic, enqueue ms, deliver ms, phy,
    size_py, queue offset)``; the position to walk on from (-1: the chain ended); ``broken``
    when the walk stopped at a position below ``min_pos`` (deleted files) or not a record."""
    cdef list out = []
    cdef int64_t pos = last_pos, fi, off
    cdef Py_ssize_t nfiles = len(files)
    cdef RecordBuf lb
    cdef const uint8_t* r
    cdef bint broken = False
    while pos >= 0 and len(out) < limit:
        if pos < min_pos or pos < first_offset:
            broken = True
            break
        fi = (pos - first_offset) // file_size
        off = (pos - first_offset) % file_size
        if fi >= nfiles:
            broken = True
            break
        lb = record_buf(files[fi])
        if off + TIMER_UNIT > lb.size:
            broken = True
            break
        r = lb.ptr + off
        if rd32(r) != TIMER_UNIT:
            broken = True
            break
        out.append((pos, rd32(r + 4), rd64(r + 16), rd64(r + 24), rd64(r + 32), rd32(r + 40), rd64(r + 48)))
        pos = rd64(r + 8)
    out.reverse()
    return out, (pos if pos >= 0 else -1), broken


def timer_wheel_scan(wheel_buf, int64_t nslots, int64_t precision, int64_t from_time, int64_t to_time):
    """Over the ticks ``from_time <= t <= to_time`` (at most one turn of the ring): ``(pending,
    next time, min first pos)``: the records of slots holding their tick, the first such tick
    with records (-1: none), the smallest first position among them (-1: none)."""
    cdef RecordBuf wb = record_buf(wheel_buf)
    cdef int64_t t, idx, n = 0, next_t = -1, min_pos = -1, fp
    cdef int64_t end = to_time
    cdef const uint8_t* s
    cdef int32_t num
    if nslots * TIMER_SLOT > wb.size:
        raise ValueError("timer wheel file is smaller than its slots")
    if end - from_time >= nslots * precision:
        end = from_time + (nslots - 1) * precision
    with nogil:
        t = from_time
        while t <= end:
            idx = _slot_index(t, precision, nslots)
            s = wb.ptr + idx * TIMER_SLOT
            if rd64(s) == t:
                num = rd32(s + 24)
                if num > 0:
                    n += num
                    if next_t < 0:
                        next_t = t
                    fp = rd64(s + 8)
                    if min_pos < 0 or fp < min_pos:
                        min_pos = fp
            t += precision
    return n, next_t, min_pos
