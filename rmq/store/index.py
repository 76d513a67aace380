"""IndexService: the message index by key (Java store.index.IndexService / IndexFile).

Files ``<storePathRootDir>/index/<yyyyMMddHHmmssSSS>`` (named by creation time, local time as
Java's ``UtilAll.timeMillisToHumanString``), each a 40-byte header, ``maxHashSlotNum`` hash
slots and ``maxIndexNum`` entries; the byte layout is drawn in ``rmq/_index.pxi`` where it is
read and written. The dispatch (reput) service indexes each record's UNIQ_KEY and KEYS as
``topic#key`` (``rmq._store.index_build``, one call per scanned batch); a full file rolls to a
new one whose begin offset / timestamp are the previous file's end.

Durability: index files are written through their mapping on the loop thread. The
ConsumeQueue flush service fdatasyncs them in a thread of their own (at a roll, and at most
every ``flushConsumeQueueThoroughInterval`` ms) and then records in the checkpoint the last
file's name, its flushed entry count and header (``index_*``, next to Java's
``indexMsgTimestamp``). After a crash, files newer than that are dropped, that file is cut back
to its flushed entries (its slots rebuilt from them) and recovery re-indexes the CommitLog from
its endPhyOffset. Without index state in the checkpoint every file is dropped and rebuilt
(Java drops the files whose endTimestamp passes the checkpoint's indexMsgTimestamp).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import mmap
import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq import _store
from rmq.errors import StoreError
from rmq.store.mapped_file import DiskSpaceError, MappingBudgetError
from rmq.store.resources import MAPPINGS, free_bytes, fsync_dir

if TYPE_CHECKING:
    from rmq.store.message_store import MessageStore

__all__ = ["IndexFile", "IndexService", "IndexSnapshot", "MAX_KEYS_PER_RECORD", "QueryOffsetResult", "index_file_name"]

log = logging.getLogger("rmq.store")

# Keys indexed per record (UNIQ_KEY plus KEYS items). Java caps nothing, but a KEYS property
# is bounded by the 32 KiB properties string, i.e. up to ~16 000 one-letter keys, each an entry:
# one record could take a sizeable part of a file. Past this the rest are not indexed (logged).
MAX_KEYS_PER_RECORD = 64

_HEADER = struct.Struct(">qqqqii")  # IndexHeader: begin/end timestamp, begin/end phy, slots, count


def index_file_name(millis: int) -> str:
    """Java UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(millis / 1000.0)) + f"{millis % 1000:03d}"


@dataclass
class QueryOffsetResult:
    """Java QueryOffsetResult: phy offsets (newest first) and the last file's end."""

    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass
class IndexSnapshot:
    """What one index flush covers: taken on the loop, synced in the flush thread."""

    files: list[IndexFile]
    last_name: str
    last_count: int
    last_header: bytes
    #: the dispatch position when it was taken: every record below went through ``build``
    dispatched: int = 0


class IndexFile:
    """One mapped index file (Java IndexFile). Positions and the header live in the mapping."""

    __slots__ = ("path", "name", "hash_slot_num", "index_num", "mm", "dirty", "destroyed")

    def __init__(
        self,
        path: str,
        hash_slot_num: int,
        index_num: int,
        *,
        create: bool = False,
        end_phy_offset: int = 0,
        end_timestamp: int = 0,
    ):
        self.path = path
        self.name = os.path.basename(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        size = _store.index_file_size(hash_slot_num, index_num)
        if not MAPPINGS.can_map():
            raise MappingBudgetError(f"cannot map index file {path}: {MAPPINGS.describe()}")
        if create:
            free = free_bytes(os.path.dirname(path))
            if free < size:
                raise DiskSpaceError(f"cannot create index file {path}: {size} bytes needed, {free} free", needed=size)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o644)
        try:
            actual = os.fstat(fd).st_size
            if not create and actual != size:
                raise StoreError(
                    f"index file {path} is {actual} bytes, expected {size} (maxHashSlotNum / maxIndexNum changed?)"
                )
            if create:
                try:
                    # Blocks allocated for real: a write into the mapping never faults (SIGBUS)
                    # on a full disk. ext4 allocates unwritten extents, no zeroing.
                    os.posix_fallocate(fd, 0, size)
                except OSError as e:
                    if e.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise DiskSpaceError(f"cannot allocate index file {path}: {e.strerror}", needed=size) from e
                    if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                        raise
                    os.ftruncate(fd, size)
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            if create:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            raise
        finally:
            os.close(fd)
        MAPPINGS.live += 1
        self.dirty = create
        self.destroyed = False
        if create:
            # Java IndexFile's constructor: a rolled file starts at the previous one's end.
            if end_phy_offset > 0:
                struct.pack_into(">qq", self.mm, 16, end_phy_offset, end_phy_offset)
            if end_timestamp > 0:
                struct.pack_into(">qq", self.mm, 0, end_timestamp, end_timestamp)

    # -- header (IndexHeader) -----------------------------------------------------------------
    def header(self) -> tuple[int, int, int, int, int, int]:
        """(beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount,
        indexCount) with indexCount at least 1 (IndexHeader.load)."""
        bt, et, bp, ep, sc, ic = _HEADER.unpack_from(self.mm, 0)
        return bt, et, bp, ep, sc, max(ic, 1)

    @property
    def begin_timestamp(self) -> int:
        return int(struct.unpack_from(">q", self.mm, 0)[0])

    @property
    def end_timestamp(self) -> int:
        return int(struct.unpack_from(">q", self.mm, 8)[0])

    @property
    def end_phy_offset(self) -> int:
        return int(struct.unpack_from(">q", self.mm, 24)[0])

    @property
    def index_count(self) -> int:
        return max(int(struct.unpack_from(">i", self.mm, 36)[0]), 1)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """IndexFile.isTimeMatched: the file's time span meets [begin, end]."""
        bt, et = self.begin_timestamp, self.end_timestamp
        return (begin < bt and end > et) or bt <= begin <= et or bt <= end <= et

    def select_phy_offsets(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        _store.index_select(self.mm, self.hash_slot_num, self.index_num, key_hash, max_num, begin, end, out)

    # -- durability and teardown ---------------------------------------------------------------
    def sync(self) -> None:
        """fdatasync the file (flush thread; any descriptor flushes the mapping's dirty pages)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if self.destroyed:
                return
            raise
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if not self.destroyed:
            self.destroyed = True
            try:
                self.mm.close()
            except BufferError:
                log.warning("index file %s still has views; unmapped when they go", self.path)
            MAPPINGS.live -= 1

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class IndexService:
    """The index files of a store (Java IndexService). Loop-thread only, but for ``sync``."""

    def __init__(self, store: MessageStore):
        cfg = store.config
        self.store = store
        self.hash_slot_num = cfg.max_hash_slot_num
        self.index_num = cfg.max_index_num
        self.dir = os.path.join(cfg.store_path_root_dir, "index")
        self.files: list[IndexFile] = []
        self.error: str | None = None  # the last failure to create a file, until one works
        self.keys_capped = 0
        self._last_sync = 0.0
        self._dispatched = 0  # the dispatch position of the last snapshot
        # fdatasync of index files in a thread of their own: a 420 MB file's scattered slot
        # pages must not hold up the CommitLog's group commits in the store's flush thread.
        self._executor: ThreadPoolExecutor | None = None

    # -- life cycle ------------------------------------------------------------------------------
    def load(self, abnormal: bool, cp: dict[str, Any]) -> None:
        """Map the files (IndexService.load). After a crash (``abnormal``), cut the index back
        to what the checkpoint says was flushed (see the module docstring)."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            names = sorted(n for n in os.listdir(self.dir) if n.isdigit())
        except OSError as e:
            # The store still starts: messages are stored and dispatched, just not indexed.
            self.error = f"index directory {self.dir} unusable: {e}"
            log.error("%s; messages are not indexed until it is fixed", self.error)
            return
        cp_name = cp.get("index_file")
        cp_count = cp.get("index_count")
        cp_header = cp.get("index_header")
        exact = (
            isinstance(cp_name, str)
            and isinstance(cp_count, int)
            and isinstance(cp_header, bytes)
            and len(cp_header) == _HEADER.size
        )
        for name in names:
            path = os.path.join(self.dir, name)
            if abnormal and (not exact or name > str(cp_name)):
                log.warning(
                    "index file %s is past the checkpoint after a crash: dropped, rebuilt from the CommitLog", path
                )
                os.unlink(path)
                continue
            try:
                f = IndexFile(path, self.hash_slot_num, self.index_num)
            except StoreError as e:
                log.error("index file %s not loaded: %s", path, e)
                continue
            if abnormal and name == cp_name:
                assert isinstance(cp_header, bytes) and isinstance(cp_count, int)
                f.mm[0 : _HEADER.size] = cp_header
                _store.index_rebuild_slots(f.mm, self.hash_slot_num, self.index_num, cp_count)
                log.warning("index file %s cut back to its %d flushed entries after a crash", path, cp_count - 1)
                f.dirty = True
            self.files.append(f)
        if self.files:
            fsync_dir(self.dir)

    def shutdown(self) -> None:
        for f in self.files:
            f.close()
        self.files = []
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def truncate(self, offset: int) -> None:
        """Forget every entry of a record at or past CommitLog ``offset`` (the store's
        ``truncate_files``): files that begin there are deleted, the file holding the cut keeps
        its entries below it (entries are written in CommitLog order, so a binary search finds
        the cut) with the crash cut-back's slot rebuild (``index_rebuild_slots``), and its
        endPhyOffset / endTimestamp become its last kept entry's, so the records written at
        ``offset`` again are indexed (the build skips records at or below endPhyOffset)."""
        self._dispatched = min(self._dispatched, offset)
        base = 40 + 4 * self.hash_slot_num
        while self.files:
            f = self.files[-1]
            count = f.index_count  # entries 1..count-1
            lo, hi = 1, count  # first entry whose phyOffset >= offset
            while lo < hi:
                mid = (lo + hi) // 2
                if struct.unpack_from(">q", f.mm, base + 20 * mid + 4)[0] < offset:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == count and f.end_phy_offset < offset:
                return  # nothing at or past the cut
            if lo == 1 and len(self.files) > 1:
                log.warning("truncate: deleting index file %s (its entries are past offset %d)", f.path, offset)
                self.files.pop().destroy()
                continue
            _store.index_rebuild_slots(f.mm, self.hash_slot_num, self.index_num, lo)
            bt = f.begin_timestamp
            if lo > 1:
                at = base + 20 * (lo - 1)
                phy = struct.unpack_from(">q", f.mm, at + 4)[0]
                diff = struct.unpack_from(">i", f.mm, at + 12)[0]
                struct.pack_into(">q", f.mm, 8, bt + diff * 1000)
                struct.pack_into(">q", f.mm, 24, phy)
            else:
                struct.pack_into(">qq", f.mm, 16, 0, 0)
            f.dirty = True
            self._last_sync = 0.0
            log.warning("truncate: index file %s cut back to %d entries (CommitLog offset %d)", f.path, lo - 1, offset)
            return

    def rebuild_from(self, min_phy: int, dispatched: int = 0) -> int:
        """The CommitLog offset from which records may be missing from the index: the last
        file's endPhyOffset (its record is skipped again), ``min_phy`` without files, or the
        checkpoint's ``index_dispatched`` when later (records without keys add no entry, so
        endPhyOffset alone would send a crash recovery back over every one of them: a walk as
        long as the store; Java's recovery never re-indexes below the ConsumeQueues)."""
        end = self.files[-1].end_phy_offset if self.files else min_phy
        return max(end, min_phy, dispatched)

    # -- build (IndexService.buildIndex) ---------------------------------------------------------
    def _last_writable(self) -> IndexFile | None:
        """IndexService.getAndCreateLastIndexFile: the last file, or a new one when it is full
        (None when it cannot be created: logged, shown in ``error``)."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full():
            return last
        now = int(time.time() * 1000)
        name = index_file_name(now)
        while (last is not None and name <= last.name) or os.path.exists(os.path.join(self.dir, name)):
            now += 1
            name = index_file_name(now)
        try:
            os.makedirs(self.dir, exist_ok=True)
            f = IndexFile(
                os.path.join(self.dir, name),
                self.hash_slot_num,
                self.index_num,
                create=True,
                end_phy_offset=last.end_phy_offset if last else 0,
                end_timestamp=last.end_timestamp if last else 0,
            )
        except (OSError, StoreError) as e:
            self.error = f"cannot create an index file: {e}"
            self.store.rl_log.warning("index-create", "%s; records are not indexed until it can", self.error)
            return None
        if self.error is not None:
            log.warning("index files can be created again (after: %s)", self.error)
            self.error = None
        self.files.append(f)
        if last is not None:
            self._last_sync = 0.0  # flush the full file at the next flush run
        return f

    def build(self, records_buf: Any, records: list[Any]) -> None:
        """Index the keys of a batch of ``scan_records`` tuples from the CommitLog file
        ``records_buf``. Never raises for a file that cannot be created: those records stay
        unindexed and ``error`` says why (dispatch goes on)."""
        rec_i = key_i = 0
        n = len(records)
        while rec_i < n:
            f = self._last_writable()
            if f is None:
                return
            f.dirty = True
            try:
                rec_i, key_i, capped = _store.index_build(
                    f.mm, self.hash_slot_num, self.index_num, records_buf, records, rec_i, key_i, MAX_KEYS_PER_RECORD
                )
            except (ValueError, TypeError, IndexError) as e:
                # Never expected (the walker validated the records), but the index must not
                # stop dispatch: this batch stays unindexed.
                self.error = f"indexing a batch failed: {e}"
                self.store.rl_log.warning("index-build", "%s", self.error)
                return
            self.dispatched(f, capped)

    def dispatch_file(self) -> IndexFile | None:
        """The file the C dispatcher (``_store.Dispatcher.run``) indexes into: the last one,
        which it refuses for records whose keys might not fit (those come through
        :meth:`build`, which rolls). None without files: :meth:`build` creates the first."""
        return self.files[-1] if self.files else None

    def dispatched(self, f: IndexFile, capped: int) -> None:
        """Bookkeeping after records were indexed into ``f`` (by :meth:`build` or the C
        dispatcher): the file is dirty, a past batch failure is over, capped keys are counted."""
        f.dirty = True
        if self.error is not None and self.error.startswith("indexing a batch failed"):
            self.error = None
        if capped:
            self.keys_capped += capped
            self.store.rl_log.warning(
                "index-keys-capped",
                "%d records had more than %d keys: the rest are not indexed",
                capped,
                MAX_KEYS_PER_RECORD,
            )

    # -- query (IndexService.queryOffset) ----------------------------------------------------------
    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Phy offsets of ``topic#key`` stored within [begin, end] ms, newest file first, at
        most ``max_num`` (the caller caps it), plus the last file's end timestamp / offset."""
        out: list[int] = []
        last_ts = last_phy = 0
        key_hash = _store.index_key_hash(topic, key)
        files = self.files
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(out, key_hash, max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return QueryOffsetResult(out, last_ts, last_phy)

    # -- retention (IndexService.deleteExpiredFile) -----------------------------------------------
    def delete_expired_file(self, offset: int) -> int:
        """Delete the files (never the last) whose endPhyOffset is below ``offset``, the
        CommitLog's new minimum. Returns how many."""
        n = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < offset:
            f = self.files.pop(0)
            f.destroy()
            log.info("index file %s deleted: its records are below CommitLog offset %d", f.path, offset)
            n += 1
        return n

    # -- flush --------------------------------------------------------------------------------------
    def snapshot(self, interval_ms: int, force: bool = False, dispatched: int = 0) -> IndexSnapshot | None:
        """On the loop: what the next flush covers, or None when there is nothing to do yet
        (flushed at most every ``interval_ms`` unless a file rolled or ``force``).
        ``dispatched`` is the dispatch position now: every record below it has been through
        :meth:`build`, so after a crash the rebuild starts there at the latest, even when the
        records since the last entry carried no key (``rebuild_from``)."""
        now = time.monotonic()
        if not force and now - self._last_sync < interval_ms / 1000.0:
            return None
        if self.error is not None:
            dispatched = self._dispatched  # records went unindexed: the rebuild must see them
        dirty = [f for f in self.files if f.dirty]
        if not dirty and dispatched <= self._dispatched:
            return None
        self._last_sync = now
        self._dispatched = dispatched
        for f in dirty:
            f.dirty = False
        if not self.files:
            return IndexSnapshot([], "", 0, b"", dispatched)
        last = self.files[-1]
        return IndexSnapshot(dirty, last.name, last.index_count, bytes(last.mm[0 : _HEADER.size]), dispatched)

    async def flush(self, snap: IndexSnapshot) -> dict[str, Any]:
        """:meth:`sync` in the index flush thread; returns the checkpoint's index state."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-index-flush")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self.sync, snap)

    def sync(self, snap: IndexSnapshot) -> dict[str, Any]:
        """Flush thread: fdatasync the snapshot's files; returns the checkpoint's index state
        (Java StoreCheckpoint.indexMsgTimestamp plus the exact cut point)."""
        try:
            for f in snap.files:
                f.sync()
        except BaseException:
            for f in snap.files:
                f.dirty = True
            raise
        if not snap.last_name:  # no file yet: no record had a key
            return {"index_dispatched": snap.dispatched}
        end_ts = _HEADER.unpack(snap.last_header)[1]
        return {
            "index_msg_timestamp": end_ts,
            "index_file": snap.last_name,
            "index_count": snap.last_count,
            "index_header": snap.last_header,
            "index_dispatched": snap.dispatched,
        }

    def runtime_info(self) -> dict[str, Any]:
        return {"indexFiles": len(self.files), "indexError": self.error or "", "indexKeysCapped": self.keys_capped}
