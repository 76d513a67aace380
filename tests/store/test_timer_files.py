"""The timer store's files without a broker (rmq/_timer.pxi, rmq.store.timer.files): record
encoding, slot chains, the wheel scan, timer-log recovery and the checkpoint."""

import pytest

from rmq import _store
from rmq.store.timer import TimerCheckpoint, TimerLog, TimerWheel, timer_slot_time

PREC = 1000


def test_slot_time_rounds_up_so_no_timer_is_early():
    assert timer_slot_time(10_000, PREC) == 10_000
    assert timer_slot_time(10_001, PREC) == 11_000
    assert timer_slot_time(10_999, PREC) == 11_000
    assert timer_slot_time(1, 100) == 100


def test_enqueue_links_a_slot_chain_in_arrival_order_and_resets_a_stale_slot():
    log, wheel = bytearray(64 * 8), bytearray(32 * 10)
    for i, tick in enumerate((5000, 5000, 6000, 5000)):
        n = _store.timer_enqueue(log, i * 64, i * 64, wheel, 10, PREC, tick, 1, 100 + i, tick - 10, 1000 + i, 50, 7, i)
        assert n == (i + 1 if tick == 5000 and i < 2 else (1 if tick == 6000 else 3))
    first, last, num = _store.timer_slot(wheel, 10, PREC, 5000)
    assert (first, last, num) == (0, 192, 3)
    recs, nxt, broken = _store.timer_slot_records([log], 0, 64 * 8, last, 0, 100)
    assert nxt == -1 and not broken
    assert [r[4] for r in recs] == [1000, 1001, 1003]  # CommitLog offsets, oldest first
    assert [r[6] for r in recs] == [0, 1, 3]  # timer queue offsets
    # tick 15000 shares tick 5000's slot (10 slots): the slot is reset for it, 5000 reads empty
    _store.timer_enqueue(log, 256, 256, wheel, 10, PREC, 15000, 3, 1, 99_000, 2000, 50, 7, 4)
    assert _store.timer_slot(wheel, 10, PREC, 5000) == (-1, -1, 0)
    assert _store.timer_slot(wheel, 10, PREC, 15000) == (256, 256, 1)
    rec = _store.timer_read_record(log, 256)
    assert rec[:3] == (64, 3, -1) and rec[4] == 99_000 and rec[8] == 4


def test_chain_walk_stops_below_the_kept_files_and_at_the_limit():
    log, wheel = bytearray(64 * 4), bytearray(32 * 10)
    for i in range(4):
        _store.timer_enqueue(log, i * 64, i * 64, wheel, 10, PREC, 3000, 1, 0, 2500, i, 10, 0, i)
    recs, nxt, broken = _store.timer_slot_records([log], 0, 256, 192, 128, 100)
    assert [r[0] for r in recs] == [128, 192] and nxt == 64 and broken
    # a chunk of 2, then the rest from where it stopped: newest chunk first, each oldest first
    recs, nxt, broken = _store.timer_slot_records([log], 0, 256, 192, 0, 2)
    assert [r[0] for r in recs] == [128, 192] and nxt == 64 and not broken
    recs, nxt, broken = _store.timer_slot_records([log], 0, 256, nxt, 0, 2)
    assert [r[0] for r in recs] == [0, 64] and nxt == -1 and not broken


def test_wheel_scan_counts_pending_and_finds_the_next_tick(tmp_path):
    wheel = TimerWheel(str(tmp_path), PREC, slots=100)
    wheel.load()
    log = bytearray(64 * 8)
    for i, tick in enumerate((7000, 7000, 9000, 42000)):
        _store.timer_enqueue(log, i * 64, 1000 + i * 64, wheel.buf, 100, PREC, tick, 1, 0, tick, i, 1, 0, i)
    assert wheel.scan(0, 99_000) == (4, 7000, 1000)
    assert wheel.scan(8000, 99_000) == (2, 9000, 1128)
    assert wheel.scan(43_000, 99_000) == (0, -1, -1)
    # at most one turn of the ring is scanned
    assert wheel.scan(0, 10**9)[0] == 4
    wheel.close()
    with pytest.raises(ValueError, match="expected"):
        TimerWheel(str(tmp_path), PREC, slots=50).load()


def test_timer_log_recovery_finds_the_end_and_the_records_past_the_checkpoint(tmp_path):
    tl = TimerLog(str(tmp_path), 64 * 4)
    tl.load()
    wheel = bytearray(32 * 10)
    for q in range(6):  # two files: 4 + 2 records
        mf, fpos, pos = tl.place()
        _store.timer_enqueue(mf.mm, fpos, pos, wheel, 10, PREC, 4000 + q * PREC, 1, 0, 4000, q, 10, 0, q)
        mf.wrote_position = fpos + 64
    assert tl.write_pos == 6 * 64
    tl.flush()
    tl.shutdown()
    again = TimerLog(str(tmp_path), 64 * 4)
    again.load()
    found = again.recover(3 * 64)
    assert [(p, q) for p, _tick, q in found] == [(192, 3), (256, 4), (320, 5)]
    assert [tick for _p, tick, _q in found] == [7000, 8000, 9000]
    assert again.write_pos == 6 * 64
    mf, fpos, pos = again.place()
    assert pos == 6 * 64 and fpos == 2 * 64
    assert again.delete_below(4 * 64) == 1 and again.min_pos == 256
    again.shutdown()
    with pytest.raises(ValueError, match="multiple of 64"):
        TimerLog(str(tmp_path), 1000)


def test_checkpoint_round_trip_and_a_damaged_file_is_ignored(tmp_path):
    ck = TimerCheckpoint(str(tmp_path))
    ck.load()
    assert not ck.loaded
    ck.write(123_000, 640, 10)
    back = TimerCheckpoint(str(tmp_path))
    back.load()
    assert back.loaded
    assert (back.last_read_time_ms, back.last_timer_log_flush_pos, back.last_timer_queue_offset) == (123_000, 640, 10)
    path = tmp_path / "config" / "timercheck"
    data = bytearray(path.read_bytes())
    data[3] ^= 0xFF
    path.write_bytes(bytes(data))
    damaged = TimerCheckpoint(str(tmp_path))
    damaged.load()
    assert not damaged.loaded and damaged.last_read_time_ms == 0
