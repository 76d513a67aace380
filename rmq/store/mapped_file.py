"""MappedFile and MappedFileQueue: fixed-size memory-mapped files named by their start offset.

Threading: appends and every structural change (roll, truncate, delete) happen on the event
loop thread; ``flush`` runs in the store's flush thread and only reads positions and calls
``msync`` or ``fdatasync`` (both without the GIL), so it never blocks the loop.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import time
from collections.abc import Callable

from rmq import _store
from rmq.errors import StoreError
from rmq.store.resources import MAPPINGS, free_bytes, fsync_dir

__all__ = ["MappedFile", "MappedFileQueue", "OS_PAGE_SIZE", "MappingBudgetError", "DiskSpaceError"]

log = logging.getLogger("rmq.store")

OS_PAGE_SIZE = 4096


class MappingBudgetError(StoreError):
    """A new mapped file would exceed the process's file descriptor / map budget."""

    retriable = True


class DiskSpaceError(StoreError):
    """The disk cannot hold a new mapped file (no free space, or posix_fallocate failed)."""

    retriable = True

    def __init__(self, message: str, needed: int = 0):
        super().__init__(message)
        self.needed = needed


_warned_no_fallocate = False


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class MappedFile:
    """One file of ``file_size`` bytes starting at logical offset ``file_from_offset``.

    ``wrote_position`` is where the next append goes, ``flushed_position`` what fdatasync has
    made durable. ``hold()``/``release()`` count users of views into the mapping (an in-flight
    pull response); ``destroy()`` only unmaps once nothing holds the file.

    A new file (``create=True``) is refused with :class:`MappingBudgetError` when the process
    holds its budget of mappings, and with :class:`DiskSpaceError` when the disk cannot hold it:
    its blocks are allocated for real (``posix_fallocate``) before it is mapped, so a later
    write into the mapping can never fault on a full disk (SIGBUS). An existing file is
    allocated too when ``allocate`` is set (the last file, which is written next); when that
    fails ``allocated`` stays False and the writer must call :meth:`allocate` first.

    The descriptor used to map the file is closed right away (the mmap object keeps its own
    duplicate). ``flush`` syncs the written range ``[flushed_position, wrote_position)`` (msync),
    not the whole file: pages past the writer may be dirty from the warm-ahead (pre-faulted, still
    zeros) and must not be written out and write-protected again before the writer fills them.
    ``zero`` changes bytes outside that range, so it sets ``sync_whole``: the next flush is an
    fdatasync of the whole file (a descriptor opened for the call).
    """

    __slots__ = (
        "path",
        "file_name",
        "file_from_offset",
        "file_size",
        "mm",
        "wrote_position",
        "flushed_position",
        "_holds",
        "available",
        "destroyed",
        "warmed_to",
        "allocated",
        "sync_whole",
        "__weakref__",
    )
    #: read by the store's native writer at their offsets, wrote_position also moved
    #: (Appender.bind_file_type; rmq/common/slots.pxd): each stays a plain int, bool or the mmap
    __native_slots__ = ("file_from_offset", "file_size", "wrote_position", "warmed_to", "allocated", "mm")

    def __init__(self, path: str, file_size: int, *, create: bool = False, allocate: bool = False, keep_free: int = 0):
        self.path = path
        self.file_name = os.path.basename(path)
        try:
            self.file_from_offset = int(self.file_name)
        except ValueError:
            raise StoreError(f"mapped file name is not an offset: {path}") from None
        self.file_size = file_size
        self.allocated = False
        if create:
            if not MAPPINGS.can_map():
                raise MappingBudgetError(f"cannot create {path}: {MAPPINGS.describe()}")
            free = free_bytes(os.path.dirname(path) or ".")
            if free < file_size + keep_free:
                raise DiskSpaceError(
                    f"cannot create {path}: {file_size} bytes needed and {keep_free} kept free, "
                    f"{free} free on its disk",
                    needed=file_size + keep_free,
                )
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                raise MappingBudgetError(f"cannot open {path}: {e.strerror} ({MAPPINGS.describe()})") from e
            raise
        try:
            size = os.fstat(fd).st_size
            if size > file_size:
                raise StoreError(f"{path} is {size} bytes, expected {file_size}: wrong mapped file size setting?")
            if create or allocate or size < file_size:
                self._fallocate(fd, created=create)
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            if create:
                _unlink_quietly(path)
            if e.errno == errno.ENOMEM:
                raise MappingBudgetError(
                    f"cannot map {path}: {e.strerror} (vm.max_map_count? {MAPPINGS.describe()})"
                ) from e
            raise
        except BaseException:
            if create:
                _unlink_quietly(path)
            raise
        finally:
            os.close(fd)
        MAPPINGS.live += 1
        self.wrote_position = 0
        self.flushed_position = 0
        self.warmed_to = 0  # pages below this were pre-faulted for writing
        self.sync_whole = False  # bytes outside [flushed, wrote) changed: the next flush syncs all
        self._holds = 0
        self.available = True
        self.destroyed = False

    def _fallocate(self, fd: int, created: bool) -> None:
        global _warned_no_fallocate
        try:
            os.posix_fallocate(fd, 0, self.file_size)
            self.allocated = True
            return
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                if created:
                    raise DiskSpaceError(
                        f"cannot allocate {self.path} ({self.file_size} bytes): {e.strerror}", needed=self.file_size
                    ) from e
                log.error(
                    "cannot allocate the blocks of %s: %s; no writes into it until space frees", self.path, e.strerror
                )
                os.ftruncate(fd, self.file_size)  # sized (sparse) so that reads stay inside it
                return
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            # glibc emulates posix_fallocate where the file system lacks it; one that refuses
            # even that keeps sparse files, and with them the risk of SIGBUS on a full disk.
            if not _warned_no_fallocate:
                _warned_no_fallocate = True
                log.warning(
                    "the file system of %s cannot preallocate files (%s): mapped files stay sparse",
                    self.path,
                    e.strerror,
                )
        os.ftruncate(fd, self.file_size)
        self.allocated = True

    def allocate(self) -> None:
        """Allocate the blocks of an existing file before writing into it (DiskSpaceError
        when the disk cannot hold it)."""
        if self.allocated:
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, self.file_size)
        except OSError as e:
            raise DiskSpaceError(
                f"cannot allocate {self.path} ({self.file_size} bytes): {e.strerror}", needed=self.file_size
            ) from e
        finally:
            os.close(fd)
        self.allocated = True

    # -- reference counting ----------------------------------------------------------------
    def hold(self) -> bool:
        if not self.available:
            return False
        self._holds += 1
        return True

    def release(self) -> None:
        if self._holds > 0:
            self._holds -= 1
        if not self.available and self._holds == 0:
            self._cleanup()

    @property
    def hold_count(self) -> int:
        return self._holds

    # -- positions ---------------------------------------------------------------------------
    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync when at least ``least_pages`` pages are dirty (any when 0, or when the
        file is full). Returns the flushed position. Runs in the flush thread."""
        wrote = self.wrote_position
        flushed = self.flushed_position
        if wrote <= flushed or self.destroyed:
            return flushed
        if (
            least_pages > 0
            and wrote < self.file_size
            and (wrote // OS_PAGE_SIZE) - (flushed // OS_PAGE_SIZE) < least_pages
        ):
            return flushed
        if self.sync_whole:
            self.sync_whole = False  # (cleared first: a zero() during the sync sets it again)
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                if not self.available:  # deleted by retention meanwhile
                    return flushed
                raise
            try:
                os.fdatasync(fd)  # any descriptor of the file flushes its dirty pages
            finally:
                os.close(fd)
        else:
            try:
                rc = _store.sync_range(self.mm, flushed, wrote)
            except ValueError:  # unmapped meanwhile (retention, shutdown)
                return flushed
            if rc:
                raise OSError(rc, f"msync {self.path}: {os.strerror(rc)}")
        self.flushed_position = wrote
        return wrote

    def zero(self, start: int, end: int) -> None:
        """Clear ``[start, end)`` so stale bytes past a truncation can never look valid (the
        next flush syncs the whole file: these bytes are past the written range)."""
        self.sync_whole = True
        end = min(end, self.file_size)
        chunk = bytes(min(max(end - start, 0), 1 << 20))
        while start < end:
            n = min(len(chunk), end - start)
            self.mm[start : start + n] = chunk[:n] if n < len(chunk) else chunk
            start += n

    def data_end(self, start: int) -> int:
        """An upper bound of where written data ends at or after ``start`` (holes are never
        written, so SEEK_HOLE bounds it cheaply; without hole support, the file end)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return self.file_size
        try:
            return min(os.lseek(fd, start, os.SEEK_HOLE), self.file_size)
        except OSError:
            return self.file_size
        finally:
            os.close(fd)

    def last_modified(self) -> float:
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return 0.0

    # -- teardown ----------------------------------------------------------------------------
    def _cleanup(self) -> bool:
        if self.destroyed:
            return True
        try:
            self.mm.close()
        except BufferError:
            # A view (memoryview slice) is still referenced somewhere: try again later.
            return False
        MAPPINGS.live -= 1
        self.destroyed = True
        return True

    def destroy(self, unlink: bool = True) -> bool:
        """Make the file unavailable, unmap it once no one holds it, delete it from disk.

        Returns True when the mapping is gone (False: still held; retried by ``release`` and
        by the owner's next clean run)."""
        self.available = False
        if unlink:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        if self._holds > 0:
            return False
        return self._cleanup()

    def close(self) -> None:
        """Unmap without deleting (shutdown)."""
        self.available = False
        if not self._cleanup():
            log.warning("mapped file %s still has views at close; leaving it mapped", self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.file_name}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class MappedFileQueue:
    """The files of one CommitLog or one ConsumeQueue, contiguous in offset order."""

    def __init__(self, store_path: str, mapped_file_size: int, *, sync_dir: bool = False, keep_free: int = 0):
        """``sync_dir``: fsync the directory after creating a file (the CommitLog: a file whose
        directory entry is lost at a power cut loses acknowledged SYNC_FLUSH messages).
        ``keep_free``: bytes a new file must leave free on the disk (the CommitLog keeps room
        for the ConsumeQueue files and the checkpoint that its records still need)."""
        self.store_path = store_path
        self.sync_dir = sync_dir
        self.keep_free = keep_free
        self.mapped_file_size = mapped_file_size
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self._pending_destroy: list[MappedFile] = []
        self.on_change: Callable[[], None] | None = None  # called after files are added or removed

    # -- loading -----------------------------------------------------------------------------
    def load(self) -> None:
        """Map every existing file (sorted by name); positions are set by recovery."""
        if not os.path.isdir(self.store_path):
            return
        names = sorted(n for n in os.listdir(self.store_path) if n.isdigit() and len(n) == 20)
        prev = None
        for i, name in enumerate(names):
            path = os.path.join(self.store_path, name)
            size = os.path.getsize(path)
            if size < self.mapped_file_size and i == len(names) - 1:
                # A crash between creating the newest file and sizing it: the missing part
                # reads as zeros, i.e. no data.
                log.warning(
                    "%s: %d bytes, expected %d: a file creation was interrupted; extending it",
                    path,
                    size,
                    self.mapped_file_size,
                )
            elif size != self.mapped_file_size:
                raise StoreError(
                    f"{path}: size {size} does not match the configured mapped file size {self.mapped_file_size}"
                )
            mf = MappedFile(path, self.mapped_file_size, allocate=i == len(names) - 1)
            if prev is not None and mf.file_from_offset != prev + self.mapped_file_size:
                log.warning("%s: gap before %s (previous file starts at %d)", self.store_path, name, prev)
            prev = mf.file_from_offset
            mf.wrote_position = mf.flushed_position = self.mapped_file_size
            self.files.append(mf)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # -- lookup ------------------------------------------------------------------------------
    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find_by_offset(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        if offset < first:
            return None
        idx = (offset - first) // self.mapped_file_size
        if idx >= len(files):
            return None
        mf = files[idx]
        if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
            return mf
        for mf in files:  # a gap in the files: fall back to a linear search
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return None

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        last = self.last
        return last.file_from_offset + last.wrote_position if last else 0

    # -- growth ------------------------------------------------------------------------------
    def get_last_mapped_file(self, start_offset: int = 0) -> MappedFile:
        """The file to append to, creating the next one when the last is full."""
        last = self.last
        if last is not None and not last.is_full:
            return last
        if last is None:
            create_offset = start_offset - (start_offset % self.mapped_file_size)
        else:
            create_offset = last.file_from_offset + self.mapped_file_size
        return self._create(create_offset)

    def create_after(self, last: MappedFile) -> MappedFile:
        """Create the file after ``last`` (which must be the last one) before it is full, so
        that a failure leaves ``last`` writable."""
        return self._create(last.file_from_offset + self.mapped_file_size)

    def _create(self, create_offset: int) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        path = os.path.join(self.store_path, f"{create_offset:020d}")
        try:
            mf = MappedFile(path, self.mapped_file_size, create=True, keep_free=self.keep_free)
        except OSError as e:
            raise StoreError(f"cannot create mapped file {path}: {e}") from e
        if self.sync_dir:
            try:
                fsync_dir(self.store_path)
            except OSError as e:
                mf.destroy()
                raise StoreError(f"cannot sync the directory of new mapped file {path}: {e}") from e
        self.files.append(mf)
        if len(self.files) == 1:
            self.flushed_where = create_offset
        self._changed()
        return mf

    # -- flushing (flush thread) ----------------------------------------------------------
    def flush(self, least_pages: int = 0) -> int:
        """Flush the dirty files from ``flushed_where`` on; return the new flushed offset."""
        files = list(self.files)
        where = self.flushed_where
        for mf in files:
            end = mf.file_from_offset + self.mapped_file_size
            if end <= where or mf.destroyed:
                continue
            pos = mf.flush(least_pages)
            where = mf.file_from_offset + pos
            if pos < self.mapped_file_size:
                break
        if where > self.flushed_where:
            self.flushed_where = where
        return self.flushed_where

    # -- truncation and deletion ----------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at or past ``offset``: later files are deleted, the file holding
        ``offset`` is cut there and the bytes after it are zeroed."""
        keep = []
        for mf in self.files:
            end = mf.file_from_offset + self.mapped_file_size
            if end <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.zero(pos, mf.data_end(pos))
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                log.warning("truncate: deleting %s (past offset %d)", mf.path, offset)
                self._destroy(mf)
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset) if keep else 0
        self._changed()

    def _destroy(self, mf: MappedFile) -> None:
        if not mf.destroy():
            self._pending_destroy.append(mf)

    def retry_pending_destroy(self) -> None:
        self._pending_destroy = [mf for mf in self._pending_destroy if not mf.destroy(unlink=False)]

    def delete_first_files(self, count: int) -> list[MappedFile]:
        """Delete the first ``count`` files (never the last one); returns them."""
        count = min(count, len(self.files) - 1)
        if count <= 0:
            return []
        gone, self.files = self.files[:count], self.files[count:]
        self._changed()
        for mf in gone:
            log.info("deleting expired file %s", mf.path)
            self._destroy(mf)
        return gone

    def delete_expired_by_time(
        self, expired_ms: int, clean_immediately: bool, max_files: int = 10, keep_from: int | None = None
    ) -> int:
        """Java ``deleteExpiredFileByTime``: files (never the last) older than ``expired_ms``,
        or any when ``clean_immediately``; at most ``max_files`` per call; never a file that
        ends past ``keep_from`` (records not dispatched yet)."""
        now = time.time()
        n = 0
        for mf in self.files[:-1]:
            if n >= max_files:
                break
            if keep_from is not None and mf.file_from_offset + self.mapped_file_size > keep_from:
                break
            if clean_immediately or now - mf.last_modified() >= expired_ms / 1000.0:
                n += 1
            else:
                break
        self.delete_first_files(n)
        return n

    def shutdown(self) -> None:
        for mf in self.files:
            mf.close()
        for mf in self._pending_destroy:
            mf.close()
        self.files = []
        self._pending_destroy = []
        self._changed()

    def destroy_all(self) -> None:
        files, self.files = self.files, []
        self._changed()
        for mf in files:
            self._destroy(mf)
        try:
            os.rmdir(self.store_path)
        except OSError:
            pass
