"""ReputMessageService (Java DefaultMessageStore.ReputMessageService): builds the
ConsumeQueues from the CommitLog and tells the arrival listeners."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container, Iterator
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.errors import StoreError
from rmq.store.consume_queue import ConsumeQueue
from rmq.store.index import MAX_KEYS_PER_RECORD
from rmq.store.mapped_file import DiskSpaceError, MappedFile

if TYPE_CHECKING:
    from rmq.store.commitlog import CommitLog
    from rmq.store.message_store import MessageStore

__all__ = ["DISPATCH_BACKOFF_MAX", "SCHEDULE_TOPIC", "ReputMessageService", "scan_committed"]

log = logging.getLogger("rmq.store")

SCHEDULE_TOPIC = TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
DISPATCH_BACKOFF_MAX = 5.0  # seconds between dispatch retries, at most
BATCH_RECORDS = 4096  # records per run before yielding to the loop


class ReputMessageService:
    """Dispatches CommitLog records from ``reput_from_offset`` into their ConsumeQueues.

    Woken right after an append (ASYNC_FLUSH) or after the group commit's fdatasync
    (SYNC_FLUSH: nothing is dispatched before it is durable), and every second. A wake-up
    schedules one dispatch run for the next loop iteration (a ``call_soon`` callback): every
    append of one read (or of one loop turn) is dispatched by one run, without the task step,
    future and timer a task wake-up costs per read. Java's ReputMessageService polls every
    1 ms instead; this keeps dispatch, and the long-polling wake-ups it triggers, within the
    same loop turn. Backlogs larger than ``BATCH_RECORDS`` and retries after a failure belong
    to the :meth:`run` task. A failure (a ConsumeQueue file that cannot be created: disk
    full, no descriptors left) is logged (rate-limited), shown in ``dispatch_error`` and
    retried with backoff from the record that failed; nothing is skipped.
    """

    def __init__(self, store: MessageStore):
        self.store = store
        self.reput_from_offset = 0
        # (listener, the queues it watches or None for all): add_listener
        self._listeners: list[tuple[Callable[[str, int, int, int], None], Container[tuple[str, int]] | None]] = []
        self.dispatch_error: str | None = None
        self.dispatched = 0
        self.event = asyncio.Event()  # wakes the run() task (backlog, retry)
        self.runs = 0  # dispatch runs (callbacks and task) so far
        self._soon: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the store's (asked once: 3.11 getpid)
        self._backoff = 0.0
        self._delay_millis = store.config.delay_level_millis()
        # The C dispatcher (rmq/_dispatch.pxi); None runs every record through the Python path.
        self.fast: _store.Dispatcher | None = (
            _store.Dispatcher(SCHEDULE_TOPIC) if store.config.dispatch_fast_path else None
        )
        self._index_slots = store.config.max_hash_slot_num
        self._index_num = store.config.max_index_num
        self._watch_list: list[Container[tuple[str, int]]] | None = []

    def wakeup(self) -> None:
        """Dispatch what was appended, once, in the next loop iteration (on the loop thread).
        While a failure is being retried the task keeps its backoff."""
        if self._soon is None:
            if self.dispatch_error is not None:
                self.event.set()
                return
            loop = self._loop
            if loop is None:
                loop = self._loop = asyncio.get_running_loop()
            self._soon = loop.call_soon(self._dispatch_soon)
            # the appender calls this (its ``waker``) again only after the run below began:
            # one Python call per loop turn, not per put
            self.store.appender.wake_pending = True

    def stop(self) -> None:
        """Drop a scheduled run (shutdown)."""
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
            self.store.appender.wake_pending = False

    def _dispatch_soon(self) -> None:
        self._soon = None
        self.store.appender.wake_pending = False
        if not self.store.running:
            return
        if self.dispatch_error is not None:
            self.event.set()
            return
        self.runs += 1
        try:
            n = self.do_reput(max_records=BATCH_RECORDS)
        except Exception as e:  # noqa: BLE001 - dispatch survives anything: recorded, retried by the task
            self._failed(e)
            return
        if n >= BATCH_RECORDS:
            self.event.set()  # a backlog: the task goes on in bounded steps

    def forget_queues(self) -> None:
        """Drop the C dispatcher's cached ConsumeQueues (after queues were destroyed: the cache
        would never write into them, it checks each against the store's table, but it would
        keep the objects alive). They are cached again at their next record."""
        if self.fast is not None:
            self.fast.clear()

    def dispatch_limit(self) -> int:
        """Where dispatch stops: the flushed end (SYNC_FLUSH) or the end; on a controller-mode
        master with ``allAckInSyncStateSet`` and slaves in its SyncStateSet, also the confirm
        offset, so consumers see only what every in-sync replica has; on a controller-mode
        slave, the confirm offset its master sent (rmq.store.ha.client), whatever
        ``allAckInSyncStateSet`` (Java 5 ``ReputMessageService.getReputEndOffset`` /
        ``CommitLog.getConfirmOffset``; neither with ``readUnCommitted``)."""
        store = self.store
        cl = store.commit_log
        cfg = store.config
        limit = cl.flushed_offset if cfg.sync_flush else cl.max_offset
        if not store.controller_mode or cfg.read_uncommitted:
            return limit
        ha = store.ha
        if ha is not None:
            if cfg.all_ack_in_sync_state_set and len(ha.sync_state_set) > 1:
                limit = min(limit, ha.confirm_offset)
        elif store.ha_client is not None:
            # a slave: no further than the master's confirm offset (-1 until the session's
            # first transfer: nothing new is dispatched before the master said it)
            limit = min(limit, max(store.ha_client.confirm_offset, self.reput_from_offset))
        return limit

    def _schedule_tags_code(self, mf: MappedFile, props_pos: int, props_len: int, store_ts: int, tags_code: int) -> int:
        """SCHEDULE_TOPIC_XXXX units carry the delivery time as their tags code (Java)."""
        v = _store.find_property(mf.mm[props_pos : props_pos + props_len], "DELAY")
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
        ConsumeQueues. Returns the number of records dispatched. Raises (e.g. StoreError when a
        ConsumeQueue file cannot be created) with ``reput_from_offset`` at the failed record.

        Java DefaultMessageStore.ReputMessageService.doReput. The common records go through
        the C dispatcher (``_store.Dispatcher.run``: unit and index keys written straight from
        the CommitLog file); it stops at the first record it does not take, which goes through
        the Python path below (``_python_step``, the reference for every case) on its own,
        then the C dispatcher goes on."""
        store = self.store
        cl = store.commit_log
        if limit is None:
            limit = self.dispatch_limit()
        if self.reput_from_offset < cl.min_offset:
            log.warning(
                "reput offset %d below the CommitLog minimum %d: skipping ahead", self.reput_from_offset, cl.min_offset
            )
            self.reput_from_offset = cl.min_offset
        arrived: dict[tuple[str, int, int], int] = {}
        cqs: dict[tuple[str, int], ConsumeQueue] = {}
        fast = self.fast
        index = store.index
        watch = self._watch_list
        n = 0
        try:
            while self.reput_from_offset < limit and n < max_records:
                mf = cl.mfq.find_by_offset(self.reput_from_offset)
                if mf is None:
                    log.error("reput: no CommitLog file holds offset %d", self.reput_from_offset)
                    break
                pos = self.reput_from_offset - mf.file_from_offset
                stop = min(mf.wrote_position, limit - mf.file_from_offset)
                budget = max_records - n
                if fast is not None:
                    f = index.dispatch_file() if index is not None else None
                    if index is None or f is not None:
                        at, k, capped = fast.run(
                            mf.mm,
                            pos,
                            stop,
                            mf.file_from_offset,
                            budget,
                            store.consume_queue_table,
                            None if f is None else f.mm,
                            self._index_slots,
                            self._index_num,
                            MAX_KEYS_PER_RECORD,
                            arrived if notify else None,
                            watch,
                        )
                        if k:
                            n += k
                            self.reput_from_offset = mf.file_from_offset + at
                            if f is not None and index is not None:
                                index.dispatched(f, capped)
                            if at >= stop or n >= max_records:
                                continue
                            pos = at
                    budget = 1  # the record the C dispatcher did not take
                k, go_on, unreadable = self._python_step(mf, pos, stop, budget, notify, arrived, cqs)
                n += k
                if unreadable is not None:
                    raise StoreError(unreadable)
                if not go_on:
                    break
        finally:
            self.dispatched += n
            self._notify(arrived)
        return n

    def _python_step(
        self,
        mf: MappedFile,
        pos: int,
        stop: int,
        budget: int,
        notify: bool,
        arrived: dict[tuple[str, int, int], int],
        cqs: dict[tuple[str, int], ConsumeQueue],
    ) -> tuple[int, bool, str | None]:
        """Dispatch up to ``budget`` records of ``mf`` from ``pos`` in Python (Java
        CommitLogDispatcherBuildIndex, then CommitLogDispatcherBuildConsumeQueue per record);
        the queues it finds are registered with the C dispatcher. Returns ``(records, go on, what
        is unreadable or None)``; raises with ``reput_from_offset`` at a record that failed."""
        store = self.store
        cl = store.commit_log
        index = store.index
        fast = self.fast
        recs, at, outcome, _ = _store.scan_records(mf.mm, pos, stop, mf.file_from_offset, False, budget)
        if index is not None and recs:
            # One Cython call per batch. Before the queues: a retry from a failed record finds
            # these at or below the index's endPhyOffset and skips them.
            index.build(mf.mm, recs)
        try:
            for phy, size, topic, qid, qoff, tags, store_ts, sys_flag, ppos, plen in recs:
                if sys_flag & 0x4:
                    # PREPARED (0x4) and ROLLBACK (0xC) records are not dispatched (Java).
                    continue
                if topic == SCHEDULE_TOPIC:
                    tags = self._schedule_tags_code(mf, ppos, plen, store_ts, tags)
                key = (topic, qid)
                cq = cqs.get(key)
                if cq is None:
                    cq = cqs[key] = store.find_consume_queue(topic, qid)
                    if fast is not None and topic != SCHEDULE_TOPIC:
                        fast.register(topic, qid, cq)
                if cq.put_message_position_info(phy, size, tags, qoff) and notify:
                    arrived[(topic, qid, tags)] = qoff + 1
        except BaseException:
            # `phy` is the record that failed: the ones before it are in their queues (and
            # their waiters are told); the next run starts again at this one.
            self.reput_from_offset = phy
            raise
        n = len(recs)
        self.reput_from_offset = mf.file_from_offset + at
        if outcome == _store.SCAN_BLANK:
            self.reput_from_offset = cl.roll_next_file(self.reput_from_offset)
        elif outcome == _store.SCAN_TORN and store.config.broker_role == "SLAVE":
            # A slave's data can end inside a record (Java's master cuts transfers at
            # haTransferBatchSize, not at records): the rest comes with the next transfer.
            return n, False, None
        elif outcome in (_store.SCAN_CORRUPT, _store.SCAN_TORN):
            return (
                n,
                False,
                (
                    f"unreadable record at CommitLog offset {self.reput_from_offset} "
                    f"({'corrupt' if outcome == _store.SCAN_CORRUPT else 'torn'}); dispatch stops here"
                ),
            )
        elif outcome == _store.SCAN_END or (at >= stop and not recs):
            return n, False, None
        return n, True, None

    def undispatched_queue_offsets(self, limit: int) -> dict[tuple[str, int], int]:
        """The next queue offset of every queue with records between ``reput_from_offset``
        and ``limit`` (records not dispatched yet): recovery adds them to the CommitLog's
        queue offsets so that new appends never reuse an offset dispatch has still to write."""
        cl = self.store.commit_log
        out: dict[tuple[str, int], int] = {}
        at_offset = max(self.reput_from_offset, cl.min_offset)
        for _mf, recs, _next in scan_committed(cl, at_offset, limit):
            for _phy, _size, topic, qid, qoff, _tags, _ts, sys_flag, _ppos, _plen in recs:
                if not sys_flag & 0x4:
                    key = (topic, qid)
                    if qoff + 1 > out.get(key, 0):
                        out[key] = qoff + 1
        return out

    def add_listener(
        self, fn: Callable[[str, int, int, int], None], watched: Container[tuple[str, int]] | None = None
    ) -> None:
        """Call ``fn(topic, queue_id, next_offset, tags_code)`` after each run, once per
        (queue, distinct tags code) dispatched in it; with ``watched``, only for the queues
        ``(topic, queue_id)`` it holds at that time (tested once per queue per run, so queues
        nobody waits on cost no call and no Python object per record)."""
        self._listeners.append((fn, watched))
        self._watch_list = self._watch()

    @property
    def listeners(self) -> list[Callable[[str, int, int, int], None]]:
        """The arrival listeners, in the order they were added."""
        return [fn for fn, _ in self._listeners]

    def _watch(self) -> list[Container[tuple[str, int]]] | None:
        """For the C dispatcher: None when some listener wants every queue, else the
        containers of queues the listeners watch (empty: nobody listens)."""
        if any(w is None for _, w in self._listeners):
            return None
        return [w for _, w in self._listeners if w is not None]

    def _notify(self, arrived: dict[tuple[str, int, int], int]) -> None:
        if arrived and self._listeners:
            for (topic, qid, tags), next_offset in arrived.items():
                for fn, w in self._listeners:
                    if w is not None and (topic, qid) not in w:
                        continue
                    try:
                        fn(topic, qid, next_offset, tags)
                    except Exception:
                        log.exception("arrival listener %r failed", fn)

    def _failed(self, e: Exception) -> None:
        """Record a dispatch failure; the task retries after the (doubled) backoff."""
        store = self.store
        self._backoff = min(max(self._backoff * 2, 0.05), DISPATCH_BACKOFF_MAX)
        self.dispatch_error = f"{type(e).__name__}: {e}"
        if isinstance(e, DiskSpaceError):
            # No new messages until the queues they need can be written.
            store.clean_commit_log.set_disk_full(f"disk full: {e}; message store is not writeable", e.needed)
        store.rl_log.warning(
            "dispatch",
            "dispatch failed at CommitLog offset %d (%d bytes behind): %s; retrying in %.2f s",
            self.reput_from_offset,
            store.dispatch_behind_bytes(),
            self.dispatch_error,
            self._backoff,
            exc_info=not isinstance(e, StoreError),
        )

    async def run(self) -> None:
        """The task: every second (or after the backoff), on a backlog and after failures."""
        store = self.store
        while store.running:
            try:
                # (asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that
                # races with the event being set, and the task would never stop.)
                async with asyncio.timeout(self._backoff or 1.0):
                    await self.event.wait()
            except TimeoutError:
                pass
            self.event.clear()
            try:
                # Bounded batches so a large backlog does not starve the loop.
                self.runs += 1
                while self.do_reput(max_records=BATCH_RECORDS) >= BATCH_RECORDS:
                    await asyncio.sleep(0)
                    self.runs += 1
            except Exception as e:  # noqa: BLE001 - dispatch survives anything: it records the error, backs off
                self._failed(e)
                continue
            if self.dispatch_error is not None:
                log.warning("dispatch works again (after: %s)", self.dispatch_error)
                self.dispatch_error = None
            self._backoff = 0.0


def scan_committed(cl: CommitLog, start: int, limit: int) -> Iterator[tuple[MappedFile, list[tuple[Any, ...]], int]]:
    """Walk the CommitLog records in [``start``, ``limit``) a mapped file at a time: yields
    ``(mapped file, its records scanned this step, the offset after them)`` and stops at the
    first gap, a record that does not decode, or ``limit``; a file's blank tail (Java's
    BLANK_MAGIC_CODE) moves on to the next file. Recovery's queue offsets and the index
    rebuild both read the CommitLog this way."""
    at_offset = start
    while at_offset < limit:
        mf = cl.mfq.find_by_offset(at_offset)
        if mf is None:
            return
        pos = at_offset - mf.file_from_offset
        recs, at, outcome, _ = _store.scan_records(
            mf.mm, pos, min(mf.wrote_position, limit - mf.file_from_offset), mf.file_from_offset, False
        )
        at_offset = mf.file_from_offset + at
        if outcome == _store.SCAN_BLANK:
            at_offset = cl.roll_next_file(at_offset)
        yield mf, recs, at_offset
        if outcome != _store.SCAN_BLANK and not recs:
            return
