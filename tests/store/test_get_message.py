"""getMessage (Java DefaultMessageStore.getMessage): every status and correction, the filter
budget, transfer limits, suggestPullingFromSlave, and a randomized differential test against
the pure-Python model in getmessage_model.py (beside this file)."""

import os
import random
import struct

import getmessage_model as _model
import pytest

from rmq import _store
from rmq._testing import wait_until
from rmq.store import GetMessageStatus as S
from rmq.store import MessageFilter, MessageInner


async def put_n(store, topic, qid, n, body=b"x" * 100, tags="TagA"):
    results = []
    for _i in range(n):
        props = {"TAGS": tags} if tags else {}
        r = await store.put_message(MessageInner(topic, qid, body, properties=props))
        assert r.is_ok, r
        results.append(r.append)
    store.do_reput()
    return results


def phys_of(res):
    return [struct.unpack(">q", bytes(rec[28:36]))[0] for rec in res.iter_records()]


def get(store, topic, qid, offset, n=32, flt=None):
    res = store.get_message("G", topic, qid, offset, n, flt)
    out = (res.status, res.next_begin_offset, res.min_offset, res.max_offset, res.message_count)
    res.release()
    return out


async def test_statuses_and_master_corrections(make_store):
    store = await make_store()
    await put_n(store, "T", 0, 10)
    assert get(store, "T", 0, 3) == (S.FOUND, 10, 0, 10, 7)
    assert get(store, "T", 0, 0, 4) == (S.FOUND, 4, 0, 10, 4)
    assert get(store, "T", 0, 10) == (S.OFFSET_OVERFLOW_ONE, 10, 0, 10, 0)
    assert get(store, "T", 0, 15) == (S.OFFSET_OVERFLOW_BADLY, 0, 0, 10, 0)  # min == 0 → 0
    assert get(store, "T", 1, 5) == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0, 0)  # unknown queue
    assert get(store, "Nope", 0, 0) == (S.NO_MESSAGE_IN_QUEUE, 0, 0, 0, 0)
    assert get(store, "T", -1, 5) == (S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, 0)
    res = store.get_message("G", "T", 0, 0, 32)
    assert res.status == S.FOUND and len(res.buffers) == 1  # adjacent records merged
    assert res.buffer_total_size == sum(len(b) for b in res.buffers) == 10 * len(next(res.iter_records()))
    res.release()
    res.release()  # idempotent


async def _store_with_min_offset(make_store, **kw):
    """A store whose queue T-0 starts above 0 after retention."""
    store = await make_store(mapped_file_size_commitlog=8 * 1024, **kw)
    await put_n(store, "T", 0, 200)  # ~25 files of 8 KiB
    store.commit_log.mfq.delete_first_files(5)
    store.delete_expired_files()  # ConsumeQueues follow the new minimum
    return store


async def test_offset_too_small_and_overflow_badly_after_retention(make_store):
    store = await _store_with_min_offset(make_store)
    lo, hi = store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0)
    assert 0 < lo < hi == 200
    # The minimum is the first unit whose record is still in the CommitLog.
    assert store.get_commit_log_offset_in_queue("T", 0, lo) >= store.min_phy_offset
    assert store.get_commit_log_offset_in_queue("T", 0, lo - 1) < store.min_phy_offset
    assert get(store, "T", 0, 0) == (S.OFFSET_TOO_SMALL, lo, lo, hi, 0)
    assert get(store, "T", 0, 500) == (S.OFFSET_OVERFLOW_BADLY, hi, lo, hi, 0)  # min != 0 → max
    assert get(store, "T", 0, lo)[0] == S.FOUND


@pytest.mark.parametrize("check_in_slave", [False, True])
async def test_slave_corrects_only_with_offset_check_in_slave(make_store, check_in_slave):
    store = await _store_with_min_offset(make_store)
    lo, hi = store.get_min_offset_in_queue("T", 0), store.get_max_offset_in_queue("T", 0)
    store.config.broker_role = "SLAVE"
    store.config.offset_check_in_slave = check_in_slave
    fix = (lambda old, new: new) if check_in_slave else (lambda old, new: old)
    assert get(store, "T", 0, 0)[:2] == (S.OFFSET_TOO_SMALL, fix(0, lo))
    assert get(store, "T", 0, 500)[:2] == (S.OFFSET_OVERFLOW_BADLY, fix(500, hi))
    assert get(store, "T", 0, hi)[:2] == (S.OFFSET_OVERFLOW_ONE, hi)
    assert get(store, "X", 0, 7)[:2] == (S.NO_MESSAGE_IN_QUEUE, fix(7, 0))
    r = await store.put_message(MessageInner("T", 0, b"x"))
    assert r.status.name == "SERVICE_NOT_AVAILABLE" and "slave" in r.remark


async def test_message_was_removing_and_offset_found_null(make_store):
    store = await make_store(mapped_file_size_commitlog=8 * 1024)
    await put_n(store, "Old", 0, 20)  # the first files only
    await put_n(store, "Fill", 0, 200)
    cl = store.commit_log
    n_old_files = (20 * 300) // (8 * 1024) + 2
    # The window Java has between deleting CommitLog files and correcting the queues.
    cl.mfq.delete_first_files(n_old_files)
    status, nxt, lo, hi, count = get(store, "Old", 0, 0)
    assert (status, nxt, lo, hi, count) == (S.MESSAGE_WAS_REMOVING, 20, 0, 20, 0)
    status, nxt, lo, hi, count = get(store, "Fill", 0, 0, 32)
    assert status == S.FOUND and count == 32  # skips to the next live file, then finds
    assert phys_of(store.get_message("G", "Fill", 0, 0, 1))[0] >= cl.min_offset
    # A queue file gone under a live offset: OFFSET_FOUND_NULL, next = start of the next file.
    cq = store.find_consume_queue("Fill", 0, create=False)
    cq.mfq.delete_first_files(1)
    assert get(store, "Fill", 0, 30)[:2] == (S.OFFSET_FOUND_NULL, 100)


@pytest.mark.parametrize("n", [1, 32, 1000])
async def test_filter_budget_scans_exactly_max_16000_or_n_times_20(make_store, n):
    store = await make_store(mapped_file_size_commitlog=1024 * 1024, mapped_file_size_consume_queue=20 * 5000)
    await put_n(store, "T", 0, 2000, body=b"b", tags="TagB")
    flt = MessageFilter.from_expression("TagA")
    budget_units = max(16000, n * 20) // 20
    res = store.get_message("G", "T", 0, 7, n, flt)
    assert res.status == S.NO_MATCHED_MESSAGE and res.message_count == 0
    assert res.next_begin_offset == 7 + budget_units
    res.release()


async def test_filter_on_record_tags_after_unit_code(make_store):
    store = await make_store()
    # "Aa" and "BB" have the same Java hashCode: the unit matches, the record must not.
    assert _store.java_hash_code("Aa") == _store.java_hash_code("BB")
    await put_n(store, "T", 0, 3, tags="BB")
    await put_n(store, "T", 0, 2, tags="Aa")
    res = store.get_message("G", "T", 0, 0, 32, MessageFilter.from_expression("Aa"))
    assert res.status == S.FOUND and res.message_count == 2 and res.next_begin_offset == 5
    res.release()
    res = store.get_message("G", "T", 0, 0, 3, MessageFilter.from_expression("Aa || Zz"))
    assert res.message_count == 2
    res.release()
    assert get(store, "T", 0, 0, 32, MessageFilter.from_expression("*"))[4] == 5
    assert get(store, "T", 0, 0, 32, MessageFilter.from_expression("Nope"))[:2] == (S.NO_MATCHED_MESSAGE, 5)


async def test_transfer_limits_in_memory(make_store):
    store = await make_store(mapped_file_size_commitlog=4 * 1024 * 1024)
    await put_n(store, "Small", 0, 100, body=b"s" * 10)
    res = store.get_message("G", "Small", 0, 0, 64)
    assert res.message_count == 32 and not res.suggest_pulling_from_slave  # 32 in memory
    res.release()
    recs = await put_n(store, "Big", 0, 40, body=b"b" * 10_000)
    size = recs[0].wrote_bytes
    res = store.get_message("G", "Big", 0, 0, 32)
    assert res.message_count == (256 * 1024) // size  # 256 KiB
    assert res.buffer_total_size <= 256 * 1024
    res.release()


async def test_transfer_limits_in_disk_and_suggest_slave(make_store):
    store = await make_store(mapped_file_size_commitlog=4 * 1024 * 1024, total_physical_memory=100_000)
    # memory = 40 % of 100 000 bytes: anything more than 40 000 bytes behind the end is "in disk"
    await put_n(store, "Small", 0, 100, body=b"s" * 10)
    recs = await put_n(store, "Big", 0, 40, body=b"b" * 10_000)
    await put_n(store, "Tail", 0, 10, body=b"t" * 10_000)
    res = store.get_message("G", "Small", 0, 0, 32)
    assert res.message_count == 8 and res.suggest_pulling_from_slave  # 8 on disk
    res.release()
    res = store.get_message("G", "Big", 0, 0, 32)
    assert res.message_count == (64 * 1024) // recs[0].wrote_bytes and res.suggest_pulling_from_slave
    res.release()
    res = store.get_message("G", "Tail", 0, 7, 32)  # the last 3 records: within 40 000 bytes
    assert res.message_count == 3 and not res.suggest_pulling_from_slave
    res.release()
    store.config.total_physical_memory = 10**12
    res = store.get_message("G", "Small", 0, 0, 32)
    assert res.message_count == 32 and not res.suggest_pulling_from_slave
    res.release()


async def test_small_answers_are_copied_and_hold_nothing(make_store):
    store = await make_store(mapped_file_size_commitlog=8 * 1024)
    await put_n(store, "T", 0, 100)
    res = store.get_message("G", "T", 0, 0, 8)
    assert res.message_count == 8 and not res.holds_files
    assert len(res.buffers) == 1 and type(res.buffers[0]) is bytes
    assert len(res.buffers[0]) == res.buffer_total_size
    first = store.commit_log.mfq.files[0]
    assert first.hold_count == 0
    store.commit_log.mfq.delete_first_files(1)
    assert first.destroyed  # nothing of the answer refers to the mapping
    assert [r["queue_offset"] for r in map(_store.decode_record, res.iter_records())] == list(range(8))


async def test_views_hold_the_file_until_released(make_store, monkeypatch):
    from rmq.store import message_store

    monkeypatch.setattr(message_store, "PULL_COPY_LIMIT", 0)  # every answer as views
    store = await make_store(mapped_file_size_commitlog=8 * 1024)
    await put_n(store, "T", 0, 100)
    res = store.get_message("G", "T", 0, 0, 8)
    assert res.holds_files
    first = store.commit_log.mfq.files[0]
    data = bytes(res.buffers[0])
    assert first.hold_count == 1
    store.commit_log.mfq.delete_first_files(1)
    assert not first.destroyed  # still mapped under the pull in flight
    assert bytes(res.buffers[0]) == data
    res.release()
    # Unmapped now, or (if the warm-ahead thread still touches it) on the next clean run.

    def destroyed():
        if not first.destroyed:
            store.commit_log.mfq.retry_pending_destroy()
        return first.destroyed

    await wait_until(destroyed, what="the first file unmapped")
    assert not os.path.exists(first.path)


# --------------------------------------------------------------------------------------------
# Differential test against the pure-Python model of seed 001's algorithm
# --------------------------------------------------------------------------------------------
TAGS = ["A", "B", "C", "Aa", "BB", None]


async def test_differential_against_the_model(make_store, depth):
    rng = random.Random(20261121)
    cl_size, units_per_file = 32 * 1024, 50
    store = await make_store(mapped_file_size_commitlog=cl_size, mapped_file_size_consume_queue=20 * units_per_file)
    queues = [(f"T{t}", q) for t in range(8) for q in range(5)]
    units = {k: [] for k in queues}
    tags_of = {}
    for _ in range(int(4000 * depth)):
        k = rng.choice(queues[: rng.randint(1, len(queues))])  # skewed: some queues long
        tag = rng.choice(TAGS)
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 400)))
        r = await store.put_message(MessageInner(k[0], k[1], body, properties={"TAGS": tag} if tag else {}))
        a = r.append
        assert a.logics_offset == len(units[k])
        units[k].append((a.wrote_offset, a.wrote_bytes, _store.java_hash_code(tag) if tag else 0))
        tags_of[a.wrote_offset] = (a.wrote_bytes, tag)
    store.do_reput()
    max_py = store.max_phy_offset

    def check(phase, min_of, n_queries):
        live_from = store.commit_log.min_offset
        records = {p: v for p, v in tags_of.items() if p >= live_from}
        for _ in range(n_queries):
            k = rng.choice(queues)
            u = units[k]
            offset = rng.randint(-2, len(u) + 3)
            n = rng.choice([1, 2, 8, 31, 32, 64, 1000])
            pick = rng.sample(TAGS[:-1], rng.randint(0, 3))
            flt = MessageFilter.from_expression(" || ".join(pick)) if pick else None
            tpm = rng.choice([10**12, max_py, max_py // 2, 50_000, 1])
            store.config.total_physical_memory = tpm
            cfg = _model.ModelConfig(
                cq_units_per_file=units_per_file, commitlog_file_size=cl_size, memory=int(tpm * 0.4)
            )
            exp = _model.get_message(
                cfg,
                u,
                min_of(k),
                records,
                max_py,
                offset,
                n,
                None if flt is None else set(flt.codes),
                None if flt is None else set(flt.tags),
            )
            res = store.get_message("G", k[0], k[1], offset, n, flt)
            got = (
                res.status.name,
                res.next_begin_offset,
                res.min_offset,
                res.max_offset,
                res.suggest_pulling_from_slave
                if res.status.name
                not in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_ONE", "OFFSET_OVERFLOW_BADLY", "NO_MESSAGE_IN_QUEUE")
                else False,
                phys_of(res),
                res.buffer_total_size,
            )
            res.release()
            want = (
                exp.status,
                exp.next_begin_offset,
                exp.min_offset,
                exp.max_offset,
                exp.suggest_pulling_from_slave,
                exp.phys,
                exp.total,
            )
            assert got == want, (phase, k, offset, n, pick, tpm)

    check("all live", lambda k: 0, 2500)
    # CommitLog files deleted, queues not yet corrected: MESSAGE_WAS_REMOVING and skips.
    store.commit_log.mfq.delete_first_files(6)
    check("removing", lambda k: 0, 1500)
    # Queues corrected to the new minimum.
    store.delete_expired_files()
    live_from = store.commit_log.min_offset

    def corrected_min(k):
        for i, (p, _, _) in enumerate(units[k]):
            if p >= live_from:
                return i
        return len(units[k])

    for k in queues:
        assert store.get_min_offset_in_queue(*k) == corrected_min(k)
    check("corrected", corrected_min, 1500)


def test_scan_differential_over_thousands_of_random_queues(depth):
    """rmq._store.get_message_scan against the model on 3000 synthetic queues: random file
    sizes, removed files, units past the readable end, tag collisions, memory settings."""
    rng = random.Random(1234)
    host = bytes(8)
    tags_pool = ["A", "B", "Aa", "BB", "C", None]
    for case in range(int(3000 * depth)):
        file_size = rng.choice([2048, 4096, 8192])
        n_files = rng.randint(1, 4)
        removed = rng.randint(0, 2)  # leading files that no longer exist
        files = [bytearray(file_size) for _ in range(n_files)]
        first_from = removed * file_size
        recs = []  # (phy, size, tags) for every record written
        for f in range(removed + n_files):
            pos = 0
            while True:
                tag = rng.choice(tags_pool)
                props = f"TAGS\x01{tag}".encode() if tag else b""
                body = bytes(rng.randint(0, 300))
                size = _store.RECORD_FIXED_SIZE + len(body) + 1 + len(props)
                if pos + size + 8 > file_size:
                    break
                phy = f * file_size + pos
                if f >= removed:
                    _store.encode_record(
                        files[f - removed], pos, body, b"T", props, 0, 0, len(recs), phy, 0, 0, host, 0, host, 0, 0
                    )
                recs.append((phy, size, tag))
                pos += size
        max_py = (removed + n_files - 1) * file_size + rng.randint(0, file_size)
        readable = rng.choice([max_py, rng.randint(0, max_py)])
        # The queue: a random increasing subset of the records, some units with a wrong size.
        queue = sorted(rng.sample(recs, rng.randint(1, min(len(recs), 400))))
        units = []
        for phy, size, tag in queue:
            if rng.random() < 0.02:
                size += 1  # a unit that does not match its record
            units.append((phy, size, _store.java_hash_code(tag) if tag else 0))
        cq = bytearray()
        for phy, size, code in units:
            cq += struct.pack(">qiq", phy, size, code)
        start = rng.randint(0, len(units) - 1)
        n = rng.choice([1, 3, 8, 32, 64, 2000])
        memory = rng.choice([10**12, rng.randint(0, max_py + 1)])
        pick = rng.sample(tags_pool[:-1], rng.randint(0, 2))
        flt = MessageFilter.from_expression(" || ".join(pick)) if pick else None
        limits = rng.choice([(256 * 1024, 32, 64 * 1024, 8), (3000, 5, 1000, 2)])
        table = _store.CommitLogTable()
        table.reset(file_size, first_from, list(files))
        status, scanned, _count, total, max_phy, segments = _store.get_message_scan(
            cq,
            start * 20,
            len(cq),
            table,
            readable,
            n,
            max_py,
            memory,
            None if flt is None else flt.codes,
            None if flt is None else flt.tag_bytes,
            *limits,
        )
        got_phys = []
        for idx, s, e in segments:
            pos = s
            while pos < e:
                r = _store.decode_record(files[idx], pos)
                assert r["commit_log_offset"] == first_from + idx * file_size + pos
                got_phys.append(r["commit_log_offset"])
                pos += r["store_size"]
        copied = _store.get_message_scan(
            cq,
            start * 20,
            len(cq),
            table,
            readable,
            n,
            max_py,
            memory,
            None if flt is None else flt.codes,
            None if flt is None else flt.tag_bytes,
            *limits,
            copy_limit=rng.choice([1, total, total + 1, 1 << 20]),
        )
        # the copy: the same scan, and the segments' bytes in order when they fit its limit
        assert copied[:5] == (status, scanned, _count, total, max_phy)
        if type(copied[5]) is bytes:
            assert len(copied[5]) == total and copied[5] == b"".join(bytes(files[i][s:e]) for i, s, e in segments)
        else:
            assert copied[5] == segments
        table.release()
        live = {phy: (size, tag) for phy, size, tag in recs if phy >= first_from and phy + size <= readable}
        cfg = _model.ModelConfig(
            cq_units_per_file=10**9,
            commitlog_file_size=file_size,
            memory=memory,
            max_bytes_mem=limits[0],
            max_count_mem=limits[1],
            max_bytes_disk=limits[2],
            max_count_disk=limits[3],
        )
        exp = _model.get_message(
            cfg,
            units,
            0,
            live,
            max_py,
            start,
            n,
            None if flt is None else set(flt.codes),
            None if flt is None else set(flt.tags),
        )
        got = (S(status).name, start + scanned // 20, got_phys, total, (max_py - max_phy) > memory)
        want = (exp.status, exp.next_begin_offset, exp.phys, exp.total, exp.suggest_pulling_from_slave)
        assert got == want, (case, file_size, n_files, removed, start, n, pick, memory, limits)
