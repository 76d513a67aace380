"""Retention and the disk guard (Java DefaultMessageStore.CleanCommitLogService and
CleanConsumeQueueService)."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq.store.resources import free_bytes

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

__all__ = ["CleanCommitLogService", "CleanConsumeQueueService", "disk_used_ratio"]

log = logging.getLogger("rmq.store")

#: Clean runs a DELETE_EXPIRED_COMMITLOG request makes "manual" (Java
#: CleanCommitLogService.MAX_MANUAL_DELETE_FILE_TIMES).
MAX_MANUAL_DELETE_FILE_TIMES = 20


def disk_used_ratio(path: str) -> float:
    """Used fraction (0..1) of the file system holding ``path`` (1.0 when unreadable), as
    Java UtilAll.getDiskPartitionSpaceUsedPercent and ``df`` count it: used blocks over used
    plus available ones, rounded up to a hundredth. The blocks reserved for root count on
    neither side: ``(total - available) / total`` would call a disk with large reserved space
    fuller than it is, and make retention delete (``disk_max_used_space_ratio``) where Java
    would not."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return 1.0
    return -(-used * 100 // entire) / 100.0


class CleanCommitLogService:
    """The disk guard and CommitLog retention.

    Above ``disk_space_warning_level_ratio`` (Java's 90 % hard guard) the store refuses writes
    (``disk_full``, SERVICE_NOT_AVAILABLE with ``disk_full_remark``); so does a file that could
    not be allocated (ENOSPC), until the disk has room for it again. The disk is checked at
    every new CommitLog file (files are preallocated, so disk use only grows there) and at
    every clean run (``clean_resource_interval`` ms).
    """

    def __init__(self, store: MessageStore, used_ratio: Callable[[str], float] | None = None):
        self.store = store
        self.used_ratio = used_ratio or disk_used_ratio
        self._disk_full = False
        self.disk_full_remark = ""
        self._space_needed = 0  # free bytes needed before a disk-full refusal ends
        self.manual_delete_runs = 0  # clean runs still to delete as if at deleteWhen

    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG (Java ``executeDeleteFilesManually``): the next
        ``MAX_MANUAL_DELETE_FILE_TIMES`` (20) clean runs delete expired files whatever the hour
        (``deleteWhen``); files younger than ``fileReservedTime`` are still kept."""
        if self.manual_delete_runs == 0:  # one line per request burst, however often it is repeated
            log.info(
                "executeDeleteFilesManually was invoked: the next %d clean runs delete expired CommitLog files",
                MAX_MANUAL_DELETE_FILE_TIMES,
            )
        self.manual_delete_runs = MAX_MANUAL_DELETE_FILE_TIMES

    def _path(self) -> str:
        path = self.store.commit_log.mfq.store_path
        return path if os.path.isdir(path) else self.store.config.store_path_root_dir

    @property
    def disk_full(self) -> bool:
        """Writes are refused until the disk has room again (the appender's ``refusing``
        follows it)."""
        return self._disk_full

    @disk_full.setter
    def disk_full(self, value: bool) -> None:
        self._disk_full = value
        self.store.refresh_refusal()

    def set_disk_full(self, remark: str, needed: int = 0) -> None:
        if not self.disk_full:
            log.error("%s: refusing writes", remark)
        self.disk_full = True
        self.disk_full_remark = remark
        self._space_needed = max(self._space_needed, needed)

    def check_disk(self) -> float:
        """Java isSpaceFull: returns the used ratio; sets or clears ``disk_full``."""
        cfg = self.store.config
        path = self._path()
        ratio = self.used_ratio(path)
        if ratio > cfg.disk_space_warning_level_ratio / 100.0:
            self.set_disk_full(
                f"disk full: {ratio * 100:.1f}% used, above "
                f"{cfg.disk_space_warning_level_ratio}%; message store is not writeable"
            )
        elif self.disk_full:
            if self._space_needed and free_bytes(path) < self._space_needed:
                return ratio
            log.warning(
                "disk use %.1f%% back below %d%%: accepting writes", ratio * 100, cfg.disk_space_warning_level_ratio
            )
            self.disk_full = False
            self.disk_full_remark = ""
            self._space_needed = 0
        return ratio

    def _is_time_to_delete(self) -> bool:
        hour = time.localtime().tm_hour
        for w in self.store.config.delete_when.split(";"):
            w = w.strip()
            if w.isdigit() and int(w) == hour:
                return True
        return False

    def delete_expired_files(self, manual: bool = False) -> int:
        """One run: deletes CommitLog files older than ``file_reserved_time`` hours at
        ``delete_when`` (or ``manual``), and any old file when the disk is above
        ``disk_max_used_space_ratio`` (immediately, regardless of age, above
        ``disk_space_clean_forcibly_ratio``), never one holding records not dispatched yet.
        Returns how many were deleted."""
        store = self.store
        cfg = store.config
        ratio = self.check_disk()
        space_full = ratio > cfg.disk_max_used_space_ratio / 100.0
        clean_now = cfg.clean_file_forcibly_enable and (
            ratio > cfg.disk_space_clean_forcibly_ratio / 100.0 or self.disk_full
        )
        n = 0
        if not manual and self.manual_delete_runs > 0:
            self.manual_delete_runs -= 1
            manual = True
        if manual or space_full or self._is_time_to_delete():
            expired_ms = cfg.file_reserved_time * 3600 * 1000
            n = store.commit_log.delete_expired_files(
                expired_ms, space_full or clean_now, keep_from=store.reput.reput_from_offset
            )
            if n:
                log.info(
                    "retention deleted %d CommitLog file(s); CommitLog now starts at %d", n, store.commit_log.min_offset
                )
        store.commit_log.mfq.retry_pending_destroy()
        return n


class CleanConsumeQueueService:
    """Deletes ConsumeQueue files whose units all point below the CommitLog minimum, moves
    each queue's minimum offset past such units, and deletes the index files wholly below it."""

    def __init__(self, store: MessageStore):
        self.store = store

    def clean(self) -> None:
        min_phy = self.store.commit_log.min_offset
        for queues in self.store.consume_queue_table.values():
            for cq in queues.values():
                cq.delete_expired_file(min_phy)
                cq.mfq.retry_pending_destroy()
        if self.store.index is not None:
            # Java CleanConsumeQueueService.deleteExpiredFiles → IndexService.deleteExpiredFile
            self.store.index.delete_expired_file(min_phy)


async def run_clean_services(store: MessageStore) -> None:
    """The clean task: both services every ``clean_resource_interval`` ms."""
    while store.running:
        await asyncio.sleep(store.config.clean_resource_interval / 1000.0)
        try:
            store.delete_expired_files()
        except Exception:
            log.exception("retention run failed")
