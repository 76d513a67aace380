"""The epoch file of a store in controller mode (Java 5 ``EpochFileCache``).

Each time a replica becomes master under a new controller epoch it appends ``(epoch,
startOffset)``: the CommitLog offset from which that master wrote. An entry ends where the next
one starts; the last one ends at the store's CommitLog end. Two replicas agree on everything
below the end of the newest epoch both have with the same start (``find_consistent_point``): a
returning old master or a lagging slave cuts its CommitLog back there before it follows
(``MessageStore.truncate_files``).

The file is ``<storePathRootDir>/epochFileCheckpoint`` in Java's ``CheckpointFile`` format, so
either side reads the other's: the entry count, the CRC32 of the entry lines, then one
``epoch-startOffset`` line per entry::

    2
    773307083
    7-7000
    8-8000

It is replaced whole (``rmq.common.files.atomic_write``: temporary file, fsync, rename, directory
fsync) and a copy kept as ``epochFileCheckpoint.bak`` (Java reads the backup when the file is
unreadable), so a kill -9 leaves the old or the new list, never a torn one. At most
``MAX_ENTRIES`` (1024) entries are kept: the oldest are dropped past it (their data has usually
been deleted by retention long before; ``truncate_prefix`` drops those explicitly).
"""

from __future__ import annotations

import itertools
import logging
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from rmq.common.files import atomic_write

__all__ = ["EPOCH_FILE_NAME", "EpochEntry", "EpochFile", "MAX_ENTRIES", "find_consistent_point"]

log = logging.getLogger("rmq.store.ha")

EPOCH_FILE_NAME = "epochFileCheckpoint"  # Java DefaultMessageStore: storePathRootDir/epochFileCheckpoint
#: Entries kept at most (each master election adds one); the oldest go first.
MAX_ENTRIES = 1024


@dataclass(frozen=True)
class EpochEntry:
    """One epoch: the master of ``epoch`` wrote from CommitLog offset ``start`` on."""

    epoch: int
    start: int


def _encode(entries: list[EpochEntry]) -> bytes:
    lines = "".join(f"{e.epoch}-{e.start}\n" for e in entries)
    crc = zlib.crc32(lines.encode())
    if crc >= 1 << 31:
        crc -= 1 << 32  # Java's int
    return f"{len(entries)}\n{crc}\n{lines}".encode()


def _decode(data: bytes) -> list[EpochEntry]:
    """Parse a CheckpointFile; ValueError when it is torn, its CRC or its count is wrong, or the
    entries do not grow."""
    text = data.decode()
    parts = text.split("\n")
    if len(parts) < 2:
        raise ValueError("no header")
    count, crc = int(parts[0]), int(parts[1])
    body_lines = [p for p in parts[2:] if p.strip()]
    entries = []
    for line in body_lines:
        a, _, b = line.strip().partition("-")
        entries.append(EpochEntry(int(a), int(b)))
    body = "".join(line.strip() + "\n" for line in body_lines)
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    real = zlib.crc32(body.encode())
    if crc != 0 and real not in (crc, crc + (1 << 32)):  # (Java: 0 means not checked)
        raise ValueError("entries crc32 does not match")
    for prev, cur in itertools.pairwise(entries):
        if cur.epoch <= prev.epoch or cur.start < prev.start:
            raise ValueError(f"entries do not grow: {prev} then {cur}")
    return entries


def find_consistent_point(local: list[EpochEntry], local_end: int, remote: list[EpochEntry], remote_end: int) -> int:
    """Java ``EpochFileCache.findConsistentPoint``: the newest epoch both lists hold with the
    same start; the lower of its two ends (an entry ends at the next one's start, the last at
    the side's CommitLog end). -1 when they share none."""
    remote_by_epoch = {e.epoch: i for i, e in enumerate(remote)}
    for i in range(len(local) - 1, -1, -1):
        e = local[i]
        j = remote_by_epoch.get(e.epoch)
        if j is None or remote[j].start != e.start:
            continue
        lend = local[i + 1].start if i + 1 < len(local) else local_end
        rend = remote[j + 1].start if j + 1 < len(remote) else remote_end
        return min(lend, rend)
    return -1


class EpochFile:
    """``(epoch, start)`` entries of one store, in memory and in ``<root>/epochFileCheckpoint``.

    Loop-thread object; ``save`` (the fsyncs) is what callers run in the store's flush thread.
    Mutations return the bytes to write; :meth:`save` writes the current list.
    """

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, EPOCH_FILE_NAME)
        self.entries: list[EpochEntry] = []

    # -- load / save ----------------------------------------------------------------------------
    def load(self) -> None:
        """Read the file, else its backup (Java ``CheckpointFile.read``); none: no entries.
        Raises ValueError when both exist and neither is readable."""
        errors = []
        for path in (self.path, self.path + ".bak"):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            try:
                entries = _decode(data)
            except (ValueError, UnicodeDecodeError) as e:
                errors.append(f"{path}: {e}")
                log.warning("epoch file %s unreadable (%s)", path, e)
                continue
            if entries or path.endswith(".bak"):
                self.entries = entries
                return
        if errors:
            raise ValueError("epoch file unreadable: " + "; ".join(errors))
        self.entries = []

    def save(self) -> None:
        """Write the entries (blocking: temporary file, fsync, rename; then the backup)."""
        data = _encode(self.entries)
        atomic_write(self.path, data)
        atomic_write(self.path + ".bak", data)

    # -- queries ---------------------------------------------------------------------------------
    @property
    def last_epoch(self) -> int:
        """The newest epoch (-1 without entries)."""
        return self.entries[-1].epoch if self.entries else -1

    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    def with_ends(self, max_offset: int) -> list[tuple[int, int, int]]:
        """``(epoch, start, end)`` per entry, the last ending at ``max_offset``."""
        out = []
        for i, e in enumerate(self.entries):
            end = self.entries[i + 1].start if i + 1 < len(self.entries) else max_offset
            out.append((e.epoch, e.start, end))
        return out

    def find_by_offset(self, offset: int, max_offset: int) -> EpochEntry | None:
        """The entry whose range holds ``offset`` (Java ``findEpochEntryByOffset``)."""
        for epoch, start, end in self.with_ends(max_offset):
            if start <= offset < end:
                return EpochEntry(epoch, start)
        return None

    # -- changes (the caller saves) --------------------------------------------------------------
    def append(self, epoch: int, start: int) -> bool:
        """Java ``appendEntry``: a newer epoch starting at or after the last one's start.
        Java wants a strictly greater start; an epoch whose master wrote nothing is kept here
        as an empty range instead, so a replica that only saw that epoch still finds it in
        common with the next master's list (``find_consistent_point``). False (nothing
        changed) for an older or equal epoch or an earlier start."""
        last = self.last()
        if last is not None and (epoch <= last.epoch or start < last.start):
            log.error("epoch entry (%d, %d) is not after the last (%d, %d): not appended", epoch, start, *_t(last))
            return False
        self.entries.append(EpochEntry(epoch, start))
        if len(self.entries) > MAX_ENTRIES:
            del self.entries[: len(self.entries) - MAX_ENTRIES]
        return True

    def replace(self, entries: Iterable[EpochEntry]) -> None:
        """Take another replica's entries (a slave adopting its master's, up to its own end)."""
        self.entries = list(entries)[-MAX_ENTRIES:]

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Java ``truncateSuffixByOffset``: drop entries starting at or after ``offset``."""
        self.entries = [e for e in self.entries if e.start < offset]

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Java ``truncateSuffixByEpoch``: drop entries of ``epoch`` and later."""
        self.entries = [e for e in self.entries if e.epoch < epoch]

    def truncate_prefix(self, offset: int, max_offset: int) -> None:
        """Java ``truncatePrefixByOffset``: drop entries ending at or before ``offset`` (their
        data was deleted by retention); the last entry always stays."""
        ends = self.with_ends(max_offset)
        keep = [EpochEntry(ep, st) for ep, st, end in ends[:-1] if end > offset]
        if self.entries:
            keep.append(self.entries[-1])
        self.entries = keep


def _t(e: EpochEntry) -> tuple[int, int]:
    return e.epoch, e.start
