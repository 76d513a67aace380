"""CommitLog: the append-only log of every message and its recovery (Java CommitLog)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.common.log import RateLimitedLog, clip
from rmq.errors import StoreError
from rmq.store.config import StoreConfig
from rmq.store.mapped_file import MappedFile, MappedFileQueue
from rmq.store.message import (
    AppendMessageResult,
    MessageInner,
    MessageSysFlag,
    PutMessageResult,
    PutMessageStatus,
    host_bytes,
)

__all__ = ["CommitLog"]

log = logging.getLogger("rmq.store")
_rl_log = RateLimitedLog(log)

_TRAN_MASK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_RECORD_FIXED_SIZE = _store.RECORD_FIXED_SIZE
_END_FILE_MIN_BLANK = _store.END_FILE_MIN_BLANK_LENGTH
# Java TopicValidator.VALID_PATTERN_STR: also keeps topic names safe as directory names.
# Java MessageDecoder: SYSFLAG at 36, BORNHOST at 48 (8 bytes, 20 for IPv6), STORETIMESTAMP next.
_SYSFLAG_POS = 36
_BORNHOST_POS = 48
# The topic names the writer keeps encoded (past it a name is encoded per put).
_MAX_CACHED_TOPICS = 100_000
# A record's QUEUEOFFSET is an int64 (a recovered hostile CommitLog may end a queue there).
_MAX_QUEUE_OFFSET = (1 << 63) - 1
_NO_QUEUE_OFFSET = (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)


class CommitLog:
    """Appends records in the Java v1 layout into ``<commitlog dir>/<20-digit offset>`` files.

    All appends run on the event loop thread (one writer, no lock). ``topic_queue_table`` holds
    the next logical offset of each (topic, queue_id) and the topics' encoded names (the
    writer's ``QueueTable``, rmq/_qtable.pxi).
    """

    def __init__(self, config: StoreConfig, store_host: tuple[str, int], appender: _store.Appender | None = None):
        self.config = config
        self.store_host = store_host
        self.store_host_bytes = host_bytes(store_host, resolve=True)
        # The one writer (rmq/_append.pxi): every append below and the broker's plain SEND
        # (at C level) write through it; it keeps the queue offsets, the topic cache and the
        # after-append bookkeeping. A store restarting this log hands in its own (the broker's
        # SEND path holds it), which starts empty again.
        if appender is None:
            appender = _store.Appender(self.store_host_bytes, 0)
        elif appender.store_host_bytes != self.store_host_bytes:
            raise ValueError("the appender writes another store host")
        appender.queues = _store.QueueTable(_MAX_CACHED_TOPICS)
        self.appender = appender
        self._id_prefix = appender.id_prefix  # offsetMsgId = prefix + %016X
        self._born_cache: dict[tuple[str, int], bytes] = {}
        self.file_size = config.mapped_file_size_commitlog
        # A new CommitLog file leaves room for the ConsumeQueue files its records need.
        self.mfq = MappedFileQueue(
            config.commitlog_dir,
            self.file_size,
            sync_dir=True,
            keep_free=max(2 * config.mapped_file_size_consume_queue, 1 << 20),
        )
        self.mfq.on_change = self._refresh_table
        self.table = _store.CommitLogTable()
        self.table_files: list[MappedFile] = []
        appender.mfq = self.mfq
        self._queues = appender.queues
        self.confirm_offset = 0
        # Called with (topic, queue_id) before the first record of a queue that has no
        # ConsumeQueue yet; a PutMessageResult refuses it (the store's mapping budget).
        self.admit_new_queue: Callable[[str, int], PutMessageResult | None] | None = None
        # Called after a new CommitLog file was created (the store re-checks the disk: with
        # preallocated files, disk use only grows here).
        self.on_new_file: Callable[[], object] | None = None

    @property
    def topic_queue_table(self) -> _store.QueueTable:
        """``{(topic, queue_id): next queue offset}`` (the appender's ``QueueTable``)."""
        return self._queues

    # -- table for the getMessage scan -------------------------------------------------------
    def _refresh_table(self) -> None:
        files = list(self.mfq.files)
        self.table.release()
        self.table_files = files
        if files:
            self.table.reset(
                self.file_size, files[0].file_from_offset, [mf.mm if mf.available else None for mf in files]
            )

    # -- offsets -------------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        first = self.mfq.first
        if first is None:
            return 0
        return first.file_from_offset if first.available else self.roll_next_file(first.file_from_offset)

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.mfq.flushed_where

    def file_start_timestamp(self, offset: int) -> int:
        """The store timestamp of the first record of the file holding ``offset`` (0 when there
        is none): the Java checkpoint's lower bound for a crash recovery to start from (Java
        ``DefaultMessageStore.isMappedFileMatchedRecover`` reads the same field). Safe to call
        from the flush thread: a file unmapped meanwhile raises ValueError."""
        mf = self.mfq.find_by_offset(min(offset, max(self.max_offset - 1, 0)))
        if mf is None or not mf.available or mf.wrote_position < _RECORD_FIXED_SIZE:
            return 0
        mm = mf.mm
        sys_flag = int.from_bytes(mm[_SYSFLAG_POS : _SYSFLAG_POS + 4], "big")
        at = _BORNHOST_POS + (20 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else 8)
        return int.from_bytes(mm[at : at + 8], "big")

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- append ----------------------------------------------------------------------------------
    def _encode_topic(self, topic: str) -> bytes:
        b = self._queues.topic_bytes(topic)
        if b is None:
            b = topic.encode("utf-8")
            if (
                self._queues.cached_topics < _MAX_CACHED_TOPICS
                and not TopicValidator.is_topic_or_group_illegal(topic)
                and len(b) <= 127
            ):
                self._queues.cache_topic(topic, b)
        return b

    def _born(self, host: tuple[str, int]) -> bytes:
        b = self._born_cache.get(host)
        if b is None:
            b = host_bytes(host)
            if len(self._born_cache) > 10_000:
                self._born_cache.clear()
            self._born_cache[host] = b
        return b

    def msg_id(self, phy: int) -> str:
        """offsetMsgId of the record at ``phy`` (Java MessageDecoder.createMessageId: store host + offset, hex)."""
        return f"{self._id_prefix}{phy:016X}"

    def _check(self, topic_b: bytes, msg: MessageInner) -> PutMessageResult | None:
        if not topic_b or len(topic_b) > 127:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"topic must be 1..127 bytes, got {len(topic_b)}"
            )
        if self._queues.topic_bytes(msg.topic) is None and TopicValidator.is_topic_or_group_illegal(msg.topic):
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"topic {msg.topic!r} has characters outside [%|a-zA-Z0-9_-]"
            )
        if msg.queue_id < 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=f"bad queue id {msg.queue_id}")
        return None

    def _file_for(self, size: int) -> MappedFile:
        """The file the next ``size`` bytes go to: pads the current one with a BLANK record
        when they do not fit (with the 8 bytes a later BLANK needs)."""
        mf = self.mfq.last
        if mf is None or mf.is_full:
            mf = self._new_file()
        elif size + _store.END_FILE_MIN_BLANK_LENGTH > mf.remaining:
            # Create the next file first: when that fails the current one stays open.
            nxt = self._new_file(mf)
            _store.write_blank(mf.mm, mf.wrote_position, mf.remaining)
            mf.wrote_position = self.file_size
            mf = nxt
        if not mf.allocated:
            mf.allocate()  # a file loaded on a full disk (DiskSpaceError until space frees)
        return mf

    def _new_file(self, full: MappedFile | None = None) -> MappedFile:
        """Map the file after ``full`` (or the first / next one); StoreError when it cannot be."""
        if full is None:
            mf = self.mfq.get_last_mapped_file(0)
        else:
            mf = self.mfq.create_after(full)
        if self.on_new_file is not None:
            self.on_new_file()
        return mf

    def append(self, msg: MessageInner) -> PutMessageResult:
        """Write one record; returns PUT_OK with the AppendMessageResult, or a refusal."""
        topic_b = self._queues.topic_bytes(msg.topic)  # cached = checked legal and short enough
        if topic_b is None or msg.queue_id < 0:
            topic_b = self._encode_topic(msg.topic)
            bad = self._check(topic_b, msg)
            if bad is not None:
                return bad
        props_str = msg.properties_str
        props = props_str.encode("utf-8") if props_str is not None else msg.encoded_properties()
        if len(props) > 32767:
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"properties are {len(props)} bytes, the maximum is 32767",
            )
        body = msg.body
        size = _RECORD_FIXED_SIZE + len(body) + len(topic_b) + len(props)
        max_size = self.config.max_message_size
        if len(body) > max_size or size > max_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"message is {size} bytes, the maximum is {max_size}"
            )
        if size + _END_FILE_MIN_BLANK > self.file_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"message is {size} bytes, larger than a CommitLog file"
            )
        key = (msg.topic, msg.queue_id)
        tran = msg.sys_flag & _TRAN_MASK
        queue_offset: int | None
        if tran in _NO_QUEUE_OFFSET:
            queue_offset = 0
        else:
            queue_offset = self.topic_queue_table.get(key)
            if queue_offset is None:
                if self.admit_new_queue is not None:
                    refused = self.admit_new_queue(msg.topic, msg.queue_id)
                    if refused is not None:
                        return refused
                queue_offset = 0
            elif queue_offset >= _MAX_QUEUE_OFFSET:
                return self._queue_full(msg, 1)
        files = self.mfq.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position + size + _END_FILE_MIN_BLANK > mf.file_size or not mf.allocated:
            mf = self._file_for(size)  # a new file, a roll, or one to allocate
        born = self._born_cache.get(msg.born_host)
        if born is None:
            born = self._born(msg.born_host)
        phy, size, now = self.appender.write(
            mf,
            msg.topic,
            body,
            topic_b,
            props,
            msg.queue_id,
            msg.flag,
            queue_offset,
            tran not in _NO_QUEUE_OFFSET,
            msg.sys_flag,
            msg.born_timestamp,
            born,
            msg.reconsume_times,
            msg.prepared_transaction_offset,
        )
        msg.store_timestamp = now
        # (msg_ids stays empty for a single message: only a batch reply lists them)
        return PutMessageResult(
            PutMessageStatus.PUT_OK, AppendMessageResult(phy, size, f"{self._id_prefix}{phy:016X}", now, queue_offset)
        )

    def _queue_full(self, msg: MessageInner, n: int) -> PutMessageResult:
        """The refusal of ``n`` records for a queue whose next offset would pass the int64
        maximum (only a CommitLog recovered with such offsets gets there)."""
        remark = f"queue {clip(msg.topic)}-{msg.queue_id} has no queue offset left for {n} more records"
        _rl_log.warning("queue-offset-full", "%s", remark)
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=remark)

    def append_batch(self, msg: MessageInner) -> PutMessageResult:
        """Write every item of a batch body (Java MessageDecoder.encodeMessages) as its own record
        (one queue offset each)."""
        topic_b = self._encode_topic(msg.topic)
        bad = self._check(topic_b, msg)
        if bad is not None:
            return bad
        if msg.sys_flag & _TRAN_MASK:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark="batch messages cannot be transactional")
        if len(msg.body) > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                remark=f"batch is {len(msg.body)} bytes, the maximum is {self.config.max_message_size}",
            )
        outer = msg.encoded_properties()
        if len(outer) > 32767:
            return PutMessageResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                remark=f"batch properties are {len(outer)} bytes, the maximum is 32767",
            )
        try:
            items = _store.split_batch(msg.body, len(topic_b), outer)
        except ValueError as e:
            log.warning("rejecting batch for %s-%d: %s", msg.topic, msg.queue_id, e)
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, remark=f"bad batch body: {e}")
        total = sum(it[5] for it in items)
        if total + _store.END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, remark=f"batch is {total} bytes, larger than a CommitLog file"
            )
        key = (msg.topic, msg.queue_id)
        queue_offset = self.topic_queue_table.get(key)
        if queue_offset is None:
            if self.admit_new_queue is not None:
                refused = self.admit_new_queue(msg.topic, msg.queue_id)
                if refused is not None:
                    return refused
            queue_offset = 0
        elif queue_offset + len(items) > _MAX_QUEUE_OFFSET:
            return self._queue_full(msg, len(items))
        mf = self._file_for(total)
        phy, total, now = self.appender.write_batch(
            mf,
            msg.topic,
            msg.body,
            items,
            topic_b,
            outer,
            msg.queue_id,
            msg.sys_flag,
            msg.born_timestamp,
            self._born(msg.born_host),
            msg.reconsume_times,
            queue_offset,
        )
        msg.store_timestamp = now
        ids = []
        at = phy
        for it in items:
            ids.append(self.msg_id(at))
            at += it[5]
        return PutMessageResult(
            PutMessageStatus.PUT_OK,
            AppendMessageResult(
                wrote_offset=phy,
                wrote_bytes=total,
                msg_id=ids[0],
                store_timestamp=now,
                logics_offset=queue_offset,
                msg_num=len(items),
                msg_ids=ids,
            ),
        )

    def append_data(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """A slave's append of replicated bytes (Java ``CommitLog.appendData``): ``data`` is
        raw CommitLog (records, a file's BLANK tail) from the master's mapped file at
        ``offset``, written at exactly that offset.

        ``offset`` must be this log's end (the caller checked it); the first bytes of an empty
        log create the file ``offset`` falls in (a master starts a new slave at a file
        start), a full last file rolls to the next. Raises StoreError when the bytes do not
        fit the current file (the master's ``mappedFileSizeCommitLog`` differs from ours) or
        do not start at the end; DiskSpaceError / MappingBudgetError when no file can be made.
        """
        n = len(data)
        if n == 0:
            return
        mf = self.mfq.last
        if mf is None:
            if offset % self.file_size:
                raise StoreError(
                    f"replicated data starts at {offset}, inside a CommitLog file of "
                    f"{self.file_size} bytes: is the master's mappedFileSizeCommitLog the same?"
                )
            mf = self.mfq.get_last_mapped_file(offset)
        elif mf.is_full:
            mf = self._new_file(mf)
        end = mf.file_from_offset + mf.wrote_position
        if end != offset:
            raise StoreError(f"replicated data at {offset} but the CommitLog ends at {end}")
        if n > mf.remaining:
            raise StoreError(
                f"replicated data of {n} bytes at {offset} crosses the end of the CommitLog file at "
                f"{mf.file_from_offset + self.file_size}: is the master's mappedFileSizeCommitLog "
                f"({self.file_size} here) the same?"
            )
        if not mf.allocated:
            mf.allocate()
        self.appender.write_data(mf, data)

    # -- reading -------------------------------------------------------------------------------
    def select(self, offset: int, size: int, readable: int | None = None) -> tuple[MappedFile, int] | None:
        """``(mapped_file, pos)`` of ``size`` readable bytes at ``offset`` or None."""
        if readable is None:
            readable = self.max_offset
        if size <= 0 or offset + size > readable:
            return None
        mf = self.mfq.find_by_offset(offset)
        if mf is None or not mf.available:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf, pos

    # -- recovery --------------------------------------------------------------------------------
    def recover(self, start_offset: int, check_crc: bool) -> dict[str, Any]:
        """Validate every record from ``start_offset`` (a record boundary known good) to the end
        of the data, truncate a torn or corrupt tail and drop later files.

        Returns ``{"end": recovered end, "truncated_bytes": n, "reason": str | None}``.
        """
        files = self.mfq.files
        if not files:
            return {"end": 0, "truncated_bytes": 0, "reason": None}
        start_offset = max(start_offset, files[0].file_from_offset)
        mf = self.mfq.find_by_offset(start_offset)
        if mf is None:
            # The checkpoint points past our files: scan the last file from its start.
            mf = files[-1]
            start_offset = mf.file_from_offset
        idx = files.index(mf)
        pos = start_offset - mf.file_from_offset
        end = start_offset
        reason = None
        while True:
            _recs, at, outcome, blank = _store.scan_records(mf.mm, pos, self.file_size, mf.file_from_offset, check_crc)
            end = mf.file_from_offset + at
            if outcome == _store.SCAN_BLANK:
                if at + blank != self.file_size or blank < _store.END_FILE_MIN_BLANK_LENGTH:
                    reason = f"bad BLANK record at {end} (size {blank})"
                    break
                if idx + 1 >= len(files):
                    # The next file was never created: the data ends at this file's end.
                    end = mf.file_from_offset + self.file_size
                    break
                idx += 1
                mf = files[idx]
                pos = 0
                continue
            if outcome == _store.SCAN_END or outcome == _store.SCAN_LIMIT:
                break
            reason = "corrupt record" if outcome == _store.SCAN_CORRUPT else "torn record"
            break
        # How much written-looking data lies past the end?
        dropped = 0
        cut = self.mfq.find_by_offset(end) if end < self.mfq.files[-1].file_from_offset + self.file_size else None
        if cut is not None:
            p = end - cut.file_from_offset
            dropped = _store.last_nonzero(cut.mm, p, cut.data_end(p)) - p
        for later in self.mfq.files:
            if later.file_from_offset > end:
                dropped += _store.last_nonzero(later.mm, 0, later.data_end(0))
        if dropped and reason is None:
            reason = "unreadable bytes after the last record"
        if dropped:
            log.warning("CommitLog recovery: %s at offset %d; truncating %d bytes of tail data", reason, end, dropped)
        # Files fully before `end` are full; the file holding `end` is cut there.
        self.mfq.truncate_dirty_files(end)
        for f in self.mfq.files:
            if f.file_from_offset + self.file_size <= end:
                f.wrote_position = f.flushed_position = self.file_size
        self.mfq.flushed_where = end
        self._refresh_table()
        return {"end": end, "truncated_bytes": dropped, "reason": reason if dropped else None}

    def delete_expired_files(self, expired_ms: int, clean_immediately: bool, keep_from: int | None = None) -> int:
        """Delete expired files, never one holding records at or past ``keep_from`` (the
        dispatch position: those records are not in their ConsumeQueues yet)."""
        n = self.mfq.delete_expired_by_time(expired_ms, clean_immediately, keep_from=keep_from)
        self.mfq.retry_pending_destroy()
        return n

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync dirty CommitLog pages (flush thread). OSError propagates to the caller."""
        return self.mfq.flush(least_pages)

    def shutdown(self) -> None:
        self.table.release()
        self.table_files = []
        self.mfq.on_change = None
        self.mfq.shutdown()
