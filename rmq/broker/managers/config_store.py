"""Persisting the broker's small state files (topics, groups, offsets, delay progress).

Java's ``ConfigManager`` writes JSON to ``<file>.tmp``, keeps a ``.bak`` and renames. We do
the POSIX-safe version of the same thing with msgpack (our own files need no Java reader):
write ``<file>.tmp``, ``fsync`` it, ``os.replace`` it over the file, ``fsync`` the directory.
After a crash the file is either the old or the new version, never a torn mix; a leftover
``.tmp`` is ignored. A file that cannot be decoded is kept aside as ``<file>.corrupt`` and the
manager starts empty, with an error in the log, rather than refusing to start.

Nothing is written on a request path. A change only marks its table dirty
(:meth:`ConfigManager.mark_dirty`); one :class:`ConfigPersister` per broker, a background
task, takes a snapshot of each dirty table on the event loop (the tables only change there,
so the snapshot is consistent) and writes it, fsync included, in a worker thread. So a burst
of N new groups or topics costs N dictionary inserts plus a few whole-table writes (one per
interval), not N of them, and a slow disk never stalls a connection. A write or encode error
is logged (rate-limited) and retried with backoff; the persister never stops on one.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass

import msgpack

from rmq.common.files import atomic_write
from rmq.common.log import RateLimitedLog

log = logging.getLogger("rmq.broker")
_rl = RateLimitedLog(log)

# Strings are validated when they arrive (rmq.protocol.headers refuses lone surrogates), so
# "surrogatepass" is only a last line of defence: a name that slipped through must not make
# its whole table unwritable.
_UNICODE_ERRORS = "surrogatepass"


class ConfigManager(abc.ABC):
    """Base of the persisted managers: ``encode()`` → msgpack object, ``decode(obj)`` back.

    Subclasses set ``file_name`` and implement ``encode``/``decode``, and call
    :meth:`mark_dirty` after every change; the broker's :class:`ConfigPersister` writes the
    table soon after (never inline). :meth:`persist` writes synchronously (shutdown, tools).

    Snapshots are numbered; a write never replaces a newer snapshot already on disk, so a
    timed write still running in its thread cannot undo the shutdown's final write.
    """

    file_name = "config.msgpack"

    def __init__(self, config_dir: str) -> None:
        self.config_dir = config_dir
        self.path = os.path.join(config_dir, self.file_name)
        #: True while the table has changes not yet snapshotted for writing.
        self.dirty = False
        self._write_lock = threading.Lock()
        self._snapshots = 0  # snapshots taken (on the loop)
        self._written = 0  # the newest snapshot on disk

    @abc.abstractmethod
    def encode(self) -> object:
        """The manager's state as a msgpack-able object."""

    @abc.abstractmethod
    def decode(self, obj: object) -> None:
        """Restore the state written by :meth:`encode`."""

    def mark_dirty(self) -> None:
        """Note a change; the persister writes it within its interval."""
        self.dirty = True

    def load(self) -> bool:
        """Load the file if present; True when something was loaded."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return False
        try:
            self.decode(msgpack.unpackb(raw, raw=False, strict_map_key=False, unicode_errors=_UNICODE_ERRORS))
            return True
        except Exception as e:  # noqa: BLE001 - any decode failure means a damaged file
            aside = self.path + ".corrupt"
            log.error("cannot decode %s (%s); keeping it as %s and starting empty", self.path, e, aside)
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            return False

    def snapshot(self) -> tuple[int, bytes]:
        """A numbered, encoded copy of the table, taken on the loop; clears ``dirty``.

        Raises whatever encoding raises (the table stays dirty then)."""
        data = msgpack.packb(self.encode(), use_bin_type=True, unicode_errors=_UNICODE_ERRORS)
        self._snapshots += 1
        self.dirty = False
        return self._snapshots, data

    def write(self, number: int, data: bytes) -> bool:
        """Write snapshot ``number`` unless a newer one is on disk already (any thread)."""
        with self._write_lock:
            if number <= self._written:
                return False
            atomic_write(self.path, data)
            self._written = number
            return True

    def persist(self) -> None:
        """Snapshot and write now, in the calling thread (shutdown and tests)."""
        self.write(*self.snapshot())


@dataclass(slots=True)
class _Entry:
    manager: ConfigManager
    interval: float  # least seconds between two timed writes of this table
    next_at: float = 0.0  # monotonic time before which it is not written again
    failures: int = 0


class ConfigPersister:
    """Writes every registered table that is dirty, off the event loop, at most once per its
    interval (Java's timed ``persist()`` calls, coalesced).

    Args:
        interval: seconds between two checks, and the default least interval between two
            writes of one table (BrokerConfig ``configPersistInterval``, 0.2 s).

    Adaptive spacing: a table whose snapshot took ``t`` seconds on the loop is not snapshotted
    again within ``10 * t``, so however large a table grows, snapshots take at most about a
    tenth of the loop. A failed write is retried after 1, 2, 4 … 30 s.
    """

    MAX_BACKOFF = 30.0

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = max(0.01, interval)
        self._entries: list[_Entry] = []
        self.writes = 0

    def add(self, manager: ConfigManager, interval: float | None = None) -> None:
        """Persist ``manager`` (every ``interval`` seconds at most; default the persister's)."""
        self._entries.append(_Entry(manager, self.interval if interval is None else max(self.interval, interval)))

    @property
    def managers(self) -> list[ConfigManager]:
        return [e.manager for e in self._entries]

    async def run(self) -> None:
        """The background loop; ends only when cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.interval)
            for e in self._entries:
                if e.manager.dirty and time.monotonic() >= e.next_at:
                    await self._write_one(loop, e)

    async def _write_one(self, loop: asyncio.AbstractEventLoop, e: _Entry) -> None:
        m = e.manager
        t0 = time.monotonic()
        try:
            number, data = m.snapshot()
        except Exception as exc:  # noqa: BLE001 - a value that cannot be encoded must not stop persisting
            self._failed(e, t0, "encoding", exc)
            return
        cost = time.monotonic() - t0
        try:
            await loop.run_in_executor(None, m.write, number, data)
        except Exception as exc:  # noqa: BLE001 - disk errors are retried
            m.dirty = True
            self._failed(e, t0, "writing", exc)
            return
        self.writes += 1
        e.failures = 0
        e.next_at = t0 + max(e.interval, 10 * cost)

    def _failed(self, e: _Entry, now: float, what: str, exc: BaseException) -> None:
        e.failures += 1
        backoff = min(self.MAX_BACKOFF, 2.0 ** (e.failures - 1))
        e.next_at = now + backoff
        _rl.error(
            "persist-" + e.manager.file_name,
            "%s %s failed (%s: %s); retrying in %.0f s",
            what,
            e.manager.path,
            type(exc).__name__,
            exc,
            backoff,
        )

    def flush_all(self) -> None:
        """Write every table now, in the calling thread (shutdown). Never raises: a table
        that cannot be written is logged and the others are still written."""
        for m in self.managers:
            try:
                m.persist()
            except Exception:  # shutdown continues whatever one table does
                log.exception("persisting %s at shutdown failed", m.path)
