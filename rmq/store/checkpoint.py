"""StoreCheckpoint and the store directory's lock and abort marker (Java StoreCheckpoint,
DefaultMessageStore.createTempFile / lock)."""

from __future__ import annotations

import fcntl
import logging
import os
import struct
import time
from collections.abc import Callable
from typing import Any

import msgpack

from rmq.errors import StoreError
from rmq.store.resources import fsync_dir

__all__ = ["StoreCheckpoint", "StoreLock", "checkpoint_offset"]

log = logging.getLogger("rmq.store")


def checkpoint_offset(cp: dict[str, Any], key: str, default: int) -> int:
    """An offset from a checkpoint map (``default`` when missing or not a non-negative int)."""
    v = cp.get(key, default)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default


#: Java StoreCheckpoint's file: three big-endian longs (physicMsgTimestamp, logicsMsgTimestamp,
#: indexMsgTimestamp) at 0, 8 and 16 of a mapped page (MappedFile.OS_PAGE_SIZE).
JAVA_CHECKPOINT_SIZE = 4096
_JAVA_FIELDS = struct.Struct(">qqq")
_TAIL_LEN = struct.Struct(">I")
_TAIL_AT = _JAVA_FIELDS.size + _TAIL_LEN.size  # 28: our msgpack map follows its length


class StoreCheckpoint:
    """``<root>/checkpoint``: the offsets below which everything is durable.

    The file is Java 4.9.8's ``StoreCheckpoint`` page (4096 bytes; the three timestamps at 0, 8,
    16), so Java's broker recovers a store rmq wrote (its crash recovery starts at the newest
    CommitLog file whose first record is older than the checkpoint's timestamps,
    ``DefaultMessageStore.isMappedFileMatchedRecover``); Java rewrites only those 24 bytes.
    Ours follow at 24: a 4-byte length and a msgpack map. ``physic_offset``: the CommitLog is
    fsynced up to here; ``logics_offset``: every record below here has its ConsumeQueue unit
    fsynced; ``max_offset``: the CommitLog's end when it was written; ``clean``: written by a
    clean shutdown; ``index_msg_timestamp`` (Java StoreCheckpoint.indexMsgTimestamp),
    ``index_file``, ``index_count``, ``index_header``: what the last index flush made durable
    (rmq.store.index, kept in ``index_state``). The Java timestamps written are those of the
    first record of the CommitLog file holding each offset (``timestamp_of``; 0 without it),
    never newer than the record at the offset. A file that is only a msgpack map (rmq before
    this layout) is read too. Written to a temporary file, fsynced, renamed over the old one and
    the directory fsynced (a rename is durable only with it).
    """

    def __init__(self, root: str, timestamp_of: Callable[[int], int] | None = None):
        self.path = os.path.join(root, "checkpoint")
        self.root = root
        self.last: dict[str, Any] = {}
        self.index_state: dict[str, Any] = {}
        #: CommitLog offset -> store timestamp of the first record of its file (0 when unknown)
        self.timestamp_of = timestamp_of

    def read(self) -> dict[str, Any]:
        """The last checkpoint, or {} when there is none or it cannot be read (recovery then
        scans from the first file). A page Java wrote without our map reads as {}."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
            if raw[:1] and (0x80 <= raw[0] <= 0x8F or raw[0] in (0xDE, 0xDF)):
                data = msgpack.unpackb(raw)  # a map first: rmq's earlier layout
            elif len(raw) >= _TAIL_AT and (n := _TAIL_LEN.unpack_from(raw, _JAVA_FIELDS.size)[0]):
                data = msgpack.unpackb(raw[_TAIL_AT : _TAIL_AT + n])
            else:
                log.warning(
                    "checkpoint %s holds no rmq offsets (Java's page only): recovering from the first file", self.path
                )
                return {}
            if not isinstance(data, dict):
                raise TypeError("not a map")
            return data
        except FileNotFoundError:
            return {}
        except Exception as e:  # noqa: BLE001 - any unreadable checkpoint: recover from the first file
            log.warning("checkpoint %s unreadable (%s): recovering from the first file", self.path, e)
            return {}

    def _timestamp(self, offset: int) -> int:
        if self.timestamp_of is None:
            return 0
        try:
            return self.timestamp_of(offset)
        except (ValueError, OSError, IndexError):  # a file deleted meanwhile: no lower bound
            return 0

    def write(self, physic_offset: int, logics_offset: int, max_offset: int, clean: bool = False) -> None:
        """Persist the safe offsets (runs in the store's flush thread)."""
        data = {
            "version": 1,
            "physic_offset": physic_offset,
            "logics_offset": logics_offset,
            "max_offset": max_offset,
            "clean": clean,
            "timestamp": int(time.time() * 1000),
        }
        data.update(self.index_state)
        tail = msgpack.packb(data)
        index_ts = checkpoint_offset(self.index_state, "index_msg_timestamp", 0)
        page = bytearray(max(JAVA_CHECKPOINT_SIZE, _TAIL_AT + len(tail)))
        _JAVA_FIELDS.pack_into(page, 0, self._timestamp(physic_offset), self._timestamp(logics_offset), index_ts)
        _TAIL_LEN.pack_into(page, _JAVA_FIELDS.size, len(tail))
        page[_TAIL_AT : _TAIL_AT + len(tail)] = tail
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(page)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.root)
        self.last = data


class StoreLock:
    """The store directory's ``lock`` file (flock: one process per store) and its ``abort``
    marker (present while the store runs: a start that finds it knows the last stop was not
    clean)."""

    def __init__(self, root: str):
        self.root = root
        self.abort_path = os.path.join(root, "abort")
        self._fd: int | None = None

    def lock(self) -> None:
        """Take the lock; StoreError when another process holds it."""
        path = os.path.join(self.root, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"store directory {self.root} is locked by another process") from None
        self._fd = fd

    def unlock(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def was_aborted(self) -> bool:
        return os.path.exists(self.abort_path)

    def create_abort_marker(self) -> None:
        """Create the marker durably (file and directory entry)."""
        with open(self.abort_path, "wb") as f:
            os.fsync(f.fileno())
        fsync_dir(self.root)

    def remove_abort_marker(self) -> None:
        try:
            os.unlink(self.abort_path)
            fsync_dir(self.root)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warning("store shutdown: removing the abort marker: %s", e)
