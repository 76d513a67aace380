"""Puts (SPEC S1/S2/S4): records, batches, refusals, rolls, dispatch, listeners, flush."""

import asyncio
import errno
import os
import struct
import time

import pytest
from store_support import STORE_HOST, small_config

from rmq import _store
from rmq._testing import wait_until
from rmq.errors import StoreError
from rmq.store import (
    GetMessageStatus,
    MessageFilter,
    MessageInner,
    MessageStore,
    MessageSysFlag,
    PutMessageStatus,
    offset_msg_id,
)
from rmq.store.message import host_bytes


def batch_item(body, props: bytes, flag=0):
    total = 20 + len(body) + 2 + len(props)
    return struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props


def _break_syncs(monkeypatch, broken):
    """Both ways a flush reaches the disk fail with ``broken``'s error: a whole file's fdatasync
    and the written range's msync (``_store.sync_range``, which returns the errno)."""
    monkeypatch.setattr(os, "fdatasync", broken)

    def broken_range(buf, start, end):
        try:
            broken(-1)
        except OSError as e:
            return e.errno
        return 0

    monkeypatch.setattr(_store, "sync_range", broken_range)


async def test_put_and_look_up_by_physical_offset(make_store):
    store = await make_store()
    msg = MessageInner(
        "TopicTest",
        2,
        b"Hello",
        flag=5,
        properties={"TAGS": "TagA", "KEYS": "k1 k2"},
        born_timestamp=1234,
        born_host=("10.0.0.7", 50000),
        reconsume_times=3,
    )
    r = await store.put_message(msg)
    assert r.status == PutMessageStatus.PUT_OK
    a = r.append
    assert a.wrote_offset == 0 and a.logics_offset == 0 and a.msg_num == 1
    assert a.msg_id == offset_msg_id(host_bytes(STORE_HOST), 0) == "7F00000100002A9F0000000000000000"
    r2 = await store.put_message(MessageInner("TopicTest", 2, b"World"))
    assert r2.append.wrote_offset == a.wrote_bytes and r2.append.logics_offset == 1
    m = store.look_message_by_offset(a.wrote_offset)
    assert (m.topic, m.queue_id, m.queue_offset, m.body, m.flag) == ("TopicTest", 2, 0, b"Hello", 5)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2"} and m.tags == "TagA"
    assert m.born_host == ("10.0.0.7", 50000) and m.store_host == STORE_HOST
    assert m.born_timestamp == 1234 and m.reconsume_times == 3 and m.msg_id == a.msg_id
    assert m.store_timestamp == a.store_timestamp and m.store_size == a.wrote_bytes
    assert store.look_message_by_offset(a.wrote_offset, a.wrote_bytes).body == b"Hello"
    assert store.look_message_by_offset(7) is None  # not a record start
    assert store.look_message_by_offset(10**9) is None
    assert store.look_message_by_offset_msg_id(a.msg_id).body == b"Hello"
    assert store.max_phy_offset == a.wrote_bytes + r2.append.wrote_bytes and store.min_phy_offset == 0


async def test_batch_put_gives_each_item_its_own_record(make_store):
    store = await make_store()
    await store.put_message(MessageInner("B", 0, b"first"))
    batch = b"".join(
        batch_item(f"item{i}".encode(), f"UNIQ_KEY\x01U{i}\x02TAGS\x01T{i % 2}".encode(), i) for i in range(5)
    )
    r = await store.put_messages(MessageInner("B", 0, batch, properties={"WAIT": "true"}))
    assert r.is_ok and r.append.msg_num == 5 and r.append.logics_offset == 1
    assert len(r.append.msg_ids) == 5 and r.append.msg_id == r.append.msg_ids[0]
    store.do_reput()
    res = store.get_message("G", "B", 0, 1, 32)
    recs = [_store.decode_record(rec, 0, True) for rec in res.iter_records()]
    res.release()
    assert [x["queue_offset"] for x in recs] == [1, 2, 3, 4, 5]
    assert [x["body"] for x in recs] == [f"item{i}".encode() for i in range(5)]
    assert [x["flag"] for x in recs] == list(range(5))
    assert recs[0]["properties"] == b"UNIQ_KEY\x01U0\x02TAGS\x01T0\x02WAIT\x01true"
    ids = [offset_msg_id(host_bytes(STORE_HOST), x["commit_log_offset"]) for x in recs]
    assert ids == r.append.msg_ids
    res = store.get_message("G", "B", 0, 0, 32, MessageFilter.from_expression("T1"))
    assert res.message_count == 2
    res.release()


@pytest.mark.parametrize(
    "kw, status, words",
    [
        (dict(topic="T", body=b"x" * 2000), PutMessageStatus.MESSAGE_ILLEGAL, "maximum"),
        (dict(topic="T" * 128, body=b"x"), PutMessageStatus.MESSAGE_ILLEGAL, "topic"),
        (dict(topic="", body=b"x"), PutMessageStatus.MESSAGE_ILLEGAL, "topic"),
        (dict(topic="../../etc", body=b"x"), PutMessageStatus.MESSAGE_ILLEGAL, "characters"),
        (dict(topic="T\u00e9", body=b"x"), PutMessageStatus.MESSAGE_ILLEGAL, "characters"),
        (dict(topic="T", body=b"x", properties={"K": "v" * 40000}), PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, "32767"),
        (dict(topic="T", body=b"x", queue_id=-1), PutMessageStatus.MESSAGE_ILLEGAL, "queue"),
    ],
)
async def test_bad_messages_get_a_clear_status(make_store, caplog, kw, status, words):
    store = await make_store(max_message_size=1024)
    r = await store.put_message(MessageInner(**kw))
    assert r.status == status and words in r.remark and r.append is None
    assert "put refused" in caplog.text
    assert (await store.put_message(MessageInner("T", 0, b"ok"))).is_ok  # still serving


async def test_bad_batches_are_refused(make_store):
    store = await make_store(max_message_size=4096)
    r = await store.put_messages(MessageInner("T", 0, b"\x00\x00\x00\x30garbage"))
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL and "bad batch body" in r.remark
    r = await store.put_messages(MessageInner("T", 0, batch_item(b"x" * 5000, b"")))
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL
    assert store.max_phy_offset == 0


async def test_roll_writes_a_blank_record_and_everything_stays_readable(make_store):
    store = await make_store()  # 64 KiB CommitLog files
    results = [await store.put_message(MessageInner("T", 0, os.urandom(3000))) for _ in range(60)]
    store.do_reput()
    files = store.commit_log.mfq.files
    assert len(files) >= 3
    first = files[0]
    last_in_first = max((r.append for r in results if r.append.wrote_offset < 64 * 1024), key=lambda a: a.wrote_offset)
    blank_at = last_in_first.wrote_offset + last_in_first.wrote_bytes
    size, magic = struct.unpack(">iI", first.mm[blank_at : blank_at + 8])
    assert magic == _store.BLANK_MAGIC_CODE and blank_at + size == 64 * 1024
    assert results[len([r for r in results if r.append.wrote_offset < 65536])].append.wrote_offset == 65536
    seen = []
    offset = 0
    while True:
        res = store.get_message("G", "T", 0, offset, 32)
        if res.status != GetMessageStatus.FOUND:
            break
        seen += [_store.decode_record(rec, 0, True)["commit_log_offset"] for rec in res.iter_records()]
        offset = res.next_begin_offset
        res.release()
    assert seen == [r.append.wrote_offset for r in results]


async def test_arrival_listener_is_called_promptly_after_dispatch(make_store):
    store = await make_store()
    calls = []
    store.add_arrival_listener(lambda *a: calls.append(a))
    await store.put_message(MessageInner("T", 3, b"x", properties={"TAGS": "TagA"}))
    for _ in range(5):  # the behaviour under test: within a few turns of the event loop
        await asyncio.sleep(0)
        if calls:
            break
    assert calls == [("T", 3, 1, _store.java_hash_code("TagA"))]
    calls.clear()
    for i in range(4):
        await store.put_message(MessageInner("T", 3, b"x", properties={"TAGS": "TagA" if i < 3 else "TagB"}))
    store.do_reput()
    assert sorted(calls) == sorted(
        [("T", 3, 4, _store.java_hash_code("TagA")), ("T", 3, 5, _store.java_hash_code("TagB"))]
    )


async def test_appends_of_one_loop_turn_wake_dispatch_once(make_store):
    """The appender calls the dispatch wakeup only while no run is pending (its C flag
    ``wake_pending``, rmq/_append.pxi): the puts of one loop turn cost one call, and every one
    of them is dispatched by the run of the next turn."""
    store = await make_store()
    appender = store.appender
    calls = []
    wakeup = appender.waker
    assert wakeup is not None

    def counted() -> None:
        calls.append(appender.wake_pending)
        wakeup()

    appender.waker = counted
    await store.put_message(MessageInner("W", 0, b"first"))  # the queue's first put
    await wait_until(lambda: not appender.wake_pending, 20, what="the first dispatch run")
    calls.clear()
    arrived = []
    store.add_arrival_listener(lambda t, q, nxt, tags: arrived.append(nxt))
    # five puts as five tasks: they run in the same loop iteration, the dispatch in the next
    results = await asyncio.gather(*(store.put_message(MessageInner("W", 0, b"x%d" % i)) for i in range(5)))
    assert all(r.is_ok for r in results)
    assert calls == [False]  # one wakeup for the five, asked while none was pending
    await wait_until(lambda: arrived and arrived[-1] == 6, 20, what="dispatch of the five")
    assert not appender.wake_pending
    assert store.get_max_offset_in_queue("W", 0) == 6
    await store.put_message(MessageInner("W", 0, b"later"))
    assert calls == [False, False]  # the next turn's put wakes it again


async def test_transaction_half_and_rollback_messages_are_not_dispatched(make_store):
    store = await make_store()
    prep = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    r1 = await store.put_message(MessageInner("T", 0, b"half", sys_flag=prep))
    r2 = await store.put_message(
        MessageInner(
            "T",
            0,
            b"rollback",
            sys_flag=MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
            prepared_transaction_offset=r1.append.wrote_offset,
        )
    )
    r3 = await store.put_message(MessageInner("T", 0, b"commit", sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE))
    r4 = await store.put_message(MessageInner("T", 0, b"plain"))
    store.do_reput()
    assert r1.append.logics_offset == 0 and r2.append.logics_offset == 0
    assert (r3.append.logics_offset, r4.append.logics_offset) == (0, 1)
    assert store.get_max_offset_in_queue("T", 0) == 2
    res = store.get_message("G", "T", 0, 0, 32)
    assert [_store.decode_record(x)["body"] for x in res.iter_records()] == [b"commit", b"plain"]
    res.release()
    assert store.look_message_by_offset(r1.append.wrote_offset).body == b"half"


async def test_schedule_topic_units_carry_the_delivery_time(make_store):
    store = await make_store()
    r = await store.put_message(
        MessageInner("SCHEDULE_TOPIC_XXXX", 2, b"later", properties={"DELAY": "3", "REAL_TOPIC": "T", "TAGS": "x"})
    )
    store.do_reput()
    cq = store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2, create=False)
    assert cq.get_unit(0)[2] == r.append.store_timestamp + 10_000  # level 3 = 10 s


def _now_ms():
    return int(time.time() * 1000)


async def test_offsets_by_time_and_store_timestamp(make_store):
    store = await make_store()
    stamps = []
    for _ in range(6):
        r = await store.put_message(MessageInner("T", 0, b"x"))
        stamps.append(r.append.store_timestamp)
        # store timestamps have millisecond resolution: the next put gets a later one
        await wait_until(lambda: _now_ms() > stamps[-1], interval=0.001, what="the next millisecond")
    store.do_reput()
    for i, ts in enumerate(stamps):
        assert store.get_message_store_timestamp("T", 0, i) == ts
        assert store.get_offset_in_queue_by_time("T", 0, ts) == stamps.index(ts)
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, stamps[-1] + 10_000) == 6
    assert store.get_message_store_timestamp("T", 0, 99) == -1
    assert store.get_offset_in_queue_by_time("Nope", 0, 0) == 0


async def test_delete_topics(make_store):
    store = await make_store()
    for t in ("A", "B"):
        await store.put_message(MessageInner(t, 0, b"x"))
    store.do_reput()
    assert store.delete_topics(["A", "Z"]) == 1
    assert store.get_max_offset_in_queue("A", 0) == 0 and store.get_max_offset_in_queue("B", 0) == 1
    assert not os.path.exists(os.path.join(store.config.consume_queue_dir, "A"))
    r = await store.put_message(MessageInner("A", 0, b"again"))
    assert r.append.logics_offset == 0


async def test_sync_flush_group_commit_acknowledges_after_fsync(make_store, monkeypatch):
    store = await make_store(flush_disk_type="SYNC_FLUSH")
    syncs = []
    real_whole, real_range = os.fdatasync, _store.sync_range
    monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real_whole(fd))[1])
    monkeypatch.setattr(_store, "sync_range", lambda buf, s, e: (syncs.append(s), real_range(buf, s, e))[1])
    calls = []
    store.add_arrival_listener(lambda *a: calls.append(a))

    async def producer(p):
        out = []
        for _i in range(25):
            r = await store.put_message(MessageInner("S", p, os.urandom(200)))
            assert r.is_ok
            # Acknowledged ⇒ durable and (SYNC) only then dispatched.
            assert store.commit_log.flushed_offset >= r.append.wrote_offset + r.append.wrote_bytes
            out.append(r)
        return out

    results = await asyncio.gather(*(producer(p) for p in range(8)))
    assert sum(len(r) for r in results) == 200
    assert 0 < len(syncs) < 200  # group commit: fewer fsyncs than puts
    await wait_until(
        lambda: sum(store.get_max_offset_in_queue("S", p) for p in range(8)) == 200, what="all 200 dispatched"
    )
    assert calls


async def test_sync_flush_timeout_status(make_store):
    store = await make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=0)
    r = await store.put_message(MessageInner("T", 0, b"x"))
    assert r.status == PutMessageStatus.FLUSH_DISK_TIMEOUT and r.append is not None
    assert "flush" in r.remark
    assert store.runtime_info()["flushDiskTimeoutTimes"] == "1"


async def test_fsync_error_reaches_the_producer(make_store, monkeypatch, caplog):
    store = await make_store(flush_disk_type="SYNC_FLUSH")
    assert (await store.put_message(MessageInner("T", 0, b"ok"))).is_ok

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    _break_syncs(monkeypatch, broken)
    with pytest.raises(StoreError, match="Input/output error"):
        await store.put_message(MessageInner("T", 0, b"lost?"))
    assert "fdatasync failed" in caplog.text
    r = await store.put_message(MessageInner("T", 0, b"refused"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "flush error" in r.remark
    monkeypatch.undo()
    # The refusal triggered another flush; once one succeeds, writes are accepted again.
    await wait_until(lambda: store.last_flush_error is None, what="a successful flush")
    assert (await store.put_message(MessageInner("T", 0, b"back"))).is_ok
    assert "works again" in caplog.text


async def test_store_directory_lock(make_store, tmp_path):
    await make_store()
    other = MessageStore(small_config(tmp_path / "store"), STORE_HOST)
    with pytest.raises(StoreError, match="locked"):
        await other.start()


async def test_runtime_info_is_all_strings(make_store):
    store = await make_store()
    await store.put_message(MessageInner("T", 0, b"x"))
    info = store.runtime_info()
    assert all(isinstance(v, str) for v in info.values())
    assert info["putMessageTimesTotal"] == "1" and int(info["commitLogMaxOffset"]) > 0


async def test_get_and_put_after_shutdown(make_store):
    store = await make_store()
    await store.shutdown()
    r = await store.put_message(MessageInner("T", 0, b"x"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    with pytest.raises(StoreError) as ei:
        store.get_message("G", "T", 0, 0, 32)
    assert ei.value.retriable


async def test_async_flush_error_refuses_writes_until_a_flush_succeeds(make_store, monkeypatch, caplog):
    store = await make_store(flush_interval_commitlog=10, flush_commitlog_least_pages=0)

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    _break_syncs(monkeypatch, broken)
    assert (await store.put_message(MessageInner("T", 0, b"x" * 5000))).is_ok  # acked before flush
    await wait_until(lambda: store.last_flush_error, what="the flush error")
    r = await store.put_message(MessageInner("T", 0, b"y"))
    assert r.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and "Input/output error" in r.remark
    assert "refusing writes until a flush succeeds" in caplog.text
    assert store.runtime_info()["lastFlushError"]
    monkeypatch.undo()
    await wait_until(lambda: store.last_flush_error is None, what="a successful flush")
    assert (await store.put_message(MessageInner("T", 0, b"z"))).is_ok


async def test_born_host_that_is_not_ipv4(make_store):
    store = await make_store()
    for host, want in ((("::ffff:10.1.2.3", 7), ("10.1.2.3", 7)), (("::1", 9), ("0.0.0.0", 9))):
        r = await store.put_message(MessageInner("T", 0, b"x", born_host=host))
        m = store.look_message_by_offset(r.append.wrote_offset)
        assert m.born_host == want and m.sys_flag & 0x30 == 0


async def test_async_flush_waits_for_enough_dirty_pages(make_store):
    store = await make_store(
        mapped_file_size_commitlog=1024 * 1024,
        flush_interval_commitlog=10,
        flush_commitlog_least_pages=4,
        flush_commitlog_thorough_interval=10**9,
    )
    cl = store.commit_log

    await store.put_message(MessageInner("T", 0, b"x" * 1000))  # well under 4 pages
    await asyncio.sleep(0.2)  # the behaviour under test: some 20 flush rounds (10 ms) flush nothing
    assert cl.flushed_offset == 0 < cl.max_offset
    for _ in range(20):  # > 4 pages dirty
        await store.put_message(MessageInner("T", 0, b"x" * 1000))
    await wait_until(lambda: cl.flushed_offset == cl.max_offset, what="the dirty pages flushed")
    store.config.flush_commitlog_thorough_interval = 0  # "thorough": any dirty page
    await store.put_message(MessageInner("T", 0, b"y"))
    await wait_until(lambda: cl.flushed_offset == cl.max_offset, what="the last page flushed")


async def test_flush_error_after_a_timed_out_put_is_not_left_unretrieved(make_store, monkeypatch):
    import gc

    store = await make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=0)

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    _break_syncs(monkeypatch, broken)
    r = await store.put_message(MessageInner("T", 0, b"x"))
    assert r.status == PutMessageStatus.FLUSH_DISK_TIMEOUT
    await wait_until(lambda: store.last_flush_error, what="the flush error")
    gc.collect()
    await asyncio.sleep(0)  # one loop turn: the autouse guard fails the test on "never retrieved"
    monkeypatch.undo()


async def test_a_body_that_is_not_bytes_is_refused_not_raised(make_store, caplog):
    store = await make_store()
    r = await store.put_message(MessageInner("T", 0, "not bytes"))
    assert r.status == PutMessageStatus.UNKNOWN_ERROR and "append failed" in r.remark
    assert "append to CommitLog failed" in caplog.text
    assert (await store.put_message(MessageInner("T", 0, b"fine"))).is_ok


async def test_flush_callbacks_answer_after_the_group_commit_covers_them(make_store):
    """The SEND path's SYNC_FLUSH wait without a task: each callback runs once, after the
    flushed offset covers its record, in append order."""
    store = await make_store(flush_disk_type="SYNC_FLUSH")
    seen = []

    def cb(result, exc):
        assert exc is None and result.is_ok
        assert store.commit_log.flushed_offset >= result.append.wrote_offset + result.append.wrote_bytes
        seen.append(result.append.wrote_offset)

    offsets = []
    for i in range(30):
        r = store.append_message(MessageInner("S", i % 3, b"m%d" % i))
        assert r.flush_wait
        assert store.add_flush_callback(r, cb)
        offsets.append(r.append.wrote_offset)
    await wait_until(lambda: len(seen) == 30, what="every callback")
    assert seen == offsets
    assert not store.flush_commit_log.callbacks


async def test_flush_callbacks_time_out_fail_and_are_bounded(make_store, monkeypatch):
    store = await make_store(flush_disk_type="SYNC_FLUSH", sync_flush_timeout=0)
    got = []
    r = store.append_message(MessageInner("T", 0, b"x"))
    assert store.add_flush_callback(r, lambda res, exc: got.append((res.status, exc)))
    await wait_until(lambda: got, what="the timed-out callback")
    assert got == [(PutMessageStatus.FLUSH_DISK_TIMEOUT, None)] and "flush" in r.remark
    assert store.runtime_info()["flushDiskTimeoutTimes"] == "1"

    store.config.sync_flush_timeout = 5000
    gcs = store.flush_commit_log
    gcs.max_callbacks = 1

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    _break_syncs(monkeypatch, broken)
    failed = []
    r1 = store.append_message(MessageInner("T", 0, b"y"))
    r2 = store.append_message(MessageInner("T", 0, b"z"))
    assert store.add_flush_callback(r1, lambda res, exc: failed.append(exc))
    assert not store.add_flush_callback(r2, lambda res, exc: failed.append(exc))  # over max_callbacks
    await wait_until(lambda: failed, what="the failed flush reaching the callback")
    assert isinstance(failed[0], StoreError) and "Input/output error" in str(failed[0])
    monkeypatch.undo()
    # the caller that was told no waits the ordinary way; the flush works again
    store.flush_commit_log.wakeup()
    assert (await store.wait_flush(r2)).is_ok


async def test_the_ha_service_is_told_of_appends_only_while_a_writer_waits(make_store):
    """The appender calls the master's ``HAService.notify_append`` only while ``notify_armed``
    is set (a replication writer waits for data, rmq/_append.pxi), and that waiter is told."""
    store = await make_store()
    ha = store.ha
    assert ha is not None
    appender = store.appender
    notify = appender.notifier
    assert notify is not None
    calls = []

    def counted() -> None:
        calls.append(appender.notify_armed)
        notify()

    appender.notifier = counted
    await store.put_message(MessageInner("N", 0, b"a"))  # (armed at bind: one call clears it)
    await store.put_message(MessageInner("N", 0, b"b"))
    before = len(calls)
    assert before <= 1 and not appender.notify_armed
    await store.put_message(MessageInner("N", 0, b"c"))
    assert len(calls) == before  # nobody waits: no call
    waiter = asyncio.ensure_future(ha.wait_for_data(60))
    await wait_until(lambda: appender.notify_armed, 20, what="a writer waiting")
    await store.put_message(MessageInner("N", 0, b"d"))
    assert calls[before:] == [True]
    await asyncio.wait_for(waiter, 20)  # told at once, not after its 60 s
    assert not appender.notify_armed
