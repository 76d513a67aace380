"""StoreCheckpoint and the store directory's lock and abort marker (Java StoreCheckpoint,
DefaultMessageStore.createTempFile / lock)."""

from __future__ import annotations

import fcntl
import logging
import os
import time
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


class StoreCheckpoint:
    """``<root>/checkpoint`` (msgpack, ours): the offsets below which everything is durable.

    ``physic_offset``: the CommitLog is fsynced up to here; ``logics_offset``: every record
    below here has its ConsumeQueue unit fsynced; ``max_offset``: the CommitLog's end when it
    was written; ``clean``: written by a clean shutdown; ``index_msg_timestamp`` (Java
    StoreCheckpoint.indexMsgTimestamp), ``index_file``, ``index_count``, ``index_header``: what the
    last index flush made durable (rmq.store.index, kept in ``index_state``). Written to a
    temporary file, fsynced,
    renamed over the old one and the directory fsynced (a rename is durable only with it).
    """

    def __init__(self, root: str):
        self.path = os.path.join(root, "checkpoint")
        self.root = root
        self.last: dict[str, Any] = {}
        self.index_state: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        """The last checkpoint, or {} when there is none or it cannot be read (recovery then
        scans from the first file)."""
        try:
            with open(self.path, "rb") as f:
                data = msgpack.unpackb(f.read())
            if not isinstance(data, dict):
                raise TypeError("not a map")
            return data
        except FileNotFoundError:
            return {}
        except Exception as e:  # noqa: BLE001 - any unreadable checkpoint: recover from the first file
            log.warning("checkpoint %s unreadable (%s): recovering from the first file", self.path, e)
            return {}

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
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(msgpack.packb(data))
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
