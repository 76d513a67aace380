"""Flush services (Java CommitLog.FlushRealTimeService / GroupCommitService and
DefaultMessageStore.FlushConsumeQueueService).

Each runs as one background task owned by the MessageStore; the fdatasync calls run in the
store's flush thread (``store.run_blocking``), never on the event loop.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from rmq.errors import StoreError
from rmq.store.callbacks import Entry, OffsetCallbacks, PutCallback
from rmq.store.message import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

__all__ = [
    "CommitLogFlushService",
    "FlushConsumeQueueService",
    "FlushRealTimeService",
    "GroupCommitService",
    "ThoroughInterval",
]

log = logging.getLogger("rmq.store")


def _consume_result(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()


class ThoroughInterval:
    """Java's "flush at least N dirty pages, but everything every T ms" rule, shared by the
    CommitLog and ConsumeQueue flush loops (both read their settings on every round, as Java
    does, so a changed setting applies at once).

    ``least_pages(least, thorough_ms)`` returns ``least`` normally and 0 (flush every dirty
    page) once ``thorough_ms`` have passed since the last thorough round.
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = time.monotonic()

    def least_pages(self, least: int, thorough_ms: int) -> int:
        now = time.monotonic()
        if (now - self._last) * 1000 >= thorough_ms:
            self._last = now
            return 0
        return least


class CommitLogFlushService(abc.ABC):
    """What both CommitLog flush modes share: the last flush error (while set, the store
    refuses puts with SERVICE_NOT_AVAILABLE) and the flush call itself."""

    def __init__(self, store: MessageStore):
        self.store = store
        self._last_error: str | None = None

    @property
    def last_error(self) -> str | None:
        """The last fdatasync's error, None after one that succeeded (while set the store
        refuses writes; the appender's ``refusing`` follows it)."""
        return self._last_error

    @last_error.setter
    def last_error(self, value: str | None) -> None:
        self._last_error = value
        self.store.refresh_refusal()

    def wakeup(self) -> None:
        """Ask for a flush soon (a put after a flush error)."""

    async def _flush(self, least_pages: int) -> bool:
        try:
            await self.store.run_blocking(self.store.commit_log.flush, least_pages)
        except (OSError, ValueError) as e:  # ValueError: a file closed under us
            self.last_error = str(e)
            log.error("CommitLog fdatasync failed: %s; refusing writes until a flush succeeds", e)
            return False
        if self.last_error is not None:
            log.warning("CommitLog flush works again after: %s", self.last_error)
            self.last_error = None
        return True

    @abc.abstractmethod
    async def run(self) -> None:
        """The service's task (Java ServiceThread.run): FlushRealTimeService flushes on an
        interval, GroupCommitService per group of waiting puts."""

    def stop(self) -> None:
        """Called by the store's shutdown after the task was cancelled."""


class FlushRealTimeService(CommitLogFlushService):
    """ASYNC_FLUSH: every ``flush_interval_commitlog`` ms, fdatasync once
    ``flush_commitlog_least_pages`` pages are dirty (everything every
    ``flush_commitlog_thorough_interval`` ms)."""

    async def run(self) -> None:
        cfg = self.store.config
        interval = ThoroughInterval()
        while self.store.running:
            await asyncio.sleep(cfg.flush_interval_commitlog / 1000.0)
            least = interval.least_pages(cfg.flush_commitlog_least_pages, cfg.flush_commitlog_thorough_interval)
            await self._flush(least if self.last_error is None else 0)


#: ``callback(result, exc)`` of :meth:`GroupCommitService.add_callback`.
FlushCallback = PutCallback


class GroupCommitService(CommitLogFlushService):
    """SYNC_FLUSH: one fdatasync serves every append that arrived before it started; a put
    is acknowledged once the flushed offset covers it (then dispatch runs: nothing is
    dispatched before it is durable).

    Two ways to wait: ``await wait_flush(result)`` (a future and a timeout per put), and
    ``add_callback(result, callback)`` for the SEND path, which costs no task, future or timer
    per message: the callbacks wait in append order (so their deadlines are in order too) and
    one timer, armed for the oldest, expires them. At most ``max_callbacks`` (default 10,000)
    wait at once; past that ``add_callback`` says no and the caller waits the ordinary way
    (for the broker: a task its send pool bounds, answering SYSTEM_BUSY when full)."""

    max_callbacks = 10_000

    def __init__(self, store: MessageStore):
        super().__init__(store)
        self.requests: list[tuple[int, asyncio.Future[Any]]] = []
        self.callbacks = OffsetCallbacks("flush", self._expired)
        self.event = asyncio.Event()

    def add_callback(self, result: PutMessageResult, callback: FlushCallback) -> bool:
        """Call ``callback(result, None)`` once the group commit covers ``result`` (status
        FLUSH_DISK_TIMEOUT after ``sync_flush_timeout`` ms, then too), or ``callback(result,
        exc)`` when the fdatasync fails or the store shuts down. Returns False, without
        registering, when ``max_callbacks`` are already waiting."""
        if len(self.callbacks) >= self.max_callbacks:
            return False
        a = result.append
        assert a is not None  # only PUT_OK results wait for the flush
        self.callbacks.add(
            a.wrote_offset + a.wrote_bytes, self.store.config.sync_flush_timeout / 1000.0, result, callback
        )
        self.event.set()
        return True

    def _expired(self, expired: list[Entry]) -> None:
        """The timer: answer FLUSH_DISK_TIMEOUT to the callbacks past their deadline."""
        timeout_ms = self.store.config.sync_flush_timeout
        log.warning(
            "flush to disk timed out after %d ms for %d puts (offsets up to %d)",
            timeout_ms,
            len(expired),
            expired[-1][0],
        )
        for _end, _deadline, result, _callback in expired:
            self.store.count_flush_timeout()
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            result.remark = f"flush to disk did not finish in {timeout_ms} ms"

    def wakeup(self) -> None:
        self.event.set()

    async def wait_flush(self, result: PutMessageResult) -> PutMessageResult:
        """Wait for the group commit that covers ``result``: FLUSH_DISK_TIMEOUT after
        ``sync_flush_timeout`` ms, StoreError when the fdatasync fails."""
        store = self.store
        timeout_ms = store.config.sync_flush_timeout
        a = result.append
        assert a is not None  # only PUT_OK results wait for the flush
        end = a.wrote_offset + a.wrote_bytes
        fut = asyncio.get_running_loop().create_future()
        # A put that timed out no longer awaits its future: mark a later error as retrieved.
        fut.add_done_callback(_consume_result)
        self.requests.append((end, fut))
        self.event.set()
        try:
            async with asyncio.timeout(timeout_ms / 1000.0):
                await asyncio.shield(fut)
        except TimeoutError:
            store.count_flush_timeout()
            log.warning("flush to disk timed out after %d ms (offset %d)", timeout_ms, end)
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            result.remark = f"flush to disk did not finish in {timeout_ms} ms"
        return result

    def complete(self, exc: BaseException | None) -> None:
        """Fail every waiting put with ``exc``, or acknowledge those the flushed offset covers."""
        reqs, self.requests = self.requests, []
        flushed = self.store.commit_log.flushed_offset
        for end, fut in reqs:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            elif end <= flushed:
                fut.set_result(True)
            else:
                self.requests.append((end, fut))
        if exc is not None:
            self.callbacks.fail_all(exc)
        else:
            self.callbacks.complete_upto(flushed)

    async def run(self) -> None:
        while self.store.running:
            await self.event.wait()
            self.event.clear()
            if not self.requests and not self.callbacks and self.last_error is None:
                continue
            if not await self._flush(0):
                self.complete(StoreError(f"flush to disk failed: {self.last_error}"))
                continue
            self.complete(None)
            self.store.reput.wakeup()
            if self.requests or self.callbacks:
                self.event.set()

    def stop(self) -> None:
        exc = StoreError("message store shut down before the flush")
        self.complete(exc)
        self.callbacks.stop(exc)


class FlushConsumeQueueService:
    """Every ``flush_interval_consume_queue`` ms: fdatasync the ConsumeQueues with at least
    ``flush_consume_queue_least_pages`` dirty pages (all every
    ``flush_consume_queue_thorough_interval`` ms), then write the checkpoint."""

    def __init__(self, store: MessageStore):
        self.store = store

    def flush_all(self, least_pages: int) -> None:
        """Flush thread: every ConsumeQueue."""
        for queues in list(self.store.consume_queue_table.values()):
            for cq in list(queues.values()):
                cq.flush(least_pages)

    async def flush_and_checkpoint(self, least_pages: int, clean: bool = False, force_index: bool = False) -> None:
        store = self.store
        # Units below this offset are in the files being flushed now.
        logics = store.reput.reput_from_offset
        # Index files at most every thorough interval (they are written at random slots: an
        # fdatasync each second would rewrite pages all over the hash table), at a roll, and
        # at shutdown; the checkpoint then records the flushed cut (rmq.store.index).
        snap = (
            store.index.snapshot(store.config.flush_consume_queue_thorough_interval, force_index, logics)
            if store.index is not None
            else None
        )
        await store.run_blocking(self.flush_all, least_pages)
        if snap is not None and store.index is not None:
            store.checkpoint.index_state = await store.index.flush(snap)
        cl = store.commit_log
        await store.run_blocking(store.checkpoint.write, cl.flushed_offset, logics, cl.max_offset, clean)

    async def run(self) -> None:
        store = self.store
        cfg = store.config
        interval = ThoroughInterval()
        while store.running:
            await asyncio.sleep(cfg.flush_interval_consume_queue / 1000.0)
            least = interval.least_pages(cfg.flush_consume_queue_least_pages, cfg.flush_consume_queue_thorough_interval)
            try:
                await self.flush_and_checkpoint(least)
            except (OSError, ValueError) as e:
                store.rl_log.log(logging.ERROR, "cq-flush", "ConsumeQueue flush / checkpoint failed: %s", e)
