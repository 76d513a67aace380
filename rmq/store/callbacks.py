"""Puts waiting for an offset, answered by callbacks: the SYNC_FLUSH group commit
(``rmq.store.flush.GroupCommitService``, Java ``CommitLog.GroupCommitService``) and the
SYNC_MASTER replication wait (``rmq.store.ha.service.GroupTransferService``, Java
``HAService.GroupTransferService``) keep their SEND-path waiters here, one implementation.

A waiter costs no task, future or timer of its own: the callbacks wait in append order (so
their end offsets and their deadlines are in order too) and one timer, armed for the oldest
deadline, expires them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rmq.store.message import PutMessageResult

__all__ = ["PutCallback", "Entry", "OffsetCallbacks"]

log = logging.getLogger("rmq.store")

#: ``callback(result, exc)``: ``exc`` None when the offset was reached or the deadline passed
#: (the owner set the result's status then), else why the wait failed.
PutCallback = Callable[[PutMessageResult, "BaseException | None"], None]

#: (end offset, deadline on the loop's clock, result, callback)
Entry = tuple[int, float, PutMessageResult, PutCallback]


class OffsetCallbacks:
    """Callbacks of puts waiting until an offset covers their end.

    Args:
        what: names the callbacks in the line logged when one raises.
        on_expire: called by the timer with the entries past their deadline (oldest first),
            before their callbacks run with ``(result, None)``: it sets their status, counts
            and logs them.
    """

    __slots__ = ("what", "on_expire", "_entries", "_timer", "_loop")

    def __init__(self, what: str, on_expire: Callable[[list[Entry]], None]) -> None:
        self.what = what
        self.on_expire = on_expire
        self._entries: list[Entry] = []
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the store's, taken at the first add

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, end: int, timeout: float, result: PutMessageResult, callback: PutCallback) -> None:
        """Wait for ``end`` at most ``timeout`` seconds. Ends must come in append order."""
        loop = self._loop
        if loop is None:  # (asyncio.get_running_loop costs a getpid syscall in Python 3.11)
            loop = self._loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self._entries.append((end, deadline, result, callback))
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)

    def complete_upto(self, offset: int) -> None:
        """Call back, with ``(result, None)``, every waiter whose end ``offset`` covers."""
        entries = self._entries
        if not entries or entries[0][0] > offset:
            return
        n = 0
        while n < len(entries) and entries[n][0] <= offset:
            n += 1
        done, self._entries = entries[:n], entries[n:]
        for _end, _deadline, result, callback in done:
            self.call(callback, result, None)

    def fail_all(self, exc: BaseException) -> None:
        """Call back every waiter with ``(result, exc)``."""
        entries, self._entries = self._entries, []
        for _end, _deadline, result, callback in entries:
            self.call(callback, result, exc)

    def stop(self, exc: BaseException) -> None:
        """:meth:`fail_all` and disarm the timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.fail_all(exc)

    def call(self, callback: PutCallback, result: PutMessageResult, exc: BaseException | None) -> None:
        """Run one callback; one that raises is logged and does not stop the others."""
        try:
            callback(result, exc)
        except Exception:
            log.exception("%s callback %r failed", self.what, callback)

    def _expire(self) -> None:
        self._timer = None
        entries = self._entries
        if not entries:
            return
        loop = self._loop or asyncio.get_running_loop()
        now = loop.time()
        n = 0
        while n < len(entries) and entries[n][1] <= now:
            n += 1
        expired, self._entries = entries[:n], entries[n:]
        if expired:
            self.on_expire(expired)
            for _end, _deadline, result, callback in expired:
                self.call(callback, result, None)
        if self._entries:
            self._timer = loop.call_at(self._entries[0][1], self._expire)
