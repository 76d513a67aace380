"""What the store's files cost the process: file descriptors, memory maps and disk space.

Every mapped file holds one file descriptor (CPython's ``mmap`` keeps a duplicate of the
descriptor it was created from; the store closes its own right after mapping) and one entry of
the kernel's per-process map table (``vm.max_map_count``). Both are process-wide limits, so the
count of live mappings is process-wide too (:data:`MAPPINGS`). Java RocketMQ relies on the
operator raising ``ulimit -n``; here the store raises the soft limit to the hard one at start
(:func:`raise_nofile_limit`) and refuses to create new ConsumeQueues before the budget runs out,
instead of failing inside dispatch ("Too many open files").
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import shutil

__all__ = [
    "FDS_PER_MAPPING",
    "MAPPINGS",
    "MappingBudget",
    "configure_mapping_budget",
    "free_bytes",
    "fsync_dir",
    "raise_nofile_limit",
    "read_max_map_count",
]

log = logging.getLogger("rmq.store")

# CPython < 3.13 mmap objects dup() their descriptor (3.13's trackfd=False would make this 0).
FDS_PER_MAPPING = 1
# Descriptors kept for everything else: client sockets, log files, the checkpoint, the flush
# thread's transient opens. At least this many, or an eighth of the limit.
FD_RESERVE_MIN = 64
# Map entries kept for the interpreter, shared libraries, malloc arenas and thread stacks.
MAP_RESERVE_MIN = 1024
DEFAULT_MAX_MAP_COUNT = 65530


class MappingBudget:
    """Process-wide count of live file mappings against a limit.

    ``limit``: mappings the process may hold (new files past it are refused with a StoreError).
    ``queue_headroom``: mappings kept back from *new ConsumeQueues* so that the CommitLog and
    existing queues can still roll into their next file once new queues are refused.
    """

    __slots__ = ("limit", "live", "queue_headroom", "source")

    def __init__(self) -> None:
        self.live = 0
        self.limit = 1 << 30
        self.queue_headroom = 0
        self.source = "not configured"

    def can_map(self, n: int = 1) -> bool:
        return self.live + n <= self.limit

    def can_add_queues(self, pending: int) -> bool:
        """True when a new queue (one more mapping, after ``pending`` admitted queues that are
        not mapped yet) still leaves ``queue_headroom`` mappings free."""
        return self.live + pending + 1 + self.queue_headroom <= self.limit

    def describe(self) -> str:
        return f"{self.live} of {self.limit} mapped files in use ({self.source})"


MAPPINGS = MappingBudget()


def raise_nofile_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit. Returns ``(old_soft, soft, hard)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    old = soft
    if hard == resource.RLIM_INFINITY:
        # An infinite hard limit cannot be the soft one (the kernel caps it at fs.nr_open).
        try:
            with open("/proc/sys/fs/nr_open") as f:
                target = int(f.read().split()[0])
        except (OSError, ValueError):
            target = 1 << 20
    else:
        target = hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open file limit from %d to %d: %s", soft, target, e)
    return old, soft, hard


def read_max_map_count() -> int:
    """``vm.max_map_count`` (Linux), or its usual default when unreadable."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_MAX_MAP_COUNT


def configure_mapping_budget(max_mapped_files: int = 0) -> MappingBudget:
    """Raise the fd limit and set :data:`MAPPINGS`' limit (called by ``MessageStore.start``).

    The budget is ``min(soft fd limit - max(64, soft/8), vm.max_map_count - max(1024,
    max_map_count/16))``, or ``max_mapped_files`` when that is positive and smaller. New
    ConsumeQueues keep ``max(4, budget/32)`` mappings back for file rolls.
    """
    old, soft, hard = raise_nofile_limit()
    max_maps = read_max_map_count()
    by_fd = soft - max(FD_RESERVE_MIN, soft // 8)
    by_map = max_maps - max(MAP_RESERVE_MIN, max_maps // 16)
    limit = min(by_fd // FDS_PER_MAPPING if FDS_PER_MAPPING else by_map, by_map)
    source = f"open file limit {soft}, vm.max_map_count {max_maps}"
    if 0 < max_mapped_files < limit:
        limit = max_mapped_files
        source += f", maxMappedFiles {max_mapped_files}"
    limit = max(limit, 8)
    MAPPINGS.limit = limit
    MAPPINGS.queue_headroom = max(4, limit // 32)
    MAPPINGS.source = source
    log.info(
        "file descriptors: soft limit %d%s (hard %s); vm.max_map_count %d; budget %d mapped files, "
        "new ConsumeQueues refused past %d (%d in use)",
        soft,
        f" (raised from {old})" if soft != old else "",
        "unlimited" if hard == resource.RLIM_INFINITY else hard,
        max_maps,
        limit,
        limit - MAPPINGS.queue_headroom,
        MAPPINGS.live,
    )
    return MAPPINGS


def free_bytes(path: str) -> int:
    """Bytes available to unprivileged writers on the file system holding ``path`` (0 when
    it cannot be read)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return 0


def fsync_dir(path: str) -> None:
    """fsync a directory so that a file created, renamed or removed in it survives a power
    loss (the file's own fsync does not cover its directory entry)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EROFS):  # some file systems cannot sync dirs
            raise
    finally:
        os.close(fd)
