"""IdleStateHandler: close a connection nobody has used for a while.

Netty's ``IdleStateHandler(0, 0, 120)`` fires ALL_IDLE when neither a read nor a write
happened for 120 s, and RocketMQ's ``NettyConnectManageHandler`` then closes the channel.
Here each connection owns one ``call_later`` timer. Reads and writes only store a timestamp
(no timer churn per message); when the timer fires it either re-arms for the time left or,
if the connection really was idle for ``timeout`` seconds, calls ``on_idle``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["IdleStateHandler"]


class IdleStateHandler:
    """All-idle detection for one connection.

    Args:
        loop: the connection's event loop.
        timeout: seconds without reads or writes before ``on_idle`` is called; ``None``
            or ``<= 0`` disables the handler.
        on_idle: called once, on the loop, when the connection went idle.
    """

    __slots__ = ("_handle", "_loop", "_on_idle", "_timeout", "last_io")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float | None, on_idle: Callable[[], None]) -> None:
        self._loop = loop
        self._timeout = timeout if timeout and timeout > 0 else None
        self._on_idle = on_idle
        self._handle: asyncio.TimerHandle | None = None
        self.last_io = loop.time()

    def start(self) -> None:
        """Arm the timer (called from ``connection_made``)."""
        if self._timeout is not None:
            self.last_io = self._loop.time()
            self._handle = self._loop.call_later(self._timeout, self._check)

    def touch(self) -> None:
        """Record I/O; called for every read and write."""
        self.last_io = self._loop.time()

    def stop(self) -> None:
        """Disarm (called from ``connection_lost``); idempotent."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        self._handle = None
        assert self._timeout is not None
        idle_for = self._loop.time() - self.last_io
        if idle_for >= self._timeout:
            self._on_idle()
        else:
            self._handle = self._loop.call_later(self._timeout - idle_for, self._check)
