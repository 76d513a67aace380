"""TimerMessageStore (Java 5 ``TimerMessageStore``): enqueue, dequeue, flush and checkpoint.

The broker's SEND path (``rmq.broker.timer``) parks a timer message in ``rmq_sys_wheel_timer``
queue 0 with ``TIMER_OUT_MS`` (its delivery time) and ``REAL_TOPIC`` / ``REAL_QID``. One task
of this service then, in turn:

* **enqueue** (Java ``TimerEnqueueGetService`` + ``TimerEnqueuePutService``): reads the timer
  queue's ConsumeQueue from ``queue_offset`` and, for each unit, appends a timer-log record and
  links it into the wheel slot of its tick (the delivery time rounded *up* to
  ``timerPrecisionMs``: never early; Java rounds down and may deliver up to one tick early).
  A tick already passed goes to the next tick to deliver. A delivery further than
  ``timerRollWindowSlot`` ticks away is linked one window (or half of one when less than a
  third of a window would remain) ahead with the ROLL magic, as Java's ``doEnqueue``;
* **dequeue** (Java ``TimerDequeueGetService`` + ``TimerDequeuePutMessageService``): for each
  tick up to now with records (``timer_wheel_scan`` skips empty ticks), walks the slot's chain
  and appends each message to its real topic (``REAL_TOPIC`` / ``REAL_QID`` removed,
  ``TIMER_ENQUEUE_MS`` / ``TIMER_DEQUEUE_MS`` added, everything else, ``UNIQ_KEY`` and
  ``TIMER_OUT_MS`` included, kept: Java ``convertMessage``), or, for a ROLL record, again into
  the timer topic with ``TIMER_ROLL_TIMES`` + 1. Appends go through ``MessageStore.append_message``
  (the store's one writer); a SYNC_FLUSH store's group commit is awaited once per tick.

Enqueue and dequeue run in one task, so a tick is delivered only after every unit the
ConsumeQueue held when it was reached was enqueued. A second task writes, every
``timerFlushIntervalMs``, the timer log and wheel (fdatasync / msync) and then the checkpoint,
in a thread.

Guarantee (docs/design.md "Timer messages"): no timer is lost by a restart or ``kill -9``; after
a ``kill -9`` the ticks delivered since the last checkpoint (at most ``timerFlushIntervalMs``
of deliveries, plus the tick being delivered) are delivered again: at-least-once, as Java's.
A clean stop writes the checkpoint last, so nothing is delivered twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import threading
import time
import zlib
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.common.files import atomic_write
from rmq.common.log import RateLimitedLog
from rmq.common.message import MessageConst
from rmq.common.tasks import stop_gracefully, wait_event
from rmq.store.message import MessageInner, PutMessageResult, PutMessageStatus
from rmq.store.timer.files import SLOTS_TOTAL, UNIT, TimerCheckpoint, TimerLog, TimerWheel

if TYPE_CHECKING:
    from rmq.store.config import StoreConfig
    from rmq.store.message_store import MessageStore

__all__ = ["TIMER_TOPIC", "TimerMessageStore", "timer_delete_key", "timer_slot_time"]

log = logging.getLogger("rmq.store.timer")
_rlog = RateLimitedLog(log)

TIMER_TOPIC = TopicValidator.RMQ_SYS_WHEEL_TIMER_TOPIC
#: Java TimerMessageStore.TIMER_BLANK_SLOTS: the roll window stays this far inside the ring.
TIMER_BLANK_SLOTS = 60
ENQUEUE_BATCH = 4096  # units enqueued before the task yields to the loop
DEQUEUE_CHUNK = 4096  # records of one tick delivered between two loop turns
_MAGIC_DEFAULT = _store.TIMER_MAGIC_DEFAULT
_MAGIC_ROLL = _store.TIMER_MAGIC_ROLL
#: Java TimerMessageStore.MAGIC_DELETE: the record is a cancel marker (``TIMER_DEL_UNIQKEY``)
#: for the message of its tick whose ``REAL_TOPIC + "+" + UNIQ_KEY`` it names; never delivered.
_MAGIC_DELETE = 1 << 2
# Java doPut: retried later (the message stays due) vs. dropped with a log line.
_NO_RETRY = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def timer_slot_time(deliver_ms: int, precision_ms: int) -> int:
    """The tick whose slot delivers a message due at ``deliver_ms``: rounded up to the
    precision, so delivery is never before ``deliver_ms``."""
    return -(-deliver_ms // precision_ms) * precision_ms


def timer_delete_key(real_topic: str, uniq_key: str) -> str:
    """The ``TIMER_DEL_UNIQKEY`` value that cancels the timer message ``uniq_key`` of
    ``real_topic`` (Java ``TimerMessageStore.buildDeleteKey``)."""
    return f"{real_topic}+{uniq_key}"


def _topic_hash(topic: str) -> int:
    h = zlib.crc32(topic.encode("utf-8"))
    return h - (1 << 32) if h >= 1 << 31 else h


class TimerMessageStore:
    """The timer wheel of one ``MessageStore``.

    Args:
        store: the message store (its CommitLog, the timer topic's ConsumeQueue and its one
            writer are used; its ``config`` gives the ``timer*`` settings and the root).

    Attributes (for metrics and tests): ``read_time`` (the next tick to deliver; every tick
    before it is delivered), ``queue_offset`` (the next unit of the timer queue to enqueue),
    ``pending`` (records in the wheel not delivered yet), ``enqueued`` / ``dequeued`` /
    ``rolled`` / ``discarded`` / ``cancelled`` (totals since start).
    """

    def __init__(self, store: MessageStore):
        self.store = store
        cfg: StoreConfig = store.config
        self.config = cfg
        self.precision = cfg.timer_precision_ms
        root = cfg.store_path_root_dir
        self.log = TimerLog(root, cfg.mapped_file_size_timer_log)
        self.wheel = TimerWheel(root, self.precision)
        self.checkpoint = TimerCheckpoint(root)
        # Java TimerMetrics' timingCount: pending timers per real topic, [count, last change
        # ms]; persisted beside the checkpoint in config/timermetrics (its JSON shape)
        self.metrics_path = os.path.join(root, "config", "timermetrics")
        self.timing_count: dict[str, list[int]] = {}
        self._metrics_version = [0, _now_ms(), 0]  # DataVersion: stateVersion, timestamp, counter
        self.read_time = 0
        self.queue_offset = 0
        self.pending = 0
        self.enqueued = 0
        self.dequeued = 0
        self.rolled = 0
        self.discarded = 0
        self.cancelled = 0
        self.enqueue_tps = 0.0
        self.dequeue_tps = 0.0
        self._tps_mark = (time.monotonic(), 0, 0)
        self._wake: asyncio.Event | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._flush_task: asyncio.Task[Any] | None = None
        self._loaded = False
        self._stopping = False
        self._saved: tuple[int, int, int] | None = None
        self._io_lock = threading.Lock()
        self._closed = False  # the final checkpoint was written (stop)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Enqueue and dequeue run (a master with ``timerWheelEnable``; a slave only
        replicates the timer topic, as any topic)."""
        return self._task is not None and self._loaded

    async def start(self) -> None:
        """Start the services; the files are recovered (in a thread) now when they exist,
        else at the first timer message (a broker that never sees one creates none). A
        slave stays idle."""
        if self.config.broker_role == "SLAVE":
            log.info("timer store idle: this store is a slave (the timer topic replicates as any topic)")
            return
        self._wake = asyncio.Event()
        self.store.add_arrival_listener(self._on_arrival, watched={(TIMER_TOPIC, 0)})
        if self._has_files():
            await self._open()
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name="timer-wheel")
        self._flush_task = loop.create_task(self._flush_loop(), name="timer-flush")

    def _has_files(self) -> bool:
        return (
            os.path.exists(self.wheel.path) or self.store.find_consume_queue(TIMER_TOPIC, 0, create=False) is not None
        )

    async def _open(self) -> None:
        await asyncio.to_thread(self._load)
        self._loaded = True
        log.info(
            "timer store open: precision %d ms, read time %d, queue offset %d, %d pending, timer log %d..%d",
            self.precision,
            self.read_time,
            self.queue_offset,
            self.pending,
            self.log.min_pos,
            self.log.write_pos,
        )

    async def stop(self, grace: float = 5.0) -> None:
        """Stop between two ticks, then write the files and the checkpoint (a clean stop
        delivers nothing twice) and close them."""
        self._stopping = True
        self._stop.set()
        if self._wake is not None:
            self._wake.set()
        await stop_gracefully(self._task, grace, log, "timer wheel", also=(self._flush_task,))
        self._task = self._flush_task = None
        if self._loaded:
            try:
                await self._write_checkpoint(final=True)
            except Exception:  # shutdown goes on; a crash start recovers
                log.exception("timer store: final checkpoint failed")
            self.log.shutdown()
            self.wheel.close()
            self._loaded = False

    def _load(self) -> None:
        self._load_metrics()
        ck = self.checkpoint
        ck.load()
        self.log.load()
        new_wheel = self.wheel.load()
        # a lost wheel file is rebuilt from the whole timer log
        start = ck.last_timer_log_flush_pos if ck.loaded and not new_wheel else self.log.min_pos
        found = self.log.recover(start)
        queue_offset = ck.last_timer_queue_offset if ck.loaded else 0
        relinked = 0
        for pos, tick, qoff in found:
            queue_offset = max(queue_offset, qoff + 1)
            _first, last, num = self.wheel.slot(tick)
            if num > 0 and last >= pos:
                continue
            # written after the checkpoint but not linked (killed between the two writes, or
            # the wheel's pages were lost with the machine): link it again
            mf = self.log.mfq.find_by_offset(pos)
            if mf is None:
                continue
            fpos = pos - mf.file_from_offset
            _size, magic, _prev, enq, deliver, phy, size_py, thash, q = _store.timer_read_record(mf.mm, fpos)
            _store.timer_enqueue(
                mf.mm, fpos, pos, self.wheel.buf, self.wheel.slots, self.precision, tick, magic, enq, deliver,
                phy, size_py, thash, q,
            )  # fmt: skip
            relinked += 1
        if ck.loaded:
            self.read_time = ck.last_read_time_ms
        elif found:
            self.read_time = min(tick for _pos, tick, _q in found)
        else:
            self.read_time = timer_slot_time(_now_ms(), self.precision)
        self.read_time = timer_slot_time(self.read_time, self.precision)
        self.queue_offset = queue_offset
        self.pending = self.wheel.scan(self.read_time, self.read_time + (self.wheel.slots - 1) * self.precision)[0]
        if found or relinked:
            log.info("timer store recovered %d records past the checkpoint (%d linked again)", len(found), relinked)

    # -- the send side ----------------------------------------------------------------------

    def is_reject(self, deliver_ms: int) -> bool:
        """Java ``isReject``: flow control on the slot of ``deliver_ms`` past
        ``timerCongestNumEachSlot`` records (random between one and two times it)."""
        congest = self.config.timer_congest_num_each_slot
        if not self._loaded or congest >= (1 << 31) - 1:
            return False
        num = self.wheel.slot(timer_slot_time(deliver_ms, self.precision))[2]
        if num <= congest:
            return False
        if num >= congest * 2:
            return True
        return random.randrange(1000) > 1000 * (num - congest) / (congest + 0.1)

    # -- the services -----------------------------------------------------------------------

    def _on_arrival(self, topic: str, queue_id: int, next_offset: int, tags_code: int) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        wake = self._wake
        assert wake is not None  # set by start()
        errors = 0
        while not self._stopping:
            wake.clear()
            try:
                if not self._loaded:
                    if not self._has_files():
                        await wait_event(wake, None)  # the first timer message's arrival
                        continue
                    await self._open()
                more = self._enqueue(ENQUEUE_BATCH)
                paused = self.config.timer_stop_dequeue
                if not more and not paused:
                    await self._dequeue()
                errors = 0
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed step is logged and retried with backoff
                errors += 1
                backoff = min(5.0, 0.05 * (2 ** min(errors, 10)))
                _rlog.error("timer-run", "timer wheel step failed; retrying in %.2f s", backoff, exc_info=True)
                await wait_event(self._stop, backoff)
                continue
            if more:
                await asyncio.sleep(0)  # a backlog: let the loop serve requests between batches
                continue
            # timerStopDequeue: the flag is read again each second (a live change is seen then)
            delay = 1.0 if paused else (self.read_time - _now_ms()) / 1000.0
            if delay > 0:
                await wait_event(wake, delay)

    def _enqueue(self, limit: int) -> bool:
        """Enqueue up to ``limit`` units; True when more are waiting."""
        store = self.store
        cq = store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        if cq is None:
            return False
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        if self.queue_offset < lo:
            _rlog.warning(
                "timer-queue-gone",
                "timer queue offset %d is below the queue minimum %d (expired CommitLog files); skipping ahead",
                self.queue_offset,
                lo,
            )
            self.queue_offset = lo
        elif self.queue_offset > hi:
            _rlog.warning(
                "timer-queue-past", "timer queue offset %d is past its end %d; resetting", self.queue_offset, hi
            )
            self.queue_offset = hi
        n = 0
        now = _now_ms()
        while self.queue_offset < hi and n < limit:
            unit = cq.get_unit(self.queue_offset)
            if unit is None:
                break
            phy, size, _tags = unit
            ext = store.look_message_by_offset(phy, size)
            props = ext.properties if ext is not None else {}
            deliver = _as_int(props.get(MessageConst.TIMER_OUT_MS))
            real_topic = props.get(MessageConst.REAL_TOPIC)
            if ext is None or deliver is None or not real_topic:
                _rlog.error(
                    "timer-bad-unit",
                    "timer queue offset %d (CommitLog %d): no message or no TIMER_OUT_MS/REAL_TOPIC; skipped",
                    self.queue_offset,
                    phy,
                )
                self.discarded += 1
            else:
                delete = MessageConst.TIMER_DEL_UNIQKEY in props
                if not delete:
                    self._count(real_topic, 1)
                self._enqueue_one(phy, size, deliver, now, _topic_hash(real_topic), self.queue_offset, delete)
            self.queue_offset += 1
            n += 1
        return self.queue_offset < hi

    def _enqueue_one(
        self, phy: int, size: int, deliver: int, now: int, topic_hash: int, queue_offset: int, delete: bool = False
    ) -> None:
        prec = self.precision
        window = min(self.config.timer_roll_window_slot, SLOTS_TOTAL - TIMER_BLANK_SLOTS)
        # Java doEnqueue: a cancel marker is linked into the tick of the time it names (the
        # cancelled message's), and rolls with it when far ahead
        magic = _MAGIC_DEFAULT | (_MAGIC_DELETE if delete else 0)
        tick = timer_slot_time(deliver, prec)
        base = max(now, self.read_time)
        if deliver - base >= window * prec:
            # Java doEnqueue: park it one roll window on; it is put back then
            magic |= _MAGIC_ROLL
            if deliver - base - window * prec < window // 3 * prec:
                tick = timer_slot_time(base + window // 2 * prec, prec)
            else:
                tick = timer_slot_time(base + window * prec, prec)
        if tick < self.read_time:
            tick = self.read_time  # its tick was delivered: the next one takes it
        mf, fpos, pos = self.log.place()
        _store.timer_enqueue(
            mf.mm, fpos, pos, self.wheel.buf, self.wheel.slots, prec, tick, magic, now, deliver, phy, size,
            topic_hash, queue_offset,
        )  # fmt: skip
        mf.wrote_position = fpos + UNIT
        self.pending += 1
        self.enqueued += 1

    async def _dequeue(self) -> None:
        prec = self.precision
        while not self._stopping:
            now_tick = _now_ms() // prec * prec
            if self.read_time > now_tick:
                return
            _n, tick, _min = self.wheel.scan(self.read_time, now_tick)
            if tick < 0:
                self.read_time = now_tick + prec
                return
            self.read_time = tick
            if not await self._deliver_tick(tick):
                return  # stopping in the middle of a tick: it is delivered again at start
            self.read_time = tick + prec

    async def _deliver_tick(self, tick: int) -> bool:
        """Deliver every record of ``tick``'s slot: the chain is walked from its newest record
        back, ``DEQUEUE_CHUNK`` records at a time, each chunk delivered oldest first (a tick of
        up to a chunk is in arrival order; Java delivers a slot newest first), with a loop turn
        between chunks. False when stopping in a retry wait (the tick is delivered again)."""
        _first, last, num = self.wheel.slot(tick)
        if num <= 0:
            return True
        log_ = self.log
        store = self.store
        waiter: PutMessageResult | None = None
        cancelled = await self._cancelled_keys(tick, last)
        pos = last
        walked = 0
        while pos >= 0:
            records, pos, broken = _store.timer_slot_records(
                log_.buffers(), log_.min_pos, log_.file_size, pos, log_.min_pos, DEQUEUE_CHUNK
            )
            walked += len(records)
            if broken:
                _rlog.error(
                    "timer-chain",
                    "timer tick %d: the slot's chain stops at timer log position %d (below %d or not a record); "
                    "%d of %d records delivered",
                    tick,
                    pos,
                    log_.min_pos,
                    walked,
                    num,
                )
                pos = -1
            for _pos, magic, enq_ms, _deliver, phy, size, _qoff in records:
                if magic & (_MAGIC_DELETE | _MAGIC_ROLL) == _MAGIC_DELETE:
                    continue  # a cancel marker: read by _cancelled_keys, never delivered
                result = await self._deliver_one(tick, magic, enq_ms, phy, size, cancelled)
                if result is None:
                    return False
                if result.flush_wait:
                    waiter = result
            if pos >= 0:
                await asyncio.sleep(0)  # a big tick: let the loop serve requests between chunks
        if waiter is not None:
            await store.wait_flush(waiter)  # the group commit covering the tick's last append
        self.pending = max(0, self.pending - num)
        return True

    async def _cancelled_keys(self, tick: int, last: int) -> set[str]:
        """The ``TIMER_DEL_UNIQKEY`` values of the tick's cancel markers (Java
        ``dequeue``'s ``deleteMsgStack``, read before the tick's messages, wherever in the
        chain they are). A first walk of the chain reading only its 64-byte records."""
        log_ = self.log
        keys: set[str] = set()
        pos = last
        while pos >= 0:
            records, pos, broken = _store.timer_slot_records(
                log_.buffers(), log_.min_pos, log_.file_size, pos, log_.min_pos, DEQUEUE_CHUNK
            )
            for _pos, magic, _enq, _deliver, phy, size, _qoff in records:
                if magic & (_MAGIC_DELETE | _MAGIC_ROLL) != _MAGIC_DELETE:
                    continue
                ext = self.store.look_message_by_offset(phy, size)
                key = ext.properties.get(MessageConst.TIMER_DEL_UNIQKEY) if ext is not None else None
                if key:
                    keys.add(key)
            if broken:
                break  # _deliver_tick logs the broken chain
            if pos >= 0:
                await asyncio.sleep(0)
        return keys

    async def _deliver_one(
        self,
        tick: int,
        magic: int,
        enq_ms: int,
        phy: int,
        size: int,
        cancelled: set[str] | frozenset[str] = frozenset(),
    ) -> PutMessageResult | None:
        """Append one due message; its result (a dropped or cancelled one's too), None when
        stopping."""
        store = self.store
        ext = store.look_message_by_offset(phy, size)
        if ext is None:
            _rlog.error("timer-lost", "timer tick %d: no message at CommitLog offset %d; skipped", tick, phy)
            self.discarded += 1
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        roll = bool(magic & _MAGIC_ROLL)
        if cancelled and not roll:
            uniq = ext.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            real = ext.properties.get(MessageConst.REAL_TOPIC)
            if uniq and real and timer_delete_key(real, uniq) in cancelled:
                self.cancelled += 1  # Java's "dequeue_delete": cancelled before its time
                self._count(real, -1)
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        inner = self._convert(ext, enq_ms, roll)
        if inner is None:
            self.discarded += 1
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        while True:
            result = store.append_message(inner)
            if result.status in _STORED:
                break
            if result.status in _NO_RETRY:
                _rlog.error(
                    "timer-refused",
                    "timer message %s refused by the store (%s %s); dropped",
                    ext.msg_id,
                    result.status.name,
                    result.remark or "",
                )
                self.discarded += 1
                return result
            _rlog.warning(
                "timer-retry",
                "delivering timer message %s failed (%s %s); retrying in 1 s",
                ext.msg_id,
                result.status.name,
                result.remark or "",
            )
            if await wait_event(self._stop, 1.0):
                return None
        if roll:
            self.rolled += 1
        else:
            self.dequeued += 1
        # a rolled one is counted again when it is enqueued back; a (rolled) marker never counted
        if MessageConst.TIMER_DEL_UNIQKEY not in ext.properties:
            self._count(ext.properties.get(MessageConst.REAL_TOPIC) or "", -1)
        return result

    def _convert(self, ext: Any, enqueue_ms: int, roll: bool) -> MessageInner | None:
        """Java ``convert`` / ``convertMessage``: the message to append for a due record."""
        props = dict(ext.properties)
        props[MessageConst.TIMER_ENQUEUE_MS] = str(enqueue_ms)
        if roll:
            props[MessageConst.TIMER_ROLL_TIMES] = str((_as_int(props.get(MessageConst.TIMER_ROLL_TIMES)) or 0) + 1)
            topic, queue_id = TIMER_TOPIC, 0
        else:
            topic = props.pop(MessageConst.REAL_TOPIC, "")
            qid = _as_int(props.pop(MessageConst.REAL_QUEUE_ID, None))
            if not topic or qid is None:
                _rlog.error("timer-no-real", "timer message %s has no REAL_TOPIC/REAL_QID; dropped", ext.msg_id)
                return None
            queue_id = qid
        props[MessageConst.TIMER_DEQUEUE_MS] = str(_now_ms())
        return MessageInner(
            topic=topic,
            queue_id=queue_id,
            body=ext.body,
            flag=ext.flag,
            properties=props,
            born_timestamp=ext.born_timestamp,
            born_host=ext.born_host,
            sys_flag=ext.sys_flag,
            reconsume_times=ext.reconsume_times,
        )

    # -- flush and checkpoint -----------------------------------------------------------------

    async def _flush_loop(self) -> None:
        rounds = 0
        while not self._stopping:
            if await wait_event(self._stop, self.config.timer_flush_interval_ms / 1000.0):
                return
            if not self._loaded:
                continue
            try:
                await self._write_checkpoint()
                self._sample_tps()
                rounds += 1
                if rounds % 10 == 0:
                    self._clean()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - logged; the next round retries
                _rlog.error("timer-flush", "timer store flush or checkpoint failed", exc_info=True)

    async def _write_checkpoint(self, final: bool = False) -> None:
        values = (self.read_time, self.log.write_pos, self.queue_offset)
        if values == self._saved and not final:
            return

        def work() -> None:
            # one writer at a time: a flush cancelled at stop may still run in its thread
            # while the final checkpoint is written; after the final one nothing writes
            with self._io_lock:
                if self._closed:
                    return
                self._closed = final
                self.log.flush()
                self.wheel.flush()
                self.checkpoint.write(*values)
                atomic_write(self.metrics_path, self.metrics_json().encode())

        await asyncio.to_thread(work)
        self._saved = values

    def _clean(self) -> None:
        """Delete the timer-log files holding only delivered records (Java
        ``TimerLog``'s ``deleteExpiredFileByOffsetForTimerLog``)."""
        _n, _tick, min_pos = self.wheel.scan(self.read_time, self.read_time + (self.wheel.slots - 1) * self.precision)
        keep_from = min(self.checkpoint.last_timer_log_flush_pos, self.log.write_pos if min_pos < 0 else min_pos)
        deleted = self.log.delete_below(keep_from)
        if deleted:
            log.info("timer store: deleted %d timer log files below %d", deleted, keep_from)

    def _sample_tps(self) -> None:
        t0, enq0, deq0 = self._tps_mark
        t1 = time.monotonic()
        if t1 - t0 >= 1.0:
            self.enqueue_tps = (self.enqueued - enq0) / (t1 - t0)
            self.dequeue_tps = (self.dequeued - deq0) / (t1 - t0)
            self._tps_mark = (t1, self.enqueued, self.dequeued)

    # -- figures ------------------------------------------------------------------------------

    def _count(self, topic: str, delta: int) -> None:
        if not topic:
            return
        pair = self.timing_count.get(topic)
        if pair is None:
            pair = self.timing_count[topic] = [0, 0]
        pair[0] += delta
        pair[1] = _now_ms()
        if pair[0] <= 0:
            del self.timing_count[topic]  # bounded by the topics with pending timers
        self._metrics_version[2] += 1

    def metrics_json(self) -> str:
        """GET_TIMER_METRICS' body and ``config/timermetrics`` (Java
        ``TimerMetrics.encode``): ``{"dataVersion": {...}, "timingCount": {topic: {"count",
        "timeStamp"}}}``, the pending timers of each real topic."""
        state, ts, counter = self._metrics_version
        return json.dumps(
            {
                "dataVersion": {"counter": counter, "stateVersion": state, "timestamp": ts},
                "timingCount": {t: {"count": c, "timeStamp": at} for t, (c, at) in sorted(self.timing_count.items())},
            },
            separators=(",", ":"),
        )

    def _load_metrics(self) -> None:
        try:
            with open(self.metrics_path, "rb") as f:
                data = json.loads(f.read())
            table = {str(t): [int(m["count"]), int(m["timeStamp"])] for t, m in data.get("timingCount", {}).items()}
        except FileNotFoundError:
            return
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            log.warning("%s is damaged (%s); the per-topic timer counts start from zero", self.metrics_path, e)
            return
        self.timing_count = {t: v for t, v in table.items() if v[0] > 0}

    def read_behind_ms(self) -> int:
        """How late the wheel is: now − the next tick to deliver (0 when on time)."""
        if not self.active:
            return 0
        return max(0, _now_ms() - self.read_time - self.precision)

    def offset_behind(self) -> int:
        """Units of the timer queue not enqueued yet (Java ``getEnqueueBehindMessages``)."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        return max(0, cq.get_max_offset_in_queue() - self.queue_offset) if cq is not None and self.active else 0

    def runtime_info(self) -> dict[str, str]:
        """Java AdminBrokerProcessor's timer keys of GET_BROKER_RUNTIME_INFO."""
        return {
            "timerReadBehind": str(self.read_behind_ms() // 1000),
            "timerOffsetBehind": str(self.offset_behind()),
            "timerCongestNum": str(self.pending),
            "timerEnqueueTps": f"{self.enqueue_tps:.1f}",
            "timerDequeueTps": f"{self.dequeue_tps:.1f}",
            # rmq's own: the totals since start (rocketmq_timer_*_total)
            "timerEnqueuedTotal": str(self.enqueued),
            "timerDequeuedTotal": str(self.dequeued),
        }


def _as_int(value: object) -> int | None:
    if value is None:
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None
