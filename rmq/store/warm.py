"""Pre-faulting the CommitLog ahead of the writer (what Java's warmMappedFile does for a
whole new file, done here a few MiB at a time in a thread of its own)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rmq import _store

if TYPE_CHECKING:
    from rmq.store.mapped_file import MappedFile
    from rmq.store.message_store import MessageStore

__all__ = ["WARM_CHUNK", "WarmAheadService"]

log = logging.getLogger("rmq.store")

WARM_CHUNK = 4 * 1024 * 1024  # pre-fault this much CommitLog ahead of the writer


class WarmAheadService:
    """MADV_POPULATE_WRITE the next ``WARM_CHUNK`` bytes of the CommitLog file being written
    so that appends on the loop do not take the page faults. ``idle`` is the append path's
    one-attribute check (False while a warm-up runs or when the kernel lacks the advice)."""

    def __init__(self, store: MessageStore):
        self.store = store
        self.idle = True
        self.supported = True
        self._executor: ThreadPoolExecutor | None = None

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rmq-store-warm")
        self.idle = self.supported

    def stop(self) -> None:
        """Wait for a warm-up in progress (it must finish before the files are unmapped)."""
        self.idle = False
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def kick(self) -> None:
        """After an append: warm the next chunk when the writer is within half a chunk of
        the warmed end."""
        mf = self.store.commit_log.mfq.last
        if mf is None or mf.warmed_to >= mf.file_size or mf.warmed_to - mf.wrote_position > WARM_CHUNK // 2:
            return
        if self._executor is None:
            return
        start = max(mf.warmed_to, mf.wrote_position)
        length = min(WARM_CHUNK, mf.file_size - start)
        self.idle = False
        fut = asyncio.get_running_loop().run_in_executor(self._executor, self._warm, mf, start, length)
        fut.add_done_callback(self._done)

    def _warm(self, mf: MappedFile, start: int, length: int) -> None:
        """Warm thread: MADV_POPULATE_WRITE ``length`` bytes at ``start`` (content unchanged)."""
        if not mf.available:
            return
        try:
            rc = _store.populate_write(mf.mm, start, length)
        except ValueError:  # unmapped meanwhile
            return
        if rc in (errno.EINVAL, errno.ENOSYS):
            log.info("MADV_POPULATE_WRITE not supported here (errno %d): CommitLog pages fault on first write", rc)
            self.supported = False
        elif rc:
            log.warning("pre-faulting %s failed: %s", mf.path, os.strerror(rc))
        mf.warmed_to = max(mf.warmed_to, start + length)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        self.idle = self.supported and self._executor is not None
        if not fut.cancelled() and fut.exception() is not None:
            log.warning("warm-ahead failed: %r", fut.exception())
