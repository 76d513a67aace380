"""MessageStore: the facade the broker uses (docs/design.md §2).

Background tasks, all owned by the store and stopped by ``shutdown()``:

* reput (dispatch): builds ConsumeQueues from the CommitLog, woken right after an append (ASYNC)
  or after the group-commit fsync (SYNC: nothing is dispatched before it is durable), then calls
  the arrival listeners;
* flush: ASYNC every ``flush_interval_commitlog`` ms once ``flush_commitlog_least_pages`` pages
  are dirty (everything every ``flush_commitlog_thorough_interval``), or SYNC group commit;
* ConsumeQueue flush + checkpoint every ``flush_interval_consume_queue`` ms;
* clean: retention every ``clean_resource_interval`` ms.

Blocking work (fdatasync, checkpoint writes) runs in one dedicated flush thread.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import msgpack

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.common.message import decode_offset_msg_id
from rmq.errors import StoreError
from rmq.store.commitlog import CommitLog
from rmq.store.config import StoreConfig
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rmq.store.message import (GetMessageResult, GetMessageStatus, MessageExt, MessageFilter,
                               MessageInner, PutMessageResult, PutMessageStatus)

__all__ = ["MessageStore"]

log = logging.getLogger("rmq.store")

SCHEDULE_TOPIC = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
WARM_CHUNK = 4 * 1024 * 1024                    # pre-fault this much CommitLog ahead of the writer
_GET_STATUS = tuple(GetMessageStatus)           # index = value (the scan returns 0, 1 or 2)


def _consume_result(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _disk_used_ratio(path: str) -> float:
    """Used fraction (0..1) of the file system holding ``path``."""
    try:
        u = shutil.disk_usage(path)
    except OSError:
        return 1.0
    return (u.total - u.free) / u.total if u.total else 1.0


class MessageStore:
    """CommitLog + ConsumeQueues + services. See the module docstring and docs/design.md §2.

    Args:
        config: StoreConfig (Java MessageStoreConfig names and defaults).
        store_host: the broker's advertised ``(ipv4, port)``, written into every record and
            into offsetMsgIds.
        disk_used_ratio: callable(path) → used fraction 0..1 of the disk (default: the real
            file system; tests pass their own to simulate a full disk).
    """

    def __init__(self, config: StoreConfig, store_host: tuple[str, int], *,
                 disk_used_ratio: Callable[[str], float] | None = None):
        self.config = config
        self.store_host = store_host
        self.commit_log = CommitLog(config, store_host)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._listeners: list[Callable] = []
        self._disk_used_ratio = disk_used_ratio or _disk_used_ratio
        self._delay_millis = config.delay_level_millis()
        self.reput_from_offset = 0
        self.running = False
        self.shutdown_flag = False
        self.disk_full = False
        self.disk_full_remark = ""
        self.last_flush_error: str | None = None
        self.recovery_report: dict = {}
        self._lock_fd: int | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._warm_executor: ThreadPoolExecutor | None = None
        self._warming = False
        self._warm_supported = True
        self._tasks: list[asyncio.Task] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reput_event: asyncio.Event | None = None
        self._flush_event: asyncio.Event | None = None
        self._group_requests: list[tuple[int, asyncio.Future]] = []
        self._last_checkpoint: dict = {}
        self._stats = {"put_total": 0, "put_bytes": 0, "get_total": 0, "get_found": 0,
                       "flush_timeouts": 0, "dispatched": 0}
        self._root = config.store_path_root_dir
        self._abort_path = os.path.join(self._root, "abort")
        self._checkpoint_path = os.path.join(self._root, "checkpoint")

    # ======================================================================================
    # life cycle
    # ======================================================================================
    async def start(self) -> None:
        """Lock the directory, recover (clean or after a crash), start the services."""
        if self.running:
            return
        os.makedirs(self._root, exist_ok=True)
        self._lock()
        if self.shutdown_flag:
            # Restarting this object after shutdown(): fresh in-memory state, same files.
            self.commit_log = CommitLog(self.config, self.store_host)
            self.consume_queue_table = {}
            self._group_requests = []
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-store-flush")
        self._warm_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-store-warm")
        try:
            self._recover()
        except BaseException:
            self._executor.shutdown(wait=False)
            self._warm_executor.shutdown(wait=False)
            self._unlock()
            raise
        with open(self._abort_path, "wb") as f:
            f.write(b"")
            os.fsync(f.fileno())
        self._check_disk()
        self.running = True
        self.shutdown_flag = False
        self._reput_event = asyncio.Event()
        self._flush_event = asyncio.Event()
        self._tasks = [
            asyncio.create_task(self._reput_service(), name="store-reput"),
            asyncio.create_task(self._group_commit_service() if self.config.sync_flush
                                else self._flush_realtime_service(), name="store-flush-commitlog"),
            asyncio.create_task(self._flush_cq_service(), name="store-flush-consumequeue"),
            asyncio.create_task(self._clean_service(), name="store-clean"),
        ]

    async def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove the abort marker, release the lock."""
        if not self.running:
            return
        self.running = False
        self.shutdown_flag = True
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        clean = True
        try:
            await self._run_blocking(self.commit_log.flush, 0)
            self._fail_group_requests(None)
            self.do_reput()
            self._last_checkpoint["logics_pending"] = self.reput_from_offset
            await self._run_blocking(self._flush_consume_queues, 0)
            await self._run_blocking(self._write_checkpoint, True)
        except OSError as e:
            clean = False
            log.error("store shutdown: flush failed (%s); the next start will run crash recovery", e)
        self._warm_executor.shutdown(wait=True)
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.shutdown()
        self.commit_log.shutdown()
        self._executor.shutdown(wait=True)
        if clean:
            try:
                os.unlink(self._abort_path)
            except FileNotFoundError:
                pass
        self._unlock()

    def _lock(self) -> None:
        path = os.path.join(self._root, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"store directory {self._root} is locked by another process") from None
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    async def _run_blocking(self, fn, *args):
        return await self._loop.run_in_executor(self._executor, fn, *args)

    # ======================================================================================
    # recovery (S5)
    # ======================================================================================
    def _read_checkpoint(self) -> dict:
        try:
            with open(self._checkpoint_path, "rb") as f:
                data = msgpack.unpackb(f.read())
            if not isinstance(data, dict):
                raise ValueError("not a map")
            return data
        except FileNotFoundError:
            return {}
        except Exception as e:  # corrupt checkpoint: fall back to a full scan
            log.warning("checkpoint %s unreadable (%s): recovering from the first file", self._checkpoint_path, e)
            return {}

    def _write_checkpoint(self, clean: bool = False) -> None:
        """Persist the safe offsets (flush thread). ``physic_offset``: CommitLog durable up to
        here; ``logics_offset``: ConsumeQueues durable for every record below here."""
        data = {
            "version": 1,
            "physic_offset": self.commit_log.flushed_offset,
            "logics_offset": self._last_checkpoint.get("logics_pending", self.reput_from_offset),
            "max_offset": self.commit_log.max_offset,
            "clean": clean,
            "timestamp": int(time.time() * 1000),
        }
        tmp = self._checkpoint_path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(data))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._checkpoint_path)
        self._last_checkpoint.update(data)

    def _recover(self) -> None:
        cfg = self.config
        t0 = time.monotonic()
        abnormal = os.path.exists(self._abort_path)
        cp = self._read_checkpoint()
        self.commit_log.mfq.load()
        self._load_consume_queues()
        if not abnormal and cp.get("clean") and self.commit_log.mfq.files:
            end = int(cp.get("max_offset", 0))
            last = self.commit_log.mfq.last
            if self.commit_log.mfq.min_offset <= end <= last.file_from_offset + last.file_size:
                self.commit_log.set_clean_end(end)
                report = {"mode": "clean", "end": end, "truncated_bytes": 0, "reason": None}
            else:
                log.warning("checkpoint end %d outside the CommitLog files: scanning", end)
                abnormal = True
        elif self.commit_log.mfq.files:
            abnormal = True
        if abnormal:
            start = min(int(cp.get("physic_offset", 0)), int(cp.get("logics_offset", 0))) if cp else 0
            report = self.commit_log.recover(start, cfg.check_crc_on_recover)
            report["mode"] = "crash"
            report["scanned_from"] = start
            log.warning("store %s was not shut down cleanly: recovered CommitLog to %d from %d",
                        self._root, report["end"], start)
        elif not self.commit_log.mfq.files:
            report = {"mode": "empty", "end": 0, "truncated_bytes": 0, "reason": None}
        end = self.commit_log.max_offset
        min_phy = self.commit_log.min_offset
        reput_from = end
        cq_max_end = -1
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.recover(end)
                cq.correct_min_offset(min_phy)
                cq_max_end = max(cq_max_end, cq.max_physic_offset)
        if report["mode"] == "crash":
            # Units are written in CommitLog order, so everything below the highest unit's
            # record is indexed; re-dispatch from there (idempotent) to the end.
            reput_from = max(min_phy, min(end, cq_max_end if cq_max_end >= 0 else min_phy,
                                          int(cp.get("logics_offset", end)) if cp else min_phy))
        self.reput_from_offset = reput_from
        self.do_reput(limit=end, notify=False)
        self.commit_log.topic_queue_table = {}
        for topic, queues in self.consume_queue_table.items():
            for qid, cq in queues.items():
                self.commit_log.topic_queue_table[(topic, qid)] = cq.get_max_offset_in_queue()
        report["reput_from"] = reput_from
        report["seconds"] = round(time.monotonic() - t0, 3)
        self.recovery_report = report
        self._last_checkpoint = {"logics_pending": self.reput_from_offset}
        log.info("store recovered (%s) in %.3fs: CommitLog [%d, %d), %d queues", report["mode"],
                 report["seconds"], self.commit_log.min_offset, end,
                 sum(len(q) for q in self.consume_queue_table.values()))

    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in os.listdir(root):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for q in os.listdir(tdir):
                if not q.isdigit():
                    continue
                cq = ConsumeQueue(topic, int(q), root, self.config.mapped_file_size_consume_queue)
                cq.load()
                self.consume_queue_table.setdefault(topic, {})[int(q)] = cq

    # ======================================================================================
    # put (S1)
    # ======================================================================================
    def _refuse(self) -> PutMessageResult | None:
        if not self.running:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is not running")
        if self.config.broker_role == "SLAVE":
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark="message store is a slave: writes are not allowed")
        if self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=self.disk_full_remark)
        if self.last_flush_error is not None:
            # Refuse until a flush succeeds again (the next attempt is triggered here in SYNC
            # mode; the ASYNC service retries on its own schedule).
            if self.config.sync_flush:
                self._flush_event.set()
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    remark=f"message store is not writeable after a flush error: {self.last_flush_error}")
        return None

    def append_message(self, msg: MessageInner, batch: bool = False) -> PutMessageResult:
        """Append one message (or a §5.2 batch body) now, without waiting for a flush.

        This is the synchronous half of :meth:`put_message`: the broker's SEND path calls it
        inline on the loop, and only when ``result.flush_wait`` is set (SYNC_FLUSH) awaits
        :meth:`wait_flush` before acknowledging. In ASYNC_FLUSH mode a SEND is therefore
        answered without creating a task. Passing the properties as ``properties_str`` (the
        SEND header's string as received) saves re-encoding them.
        """
        refused = self._refuse()
        if refused is not None:
            return refused
        try:
            result = self.commit_log.append_batch(msg) if batch else self.commit_log.append(msg)
        except (OSError, StoreError, ValueError, TypeError) as e:
            log.error("%sappend to CommitLog failed: %s", "batch " if batch else "", e)
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"append failed: {e}")
        result.flush_wait = self._after_append(result)
        return result

    async def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append one message. SYNC_FLUSH: returns after fsync (FLUSH_DISK_TIMEOUT after
        ``sync_flush_timeout`` ms; an fsync error raises StoreError)."""
        result = self.append_message(msg)
        if result.flush_wait:
            return await self.wait_flush(result)
        return result

    async def put_messages(self, msg: MessageInner) -> PutMessageResult:
        """Append a §5.2 batch body: each item its own record and queue offset."""
        result = self.append_message(msg, batch=True)
        if result.flush_wait:
            return await self.wait_flush(result)
        return result

    def _after_append(self, result: PutMessageResult) -> bool:
        """Bookkeeping after an append; True when the caller must wait for the group commit."""
        if result.status != PutMessageStatus.PUT_OK:
            log.warning("put refused: %s (%s)", result.status.name, result.remark)
            return False
        a = result.append
        stats = self._stats
        stats["put_total"] += a.msg_num
        stats["put_bytes"] += a.wrote_bytes
        if not self._warming and self._warm_supported:
            self._maybe_warm()
        if self.config.flush_disk_type != "SYNC_FLUSH":
            self._reput_event.set()
            return False
        return True

    async def wait_flush(self, result: PutMessageResult) -> PutMessageResult:
        """Wait for the group commit that covers ``result`` (SYNC_FLUSH)."""
        end = result.append.wrote_offset + result.append.wrote_bytes
        fut = self._loop.create_future()
        # A put that timed out no longer awaits its future: mark a later error as retrieved.
        fut.add_done_callback(_consume_result)
        self._group_requests.append((end, fut))
        self._flush_event.set()
        try:
            async with asyncio.timeout(self.config.sync_flush_timeout / 1000.0):
                await asyncio.shield(fut)
        except TimeoutError:
            self._stats["flush_timeouts"] += 1
            log.warning("flush to disk timed out after %d ms (offset %d)", self.config.sync_flush_timeout, end)
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            result.remark = f"flush to disk did not finish in {self.config.sync_flush_timeout} ms"
        return result

    # -- pre-faulting the CommitLog ahead of the writer ------------------------------------------
    def _maybe_warm(self) -> None:
        mf = self.commit_log.mfq.last
        if mf is None or mf.warmed_to >= mf.file_size or mf.warmed_to - mf.wrote_position > WARM_CHUNK // 2:
            return
        start = max(mf.warmed_to, mf.wrote_position)
        length = min(WARM_CHUNK, mf.file_size - start)
        self._warming = True
        fut = self._loop.run_in_executor(self._warm_executor, self._warm, mf, start, length)
        fut.add_done_callback(self._warm_done)

    def _warm(self, mf, start: int, length: int) -> None:
        """Warm thread: MADV_POPULATE_WRITE ``length`` bytes at ``start`` (content unchanged)."""
        if not mf.available:
            return
        try:
            rc = _store.populate_write(mf.mm, start, length)
        except ValueError:                       # unmapped meanwhile
            return
        if rc in (errno.EINVAL, errno.ENOSYS):
            log.info("MADV_POPULATE_WRITE not supported here (errno %d): CommitLog pages fault on first write", rc)
            self._warm_supported = False
        elif rc:
            log.warning("pre-faulting %s failed: %s", mf.path, os.strerror(rc))
        mf.warmed_to = max(mf.warmed_to, start + length)

    def _warm_done(self, fut) -> None:
        self._warming = False
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("warm-ahead failed: %r", fut.exception())

    # ======================================================================================
    # flush (S4)
    # ======================================================================================
    def _fail_group_requests(self, exc: BaseException | None) -> None:
        reqs, self._group_requests = self._group_requests, []
        flushed = self.commit_log.flushed_offset
        for end, fut in reqs:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            elif end <= flushed:
                fut.set_result(True)
            else:
                self._group_requests.append((end, fut))

    async def _group_commit_service(self) -> None:
        """SYNC_FLUSH: one fdatasync serves every append that arrived before it started."""
        while self.running:
            await self._flush_event.wait()
            self._flush_event.clear()
            if not self._group_requests and self.last_flush_error is None:
                continue
            try:
                await self._run_blocking(self.commit_log.flush, 0)
            except (OSError, ValueError) as e:        # ValueError: a file closed under us
                self.last_flush_error = str(e)
                log.error("CommitLog fdatasync failed: %s", e)
                err = StoreError(f"flush to disk failed: {e}")
                self._fail_group_requests(err)
                continue
            if self.last_flush_error is not None:
                log.warning("CommitLog flush works again after: %s", self.last_flush_error)
                self.last_flush_error = None
            self._fail_group_requests(None)
            self._reput_event.set()
            if self._group_requests:
                self._flush_event.set()

    async def _flush_realtime_service(self) -> None:
        """ASYNC_FLUSH: every interval, flush when enough pages are dirty."""
        cfg = self.config
        last_thorough = time.monotonic()
        while self.running:
            await asyncio.sleep(cfg.flush_interval_commitlog / 1000.0)
            least = cfg.flush_commitlog_least_pages
            now = time.monotonic()
            if (now - last_thorough) * 1000 >= cfg.flush_commitlog_thorough_interval:
                last_thorough = now
                least = 0
            try:
                await self._run_blocking(self.commit_log.flush, least if self.last_flush_error is None else 0)
                if self.last_flush_error is not None:
                    log.warning("CommitLog flush works again after: %s", self.last_flush_error)
                    self.last_flush_error = None
            except (OSError, ValueError) as e:
                self.last_flush_error = str(e)
                log.error("CommitLog flush failed: %s; refusing writes until a flush succeeds", e)

    def _flush_consume_queues(self, least_pages: int) -> None:
        for queues in list(self.consume_queue_table.values()):
            for cq in list(queues.values()):
                cq.flush(least_pages)

    async def _flush_cq_service(self) -> None:
        cfg = self.config
        last_thorough = time.monotonic()
        while self.running:
            await asyncio.sleep(cfg.flush_interval_consume_queue / 1000.0)
            least = cfg.flush_consume_queue_least_pages
            now = time.monotonic()
            if (now - last_thorough) * 1000 >= cfg.flush_consume_queue_thorough_interval:
                last_thorough = now
                least = 0
            # Units below this offset are in the files being flushed now.
            self._last_checkpoint["logics_pending"] = self.reput_from_offset
            try:
                await self._run_blocking(self._flush_consume_queues, least)
                await self._run_blocking(self._write_checkpoint, False)
            except (OSError, ValueError) as e:
                log.error("ConsumeQueue flush / checkpoint failed: %s", e)

    # ======================================================================================
    # reput / dispatch (S2)
    # ======================================================================================
    def add_arrival_listener(self, fn: Callable[[str, int, int, int], None]) -> None:
        """``fn(topic, queue_id, next_logic_offset, tags_code)`` after each dispatch run, once
        per (queue, distinct tags code) dispatched in that run."""
        self._listeners.append(fn)

    def _dispatch_limit(self) -> int:
        return self.commit_log.flushed_offset if self.config.sync_flush else self.commit_log.max_offset

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        if queues is None:
            if not create:
                return None
            queues = self.consume_queue_table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None and create:
            cq = queues[queue_id] = ConsumeQueue(topic, queue_id, self.config.consume_queue_dir,
                                                 self.config.mapped_file_size_consume_queue)
        return cq

    def _schedule_tags_code(self, mf, props_pos: int, props_len: int, store_ts: int, tags_code: int) -> int:
        """SCHEDULE_TOPIC_XXXX units carry the delivery time as their tags code (Java)."""
        v = _store.find_property(mf.mm[props_pos:props_pos + props_len], "DELAY")
        if v is None:
            return tags_code
        try:
            level = int(v)
        except ValueError:
            return tags_code
        level = min(level, len(self._delay_millis))
        if level <= 0:
            return tags_code
        return store_ts + self._delay_millis[level - 1]

    def do_reput(self, limit: int | None = None, notify: bool = True, max_records: int = 1 << 30) -> int:
        """Dispatch CommitLog records from ``reput_from_offset`` to ``limit`` into the
        ConsumeQueues. Returns the number of records dispatched."""
        cl = self.commit_log
        if limit is None:
            limit = self._dispatch_limit()
        if self.reput_from_offset < cl.min_offset:
            log.warning("reput offset %d below the CommitLog minimum %d: skipping ahead",
                        self.reput_from_offset, cl.min_offset)
            self.reput_from_offset = cl.min_offset
        arrived: dict[tuple[str, int, int], int] = {}
        cqs: dict[tuple[str, int], ConsumeQueue] = {}
        n = 0
        while self.reput_from_offset < limit and n < max_records:
            mf = cl.mfq.find_by_offset(self.reput_from_offset)
            if mf is None:
                log.error("reput: no CommitLog file holds offset %d", self.reput_from_offset)
                break
            pos = self.reput_from_offset - mf.file_from_offset
            stop = min(mf.wrote_position, limit - mf.file_from_offset)
            recs, at, outcome, _ = _store.scan_records(mf.mm, pos, stop, mf.file_from_offset, False,
                                                       max_records - n)
            for phy, size, topic, qid, qoff, tags, store_ts, sys_flag, ppos, plen in recs:
                if sys_flag & 0x4:
                    # PREPARED (0x4) and ROLLBACK (0xC) records are not dispatched (Java).
                    continue
                if topic == SCHEDULE_TOPIC:
                    tags = self._schedule_tags_code(mf, ppos, plen, store_ts, tags)
                key = (topic, qid)
                cq = cqs.get(key)
                if cq is None:
                    cq = cqs[key] = self.find_consume_queue(topic, qid)
                if cq.put_message_position_info(phy, size, tags, qoff) and notify:
                    arrived[(topic, qid, tags)] = qoff + 1
            n += len(recs)
            self.reput_from_offset = mf.file_from_offset + at
            if outcome == _store.SCAN_BLANK:
                self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
            elif outcome in (_store.SCAN_CORRUPT, _store.SCAN_TORN):
                log.error("reput: unreadable record at CommitLog offset %d (outcome %d); dispatch stops here",
                          self.reput_from_offset, outcome)
                break
            elif outcome == _store.SCAN_END or (at >= stop and not recs):
                break
        self._stats["dispatched"] += n
        if arrived and self._listeners:
            for (topic, qid, tags), next_offset in arrived.items():
                for fn in self._listeners:
                    try:
                        fn(topic, qid, next_offset, tags)
                    except Exception:
                        log.exception("arrival listener %r failed", fn)
        return n

    async def _reput_service(self) -> None:
        while self.running:
            try:
                # (asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that
                # races with the event being set, and the task would never stop.)
                async with asyncio.timeout(1.0):
                    await self._reput_event.wait()
            except TimeoutError:
                pass
            self._reput_event.clear()
            try:
                # Bounded batches so a large backlog does not starve the loop.
                while self.do_reput(max_records=4096) >= 4096:
                    await asyncio.sleep(0)
            except Exception:
                # E.g. a ConsumeQueue file cannot be created (disk full): keep the service
                # alive and retry; the backlog shows in dispatch_behind_bytes().
                log.exception("dispatch failed at CommitLog offset %d; retrying in 1 s", self.reput_from_offset)
                await asyncio.sleep(1.0)

    # ======================================================================================
    # get (S3)
    # ======================================================================================
    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.broker_role != "SLAVE" or self.config.offset_check_in_slave:
            return new
        return old

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    message_filter: MessageFilter | None = None) -> GetMessageResult:
        """DefaultMessageStore.getMessage (seeds 000/001). Synchronous. The caller must call
        ``release()`` on the result once the buffers have been written out."""
        if self.shutdown_flag or not self.running:
            err = StoreError("message store is not running")
            err.retriable = True
            raise err
        self._stats["get_total"] += 1
        cl = self.commit_log
        max_offset_py = cl.max_offset
        cq = self.find_consume_queue(topic, queue_id, create=False) if queue_id >= 0 and topic else None
        if cq is None:
            if queue_id < 0 or not topic:
                return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
                                        self._next_offset_correction(offset, 0), 0, 0)
            # Java creates the queue on lookup; an unknown queue behaves as an empty one.
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                    self._next_offset_correction(offset, 0), 0, 0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                    self._next_offset_correction(offset, 0), min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL,
                                    self._next_offset_correction(offset, min_offset), min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE,
                                    self._next_offset_correction(offset, offset), min_offset, max_offset)
        if offset > max_offset:
            nxt = self._next_offset_correction(offset, min_offset if min_offset == 0 else max_offset)
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, nxt, min_offset, max_offset)
        idx = cq.get_index_buffer(offset)
        if idx is None:
            nxt = self._next_offset_correction(offset, cq.roll_next_file(offset))
            log.warning("consumer request topic: %s offset: %d minOffset: %d maxOffset: %d, but access "
                        "logic queue failed", topic, offset, min_offset, max_offset)
            return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, nxt, min_offset, max_offset)
        cq_file, start, end = idx
        cfg = self.config
        memory = int(cfg.total_physical_memory * (cfg.access_message_in_memory_max_ratio / 100.0))
        if message_filter is None or message_filter.codes is None:
            codes, tag_bytes = None, None
        else:
            codes, tag_bytes = message_filter.codes, message_filter.tag_bytes
        status, scanned, count, total, max_phy_pulling, segments = _store.get_message_scan(
            cq_file.mm, start, end, cl.table,
            cl.mfq.flushed_where if cfg.flush_disk_type == "SYNC_FLUSH" else max_offset_py,
            max_msg_nums, max_offset_py, memory, codes, tag_bytes,
            cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory,
            cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk)
        buffers = []
        holds = []
        if segments:
            files = cl.table_files
            for fidx, s, e in segments:
                mf = files[fidx]
                if mf.hold():
                    holds.append(mf)
                buffers.append(memoryview(mf.mm)[s:e])
            self._stats["get_found"] += count
        return GetMessageResult(_GET_STATUS[status], offset + scanned // CQ_STORE_UNIT_SIZE,
                                min_offset, max_offset, (max_offset_py - max_phy_pulling) > memory,
                                count, total, buffers, holds)

    # ======================================================================================
    # offsets and lookups
    # ======================================================================================
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The next logical offset to be written in the queue (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_max_offset_in_queue() if cq else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_min_offset_in_queue() if cq else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(offset) if cq else None
        return unit[0] if unit else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """STORETIMESTAMP of the message at ``offset`` in the queue, -1 when it is gone."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(offset) if cq else None
        if unit is None:
            return -1
        sel = self.commit_log.select(unit[0], unit[1])
        if sel is None:
            return -1
        mf, pos = sel
        return _store.record_store_timestamp(mf.mm, pos)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after ``timestamp_ms``
        (binary search over the queue); the max offset when every message is older, the min
        offset when every message is newer."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        # Skip units whose record is gone (below the CommitLog minimum).
        while lo < hi and self.get_message_store_timestamp(topic, queue_id, lo) < 0:
            lo += 1
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self.get_message_store_timestamp(topic, queue_id, mid)
            if 0 <= ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> MessageExt | None:
        """The decoded record at CommitLog offset ``phy_offset`` (None when not there)."""
        if size is None:
            head = self.commit_log.select(phy_offset, 8)
            if head is None:
                return None
            mf, pos = head
            size = int.from_bytes(mf.mm[pos:pos + 4], "big", signed=True)
        sel = self.commit_log.select(phy_offset, size)
        if sel is None:
            return None
        mf, pos = sel
        try:
            rec = _store.decode_record(memoryview(mf.mm)[pos:pos + size], 0, False)
        except ValueError:
            return None
        if rec["commit_log_offset"] != phy_offset:
            return None
        return MessageExt.from_record(rec)

    def look_message_by_offset_msg_id(self, msg_id: str) -> MessageExt | None:
        try:
            *_, off = decode_offset_msg_id(msg_id)
        except ValueError:
            return None
        return self.look_message_by_offset(off)

    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.max_offset - self.reput_from_offset)

    def delete_topics(self, topics) -> int:
        """Drop the ConsumeQueues of ``topics`` (their CommitLog records age out normally)."""
        n = 0
        for topic in topics:
            queues = self.consume_queue_table.pop(topic, None)
            if not queues:
                continue
            for qid, cq in queues.items():
                cq.destroy()
                self.commit_log.topic_queue_table.pop((topic, qid), None)
                n += 1
            try:
                os.rmdir(os.path.join(self.config.consume_queue_dir, topic))
            except OSError:
                pass
        return n

    def runtime_info(self) -> dict[str, str]:
        cl = self.commit_log
        info = {
            "commitLogMinOffset": cl.min_offset,
            "commitLogMaxOffset": cl.max_offset,
            "commitLogFlushedOffset": cl.flushed_offset,
            "dispatchBehindBytes": self.dispatch_behind_bytes(),
            "putMessageTimesTotal": self._stats["put_total"],
            "putMessageSizeTotal": self._stats["put_bytes"],
            "getMessageTimesTotalFound": self._stats["get_found"],
            "getMessageTimesTotal": self._stats["get_total"],
            "flushDiskTimeoutTimes": self._stats["flush_timeouts"],
            "commitLogDiskRatio": f"{self._disk_used_ratio(cl.mfq.store_path if os.path.isdir(cl.mfq.store_path) else self._root):.4f}",
            "diskFull": self.disk_full,
            "consumeQueueCount": sum(len(q) for q in self.consume_queue_table.values()),
            "flushDiskType": self.config.flush_disk_type,
            "brokerRole": self.config.broker_role,
            "lastFlushError": self.last_flush_error or "",
        }
        return {k: str(v) for k, v in info.items()}

    # ======================================================================================
    # retention (S6)
    # ======================================================================================
    def _check_disk(self) -> float:
        path = self.commit_log.mfq.store_path
        ratio = self._disk_used_ratio(path if os.path.isdir(path) else self._root)
        limit = self.config.disk_space_warning_level_ratio / 100.0
        if ratio > limit:
            if not self.disk_full:
                log.error("disk use %.1f%% above %d%%: refusing writes", ratio * 100,
                          self.config.disk_space_warning_level_ratio)
            self.disk_full = True
            self.disk_full_remark = (f"disk full: {ratio * 100:.1f}% used, above "
                                     f"{self.config.disk_space_warning_level_ratio}%; message store is not writeable")
        elif self.disk_full:
            log.info("disk use %.1f%% back below %d%%: accepting writes", ratio * 100,
                     self.config.disk_space_warning_level_ratio)
            self.disk_full = False
            self.disk_full_remark = ""
        return ratio

    def _is_time_to_delete(self) -> bool:
        hour = time.localtime().tm_hour
        for w in self.config.delete_when.split(";"):
            w = w.strip()
            if w.isdigit() and int(w) == hour:
                return True
        return False

    def delete_expired_files(self, manual: bool = False) -> int:
        """One CleanCommitLogService run: returns how many CommitLog files were deleted.

        Deletes files older than ``file_reserved_time`` hours at ``delete_when`` (or ``manual``),
        and any old file when the disk is above ``disk_max_used_space_ratio`` (immediately,
        regardless of age, above ``disk_space_clean_forcibly_ratio``). ConsumeQueues follow."""
        cfg = self.config
        ratio = self._check_disk()
        space_full = ratio > cfg.disk_max_used_space_ratio / 100.0
        clean_now = cfg.clean_file_forcibly_enable and (
            ratio > cfg.disk_space_clean_forcibly_ratio / 100.0 or self.disk_full)
        n = 0
        if manual or space_full or self._is_time_to_delete():
            expired_ms = cfg.file_reserved_time * 3600 * 1000
            n = self.commit_log.delete_expired_files(expired_ms, space_full or clean_now)
            if n:
                log.info("retention deleted %d CommitLog file(s); CommitLog now starts at %d",
                         n, self.commit_log.min_offset)
        self.commit_log.mfq.retry_pending_destroy()
        self._clean_consume_queues()
        return n

    def _clean_consume_queues(self) -> None:
        min_phy = self.commit_log.min_offset
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.delete_expired_file(min_phy)
                cq.mfq.retry_pending_destroy()

    async def _clean_service(self) -> None:
        while self.running:
            await asyncio.sleep(self.config.clean_resource_interval / 1000.0)
            try:
                self.delete_expired_files()
            except Exception:
                log.exception("retention run failed")
