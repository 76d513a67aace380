"""MessageStore: the facade the broker uses, Java DefaultMessageStore.

It keeps put, get and the queries, and owns the services, each one background task started
by ``start()`` and stopped by ``shutdown()`` (a BackgroundTasks owner):

* ``reput`` (rmq.store.reput.ReputMessageService): builds ConsumeQueues from the CommitLog;
* ``flush_commit_log`` (rmq.store.flush): FlushRealTimeService (ASYNC_FLUSH) or
  GroupCommitService (SYNC_FLUSH);
* ``flush_consume_queue`` (FlushConsumeQueueService): ConsumeQueue flush + ``checkpoint``;
* ``clean_commit_log`` / ``clean_consume_queue`` (rmq.store.clean): retention and the disk
  guard, every ``clean_resource_interval`` ms;
* ``warm`` (rmq.store.warm): pre-faults the CommitLog ahead of the writer.

The message index (``index``, rmq.store.index.IndexService, None with messageIndexEnable=false)
is built by the reput service, flushed by the ConsumeQueue flush service, trimmed by the clean
service and read by ``query_message``.

The directory lock and the abort marker are ``lock`` (rmq.store.checkpoint.StoreLock).
Blocking work (fdatasync, checkpoint writes) runs in one dedicated flush thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Collection, Container, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, overload

from rmq import _store
from rmq.common.constants import TopicValidator
from rmq.common.files import atomic_write
from rmq.common.log import RateLimitedLog, clip
from rmq.common.message import decode_offset_msg_id
from rmq.common.tasks import BackgroundTasks
from rmq.errors import StoreError
from rmq.store.checkpoint import StoreCheckpoint, StoreLock, checkpoint_offset
from rmq.store.clean import (
    CleanCommitLogService,
    CleanConsumeQueueService,
    run_clean_services,
)
from rmq.store.commitlog import CommitLog
from rmq.store.config import StoreConfig
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rmq.store.flush import (
    CommitLogFlushService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
)
from rmq.store.ha import HAClient, HAService
from rmq.store.ha.epoch import EpochFile
from rmq.store.index import IndexService, QueryOffsetResult
from rmq.store.mapped_file import DiskSpaceError, MappedFile, MappingBudgetError
from rmq.store.message import (
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    MessageInner,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    StoredMessage,
    host_bytes,
)
from rmq.store.reput import ReputMessageService, scan_committed
from rmq.store.resources import MAPPINGS, configure_mapping_budget, fsync_dir
from rmq.store.warm import WARM_CHUNK, WarmAheadService

__all__ = ["MessageStore", "QUERY_MESSAGE_MAX_BYTES", "TRUNCATE_MARKER"]

log = logging.getLogger("rmq.store")

_GET_STATUS = tuple(GetMessageStatus)
# Bytes of records one query_message answer may hold (at least one record); Java bounds only
# the count (maxMsgsNumBatch) and sends from the page cache, we copy.
QUERY_MESSAGE_MAX_BYTES = 32 * 1024 * 1024  # index = value (the scan returns 0, 1 or 2)
#: ``<root>/truncate``: the CommitLog offset of a truncation under way (``truncate_files``);
#: a start that finds it truncates there again before recovering, so a kill -9 in the middle
#: never brings the cut records back.
TRUNCATE_MARKER = "truncate"
_MAX_QUEUE_OFFSET = (1 << 63) - 1  # a record's QUEUEOFFSET is an int64
# A getMessage answer of at most this many bytes is copied out of the mapped files into one
# bytes object (get_message_scan's copy_limit) instead of one zero-copy view per record: Java's
# default maxTransferBytesOnMessageInMemory, so every pull of the ordinary limits is copied and
# only a pull carrying one larger record is sent as views (design.md, "The PULL path").
PULL_COPY_LIMIT = 256 * 1024


def _wait_store_msg_ok(msg: MessageInner) -> bool:
    """Java ``Message.isWaitStoreMsgOK``: the WAIT property, true when absent."""
    props = msg.properties_str
    if props is None:
        value = msg.properties.get("WAIT") if msg.properties else None
    else:
        at = 0 if props.startswith("WAIT\x01") else props.find("\x02WAIT\x01") + 1
        if at == 0 and not props.startswith("WAIT\x01"):
            return True
        start = at + 5
        stop = props.find("\x02", start)
        value = props[start : stop if stop >= 0 else len(props)]
    return value is None or value.lower() == "true"


def _fdatasync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


class MessageStore:
    """CommitLog + ConsumeQueues + services. See the module docstring.

    Args:
        config: StoreConfig (Java MessageStoreConfig names and defaults).
        store_host: the broker's advertised ``(ipv4, port)``, written into every record and
            into offsetMsgIds.
        disk_used_ratio: callable(path) → used fraction 0..1 of the disk (default: the real
            file system; tests pass their own to simulate a full disk).
    """

    def __init__(
        self, config: StoreConfig, store_host: tuple[str, int], *, disk_used_ratio: Callable[[str], float] | None = None
    ):
        self.config = config
        self.store_host = store_host
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.running = False  # (a plain attribute, read per pull: every change calls refresh_refusal)
        self.shutdown_flag = False
        self.recovery_report: dict[str, Any] = {}
        self.rl_log = RateLimitedLog(log)  # warnings a client can repeat: one line per key per 10 s
        self._root = config.store_path_root_dir
        self.lock = StoreLock(self._root)
        self.checkpoint = StoreCheckpoint(self._root, lambda offset: self.commit_log.file_start_timestamp(offset))
        self.clean_commit_log = CleanCommitLogService(self, disk_used_ratio)
        self.clean_consume_queue = CleanConsumeQueueService(self)
        self.reput = ReputMessageService(self)
        self.flush_consume_queue = FlushConsumeQueueService(self)
        self.flush_commit_log: CommitLogFlushService = self._new_flush_service()
        self.warm = WarmAheadService(self)
        self.index: IndexService | None = IndexService(self) if config.message_index_enable else None
        # The CommitLog's writer, kept across restarts of this object (each new CommitLog
        # starts it empty): the broker's SEND path holds it (``appender``).
        self._appender = _store.Appender(host_bytes(store_host, resolve=True), WARM_CHUNK)
        self._appender.bind_file_type(MappedFile)
        self._appender.bind_config_type(StoreConfig)
        self.refresh_refusal()
        self.commit_log = self._new_commit_log()
        self._pending_queues: set[tuple[str, int]] = set()
        self._tasks = BackgroundTasks("message store", log)
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stats = {"get_total": 0, "get_found": 0, "flush_timeouts": 0}  # puts: the appender's
        # Replication (rmq.store.ha): the listener on a master, the follower on a slave.
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None
        self.ha_listen_host = "0.0.0.0"  # the broker sets its own listen host
        # Controller mode (docs/design.md "Controller mode"; Java AutoSwitchHAService): the
        # epoch file, and the broker id this replica has in its group (the broker sets both
        # before start; the HA handshake and the SyncStateSet use the id).
        self.epochs = EpochFile(self._root)
        self.controller_mode = False
        self.broker_id = 0

    def _new_commit_log(self) -> CommitLog:
        cl = CommitLog(self.config, self.store_host, self._appender)
        cl.admit_new_queue = self._admit_new_queue
        cl.on_new_file = self.clean_commit_log.check_disk
        return cl

    def _new_flush_service(self) -> CommitLogFlushService:
        return GroupCommitService(self) if self.config.sync_flush else FlushRealTimeService(self)

    # -- state the services own, under the names the broker and tools use -----------------------
    @property
    def appender(self) -> _store.Appender:
        """The CommitLog's writer (rmq/_append.pxi): the broker's SEND fast path puts through
        its C-level ``put_plain``, which checks this store's state itself."""
        return self._appender

    @property
    def get_counts(self) -> dict[str, int]:
        """The read statistics ``get_message`` counts (``get_total``, ``get_found``; Java
        getMessageTimesTotalFound/Miss), live: the broker's native pull path reads with
        ``count=False`` and counts here only the pulls it answers itself."""
        return self._stats

    def refresh_refusal(self) -> None:
        """Set the appender's C flag ``refusing`` (its ``put_plain`` declines while it is set)
        from what refuses writes: not running, a full disk, the last flush error. Called where
        one of them changes (``running`` here, ``CleanCommitLogService.disk_full``,
        ``CommitLogFlushService.last_error``) and when the appender is bound."""
        self._appender.refusing = (
            not self.running or self.clean_commit_log.disk_full or self.flush_commit_log.last_error is not None
        )

    def _bind_appender(self) -> None:
        """The after-append bookkeeping the appender runs once per append: warm-ahead, the
        dispatch wakeup (ASYNC_FLUSH; the group commit wakes it under SYNC_FLUSH) and the HA
        service's notify_append on a master."""
        a = self._appender
        a.store = self  # (the appender takes the config now)
        self.refresh_refusal()  # (the flush service may be a new one)
        a.warm = self.warm
        # the dispatch wakeup: called by the appender while ``wake_pending`` is clear, which
        # the reput service sets when it schedules its run and clears when the run starts
        a.waker = self.reput.wakeup if self.config.flush_disk_type != "SYNC_FLUSH" else None
        a.wake_pending = False
        # the HA service's idle writers: told by the appender while one waits (``notify_armed``,
        # set by the service when a writer starts waiting, cleared when it is told); armed here
        # so that a writer already waiting is told at the next append
        a.notifier = self.ha.notify_append if self.ha is not None else None
        a.notify_armed = self.ha is not None
        a.hooks = ()

    @property
    def disk_full(self) -> bool:
        return self.clean_commit_log.disk_full

    @property
    def disk_full_remark(self) -> str:
        return self.clean_commit_log.disk_full_remark

    @property
    def last_flush_error(self) -> str | None:
        return self.flush_commit_log.last_error

    @property
    def dispatch_error(self) -> str | None:
        return self.reput.dispatch_error

    @property
    def reput_from_offset(self) -> int:
        return self.reput.reput_from_offset

    def count_flush_timeout(self) -> None:
        self._stats["flush_timeouts"] += 1

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in the store's flush thread (fdatasync, checkpoint writes)."""
        assert self._loop is not None and self._executor is not None
        return await self._loop.run_in_executor(self._executor, fn, *args)

    # ======================================================================================
    # life cycle
    # ======================================================================================
    async def start(self) -> None:
        """Raise the fd limit, lock the directory, recover (validating everything past the
        checkpoint), create the abort marker, start the services."""
        if self.running:
            return
        os.makedirs(self._root, exist_ok=True)
        configure_mapping_budget(self.config.max_mapped_files)
        self.lock.lock()
        if self.shutdown_flag:
            # Restarting this object after shutdown(): fresh in-memory state, same files.
            self.commit_log = self._new_commit_log()
            self.consume_queue_table = {}
            self._pending_queues = set()
            self.reput = ReputMessageService(self)
            self.flush_commit_log = self._new_flush_service()
            self.warm = WarmAheadService(self)
            self.index = IndexService(self) if self.config.message_index_enable else None
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-store-flush")
        try:
            self._load_epochs()
            truncated = self._recover()
            if truncated is not None:
                await self.run_blocking(self._finish_truncation_blocking, truncated)
            self.lock.create_abort_marker()
        except BaseException:
            self._close_files()
            self._executor.shutdown(wait=False)
            self.lock.unlock()
            raise
        self.clean_commit_log.check_disk()
        self.warm.start()
        self.running = True
        self.refresh_refusal()
        self.shutdown_flag = False
        self._tasks.spawn(self.reput.run(), name="store-reput")
        self._tasks.spawn(self.flush_commit_log.run(), name="store-flush-commitlog")
        self._tasks.spawn(self.flush_consume_queue.run(), name="store-flush-consumequeue")
        self._tasks.spawn(run_clean_services(self), name="store-clean")
        self._bind_appender()
        await self._start_ha()

    async def _start_ha(self) -> None:
        """A master listens for slaves on haListenPort (OSError when taken: the start fails);
        a slave follows haMasterAddress, or the address the broker learns from the name server."""
        cfg = self.config
        if cfg.broker_role == "SLAVE":
            self._start_ha_client(cfg.ha_master_address)
            return
        try:
            await self._start_ha_service()
        except BaseException:
            await self.shutdown()
            raise

    def _start_ha_client(self, master_address: str | None) -> None:
        self.ha_client = HAClient(self, master_address)
        self._tasks.spawn(self.ha_client.run(), name="store-ha-client")

    async def _start_ha_service(self) -> None:
        ha = HAService(self, self.ha_listen_host)
        await ha.start(self._tasks.spawn)
        self.ha = ha
        self._bind_appender()

    # -- role changes at run time (controller mode; Java AutoSwitchHAService) -------------------
    async def change_to_master(self, epoch: int, role: str = "SYNC_MASTER") -> bool:
        """Become the master of ``epoch`` without a restart (Java ``changeToMaster``): stop
        following, dispatch what was replicated, cut a torn tail, append ``(epoch, CommitLog
        end)`` to the epoch file, restore each queue's next offset, open the HA port, take
        writes as ``role``. A master given a newer epoch only appends it. False (nothing
        changed) for an epoch older than the last one. OSError when the HA port cannot be bound
        (the store stays a slave)."""
        if role not in ("SYNC_MASTER", "ASYNC_MASTER"):
            raise ValueError(f"role must be SYNC_MASTER or ASYNC_MASTER, not {role!r}")
        if epoch < self.epochs.last_epoch:
            log.warning(
                "change to master refused: epoch %d is older than this store's %d", epoch, self.epochs.last_epoch
            )
            return False
        if self.config.broker_role != "SLAVE":
            if epoch > self.epochs.last_epoch:
                self.epochs.append(epoch, self.commit_log.max_offset)
                await self.run_blocking(self.epochs.save)
            self.config.broker_role = role
            return True
        if self.ha_client is not None:
            await self.ha_client.stop()
            self.ha_client = None
        # Everything replicated goes into its queue first (Java waits for dispatchBehindBytes 0).
        try:
            for _ in range(1 << 30):
                if not self.reput.do_reput(max_records=4096):
                    break
                await asyncio.sleep(0)  # a long backlog: let the loop serve between batches
        except StoreError as e:  # the reput service retries; the cut below walks records itself
            log.error("change to master: dispatch stopped at %d: %s", self.reput.reput_from_offset, e)
        end = self.last_whole_record_end()
        if end < self.commit_log.max_offset:
            await self.truncate_files(end)
        if self.epochs.last_epoch >= epoch:
            self.epochs.truncate_suffix_by_epoch(epoch)
        self.epochs.append(epoch, self.commit_log.max_offset)
        await self.run_blocking(self.epochs.save)
        self._recover_topic_queue_table(self.commit_log.max_offset)
        await self._start_ha_service()
        self.config.broker_role = role
        self._bind_appender()
        log.warning(
            "store %s is now %s of epoch %d from CommitLog offset %d",
            self._root,
            role,
            epoch,
            self.commit_log.max_offset,
        )
        return True

    async def change_to_slave(self, master_ha_address: str | None, epoch: int) -> bool:
        """Stop taking writes and follow the master at ``master_ha_address`` (Java
        ``changeToSlave``): the HA port closes (puts waiting for a slave fail), and the HA
        client asks the new master's epochs and cuts this CommitLog back to the last common
        point before its first report (rmq.store.ha.client). False (nothing changed) for an
        epoch older than the last one."""
        if epoch < self.epochs.last_epoch:
            log.warning(
                "change to slave refused: epoch %d is older than this store's %d", epoch, self.epochs.last_epoch
            )
            return False
        was = self.config.broker_role
        self.config.broker_role = "SLAVE"  # no write from here on (the C fast path reads it too)
        if self.ha is not None:
            ha, self.ha = self.ha, None
            self._bind_appender()
            await ha.shutdown()
        if self.ha_client is None:
            self._start_ha_client(master_ha_address)
        else:
            self.ha_client.update_master_address(master_ha_address)
        if was != "SLAVE":
            log.warning("store %s is now SLAVE (epoch %d), following %s", self._root, epoch, master_ha_address)
        return True

    def update_ha_master_address(self, addr: str | None) -> None:
        """Java ``DefaultMessageStore.updateHaMasterAddress``: a slave follows ``addr`` ("host:port")."""
        if self.ha_client is not None:
            self.ha_client.update_master_address(addr)

    async def shutdown(self) -> None:
        """Flush everything, write the checkpoint, remove the abort marker, release the lock.

        Never raises: a step that fails is logged, the rest still runs, and the abort marker
        stays (the next start then runs crash recovery)."""
        if not self.running:
            return
        self.running = False
        self.refresh_refusal()
        self.shutdown_flag = True
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.ha is not None:
            await self.ha.shutdown()
        self.reput.stop()
        await self._tasks.close()
        clean = True
        try:
            await self.run_blocking(self.commit_log.flush, 0)
        except (OSError, ValueError) as e:
            clean = False
            log.error("store shutdown: CommitLog flush failed (%s); the next start will run crash recovery", e)
        if isinstance(self.flush_commit_log, GroupCommitService):
            self.flush_commit_log.complete(None)
        self.flush_commit_log.stop()
        try:
            self.reput.do_reput()
        except Exception as e:  # noqa: BLE001 - shutdown goes on; the next start dispatches the rest
            log.error(
                "store shutdown: dispatch stopped at CommitLog offset %d (%s); the next start dispatches the rest",
                self.reput.reput_from_offset,
                e,
            )
        try:
            await self.flush_consume_queue.flush_and_checkpoint(0, clean, force_index=True)
        except (OSError, ValueError) as e:
            clean = False
            log.error(
                "store shutdown: ConsumeQueue flush / checkpoint failed (%s); the next start will run crash recovery", e
            )
        self.warm.stop()
        self._close_files()
        assert self._executor is not None
        self._executor.shutdown(wait=True)
        if clean:
            self.lock.remove_abort_marker()
        self.lock.unlock()

    def _close_files(self) -> None:
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.shutdown()
        if self.index is not None:
            self.index.shutdown()
        self.commit_log.shutdown()

    # ======================================================================================
    # recovery (Java DefaultMessageStore.recover)
    # ======================================================================================
    def _recover(self) -> int | None:
        """Returns the offset of an interrupted truncation it completed (None without one):
        the caller makes it durable and removes the marker."""
        cfg = self.config
        t0 = time.monotonic()
        abnormal = self.lock.was_aborted()
        cp = self.checkpoint.read()
        self.commit_log.mfq.load()
        self._load_consume_queues()
        cut = self._read_truncate_marker()
        if cut is not None:
            # A truncation was interrupted (kill -9): cut again, then the ordinary crash
            # recovery brings the ConsumeQueues and the index in line (below).
            log.warning(
                "store %s: completing a truncation to CommitLog offset %d interrupted by a stop", self._root, cut
            )
            if self.commit_log.mfq.files and cut < self.commit_log.mfq.max_offset:
                self.commit_log.mfq.truncate_dirty_files(cut)
            abnormal = True
            cp = dict(cp)
            for key in ("physic_offset", "logics_offset"):
                cp[key] = min(checkpoint_offset(cp, key, cut), cut)
            self.epochs.truncate_suffix_by_offset(cut)
        if self.commit_log.mfq.files:
            # Clean or not, records past the checkpoint are validated (CRC) to the end of the
            # data instead of trusted or dropped: after a power cut the abort marker can be
            # gone and the checkpoint older than SYNC_FLUSH-acknowledged records (Java
            # CommitLog.recoverNormally re-validates the last files too). Below the
            # checkpoint's offsets everything was fsynced before the checkpoint was written.
            start = min(checkpoint_offset(cp, "physic_offset", 0), checkpoint_offset(cp, "logics_offset", 0))
            report = self.commit_log.recover(start, cfg.check_crc_on_recover)
            report["mode"] = "crash" if abnormal else "clean"
            report["scanned_from"] = start
            if abnormal:
                log.warning(
                    "store %s was not shut down cleanly: recovered CommitLog to %d from %d",
                    self._root,
                    report["end"],
                    start,
                )
            elif report["end"] != checkpoint_offset(cp, "max_offset", -1) or report["truncated_bytes"]:
                log.warning(
                    "store %s: the checkpoint ends at %s but the CommitLog's valid records end at %d "
                    "(%d bytes truncated): the last stop was not clean or the checkpoint is stale",
                    self._root,
                    cp.get("max_offset"),
                    report["end"],
                    report["truncated_bytes"],
                )
        else:
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
        if report["mode"] != "empty":
            # Units are written in CommitLog order, so everything below the highest unit's
            # record is indexed; re-dispatch from there (idempotent) to the end.
            reput_from = max(
                min_phy,
                min(
                    end,
                    cq_max_end if cq_max_end >= 0 else min_phy,
                    checkpoint_offset(cp, "logics_offset", end) if cp else min_phy,
                ),
            )
        self.reput.reput_from_offset = reput_from
        if self.index is not None:
            self.checkpoint.index_state = {k: v for k, v in cp.items() if k.startswith("index_")}
            self.index.load(abnormal, cp)
            if cut is not None:
                self.index.truncate(cut)
            if abnormal and report["mode"] != "empty":
                # After a clean stop the index ends where dispatch ended (shutdown flushed it);
                # like Java, no backfill then (a store that ran without the index stays so).
                indexed = checkpoint_offset(cp, "index_dispatched", 0)
                last = self.index.files[-1].name if self.index.files else None
                if cp.get("index_file") is not None and last != cp.get("index_file"):
                    indexed = 0  # the checkpointed file did not load: re-index what it held
                if cut is not None:
                    indexed = min(indexed, cut)
                self._rebuild_index(self.index.rebuild_from(min_phy, indexed), reput_from)
        try:
            # Controller mode: a replica starts without a role, and what it holds past its
            # queues may be what no other in-sync replica has (truncated when it follows a new
            # master). It is dispatched once known safe: as master (change_to_master) or up to
            # the master's confirm offset as slave (ReputMessageService.dispatch_limit).
            self.reput.do_reput(limit=self.reput.reput_from_offset if self.controller_mode else end, notify=False)
        except StoreError as e:
            # The reput service retries (and shows the error) once the store runs.
            log.error("store recovery: dispatch stopped at CommitLog offset %d: %s", self.reput.reput_from_offset, e)
        self._recover_topic_queue_table(end)
        report["reput_from"] = reput_from
        report["seconds"] = round(time.monotonic() - t0, 3)
        self.recovery_report = report
        log.info(
            "store recovered (%s) in %.3fs: CommitLog [%d, %d), %d queues",
            report["mode"],
            report["seconds"],
            self.commit_log.min_offset,
            end,
            sum(len(q) for q in self.consume_queue_table.values()),
        )
        return cut

    def _recover_topic_queue_table(self, end: int) -> None:
        """Java ``recoverTopicQueueTable``: each queue's next offset from its ConsumeQueue, and
        from the records past the dispatch position up to ``end``, so an offset is never reused."""
        table = self.commit_log.topic_queue_table
        table.clear()
        # (a record's QUEUEOFFSET is an int64: a queue whose last record has the maximum keeps
        # the maximum as its next offset, and the CommitLog refuses further records for it)
        for topic, queues in self.consume_queue_table.items():
            for qid, cq in queues.items():
                table[(topic, qid)] = min(cq.get_max_offset_in_queue(), _MAX_QUEUE_OFFSET)
        if self.reput.reput_from_offset < end:
            for key, next_offset in self.reput.undispatched_queue_offsets(end).items():
                if next_offset > table.get(key, 0):
                    table[key] = min(next_offset, _MAX_QUEUE_OFFSET)

    # ======================================================================================
    # truncation and epochs (controller mode; docs/design.md "Controller mode")
    # ======================================================================================
    def _load_epochs(self) -> None:
        try:
            self.epochs.load()
        except ValueError as e:
            raise StoreError(f"store {self._root}: {e}") from e

    def _marker_path(self) -> str:
        return os.path.join(self._root, TRUNCATE_MARKER)

    def _read_truncate_marker(self) -> int | None:
        try:
            with open(self._marker_path(), "rb") as f:
                text = f.read().decode().strip()
        except FileNotFoundError:
            return None
        try:
            return max(int(text), 0)
        except ValueError:
            # written atomically, so never torn; anything else is not ours to guess at
            raise StoreError(
                f"store {self._root}: truncation marker {self._marker_path()} holds {text!r}, not an offset"
            ) from None

    def is_offset_aligned(self, offset: int) -> bool:
        """Java ``isOffsetAligned``: a record (or a file's BLANK tail, or the end) starts at
        ``offset``, so cutting there leaves only whole records."""
        cl = self.commit_log
        if offset == cl.max_offset or offset % cl.file_size == 0:
            return True
        sel = cl.select(offset, 8)
        if sel is None:
            return False
        mf, pos = sel
        _recs, at, outcome, _blank = _store.scan_records(mf.mm, pos, mf.wrote_position, mf.file_from_offset, False, 1)
        return at > pos or outcome == _store.SCAN_BLANK

    def last_whole_record_end(self) -> int:
        """The end of the last whole record of the CommitLog: a slave's log can end inside a
        record (its master cuts transfers by size), which a new master must not keep (Java
        ``AutoSwitchHAService.truncateInvalidMsg``). Walks from the dispatch position with the
        recovery walk (``scan_committed``)."""
        cl = self.commit_log
        end = min(self.reput.reput_from_offset, cl.max_offset)
        for _mf, _recs, after in scan_committed(cl, end, cl.max_offset):
            end = after
        return end

    def writes_allowed(self) -> bool:
        """False on a SLAVE (and on a master fenced by a newer epoch, which is made a SLAVE)."""
        return self.config.broker_role != "SLAVE"

    async def truncate_files(self, offset: int) -> bool:
        """Cut the CommitLog back to ``offset`` and bring the ConsumeQueues, the index, each
        queue's next offset, the dispatch position, the epoch file and the checkpoint in line
        (Java ``DefaultMessageStore.truncateFiles``). Only for a store that takes no writes (a
        SLAVE, the HA client stopped). True when done (or nothing past ``offset``); False when
        ``offset`` is not a record boundary. StoreError below the CommitLog's first offset.

        Crash-safe: ``<root>/truncate`` holds ``offset`` from before the first byte is cut
        until the cut is durable; a start that finds it cuts there again and recovers as after a
        crash (the recovery paths, not a second implementation)."""
        if self.writes_allowed():
            raise StoreError("truncate_files: the store takes writes (make it a SLAVE first)")
        cl = self.commit_log
        if offset >= cl.max_offset:
            return True
        if offset < cl.min_offset:
            raise StoreError(f"cannot truncate to {offset}: the CommitLog starts at {cl.min_offset}")
        if not self.is_offset_aligned(offset):
            log.error("truncate_files: offset %d is not a record boundary; nothing cut", offset)
            return False
        log.warning("store %s: truncating the CommitLog from %d to %d", self._root, cl.max_offset, offset)
        await self.run_blocking(atomic_write, self._marker_path(), str(offset).encode())
        self._truncate_now(offset)
        await self.run_blocking(self._finish_truncation_blocking, offset)
        return True

    def _truncate_now(self, offset: int) -> None:
        """The in-memory half of ``truncate_files`` (on the loop, so no dispatch, pull or
        transfer sees a half-cut store)."""
        for queues in self.consume_queue_table.values():
            for cq in queues.values():
                cq.recover(offset)  # ConsumeQueue recovery: cut at the first unit past the end
        self.commit_log.mfq.truncate_dirty_files(offset)
        self.commit_log.mfq.retry_pending_destroy()
        if self.index is not None:
            self.index.truncate(offset)
        reput = self.reput
        if reput.reput_from_offset > offset:
            reput.reput_from_offset = offset
        reput.forget_queues()
        self._recover_topic_queue_table(offset)
        self.epochs.truncate_suffix_by_offset(offset)

    def _finish_truncation_blocking(self, offset: int) -> None:
        """Flush thread: make the cut durable (the CommitLog file holding it, every
        ConsumeQueue's last file, the index), write the epoch file and a checkpoint at or
        below ``offset``, then remove the marker."""
        cl = self.commit_log
        last = cl.mfq.last
        if last is not None:
            _fdatasync(last.path)
        for queues in list(self.consume_queue_table.values()):
            for cq in list(queues.values()):
                if cq.mfq.last is not None:
                    _fdatasync(cq.mfq.last.path)
        if self.index is not None:
            for f in list(self.index.files):
                f.sync()
        self.epochs.save()
        cp = self.checkpoint.read()
        self.checkpoint.index_state = {}  # the index state before the cut no longer holds
        self.checkpoint.write(
            min(checkpoint_offset(cp, "physic_offset", offset), offset),
            min(checkpoint_offset(cp, "logics_offset", offset), offset),
            cl.max_offset,
        )
        try:
            os.unlink(self._marker_path())
        except FileNotFoundError:
            pass
        fsync_dir(self._root)

    def _rebuild_index(self, start: int, limit: int) -> None:
        """Index the records in [start, limit) (dispatched before, but missing from the index
        after a crash cut it back); the dispatch from ``limit`` indexes the rest."""
        index = self.index
        cl = self.commit_log
        if index is None or start >= limit:
            return
        t0 = time.monotonic()
        reached, n = start, 0
        for mf, recs, after in scan_committed(cl, start, limit):
            index.build(mf.mm, recs)
            n += len(recs)
            reached = after
        log.info(
            "index rebuilt from CommitLog offset %d to %d: %d records in %.3fs",
            start,
            reached,
            n,
            time.monotonic() - t0,
        )

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
    # put
    # ======================================================================================
    def _refuse(self) -> PutMessageResult | None:
        if not self.running:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is not running")
        if self.config.broker_role == "SLAVE":
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE, remark="message store is a slave: writes are not allowed"
            )
        clean = self.clean_commit_log
        if clean.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=clean.disk_full_remark)
        flush = self.flush_commit_log
        if flush.last_error is not None:
            # Refuse until a flush succeeds again (the next attempt is triggered here in SYNC
            # mode; the ASYNC service retries on its own schedule).
            flush.wakeup()
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                remark=f"message store is not writeable after a flush error: {flush.last_error}",
            )
        return None

    def append_message(self, msg: MessageInner, batch: bool = False) -> PutMessageResult:
        """Append one message (or a batch body, Java MessageDecoder.encodeMessages) now, without waiting for a flush.

        This is the synchronous half of :meth:`put_message`: the broker's SEND path calls it
        inline on the loop, and only when ``result.flush_wait`` is set (SYNC_FLUSH) awaits
        :meth:`wait_flush` before acknowledging. In ASYNC_FLUSH mode a SEND is therefore
        answered without creating a task. Passing the properties as ``properties_str`` (the
        SEND header's string as received) saves re-encoding them.
        """
        refused = self._refuse()
        if refused is not None:
            return refused
        ha = self.ha
        if (
            ha is not None
            and ha.controller_mode
            and self.config.broker_role == "SYNC_MASTER"
            and len(ha.sync_state_set) < self.config.min_in_sync_replicas
            and _wait_store_msg_ok(msg)
        ):
            # Java 5 CommitLog.asyncPutMessage: refused before anything is stored
            remark = (
                f"in-sync replicas not enough: SyncStateSet {sorted(ha.sync_state_set)} has fewer than "
                f"minInSyncReplicas={self.config.min_in_sync_replicas} members"
            )
            self.rl_log.warning("isr-not-enough", "put refused: %s", remark)
            return PutMessageResult(PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark=remark)
        try:
            result = self.commit_log.append_batch(msg) if batch else self.commit_log.append(msg)
        except MappingBudgetError as e:
            self.rl_log.warning("append-budget", "append to CommitLog refused: %s", e)
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=str(e))
        except DiskSpaceError as e:
            self.clean_commit_log.set_disk_full(f"disk full: {e}; message store is not writeable", e.needed)
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=self.disk_full_remark)
        except (OSError, StoreError, ValueError, TypeError) as e:
            log.error("%sappend to CommitLog failed: %s", "batch " if batch else "", e)
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=f"append failed: {e}")
        result.flush_wait = self._after_append(result)
        if self.ha is not None and self.config.broker_role == "SYNC_MASTER" and result.append is not None:
            result.flush_wait |= self._replica_wait(result, msg)
        return result

    def _replica_wait(self, result: PutMessageResult, msg: MessageInner) -> bool:
        """SYNC_MASTER (Java ``CommitLog.submitReplicaRequest``): wait for a slave's ack when
        one is connected and not too far behind, else SLAVE_NOT_AVAILABLE (the message is
        stored all the same). A message with WAIT=false is acknowledged at once."""
        ha = self.ha
        if ha is None or result.status != PutMessageStatus.PUT_OK or not _wait_store_msg_ok(msg):
            return False
        a = result.append
        assert a is not None
        if ha.controller_mode:
            # Java 5 handleHA: the SyncStateSet decides (no SLAVE_NOT_AVAILABLE: the
            # minInSyncReplicas check refused the put before it was stored).
            if not ha.must_wait():
                return False
            result.replica_wait = True
            return True
        if ha.is_slave_ok(a.wrote_offset + a.wrote_bytes):
            result.replica_wait = True
            return True
        result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
        result.remark = (
            "no slave connected"
            if not any(c.slave_request_offset >= 0 for c in ha.connections)
            else f"the slave is more than {self.config.ha_slave_fallbehind_max} bytes behind"
        )
        self.rl_log.warning("slave-not-available", "SYNC_MASTER put answered SLAVE_NOT_AVAILABLE: %s", result.remark)
        return False

    def _admit_new_queue(self, topic: str, queue_id: int) -> PutMessageResult | None:
        """Before the first record of a queue without a ConsumeQueue: refuse it while the
        mapping budget (file descriptors, vm.max_map_count) is nearly used up, so dispatch
        never meets a ConsumeQueue it cannot create."""
        key = (topic, queue_id)
        queues = self.consume_queue_table.get(topic)
        if (queues is not None and queue_id in queues) or key in self._pending_queues:
            return None
        if not MAPPINGS.can_add_queues(len(self._pending_queues)):
            remark = (
                f"too many mapped files to create ConsumeQueue {clip(topic)}-{queue_id}: "
                f"{MAPPINGS.describe()}, {len(self._pending_queues)} new queues not mapped yet, "
                f"{MAPPINGS.queue_headroom} kept for file rolls; "
                f"raise the open file limit (ulimit -n) or vm.max_map_count, or delete unused topics"
            )
            self.rl_log.warning("queue-budget", "%s", remark)
            return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, remark=remark)
        self._pending_queues.add(key)
        return None

    async def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append one message. SYNC_FLUSH: returns after fsync (FLUSH_DISK_TIMEOUT after
        ``sync_flush_timeout`` ms; an fsync error raises StoreError)."""
        result = self.append_message(msg)
        if result.flush_wait:
            return await self.wait_flush(result)
        return result

    async def put_messages(self, msg: MessageInner) -> PutMessageResult:
        """Append a batch body (Java MessageDecoder.encodeMessages): each item its own record and queue offset."""
        result = self.append_message(msg, batch=True)
        if result.flush_wait:
            return await self.wait_flush(result)
        return result

    def _after_append(self, result: PutMessageResult) -> bool:
        """After an append (its bookkeeping ran in the appender): a refusal's log line; True
        when the caller must wait for the group commit."""
        if result.status != PutMessageStatus.PUT_OK:
            self.rl_log.warning(
                f"put-refused-{result.status.name}", "put refused: %s (%s)", result.status.name, result.remark
            )
            return False
        return self.config.flush_disk_type == "SYNC_FLUSH"

    def add_flush_callback(
        self, result: PutMessageResult, callback: Callable[[PutMessageResult, BaseException | None], None]
    ) -> bool:
        """SYNC_FLUSH without a task: ``callback(result, exc)`` once the group commit covers
        ``result`` (GroupCommitService.add_callback). False when this store does not group
        commit or too many callbacks wait already: then ``await wait_flush(result)``."""
        flush = self.flush_commit_log
        if result.replica_wait and self.ha is not None:
            transfer = self.ha.group_transfer
            if not isinstance(flush, GroupCommitService):
                return transfer.add_callback(result, callback)

            def flushed(res: PutMessageResult, exc: BaseException | None) -> None:
                # Java: the flush's status first, then the replica's.
                if exc is not None or res.status != PutMessageStatus.PUT_OK:
                    callback(res, exc)
                else:
                    transfer.add_callback(res, callback, force=True)

            return flush.add_callback(result, flushed)
        if not isinstance(flush, GroupCommitService):
            return False
        return flush.add_callback(result, callback)

    async def wait_flush(self, result: PutMessageResult) -> PutMessageResult:
        """Wait for the group commit that covers ``result`` (SYNC_FLUSH)."""
        flush = self.flush_commit_log
        if isinstance(flush, GroupCommitService) and self.config.sync_flush:
            result = await flush.wait_flush(result)
        if result.replica_wait and self.ha is not None and result.status == PutMessageStatus.PUT_OK:
            result = await self.ha.group_transfer.wait_transfer(result)
        return result

    # ======================================================================================
    # dispatch
    # ======================================================================================
    def add_arrival_listener(
        self, fn: Callable[[str, int, int, int], None], watched: Container[tuple[str, int]] | None = None
    ) -> None:
        """``fn(topic, queue_id, next_logic_offset, tags_code)`` after each dispatch run, once
        per (queue, distinct tags code) dispatched in that run; with ``watched`` (a container
        of ``(topic, queue_id)``, e.g. the long-polling table), only for the queues it holds
        (Java's NotifyMessageArrivingListener is called per record; here no call and no
        object is made for a queue nobody waits on)."""
        self.reput.add_listener(fn, watched)

    def do_reput(self, limit: int | None = None, notify: bool = True, max_records: int = 1 << 30) -> int:
        """Dispatch now (ReputMessageService.do_reput); returns the records dispatched."""
        return self.reput.do_reput(limit, notify, max_records)

    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: Literal[True] = True) -> ConsumeQueue: ...

    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None: ...

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        if queues is None:
            if not create:
                return None
            queues = self.consume_queue_table[topic] = {}
        cq = queues.get(queue_id)
        if cq is None and create:
            cq = queues[queue_id] = ConsumeQueue(
                topic, queue_id, self.config.consume_queue_dir, self.config.mapped_file_size_consume_queue
            )
            self._pending_queues.discard((topic, queue_id))
        return cq

    # ======================================================================================
    # get (Java DefaultMessageStore.getMessage)
    # ======================================================================================
    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.broker_role != "SLAVE" or self.config.offset_check_in_slave:
            return new
        return old

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        *,
        count: bool = True,
    ) -> GetMessageResult:
        """Java DefaultMessageStore.getMessage. Synchronous. The caller must call
        ``release()`` on the result once the buffers have been written out. ``count=False``
        (default True) leaves the getMessageTimesTotal/Found statistics alone: the long-polling
        service probes a held SQL92 pull's new messages this way before it wakes the pull."""
        if self.shutdown_flag or not self.running:
            err = StoreError("message store is not running")
            err.retriable = True
            raise err
        if count:
            self._stats["get_total"] += 1
        cl = self.commit_log
        max_offset_py = cl.max_offset
        # (find_consume_queue without creating, inline: once per pull)
        queues = self.consume_queue_table.get(topic) if queue_id >= 0 and topic else None
        cq = queues.get(queue_id) if queues is not None else None
        if cq is None:
            if queue_id < 0 or not topic:
                return GetMessageResult(
                    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, self._next_offset_correction(offset, 0), 0, 0
                )
            # Java creates the queue on lookup; an unknown queue behaves as an empty one.
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._next_offset_correction(offset, 0), 0, 0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        if max_offset == 0:
            return GetMessageResult(
                GetMessageStatus.NO_MESSAGE_IN_QUEUE, self._next_offset_correction(offset, 0), min_offset, max_offset
            )
        if offset < min_offset:
            return GetMessageResult(
                GetMessageStatus.OFFSET_TOO_SMALL,
                self._next_offset_correction(offset, min_offset),
                min_offset,
                max_offset,
            )
        if offset == max_offset:
            return GetMessageResult(
                GetMessageStatus.OFFSET_OVERFLOW_ONE,
                self._next_offset_correction(offset, offset),
                min_offset,
                max_offset,
            )
        if offset > max_offset:
            nxt = self._next_offset_correction(offset, min_offset if min_offset == 0 else max_offset)
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, nxt, min_offset, max_offset)
        idx = cq.get_index_buffer(offset)
        if idx is None:
            nxt = self._next_offset_correction(offset, cq.roll_next_file(offset))
            log.warning(
                "consumer request topic: %s offset: %d minOffset: %d maxOffset: %d, but access logic queue failed",
                topic,
                offset,
                min_offset,
                max_offset,
            )
            return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, nxt, min_offset, max_offset)
        cq_file, start, end = idx
        cfg = self.config
        memory = int(cfg.total_physical_memory * (cfg.access_message_in_memory_max_ratio / 100.0))
        if message_filter is None or message_filter.codes is None:
            codes, tag_bytes = None, None
        else:
            codes, tag_bytes = message_filter.codes, message_filter.tag_bytes
        program, prop_evaluate = None, None
        if message_filter is not None and message_filter.properties is not None:
            program, prop_evaluate = message_filter.program, message_filter.properties.match_values
        status, scanned, found, total, max_phy_pulling, segments = _store.get_message_scan(
            cq_file.mm,
            start,
            end,
            cl.table,
            cl.mfq.flushed_where if cfg.flush_disk_type == "SYNC_FLUSH" else max_offset_py,
            max_msg_nums,
            max_offset_py,
            memory,
            codes,
            tag_bytes,
            cfg.max_transfer_bytes_on_message_in_memory,
            cfg.max_transfer_count_on_message_in_memory,
            cfg.max_transfer_bytes_on_message_in_disk,
            cfg.max_transfer_count_on_message_in_disk,
            program,
            prop_evaluate,
            PULL_COPY_LIMIT,
        )
        buffers: list[Any]
        holds = []
        if isinstance(segments, bytes):  # small records: copied, no view and no hold (get_message_scan)
            buffers = [segments]
            if count:
                self._stats["get_found"] += found
        elif segments:
            buffers = []
            files = cl.table_files
            for fidx, s, e in segments:
                mf = files[fidx]
                if mf.hold():
                    holds.append(mf)
                buffers.append(memoryview(mf.mm)[s:e])
            if count:
                self._stats["get_found"] += found
        else:
            buffers = []
        return GetMessageResult(
            _GET_STATUS[status],
            offset + scanned // CQ_STORE_UNIT_SIZE,
            min_offset,
            max_offset,
            (max_offset_py - max_phy_pulling) > memory,
            found,
            total,
            buffers,
            holds,
        )

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

    def get_earliest_message_time(self) -> int:
        """STORETIMESTAMP of the oldest message in the CommitLog, -1 when it is empty (Java
        ``DefaultMessageStore.getEarliestMessageTime``)."""
        cl = self.commit_log
        if cl.max_offset <= cl.min_offset:
            return -1
        sel = cl.select(cl.min_offset, 1)
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

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> StoredMessage | None:
        """The decoded record at CommitLog offset ``phy_offset`` (None when not there)."""
        if size is None:
            head = self.commit_log.select(phy_offset, 8)
            if head is None:
                return None
            mf, pos = head
            size = int.from_bytes(mf.mm[pos : pos + 4], "big", signed=True)
        sel = self.commit_log.select(phy_offset, size)
        if sel is None:
            return None
        mf, pos = sel
        try:
            rec = _store.decode_record(memoryview(mf.mm)[pos : pos + size], 0, False)
        except ValueError:
            return None
        if rec["commit_log_offset"] != phy_offset:
            return None
        return StoredMessage.from_record(rec)

    def select_one_message_by_offset(self, phy_offset: int) -> bytes | None:
        """The raw record at CommitLog offset ``phy_offset`` (Java
        DefaultMessageStore.selectOneMessageByOffset), validated by the walker; None when
        there is none."""
        if phy_offset < 0:
            return None
        head = self.commit_log.select(phy_offset, 8)
        if head is None:
            return None
        mf, pos = head
        size = int.from_bytes(mf.mm[pos : pos + 4], "big", signed=True)
        if size <= 0:
            return None
        sel = self.commit_log.select(phy_offset, size)
        if sel is None:
            return None
        mf, pos = sel
        data = bytes(mf.mm[pos : pos + size])
        try:
            span = _store.record_span(data, 0)
        except ValueError:
            return None
        if span is None or int.from_bytes(data[28:36], "big", signed=True) != phy_offset:
            return None
        return data

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Java DefaultMessageStore.queryMessage: the records indexed under ``key`` (a KEYS
        item or a UNIQ_KEY) of ``topic`` stored within [begin, end] ms, oldest first, at most
        ``min(max_num, maxMsgsNumBatch)`` and (past the first) ``QUERY_MESSAGE_MAX_BYTES``; with
        the index's last update timestamp and offset.
        Empty when the index is disabled. Records whose hash merely collides are included,
        as Java does (the client filters by key)."""
        result = QueryMessageResult()
        index = self.index
        if index is None or max_num <= 0:
            return result
        max_num = min(max_num, self.config.max_msgs_num_batch)
        last_query_time = end
        for _ in range(3):
            q: QueryOffsetResult = index.query_offset(topic, key, max_num, begin, last_query_time)
            if not q.phy_offsets:
                break
            q.phy_offsets.sort()
            result.index_last_update_timestamp = q.index_last_update_timestamp
            result.index_last_update_phyoffset = q.index_last_update_phyoffset
            for m, off in enumerate(q.phy_offsets):
                data = self.select_one_message_by_offset(off)
                if data is None:
                    continue
                if m == 0:
                    last_query_time = _store.record_store_timestamp(data, 0)
                if result.buffers and result.buffer_total_size + len(data) > QUERY_MESSAGE_MAX_BYTES:
                    break  # the answer is copied: bounded (64 x 4 MiB would be 256 MiB)
                result.add(data)
            if result.buffer_total_size > 0 or last_query_time < begin:
                break
        return result

    def look_message_by_offset_msg_id(self, msg_id: str) -> StoredMessage | None:
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

    def delete_topics(self, topics: Iterable[str]) -> int:
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
        if n:
            self.reput.forget_queues()
        return n

    def clean_unused_topic(self, topics: Collection[str]) -> list[str]:
        """CLEAN_UNUSED_TOPIC (Java ``DefaultMessageStore.cleanUnusedTopic``): drop the
        ConsumeQueues of every topic that is not in ``topics`` (the broker's topic table), but
        ``SCHEDULE_TOPIC_XXXX`` and ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, which the broker writes
        without a topic config. Returns the topics dropped."""
        keep = {TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC}
        unused = [t for t in self.consume_queue_table if t not in topics and t not in keep]
        for topic in unused:
            log.info("cleanUnusedTopic: %s has no topic config, its consume queues are destroyed", clip(topic))
        self.delete_topics(unused)
        return unused

    def runtime_info(self) -> dict[str, str]:
        cl = self.commit_log
        info = {
            "commitLogMinOffset": cl.min_offset,
            "commitLogMaxOffset": cl.max_offset,
            "commitLogFlushedOffset": cl.flushed_offset,
            "dispatchBehindBytes": self.dispatch_behind_bytes(),
            "putMessageTimesTotal": self._appender.put_total,
            "putMessageSizeTotal": self._appender.put_bytes,
            "getMessageTimesTotalFound": self._stats["get_found"],
            "getMessageTimesTotal": self._stats["get_total"],
            "flushDiskTimeoutTimes": self._stats["flush_timeouts"],
            "commitLogDiskRatio": f"{self.clean_commit_log.used_ratio(self.clean_commit_log._path()):.4f}",
            "diskFull": self.disk_full,
            "consumeQueueCount": sum(len(q) for q in self.consume_queue_table.values()),
            "flushDiskType": self.config.flush_disk_type,
            "brokerRole": self.config.broker_role,
            "lastFlushError": self.last_flush_error or "",
            "dispatchError": self.dispatch_error or "",
            "mappedFiles": MAPPINGS.live,
            "mappedFilesBudget": MAPPINGS.limit,
        }
        if self.index is not None:
            info.update(self.index.runtime_info())
        if self.ha is not None:
            info.update(self.ha.runtime_info())
        if self.ha_client is not None:
            info.update(self.ha_client.runtime_info())
        return {k: str(v) for k, v in info.items()}

    # ======================================================================================
    # retention
    # ======================================================================================
    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: the next clean runs delete expired CommitLog files at any
        hour (rmq.store.clean.CleanCommitLogService.execute_delete_files_manually)."""
        self.clean_commit_log.execute_delete_files_manually()

    def clean_expired_consumer_queue(self) -> int:
        """CLEAN_EXPIRED_CONSUMEQUEUE (Java ``DefaultMessageStore.cleanExpiredConsumerQueue``):
        destroy every ConsumeQueue (but ``SCHEDULE_TOPIC_XXXX``'s and ``rmq_sys_wheel_timer``'s,
        whose progress the delay and timer services keep by queue offset) whose last record ends below
        the CommitLog's minimum offset, i.e. whose messages all aged out, and forget its next
        queue offset (a new message there starts at 0 again, as in Java); a topic left without
        queues is dropped. Then trim the other queues' leading units below that minimum (the
        clean service's usual pass). Returns how many queues were destroyed."""
        min_phy = self.commit_log.min_offset
        n = 0
        for topic in list(self.consume_queue_table):
            if topic in (TopicValidator.RMQ_SYS_SCHEDULE_TOPIC, TopicValidator.RMQ_SYS_WHEEL_TIMER_TOPIC):
                continue
            queues = self.consume_queue_table[topic]
            for qid, cq in list(queues.items()):
                last = cq.max_physic_offset
                if last != -1 and last < min_phy:
                    log.info(
                        "cleanExpiredConsumerQueue: %s %d destroyed, CommitLog min offset %d, queue's last "
                        "record ends at %d",
                        clip(topic),
                        qid,
                        min_phy,
                        last,
                    )
                    self.commit_log.topic_queue_table.pop((topic, qid), None)
                    cq.destroy()
                    del queues[qid]
                    n += 1
            if not queues:
                del self.consume_queue_table[topic]
                try:
                    os.rmdir(os.path.join(self.config.consume_queue_dir, topic))
                except OSError:
                    pass
        if n:
            self.reput.forget_queues()
        self.clean_consume_queue.clean()
        return n

    def delete_expired_files(self, manual: bool = False) -> int:
        """One clean run (CleanCommitLogService then CleanConsumeQueueService): returns how
        many CommitLog files were deleted. See rmq.store.clean."""
        n = self.clean_commit_log.delete_expired_files(manual)
        if n:
            self.reput.forget_queues()
        self.clean_consume_queue.clean()
        return n
